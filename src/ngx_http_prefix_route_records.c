
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Server records in the zone: the index and load accounting of each
 * server address, which outlive reloads.  The master finds or makes them
 * on start and reload (init_zone, then init_records); with "resolve" each
 * worker's view follows the addresses the name gives, and records of
 * addresses gone are given back (docs/design.md, "What workers share").
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_prefix_route.h"
#include "ngx_http_prefix_route_hash.h"


static size_t ngx_http_prefix_route_resized(ngx_shm_zone_t *shm_zone);
static ngx_uint_t ngx_http_prefix_route_name(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_uint_t pass,
    ngx_http_prefix_route_reuse_t *reuse);
static ngx_int_t ngx_http_prefix_route_name_one(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_uint_t pass,
    ngx_http_prefix_route_reuse_t *reuse,
    ngx_http_prefix_route_peer_t **record, ngx_str_t *name);
static ngx_uint_t ngx_http_prefix_route_slots(ngx_cycle_t *cycle);
static void ngx_http_prefix_route_place(
    ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers);
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
static ngx_int_t ngx_http_prefix_route_follow_records(
    ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers, ngx_uint_t unknown,
    ngx_uint_t *reused, ngx_uint_t *roomless);
static void ngx_http_prefix_route_keep(uint64_t *keep,
    ngx_http_prefix_route_peer_t *sp);
static void ngx_http_prefix_route_unfollow(void *data);
static ngx_http_prefix_route_peer_t *ngx_http_prefix_route_known(
    ngx_http_prefix_route_peer_t **known, ngx_uint_t n, ngx_str_t *name);
static int ngx_libc_cdecl ngx_http_prefix_route_known_cmp(const void *one,
    const void *two);
static void ngx_http_prefix_route_shadow_name(ngx_str_t *name, u_char *buf,
    ngx_http_upstream_rr_peer_t *peer);
#endif


/*
 * A new zone where the configuration before had one of this name and
 * another size: nginx does not keep a zone whose size changed, so the
 * index starts empty.  Returns the old zone's size in bytes, 0 if there
 * was none; the new configuration's first worker tells the operator (a
 * warn: every prompt is a MISS again, for minutes of TTFT), not the
 * master here: the reload may yet fail, and the old zone go on.
 * Runs in the master, before ngx_cycle becomes the new cycle.
 */

static size_t
ngx_http_prefix_route_resized(ngx_shm_zone_t *shm_zone)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_shm_zone_t   *old;

    for (part = &((ngx_cycle_t *) ngx_cycle)->shared_memory.part;
         part != NULL;
         part = part->next)
    {
        old = part->elts;

        for (i = 0; i < part->nelts; i++) {

            if (old[i].tag != &ngx_http_prefix_route_module
                || old[i].shm.name.len != shm_zone->shm.name.len
                || ngx_strncmp(old[i].shm.name.data, shm_zone->shm.name.data,
                               shm_zone->shm.name.len)
                   != 0)
            {
                continue;
            }

            return old[i].shm.size;
        }
    }

    return 0;
}


/*
 * The worker slots a zone made for the cycle's configuration has: one
 * for each worker process, as many for the workers of the previous
 * configuration still finishing their requests after a reload, plus two.
 */

static ngx_uint_t
ngx_http_prefix_route_slots(ngx_cycle_t *cycle)
{
    ngx_core_conf_t  *ccf;

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    return 2 * (ccf->master ? (ngx_uint_t) ccf->worker_processes : 1) + 2;
}


/*
 * Sets up or takes over the zone, in limit_req's manner, and finds the
 * records of the servers it knows (ngx_http_prefix_route_init_records()
 * gives the others theirs).  Runs in the master on start and reload.
 */

