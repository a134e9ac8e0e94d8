
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_index.h"


/* holders dropped at most to make room for one allocation */
#define NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES  8

/* how often the workers' records are checked for dead ones, ms */
#define NGX_HTTP_PREFIX_ROUTE_SWEEP        1000


static ngx_http_prefix_route_entry_t *ngx_http_prefix_route_index_lookup(
    ngx_http_prefix_route_sh_t *sh, uint64_t hash);
static ngx_http_prefix_route_holder_t *ngx_http_prefix_route_index_holder(
    ngx_http_prefix_route_entry_t *e, ngx_http_prefix_route_peer_t *peer);
static void *ngx_http_prefix_route_index_alloc(
    ngx_http_prefix_route_index_t *idx, size_t size, ngx_uint_t tries);
static ngx_uint_t ngx_http_prefix_route_index_evict(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_index_remove(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_holder_t *h);
static void ngx_http_prefix_route_index_release(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e);
static ngx_http_prefix_route_worker_t *ngx_http_prefix_route_index_worker(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_index_orphans(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_worker_t *worker);


/* this process, told apart from earlier ones of the same pid */
static uint64_t  ngx_http_prefix_route_nonce;


ngx_int_t
ngx_http_prefix_route_index_init(ngx_http_prefix_route_index_t *idx,
    ngx_slab_pool_t *shpool, ngx_http_prefix_route_index_t *old)
{
    ngx_http_prefix_route_sh_t  *sh;

    if (old != NULL) {
        idx->sh = old->sh;
        idx->shpool = old->shpool;
        return NGX_OK;
    }

    idx->shpool = shpool;

    if (shpool->data != NULL) {
        /* the zone survived, as on Windows after a restart of the master */
        idx->sh = shpool->data;
        return NGX_OK;
    }

    sh = ngx_slab_alloc(shpool, sizeof(ngx_http_prefix_route_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(sh, sizeof(ngx_http_prefix_route_sh_t));

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel, ngx_rbtree_insert_value);
    ngx_queue_init(&sh->lru);
    ngx_queue_init(&sh->peers);
    ngx_queue_init(&sh->workers);

    idx->sh = sh;
    shpool->data = sh;

    /* the index makes room itself when the slab allocator runs out */
    shpool->log_nomem = 0;

    return NGX_OK;
}


ngx_http_prefix_route_peer_t *
ngx_http_prefix_route_index_peer(ngx_http_prefix_route_index_t *idx,
    ngx_str_t *name)
{
    ngx_queue_t                   *q;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;

    ngx_shmtx_lock(&idx->shpool->mutex);

    for (q = ngx_queue_head(&sh->peers);
         q != ngx_queue_sentinel(&sh->peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);

        if (peer->len == name->len
            && ngx_memcmp(peer->name, name->data, name->len) == 0)
        {
            goto done;
        }
    }

    /*
     * A peer record has a size of its own: in a zone full of index blocks
     * the whole index may have to go to free a page for it (reload only).
     */

    peer = ngx_http_prefix_route_index_alloc(idx,
                                  sizeof(ngx_http_prefix_route_peer_t)
                                  + name->len, sh->holders);
    if (peer == NULL) {
        goto done;
    }

    ngx_memzero(peer, sizeof(ngx_http_prefix_route_peer_t));

    ngx_queue_init(&peer->lru);
    peer->len = name->len;
    ngx_memcpy(peer->name, name->data, name->len);

    ngx_queue_insert_tail(&sh->peers, &peer->queue);

done:

    ngx_shmtx_unlock(&idx->shpool->mutex);

    return peer;
}


ngx_uint_t
ngx_http_prefix_route_index_match(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_http_prefix_route_entry_t **chain,
    ngx_http_prefix_route_peer_t **peers, ngx_uint_t npeers,
    ngx_uint_t *match, u_char *leaf)
{
    ngx_uint_t                       lo, hi, mid, i, k, found;
    ngx_http_prefix_route_entry_t   *e, *deepest;
    ngx_http_prefix_route_holder_t  *h;

    for (i = 0; i < npeers; i++) {
        match[i] = 0;
        leaf[i] = 0;
    }

    /*
     * The indexed prefixes of a chain are closed under "one block shorter"
     * (every entry has its parent), so the longest one is found by binary
     * search over the chain.
     */

    lo = 0;
    hi = n;
    deepest = NULL;

    while (lo < hi) {
        mid = lo + (hi - lo + 1) / 2;

        e = ngx_http_prefix_route_index_lookup(idx->sh, hash[mid - 1]);

        if (e != NULL) {
            lo = mid;
            deepest = e;

        } else {
            hi = mid - 1;
        }
    }

    /*
     * Walk back to the first block; the deepest holder of a peer met on
     * the way gives its match, as its holders form whole prefixes.
     */

    found = 0;
    e = deepest;

    for (k = lo; k > 0; k--) {

        if (e == NULL) {
            /* not reached: an entry's parent lives as long as it does */
            for (i = 0; i < npeers; i++) {
                match[i] = 0;
            }

            return 0;
        }

        chain[k - 1] = e;

        for (h = e->holders; h != NULL && found < npeers; h = h->next) {
            for (i = 0; i < npeers; i++) {
                if (peers[i] == h->peer && match[i] == 0) {
                    match[i] = k;
                    leaf[i] = (e->children == 0);
                    found++;
                }
            }
        }

        e = e->parent;
    }

    return lo;
}


ngx_uint_t
ngx_http_prefix_route_index_update(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_http_prefix_route_entry_t **chain,
    ngx_uint_t d, ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity)
{
    uint32_t                         stamp;
    ngx_uint_t                       i;
    ngx_queue_t                     *q;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    sh = idx->sh;

    /* entries stamped with this update are not evicted while it runs */

    stamp = ++sh->stamp;

    for (i = 0; i < d; i++) {
        chain[i]->stamp = stamp;
    }

    /*
     * From the first block on, so that running out of memory leaves a
     * whole prefix recorded.
     */

    for (i = 0; i < n; i++) {

        if (i >= d) {
            e = ngx_http_prefix_route_index_alloc(idx,
                                      sizeof(ngx_http_prefix_route_entry_t),
                                      NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
            if (e == NULL) {
                break;
            }

            e->node.key = (ngx_rbtree_key_t) hash[i];
            e->parent = (i > 0) ? chain[i - 1] : NULL;
            e->holders = NULL;
            e->children = 0;
            e->stamp = stamp;

            if (e->parent != NULL) {
                e->parent->children++;
            }

            ngx_rbtree_insert(&sh->rbtree, &e->node);
            sh->entries++;

            chain[i] = e;
        }

        e = chain[i];

        if (ngx_http_prefix_route_index_holder(e, peer) != NULL) {
            continue;
        }

        h = ngx_http_prefix_route_index_alloc(idx,
                                  sizeof(ngx_http_prefix_route_holder_t),
                                  NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
        if (h == NULL) {
            if (e->holders == NULL && e->children == 0) {
                /* the entry just added, a leaf nobody holds */
                e->stamp = 0;
                ngx_http_prefix_route_index_release(idx, e);
            }

            break;
        }

        h->next = e->holders;
        e->holders = h;
        h->entry = e;
        h->peer = peer;

        ngx_queue_insert_head(&peer->lru, &h->peer_lru);
        ngx_queue_insert_head(&sh->lru, &h->zone_lru);

        peer->blocks++;
        sh->holders++;
    }

    n = i;

    /* the deepest block first, so that parents end up more recent */

    while (i-- > 0) {
        h = ngx_http_prefix_route_index_holder(chain[i], peer);

        ngx_queue_remove(&h->peer_lru);
        ngx_queue_insert_head(&peer->lru, &h->peer_lru);

        ngx_queue_remove(&h->zone_lru);
        ngx_queue_insert_head(&sh->lru, &h->zone_lru);
    }

    while (capacity && peer->blocks > capacity) {
        q = ngx_queue_last(&peer->lru);
        h = ngx_queue_data(q, ngx_http_prefix_route_holder_t, peer_lru);

        if (h->entry->stamp == stamp) {
            /* the prompt alone is larger than the capacity */
            break;
        }

        ngx_http_prefix_route_index_remove(idx, h);
        sh->forgotten++;
    }

    return n;
}


void
ngx_http_prefix_route_index_forget(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t from, ngx_uint_t to,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    /* no entry is one of an update under way: none is kept from freeing */

    idx->sh->stamp++;

    while (to-- > from) {
        e = ngx_http_prefix_route_index_lookup(idx->sh, hash[to]);

        if (e == NULL) {
            continue;
        }

        h = ngx_http_prefix_route_index_holder(e, peer);

        if (h != NULL) {
            ngx_http_prefix_route_index_remove(idx, h);
        }
    }
}


ngx_http_prefix_route_charge_t *
ngx_http_prefix_route_index_charge(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, double work)
{
    ngx_http_prefix_route_charge_t  *charge;
    ngx_http_prefix_route_worker_t  *worker;

    worker = ngx_http_prefix_route_index_worker(idx);
    if (worker == NULL) {
        return NULL;
    }

    charge = ngx_http_prefix_route_index_alloc(idx,
                                  sizeof(ngx_http_prefix_route_charge_t),
                                  NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
    if (charge == NULL) {
        return NULL;
    }

    charge->peer = peer;
    charge->work = work;
    ngx_queue_insert_tail(&worker->charges, &charge->queue);

    peer->queued += work;
    peer->inflight++;

    return charge;
}


void
ngx_http_prefix_route_index_discharge(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_charge_t *charge)
{
    ngx_http_prefix_route_peer_t  *peer;

    peer = charge->peer;

    peer->queued -= charge->work;
    peer->inflight--;

    if (peer->queued < 0 || peer->inflight == 0) {
        /* no rounding error outlives the requests */
        peer->queued = 0;
    }

    ngx_queue_remove(&charge->queue);
    ngx_slab_free_locked(idx->shpool, charge);
}


void
ngx_http_prefix_route_index_sweep(ngx_http_prefix_route_index_t *idx)
{
    ngx_msec_t                       now;
    ngx_queue_t                     *q, *next;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_worker_t  *worker;

    sh = idx->sh;
    now = ngx_current_msec;

    if (now - sh->swept < NGX_HTTP_PREFIX_ROUTE_SWEEP) {
        return;
    }

    sh->swept = now;

    for (q = ngx_queue_head(&sh->workers);
         q != ngx_queue_sentinel(&sh->workers);
         q = next)
    {
        next = ngx_queue_next(q);
        worker = ngx_queue_data(q, ngx_http_prefix_route_worker_t, queue);

        if (worker->pid == ngx_pid
            || kill(worker->pid, 0) == 0
            || ngx_errno != NGX_ESRCH)
        {
            continue;
        }

        ngx_http_prefix_route_index_orphans(idx, worker);

        ngx_queue_remove(&worker->queue);
        ngx_slab_free_locked(idx->shpool, worker);
    }
}


/*
 * The record of this worker process in the zone, found or made on its
 * first request; NULL when the zone has no memory for it.
 */

static ngx_http_prefix_route_worker_t *
ngx_http_prefix_route_index_worker(ngx_http_prefix_route_index_t *idx)
{
    ngx_queue_t                     *q;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_worker_t  *worker;

    worker = idx->worker;

    if (worker != NULL && worker->pid == ngx_pid) {
        return worker;
    }

    /*
     * Set once in each process, kept across reloads: a record of this
     * pid with another nonce is a dead process's whose pid came back.
     * A process without a master keeps its record across a reload, with
     * the requests of the old cycle still in it.
     */

    if (ngx_http_prefix_route_nonce == 0) {
        ngx_http_prefix_route_nonce = ((uint64_t) ngx_time() << 32
                                       ^ (uint64_t) ngx_random()) | 1;
    }

    sh = idx->sh;

    for (q = ngx_queue_head(&sh->workers);
         q != ngx_queue_sentinel(&sh->workers);
         q = ngx_queue_next(q))
    {
        worker = ngx_queue_data(q, ngx_http_prefix_route_worker_t, queue);

        if (worker->pid == ngx_pid) {

            if (worker->nonce != ngx_http_prefix_route_nonce) {
                ngx_http_prefix_route_index_orphans(idx, worker);
                worker->nonce = ngx_http_prefix_route_nonce;
            }

            goto done;
        }
    }

    worker = ngx_http_prefix_route_index_alloc(idx,
                                  sizeof(ngx_http_prefix_route_worker_t),
                                  NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
    if (worker == NULL) {
        return NULL;
    }

    ngx_queue_init(&worker->charges);
    worker->nonce = ngx_http_prefix_route_nonce;
    worker->pid = ngx_pid;
    ngx_queue_insert_tail(&sh->workers, &worker->queue);

done:

    idx->worker = worker;

    return worker;
}


/*
 * Gives back the charges of a worker process that died with requests in
 * flight.
 */

static void
ngx_http_prefix_route_index_orphans(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_worker_t *worker)
{
    ngx_uint_t  n;

    for (n = 0; !ngx_queue_empty(&worker->charges); n++) {
        ngx_http_prefix_route_index_discharge(idx,
            ngx_queue_data(ngx_queue_head(&worker->charges),
                           ngx_http_prefix_route_charge_t, queue));
    }

    if (n) {
        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "prefix_route: worker process %P exited with "
                      "requests in flight (%ui), their queued work is "
                      "given back", worker->pid, n);
    }
}


static ngx_http_prefix_route_entry_t *
ngx_http_prefix_route_index_lookup(ngx_http_prefix_route_sh_t *sh,
    uint64_t hash)
{
    ngx_rbtree_key_t    key;
    ngx_rbtree_node_t  *node, *sentinel;

    key = (ngx_rbtree_key_t) hash;
    node = sh->rbtree.root;
    sentinel = sh->rbtree.sentinel;

    while (node != sentinel) {

        if (key < node->key) {
            node = node->left;
            continue;
        }

        if (key > node->key) {
            node = node->right;
            continue;
        }

        return (ngx_http_prefix_route_entry_t *) node;
    }

    return NULL;
}


static ngx_http_prefix_route_holder_t *
ngx_http_prefix_route_index_holder(ngx_http_prefix_route_entry_t *e,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_holder_t  *h;

    for (h = e->holders; h != NULL; h = h->next) {
        if (h->peer == peer) {
            return h;
        }
    }

    return NULL;
}


static void *
ngx_http_prefix_route_index_alloc(ngx_http_prefix_route_index_t *idx,
    size_t size, ngx_uint_t tries)
{
    void  *p;

    for ( ;; ) {
        p = ngx_slab_alloc_locked(idx->shpool, size);

        if (p != NULL || tries-- == 0) {
            return p;
        }

        if (ngx_http_prefix_route_index_evict(idx) == 0) {
            return NULL;
        }
    }
}


static ngx_uint_t
ngx_http_prefix_route_index_evict(ngx_http_prefix_route_index_t *idx)
{
    ngx_queue_t                     *q;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_holder_t  *h;

    sh = idx->sh;

    if (ngx_queue_empty(&sh->lru)) {
        return 0;
    }

    q = ngx_queue_last(&sh->lru);
    h = ngx_queue_data(q, ngx_http_prefix_route_holder_t, zone_lru);

    if (h->entry->stamp == sh->stamp) {
        /* only the blocks of the update under way are left */
        return 0;
    }

    ngx_http_prefix_route_index_remove(idx, h);
    sh->evictions++;

    return 1;
}


static void
ngx_http_prefix_route_index_remove(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_holder_t *h)
{
    ngx_http_prefix_route_entry_t    *e;
    ngx_http_prefix_route_holder_t  **hp;

    e = h->entry;

    for (hp = &e->holders; *hp != h; hp = &(*hp)->next) {
        /* void */
    }

    *hp = h->next;

    ngx_queue_remove(&h->peer_lru);
    ngx_queue_remove(&h->zone_lru);

    h->peer->blocks--;
    idx->sh->holders--;

    ngx_slab_free_locked(idx->shpool, h);

    ngx_http_prefix_route_index_release(idx, e);
}


static void
ngx_http_prefix_route_index_release(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e)
{
    ngx_http_prefix_route_sh_t     *sh;
    ngx_http_prefix_route_entry_t  *parent;

    sh = idx->sh;

    /* an entry lives while a peer holds it or a longer prefix needs it */

    while (e != NULL
           && e->holders == NULL
           && e->children == 0
           && e->stamp != sh->stamp)
    {
        parent = e->parent;

        ngx_rbtree_delete(&sh->rbtree, &e->node);
        ngx_slab_free_locked(idx->shpool, e);
        sh->entries--;

        if (parent != NULL) {
            parent->children--;
        }

        e = parent;
    }
}
