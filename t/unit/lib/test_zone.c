
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <stdio.h>

#include "test_zone.h"


/* what nginx's objects linked here expect of the rest of nginx */
ngx_pid_t                       ngx_pid;
ngx_int_t                       ngx_ncpu = 1;
volatile ngx_cycle_t           *ngx_cycle;
volatile ngx_time_t            *ngx_cached_time;
ngx_int_t                       ngx_debug_points;
ngx_uint_t                      ngx_process;
ngx_int_t                       ngx_last_process;
ngx_process_t                   ngx_processes[NGX_MAX_PROCESSES];

ngx_log_t                       test_log;
ngx_pool_t                     *test_pool;
ngx_slab_pool_t                *zone;
ngx_http_prefix_route_index_t   idx;
ngx_http_prefix_route_peer_t   *peers[64];
ngx_uint_t                      pos[64];
ngx_uint_t                      npeers;
ngx_uint_t                      test_kill;
ngx_uint_t                      test_reused;

static ngx_cycle_t              test_cycle;
static ngx_time_t               test_time;


void ngx_debug_point(void);


/* what nginx's start does for these objects; logs at "log_level" or up */

void
test_zone_process(ngx_uint_t log_level)
{
    ngx_pid = getpid();
    ngx_pagesize = getpagesize();

    for (ngx_pagesize_shift = 0;
         (ngx_uint_t) 1 << ngx_pagesize_shift < ngx_pagesize;
         ngx_pagesize_shift++)
    {
        /* void */
    }

    ngx_slab_sizes_init();

    test_log.log_level = log_level;
    test_log.file = NULL;
    test_cycle.log = &test_log;
    ngx_cycle = &test_cycle;
    ngx_cached_time = &test_time;

    test_pool = ngx_create_pool(16384, &test_log);
    if (test_pool == NULL) {
        exit(1);
    }
}


void
ngx_debug_point(void)
{
    abort();
}


/* nginx's logger, reduced to stderr */

void
ngx_log_error_core(ngx_uint_t level, ngx_log_t *log, ngx_err_t err,
    const char *fmt, ...)
{
    u_char   buf[1024], *p;
    va_list  args;

    va_start(args, fmt);
    p = ngx_vslprintf(buf, buf + sizeof(buf) - 1, fmt, args);
    va_end(args);

    *p = '\0';
    fprintf(stderr, "# log: %s\n", buf);
}


/*
 * A zone of "size" bytes set up as ngx_init_zone_pool() does, in place
 * of the last one, with the index in it and "npeers_" peers at positions
 * 0 .. npeers_ - 1.
 */

void
test_zone(size_t size, ngx_uint_t npeers_)
{
    u_char      name[16];
    ngx_str_t   s;
    ngx_uint_t  i;

    if (zone != NULL) {
        (void) munmap(zone, zone->end - (u_char *) zone);
    }

    zone = mmap(NULL, size, PROT_READ|PROT_WRITE, MAP_ANON|MAP_SHARED, -1, 0);
    if (zone == MAP_FAILED) {
        fprintf(stderr, "mmap failed\n");
        exit(1);
    }

    zone->end = (u_char *) zone + size;
    zone->min_shift = 3;
    zone->addr = zone;

    if (ngx_shmtx_create(&zone->mutex, &zone->lock, NULL) != NGX_OK) {
        exit(1);
    }

    ngx_slab_init(zone);

    ngx_memzero(&idx, sizeof(idx));

    /* a mend in one slice: the tests that want slices say so */
    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    if (ngx_http_prefix_route_index_scratch(&idx, test_pool, TEST_MAX_BLOCKS)
        != NGX_OK)
    {
        exit(1);
    }

    if (ngx_http_prefix_route_index_init(&idx, zone, NULL, 4) != NGX_OK) {
        fprintf(stderr, "index init failed\n");
        exit(1);
    }

    npeers = npeers_;

    for (i = 0; i < npeers; i++) {
        s.data = name;
        s.len = ngx_sprintf(name, "peer%ui", i) - name;
        peers[i] = test_peer(&s);
        pos[peers[i]->slot] = i;
    }
}


ngx_http_prefix_route_peer_t *
test_peer(ngx_str_t *name)
{
    ngx_http_prefix_route_reuse_t  reuse;
    ngx_http_prefix_route_peer_t  *peer;

    ngx_memzero(&reuse, sizeof(ngx_http_prefix_route_reuse_t));

    peer = ngx_http_prefix_route_index_peer(&idx, name, &reuse);
    test_reused += reuse.reused;

    return peer;
}


/* t/build.mk builds the index with this between its writes to the zone */

void
ngx_http_prefix_route_kill_point(void)
{
    if (test_kill && --test_kill == 0) {
        _exit(0);
    }
}