ngx_int_t
ngx_http_prefix_route_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_prefix_route_srv_conf_t  *oprcf = data;

    size_t                             len, size;
    ngx_int_t                          rc;
    ngx_str_t                         *names;
    ngx_uint_t                         b, i, nworkers;
    ngx_slab_pool_t                   *shpool;
    ngx_http_upstream_rr_peer_t       *peer;
    ngx_http_upstream_rr_peers_t      *peers;
    ngx_http_prefix_route_sh_t        *sh;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = shm_zone->data;
    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;
    nworkers = ngx_http_prefix_route_slots(prcf->cycle);

    if (oprcf == NULL && !shm_zone->shm.exists) {
        shpool->data = NULL;
    }

    rc = ngx_http_prefix_route_index_init(&prcf->index, shpool,
                                          oprcf ? &oprcf->index : NULL,
                                          nworkers);

    if (rc == NGX_DECLINED) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "prefix_route zone \"%V\" was set up by another "
                      "version of the module: change its name or size to "
                      "start a new one", &shm_zone->shm.name);
        return NGX_ERROR;
    }

    if (rc != NGX_OK) {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "prefix_route zone \"%V\" is too small",
                      &shm_zone->shm.name);
        return NGX_ERROR;
    }

    sh = prcf->index.sh;

    if (oprcf == NULL && !shm_zone->shm.exists) {

        prcf->resized = ngx_http_prefix_route_resized(shm_zone);

        /* a new zone: slab errors name it */

        len = sizeof(" in prefix_route zone \"\"") + shm_zone->shm.name.len;

        shpool->log_ctx = ngx_slab_alloc(shpool, len);
        if (shpool->log_ctx == NULL) {
            return NGX_ERROR;
        }

        ngx_sprintf(shpool->log_ctx, " in prefix_route zone \"%V\"%Z",
                    &shm_zone->shm.name);

    } else if (sh->nworkers < nworkers
               && (oprcf == NULL
                   || ngx_http_prefix_route_slots(oprcf->cycle) < nworkers))
    {
        /* once for each raise, not at every reload that keeps it */

        ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                      "prefix_route zone \"%V\" was made for "
                      "worker_processes %ui, %ui now: the load of workers "
                      "beyond its slots is counted in one shared cell, "
                      "balanced alike, but a crash of such a worker "
                      "leaves its requests counted until the zone's size "
                      "or name changes", &shm_zone->shm.name,
                      (sh->nworkers - 2) / 2, (nworkers - 2) / 2);
    }

    /*
     * shadow mode: prefix_route's would-be placements are recorded apart,
     * for records of the primary servers under names no server has
     */

    names = NULL;

    if (prcf->shadow) {
        names = ngx_palloc(prcf->cycle->pool,
                           prcf->peers->number * sizeof(ngx_str_t));
        if (names == NULL) {
            return NGX_ERROR;
        }

        for (peer = prcf->peers->peer, i = 0;
             peer != NULL;
             peer = peer->next, i++)
        {
            names[i].len = sizeof("shadow of ") - 1 + peer->name.len;
            names[i].data = ngx_pnalloc(prcf->cycle->pool, names[i].len);
            if (names[i].data == NULL) {
                return NGX_ERROR;
            }

            ngx_sprintf(names[i].data, "shadow of %V", &peer->name);
        }
    }

    prcf->vnames = names;

    /*
     * each list's position of a peer slot, for the index lookup: for every
     * slot the zone may number, as old workers of "server name resolve"
     * may number more before ngx_http_prefix_route_init_records(), which
     * must not fail
     */

    size = (NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS + 1) * sizeof(ngx_uint_t);

    if (prcf->shadow) {
        prcf->vpos = ngx_palloc(prcf->cycle->pool, size);
        if (prcf->vpos == NULL) {
            return NGX_ERROR;
        }
    }

    for (b = 0, peers = prcf->peers; peers != NULL; b++, peers = peers->next)
    {
        prcf->pos[b] = ngx_palloc(prcf->cycle->pool, size);
        if (prcf->pos[b] == NULL) {
            return NGX_ERROR;
        }
    }

    if (ngx_http_prefix_route_index_lock_master(&prcf->index,
                                                shm_zone->shm.log)
        != NGX_OK)
    {
        ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                      "prefix_route zone \"%V\" cannot be taken over",
                      &shm_zone->shm.name);
        return NGX_ERROR;
    }

    /*
     * this configuration's number, and those still running: the records
     * only others named are given to new servers, in
     * ngx_http_prefix_route_init_records() and in the workers for the new
     * addresses of "server name resolve" (ngx_http_prefix_route_follow())
     */

    prcf->index.gen = ++sh->gen;
    (void) ngx_http_prefix_route_index_running(&prcf->index,
                                               oprcf ? oprcf->index.gen : 0);

    /*
     * the servers the zone knows: affinity survives a reload, and one
     * that comes back finds its own record before another new server may
     * be given it
     */

    (void) ngx_http_prefix_route_name(prcf, 0, NULL);

    ngx_shmtx_unlock(&shpool->mutex);

    return NGX_OK;
}


