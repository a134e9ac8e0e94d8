
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * The prefix index in a zone mapped as nginx maps one, on nginx's own slab
 * allocator and shared mutex, for the index's unit test and the mend
 * bench (t/unit/lib/test_zone.c).
 */

#ifndef _TEST_ZONE_H_INCLUDED_
#define _TEST_ZONE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_index.h"


#define TEST_MAX_BLOCKS  1024


void test_zone_process(ngx_uint_t log_level);
void test_zone(size_t size, ngx_uint_t npeers);

/*
 * The record of the server "name" (ngx_http_prefix_route_index_peer(), a
 * hold of the mutex of its own), counting reuses in test_reused.
 */
ngx_http_prefix_route_peer_t *test_peer(ngx_str_t *name);


extern ngx_log_t                       test_log;
extern ngx_pool_t                     *test_pool;

extern ngx_slab_pool_t                *zone;
extern ngx_http_prefix_route_index_t   idx;
extern ngx_http_prefix_route_peer_t   *peers[64];
extern ngx_uint_t                      pos[64];    /* by slot */
extern ngx_uint_t                      npeers;
extern ngx_uint_t                      test_reused; /* records reused */
extern ngx_uint_t                      test_kill;  /* the kill point this
                                                      process dies at,
                                                      counting down; 0:
                                                      none */


#endif /* _TEST_ZONE_H_INCLUDED_ */