/*
 * The records of the servers the zone does not know yet, made or given
 * from those no running configuration names, and the view's positions.
 * Runs in the master once the configuration is in place (init_module):
 * a reload that fails after the zones' init (a listen socket that cannot
 * be bound) gives no record away, which would drop its blocks for a
 * server that may come back (helper-77).  It cannot fail, as nginx exits
 * when init_module does: with the zone's mutex held by a stuck process,
 * or no room, a server without a record is balanced by load only; the
 * position arrays were allocated in init_zone().
 */

void
ngx_http_prefix_route_init_records(ngx_http_prefix_route_srv_conf_t *prcf)
{
    ngx_uint_t                      roomless;
    ngx_shm_zone_t                 *shm_zone;
    ngx_http_prefix_route_reuse_t   reuse;

    shm_zone = prcf->shm_zone;
    ngx_memzero(&reuse, sizeof(ngx_http_prefix_route_reuse_t));

    if (ngx_http_prefix_route_index_lock_master(&prcf->index,
                                                shm_zone->shm.log)
        == NGX_OK)
    {
        roomless = ngx_http_prefix_route_name(prcf, 1, &reuse);

        /* the slots numbered now: other workers may add none meanwhile */

        prcf->npos = prcf->index.sh->npeers;

        ngx_shmtx_unlock(&prcf->index.shpool->mutex);

    } else {
        roomless = ngx_http_prefix_route_name(prcf, 2, NULL);
        prcf->npos = prcf->index.sh->npeers;

        if (roomless) {
            ngx_log_error(NGX_LOG_WARN, shm_zone->shm.log, 0,
                          "prefix_route zone \"%V\" cannot be taken over "
                          "for %ui new server(s), the first %V: they are "
                          "balanced by load only", &shm_zone->shm.name,
                          roomless, prcf->roomless);
            roomless = 0;
        }
    }

    if (reuse.reused) {
        ngx_log_error(NGX_LOG_NOTICE, shm_zone->shm.log, 0,
                      "prefix_route zone \"%V\": %ui record(s) of servers "
                      "gone were reused for new servers, their blocks "
                      "dropped",
                      &shm_zone->shm.name, reuse.reused);
    }

    if (roomless) {
        ngx_log_error(NGX_LOG_WARN, shm_zone->shm.log, 0,
                      "prefix_route zone \"%V\" has no room for %ui "
                      "server(s), the first %V: they are balanced by load "
                      "only", &shm_zone->shm.name, roomless,
                      prcf->roomless);
    }

    ngx_http_prefix_route_place(prcf, prcf->peers);
}


/*
 * One pass over the servers without a record yet, the shadow ones too:
 * pass 0 finds those the zone knows by name, pass 1 makes or gives the
 * others theirs (the caller holds the zone mutex for both), pass 2 only
 * counts them.  Each record found is marked as named by this
 * configuration.  Returns the servers (not shadow ones) still without
 * one; the first one's name is kept in prcf->roomless.
 */

static ngx_uint_t
ngx_http_prefix_route_name(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_uint_t pass, ngx_http_prefix_route_reuse_t *reuse)
{
    ngx_uint_t                      b, i, roomless;
    ngx_http_upstream_rr_peer_t    *peer;
    ngx_http_upstream_rr_peers_t   *peers;

    roomless = 0;

    for (b = 0, peers = prcf->peers; peers != NULL; b++, peers = peers->next)
    {
        for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            if (ngx_http_prefix_route_name_one(prcf, pass, reuse,
                                               &prcf->shared[b][i],
                                               &peer->name)
                != NGX_OK
                && pass && roomless++ == 0)
            {
                prcf->roomless = &peer->name;
            }
        }
    }

    /* shadow mode: the records of the primary servers' names, after them */

    for (i = 0; prcf->vnames != NULL && i < prcf->peers->number; i++) {
        (void) ngx_http_prefix_route_name_one(prcf, pass, reuse,
                                              &prcf->vshared[i],
                                              &prcf->vnames[i]);
    }

    return roomless;
}


/* a server's record by the pass above: NGX_DECLINED when it has none */

static ngx_int_t
ngx_http_prefix_route_name_one(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_uint_t pass, ngx_http_prefix_route_reuse_t *reuse,
    ngx_http_prefix_route_peer_t **record, ngx_str_t *name)
{
    if (*record != NULL) {
        return NGX_OK;
    }

    if (pass == 0) {
        *record = ngx_http_prefix_route_index_find(&prcf->index, name);

    } else if (pass == 1) {
        *record = ngx_http_prefix_route_index_peer(&prcf->index, name, reuse);
    }

    if (*record == NULL) {
        return NGX_DECLINED;
    }

    /* not given to another address while this one runs */

    (*record)->fixed = prcf->index.gen;

    return NGX_OK;
}


/*
 * Fills the view's positions by peer slot from its records: each list's
 * position of a slot (pos, and vpos in shadow mode) is that of the first
 * server line with its address, the list's size where none has it; and
 * counts the lines that repeat an earlier address.  pos[] and vpos[] have
 * room for prcf->npos + 1 slots.
 */

static void
ngx_http_prefix_route_place(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers)
{
    ngx_uint_t                     b, i;
    ngx_http_upstream_rr_peers_t  *list;

    prcf->number[0] = peers->number;
    prcf->number[1] = peers->next ? peers->next->number : 0;

    if (prcf->shadow) {
        for (i = 0; i <= prcf->npos; i++) {
            prcf->vpos[i] = peers->number;
        }

        for (i = peers->number; i > 0; i--) {
            if (prcf->vshared[i - 1] != NULL) {
                prcf->vpos[prcf->vshared[i - 1]->slot] = i - 1;
            }
        }
    }

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {

        for (i = 0; i <= prcf->npos; i++) {
            prcf->pos[b][i] = list->number;
        }

        /* backwards: the first line of an address is its position */

        for (i = list->number; i > 0; i--) {
            if (prcf->shared[b][i - 1] != NULL) {
                prcf->pos[b][prcf->shared[b][i - 1]->slot] = i - 1;
            }
        }
    }

    prcf->repeats = 0;

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {
        for (i = 0; i < list->number; i++) {
            prcf->repeats += ngx_http_prefix_route_repeat(prcf, b, i);
        }
    }
}


#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)

/*
 * "server name resolve" (nginx 1.27.3+): round robin's lists in the
 * upstream's zone ("peers", the primary one, and its backups) change
 * while nginx runs, counted by *peers->config.  When the count moved,
 * this worker's view of the servers is made again, as nginx's hash
 * method makes its points again: each server's record in the zone, found
 * by its address (peer->name) or made (a server the zone has no room for
 * is balanced by load only), the hashes of the names that rank them,
 * the positions by peer slot and a balancer call's scratch.  A server
 * that left the lists keeps its record and its blocks, which age out of
 * the index as capacity and memory need (docs/design.md, "nginx
 * versions").  The caller holds both lists' locks
 * (ngx_http_prefix_route_lists_rlock()), given back while new addresses'
 * records are made and held again on return.  Returns NGX_OK, or
 * NGX_ERROR when no memory is left for the view or the lists changed
 * NGX_HTTP_PREFIX_ROUTE_RETAKES times while records were made: the
 * view's config stays the one before, so the next call makes it again,
 * and the balancer chooses by round robin meanwhile.
 */

ngx_int_t
ngx_http_prefix_route_follow(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers)
{
    u_char                          *p;
    u_char                           shadow[sizeof("shadow of ") - 1
                                            + NGX_SOCKADDR_STRLEN];
    size_t                           size;
    ngx_int_t                        rc;
    ngx_str_t                        name;
    ngx_uint_t                       b, i, n, room, roomless, reused, tries,
                                     nknown, unknown;
    ngx_pool_cleanup_t              *cln;
    ngx_http_upstream_rr_peer_t     *peer;
    ngx_http_upstream_rr_peers_t    *list;
    ngx_http_prefix_route_peer_t   **known;

    if (!prcf->resolve || prcf->config == *peers->config) {
        return NGX_OK;
    }

    roomless = 0;
    reused = 0;
    tries = 0;

again:

    n = 1;

    for (list = peers; list != NULL; list = list->next) {
        n = ngx_max(n, list->number);
    }

    /*
     * the positions by slot: room for every slot a zone has, once, freed
     * with the worker's configuration, as the arrays below
     */

    if (prcf->view_pos == NULL) {
        cln = ngx_pool_cleanup_add(prcf->cycle->pool, 0);
        if (cln == NULL) {
            return NGX_ERROR;
        }

        p = ngx_alloc(3 * (NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS + 1)
                      * sizeof(ngx_uint_t)
                      + NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS * sizeof(uint64_t),
                      ngx_cycle->log);
        if (p == NULL) {
            return NGX_ERROR;
        }

        prcf->view_pos = p;

        prcf->index.holding = (uint64_t *) (p + 3
                                            * (NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS
                                               + 1) * sizeof(ngx_uint_t));
        ngx_memzero(prcf->index.holding,
                    NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS * sizeof(uint64_t));

        cln->handler = ngx_http_prefix_route_unfollow;
        cln->data = prcf;
    }

    /*
     * the records of the view before, found again by name without the
     * zone mutex: only new addresses take it (the name of a record this
     * configuration names does not change while it runs)
     */

    nknown = prcf->number[0] + prcf->number[1]
             + (prcf->shadow ? prcf->number[0] : 0);

    known = ngx_alloc((nknown + 1) * sizeof(ngx_http_prefix_route_peer_t *),
                      ngx_cycle->log);
    if (known == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(known, prcf->shared[0],
               prcf->number[0] * sizeof(ngx_http_prefix_route_peer_t *));

    if (prcf->number[1]) {
        ngx_memcpy(known + prcf->number[0], prcf->shared[1],
                   prcf->number[1] * sizeof(ngx_http_prefix_route_peer_t *));
    }

    if (prcf->shadow) {
        ngx_memcpy(known + prcf->number[0] + prcf->number[1], prcf->vshared,
                   prcf->number[0] * sizeof(ngx_http_prefix_route_peer_t *));
    }

    /* by the hash of their names, without the servers the zone had not */

    for (i = 0, b = 0; i < nknown; i++) {
        if (known[i] != NULL) {
            known[b++] = known[i];
        }
    }

    nknown = b;

    ngx_qsort(known, nknown, sizeof(ngx_http_prefix_route_peer_t *),
              ngx_http_prefix_route_known_cmp);

    /* the arrays by position, made larger as the lists grow */

    if (n > prcf->room) {
        room = ngx_max(n, 2 * prcf->room);
        size = room * (2 * sizeof(uint64_t)
                       + sizeof(ngx_http_prefix_route_candidate_t)
                       + 3 * sizeof(ngx_http_prefix_route_peer_t *)
                       + 2 * sizeof(ngx_uint_t));

        p = ngx_alloc(size, ngx_cycle->log);
        if (p == NULL) {
            ngx_free(known);
            return NGX_ERROR;
        }

        ngx_free(prcf->view);

        prcf->view = p;
        prcf->room = room;

        prcf->id[0] = (uint64_t *) p;
        prcf->id[1] = prcf->id[0] + room;
        prcf->cand = (ngx_http_prefix_route_candidate_t *)
                         (prcf->id[1] + room);
        prcf->shared[0] = (ngx_http_prefix_route_peer_t **)
                              (prcf->cand + room);
        prcf->shared[1] = prcf->shared[0] + room;
        prcf->vshared = prcf->shared[1] + room;
        prcf->held = (ngx_uint_t *) (prcf->vshared + room);
        prcf->vheld = prcf->held + room;
    }

    prcf->pos[0] = prcf->view_pos;
    prcf->pos[1] = prcf->pos[0] + NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS + 1;

    if (prcf->shadow) {
        prcf->vpos = prcf->pos[1] + NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS + 1;
    }

    /* what needs no zone: the ranks' hashes, the records known */

    unknown = 0;

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {

        /* the view's numbers follow its arrays, should it be made again */

        prcf->number[b] = list->number;

        for (peer = list->peer, i = 0; peer != NULL; peer = peer->next, i++) {
            prcf->id[b][i] = ngx_http_prefix_route_hash(peer->name.data,
                                                        peer->name.len, 0);

            prcf->shared[b][i] = ngx_http_prefix_route_known(known, nknown,
                                                             &peer->name);
            unknown += (prcf->shared[b][i] == NULL);

            if (b != 0) {
                continue;
            }

            prcf->vshared[i] = NULL;

            if (prcf->shadow) {
                ngx_http_prefix_route_shadow_name(&name, shadow, peer);
                prcf->vshared[i] = ngx_http_prefix_route_known(known, nknown,
                                                               &name);
                unknown += (prcf->vshared[i] == NULL);
            }
        }
    }

    ngx_free(known);

    /*
     * new addresses: their records found or made in the zone, the lists'
     * locks given back meanwhile; the view is made again if the lists
     * changed then
     */

    if (unknown) {
        rc = ngx_http_prefix_route_follow_records(prcf, peers, unknown,
                                                  &reused, &roomless);

        if (rc == NGX_AGAIN && ++tries < NGX_HTTP_PREFIX_ROUTE_RETAKES) {
            goto again;
        }

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }
    }

    ngx_http_prefix_route_place(prcf, peers);

    prcf->config = *peers->config;
    prcf->release = 1;

    if (reused) {
        ngx_http_prefix_route_mend_soon(&prcf->index);

        ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                      "prefix_route zone \"%V\": %ui record(s) of servers "
                      "gone were reused for new servers of upstream "
                      "\"%V\", their blocks dropped",
                      &prcf->shm_zone->shm.name, reused, peers->name);
    }

    if (roomless) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "prefix_route zone \"%V\" has no room for %ui "
                      "server(s) of upstream \"%V\": they are balanced by "
                      "load only", &prcf->shm_zone->shm.name, roomless,
                      peers->name);
    }

    ngx_log_debug3(NGX_LOG_DEBUG_HTTP, ngx_cycle->log, 0,
                   "prefix_route: upstream \"%V\" now has %ui + %ui servers",
                   peers->name, prcf->number[0], prcf->number[1]);

    return NGX_OK;
}


/*
 * The records of the "unknown" servers of the lists that the view has
 * none for (NULL in prcf->shared or prcf->vshared), found by name or made
 * in the zone (ngx_http_prefix_route_index_peer(), which may evict), with
 * the lists' locks given back and their names copied first: nginx never
 * gives back a lock of the lists that a worker killed held, and this one
 * would wait for the zone mutex under it (docs/design.md, "nginx
 * versions").  The caller holds both lists' read locks, held again on
 * return.  Returns NGX_OK with the records in the view (NULL where the
 * zone had no room: *roomless counts them), NGX_AGAIN when the lists
 * changed meanwhile, NGX_ERROR without memory.
 */

static ngx_int_t
ngx_http_prefix_route_follow_records(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers, ngx_uint_t unknown,
    ngx_uint_t *reused, ngx_uint_t *roomless)
{
    u_char                          *p;
    u_char                           shadow[sizeof("shadow of ") - 1
                                            + NGX_SOCKADDR_STRLEN];
    size_t                           size;
    ngx_str_t                       *names, name;
    ngx_uint_t                       b, i, k, pass, config, capacity;
    ngx_http_upstream_rr_peer_t     *peer;
    ngx_http_prefix_route_reuse_t    reuse;
    ngx_http_upstream_rr_peers_t    *list;
    ngx_http_prefix_route_peer_t   **made;
    ngx_http_prefix_route_index_t   *idx;

    size = unknown * (sizeof(ngx_str_t) + sizeof(ngx_http_prefix_route_peer_t *)
                      + sizeof(shadow));

    for (list = peers; list != NULL; list = list->next) {
        for (peer = list->peer; peer != NULL; peer = peer->next) {
            size += peer->name.len;
        }
    }

    names = ngx_alloc(size, ngx_cycle->log);
    if (names == NULL) {
        return NGX_ERROR;
    }

    made = (ngx_http_prefix_route_peer_t **) (names + unknown);
    p = (u_char *) (made + unknown);

    /* the names, in the order of the view's empty places */

    k = 0;

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {
        for (peer = list->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            if (prcf->shared[b][i] == NULL) {
                names[k].data = p;
                names[k].len = peer->name.len;
                p = ngx_cpymem(p, peer->name.data, peer->name.len);
                k++;
            }

            if (b == 0 && prcf->shadow && prcf->vshared[i] == NULL) {
                ngx_http_prefix_route_shadow_name(&name, shadow, peer);
                names[k].data = p;
                names[k].len = name.len;
                p = ngx_cpymem(p, name.data, name.len);
                k++;
            }
        }
    }

    config = *peers->config;

    ngx_http_prefix_route_lists_unlock(peers);

    idx = &prcf->index;
    capacity = prcf->capacity / prcf->block;

    ngx_memzero(&reuse, sizeof(ngx_http_prefix_route_reuse_t));

    ngx_shmtx_lock(&idx->shpool->mutex);

    /* the names the zone knows first, as at a reload */

    for (pass = 0; pass < 2; pass++) {
        for (k = 0; k < unknown; k++) {

            if (pass == 0) {
                made[k] = ngx_http_prefix_route_index_find(idx, &names[k]);

            } else if (made[k] == NULL) {
                made[k] = ngx_http_prefix_route_index_peer(idx, &names[k],
                                                           &reuse);

            } else {
                continue;
            }

            if (made[k] == NULL) {
                continue;
            }

            ngx_http_prefix_route_index_capacity(idx, made[k], capacity);

            /* held at once: no other address takes it, in this hold too */

            ngx_http_prefix_route_index_hold(idx, made[k]);
        }
    }

    prcf->npos = idx->sh->npeers;

    ngx_shmtx_unlock(&idx->shpool->mutex);

    *reused += reuse.reused;

    ngx_http_prefix_route_lists_rlock(peers);

    if (*peers->config != config) {
        ngx_free(names);
        return NGX_AGAIN;
    }

    k = 0;

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {
        for (i = 0; i < list->number; i++) {

            if (prcf->shared[b][i] == NULL) {
                prcf->shared[b][i] = made[k++];
                *roomless += (prcf->shared[b][i] == NULL);
            }

            if (b == 0 && prcf->shadow && prcf->vshared[i] == NULL) {
                prcf->vshared[i] = made[k++];
            }
        }
    }

    ngx_free(names);

    return NGX_OK;
}


void
ngx_http_prefix_route_let_go(ngx_http_prefix_route_srv_conf_t *prcf)
{
    uint64_t    keep[NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS];
    ngx_uint_t  b, i;

    if (!prcf->release) {
        return;
    }

    prcf->release = 0;

    /* the view's slots, before the mutex: its records keep their slots */

    ngx_memzero(keep, sizeof(keep));

    for (b = 0; b < 2; b++) {
        for (i = 0; i < prcf->number[b]; i++) {
            ngx_http_prefix_route_keep(keep, prcf->shared[b][i]);
        }
    }

    for (i = 0; prcf->shadow && i < prcf->number[0]; i++) {
        ngx_http_prefix_route_keep(keep, prcf->vshared[i]);
    }

    ngx_shmtx_lock(&prcf->index.shpool->mutex);
    ngx_http_prefix_route_index_let_go(&prcf->index, keep);
    ngx_shmtx_unlock(&prcf->index.shpool->mutex);
}


/* sets the bit of record "sp" (NULL: none) in "keep", a bitmap by slot */

static void
ngx_http_prefix_route_keep(uint64_t *keep, ngx_http_prefix_route_peer_t *sp)
{
    if (sp != NULL) {
        keep[sp->slot / 64] |= (uint64_t) 1 << (sp->slot % 64);
    }
}


/*
 * The cleanup of the cycle's pool: frees this worker's view (taken with
 * ngx_alloc(), as it is made again while the cycle lives).
 */

static void
ngx_http_prefix_route_unfollow(void *data)
{
    ngx_http_prefix_route_srv_conf_t  *prcf = data;

    ngx_free(prcf->view);
    ngx_free(prcf->view_pos);
}


/*
 * The record named "name" among the n "known" ones, sorted by the hash of
 * their names (ngx_http_prefix_route_known_cmp()), or NULL.
 */

static ngx_http_prefix_route_peer_t *
ngx_http_prefix_route_known(ngx_http_prefix_route_peer_t **known,
    ngx_uint_t n, ngx_str_t *name)
{
    uint32_t     hash;
    ngx_uint_t   lo, hi, mid;

    hash = ngx_crc32_short(name->data, name->len);

    /* the first of those whose hash is not below "hash" */

    lo = 0;
    hi = n;

    while (lo < hi) {
        mid = lo + (hi - lo) / 2;

        if (known[mid]->sn.node.key < hash) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    while (lo < n && known[lo]->sn.node.key == hash) {
        if (ngx_memn2cmp(known[lo]->name, name->data, known[lo]->sn.str.len,
                         name->len)
            == 0)
        {
            return known[lo];
        }

        lo++;
    }

    return NULL;
}


/*
 * Orders records by the hash of their names (read without the zone mutex:
 * a record's name does not change while a running configuration names
 * it, docs/design.md, "nginx versions").
 */

static int ngx_libc_cdecl
ngx_http_prefix_route_known_cmp(const void *one, const void *two)
{
    ngx_rbtree_key_t  a, b;

    a = (*(ngx_http_prefix_route_peer_t **) one)->sn.node.key;
    b = (*(ngx_http_prefix_route_peer_t **) two)->sn.node.key;

    return (a > b) - (a < b);
}


/*
 * The name of the record of shadow mode's would-be placements on "peer",
 * as ngx_http_prefix_route_init_zone() gives it, in "buf"
 * (NGX_SOCKADDR_STRLEN bytes and the prefix).
 */

static void
ngx_http_prefix_route_shadow_name(ngx_str_t *name, u_char *buf,
    ngx_http_upstream_rr_peer_t *peer)
{
    u_char  *last;

    last = ngx_snprintf(buf, sizeof("shadow of ") - 1 + NGX_SOCKADDR_STRLEN,
                        "shadow of %V", &peer->name);
    name->data = buf;
    name->len = last - buf;
}

#endif


/*
 * pos[b][slot] is the first server line of list b with the record of
 * that slot: a line elsewhere repeats it, and so does a backup line whose
 * address a primary line has.
 */

ngx_uint_t
ngx_http_prefix_route_repeat(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_uint_t b, ngx_uint_t i)
{
    ngx_uint_t  slot;

    if (prcf->shared[b][i] == NULL) {
        return 0;
    }

    slot = prcf->shared[b][i]->slot;

    return prcf->pos[b][slot] != i
           || (b == 1 && prcf->pos[0][slot] < prcf->number[0]);
}
