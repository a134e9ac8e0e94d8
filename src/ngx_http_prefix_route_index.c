
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_index.h"


/*
 * An entry stands for one block hash, that is for one whole prefix of some
 * prompt; it points to the entry of the prefix one block shorter.  A holder
 * says that one peer received that prefix; it points to the same peer's
 * holder of the parent entry ("up"), and holders are kept in a per-peer
 * LRU queue, which enforces the per-peer capacity, and in a zone-wide LRU
 * queue, which gives memory back when the slab allocator runs out.  Each
 * record moves its holders to the queue heads from the deepest block to
 * the first, so a parent is always more recently used than its children
 * and both queues forget the deepest blocks first: the blocks a peer holds
 * always form whole prefixes, the holders of an entry include those of its
 * children, and no holder is freed while another points up to it.
 *
 * Both take one 64-byte slab chunk; a holder refers to its entry and its
 * parent holder by 32-bit offsets in the zone, in units of 8 bytes (zones
 * up to 32 GiB).
 */

struct ngx_http_prefix_route_entry_s {
    ngx_rbtree_node_t                node;      /* key: the block hash;
                                                   node.data: pinned by the
                                                   record under way */
    ngx_http_prefix_route_entry_t   *parent;    /* prefix one block shorter */
    ngx_http_prefix_route_holder_t  *holders;
    uint32_t                         children;  /* entries it is parent of */
    uint32_t                         nholders;
};


struct ngx_http_prefix_route_holder_s {
    ngx_queue_t                      peer_lru;
    ngx_queue_t                      zone_lru;
    ngx_http_prefix_route_holder_t  *next;      /* same entry, other peer */
    ngx_http_prefix_route_peer_t    *peer;
    uint32_t                         entry;     /* offset */
    uint32_t                         up;        /* offset, 0: first block */
    uint32_t                         kids;      /* holders up to this one */
    uint32_t                         slot;      /* peer->slot */
};


/* the version of the structs above and in the header, kept in the zone */
#define NGX_HTTP_PREFIX_ROUTE_LAYOUT                                         \
    (0x50520000 + sizeof(ngx_http_prefix_route_sh_t)                         \
     + sizeof(ngx_http_prefix_route_peer_t)                                  \
     + sizeof(ngx_http_prefix_route_holder_t))

/* holders dropped at most to make room for one allocation */
#define NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES  8


#define ngx_http_prefix_route_off(idx, p)                                    \
    ((p) ? (uint32_t) (((u_char *) (p) - (u_char *) (idx)->shpool) >> 3) : 0)

#define ngx_http_prefix_route_ptr(idx, off)                                  \
    ((off) ? (void *) ((u_char *) (idx)->shpool + ((size_t) (off) << 3))    \
           : NULL)


static ngx_uint_t ngx_http_prefix_route_index_deepest(
    ngx_http_prefix_route_sh_t *sh, uint64_t *hash, ngx_uint_t n,
    ngx_http_prefix_route_entry_t **deepest);
static ngx_http_prefix_route_entry_t *ngx_http_prefix_route_index_lookup(
    ngx_http_prefix_route_sh_t *sh, uint64_t hash);
static ngx_http_prefix_route_holder_t *ngx_http_prefix_route_index_holder(
    ngx_http_prefix_route_entry_t *e, ngx_http_prefix_route_peer_t *peer);
static ngx_http_prefix_route_holder_t *ngx_http_prefix_route_index_add(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_http_prefix_route_holder_t *up, ngx_http_prefix_route_peer_t *peer);
static void *ngx_http_prefix_route_index_alloc(
    ngx_http_prefix_route_index_t *idx, size_t size, ngx_uint_t tries);
static ngx_uint_t ngx_http_prefix_route_index_evict(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_index_remove(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_holder_t *h);
static void ngx_http_prefix_route_index_release(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e);
static int ngx_libc_cdecl ngx_http_prefix_route_index_cmp(const void *a,
    const void *b);


ngx_int_t
ngx_http_prefix_route_index_init(ngx_http_prefix_route_index_t *idx,
    ngx_slab_pool_t *shpool, ngx_http_prefix_route_index_t *old,
    ngx_uint_t nworkers)
{
    ngx_http_prefix_route_sh_t  *sh;

    idx->shpool = shpool;
    idx->slot = -1;

    sh = old ? old->sh : shpool->data;

    if (sh != NULL) {
        /* the zone survived a reload, or a restart of the master */

        if (sh->layout != NGX_HTTP_PREFIX_ROUTE_LAYOUT) {
            return NGX_DECLINED;
        }

        idx->sh = sh;
        return NGX_OK;
    }

    sh = ngx_slab_alloc(shpool, sizeof(ngx_http_prefix_route_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_memzero(sh, sizeof(ngx_http_prefix_route_sh_t));

    sh->workers = ngx_slab_calloc(shpool,
                        nworkers * sizeof(ngx_http_prefix_route_worker_t));
    if (sh->workers == NULL) {
        return NGX_ERROR;
    }

    sh->layout = NGX_HTTP_PREFIX_ROUTE_LAYOUT;
    sh->nworkers = nworkers;

    ngx_rbtree_init(&sh->rbtree, &sh->sentinel, ngx_rbtree_insert_value);
    ngx_queue_init(&sh->lru);
    ngx_queue_init(&sh->peers);

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
    size_t                         size;
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
     * The record, its name and its load cells (one a worker slot and the
     * shared one) in one allocation.  In a zone full of index blocks the
     * whole index may have to go to free a page for it (reload only).
     */

    size = ngx_align(sizeof(ngx_http_prefix_route_peer_t) + name->len,
                     NGX_ALIGNMENT);

    peer = ngx_http_prefix_route_index_alloc(idx, size
                               + (sh->nworkers + 1)
                                 * sizeof(ngx_http_prefix_route_cell_t),
                               sh->holders);
    if (peer == NULL) {
        goto done;
    }

    ngx_memzero(peer, size + (sh->nworkers + 1)
                             * sizeof(ngx_http_prefix_route_cell_t));

    ngx_queue_init(&peer->lru);
    peer->slot = sh->npeers++;
    peer->cells = (ngx_http_prefix_route_cell_t *) ((u_char *) peer + size);
    peer->len = name->len;
    ngx_memcpy(peer->name, name->data, name->len);

    ngx_queue_insert_tail(&sh->peers, &peer->queue);

done:

    ngx_shmtx_unlock(&idx->shpool->mutex);

    return peer;
}


ngx_uint_t
ngx_http_prefix_route_index_match(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_uint_t *pos, ngx_uint_t npos,
    ngx_uint_t npeers, ngx_uint_t budget, ngx_uint_t *match, u_char *leaf)
{
    uint32_t                         last;
    ngx_uint_t                       d, i, k, found;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    for (i = 0; i < npeers; i++) {
        match[i] = 0;
        leaf[i] = 0;
    }

    d = ngx_http_prefix_route_index_deepest(idx->sh, hash, n, &e);

    /*
     * Walk back to the first block; the deepest holder of a peer met on
     * the way gives its match, as its holders form whole prefixes.  The
     * holders of an entry include those of its child, so an entry with as
     * many holders as the child has no new peer and is not looked into.
     */

    found = 0;
    last = 0;

    for (k = d; k > 0 && e != NULL && found < npeers; k--) {

        if (e->nholders != last) {

            if (e->nholders > budget) {
                idx->sh->capped++;
                break;
            }

            budget -= e->nholders;

            for (h = e->holders; h != NULL; h = h->next) {

                if (h->slot < npos) {
                    i = pos[h->slot];

                    if (i < npeers && match[i] == 0) {
                        match[i] = k;
                        leaf[i] = (e->children == 0);
                        found++;
                    }
                }
            }

            last = e->nholders;
        }

        e = e->parent;
    }

    return d;
}


ngx_uint_t
ngx_http_prefix_route_index_record(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_uint_t *held,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity)
{
    ngx_uint_t                        d, i, k;
    ngx_queue_t                      *q;
    ngx_http_prefix_route_sh_t       *sh;
    ngx_http_prefix_route_entry_t   **chain, *e;
    ngx_http_prefix_route_holder_t   *h, *up;

    sh = idx->sh;
    chain = idx->chain;

    /*
     * The chain's entries are pinned (node.data) while the record runs:
     * the allocations below may evict, and must not free what it uses.
     */

    d = ngx_http_prefix_route_index_deepest(sh, hash, n, &e);

    for (k = d; k > 0; k--) {
        e->node.data = 1;
        chain[k - 1] = e;
        e = e->parent;
    }

    /* the peer's deepest holder on the chain, from the hint of match() */

    i = ngx_min(*held, d);

    while (i > 0 && ngx_http_prefix_route_index_holder(chain[i - 1], peer)
                    == NULL)
    {
        i--;
    }

    while (i < d && ngx_http_prefix_route_index_holder(chain[i], peer)
                    != NULL)
    {
        i++;
    }

    *held = i;
    up = i ? ngx_http_prefix_route_index_holder(chain[i - 1], peer) : NULL;
    k = d;

    /* from the first missing block on: running out leaves a whole prefix */

    for ( /* void */ ; i < n; i++) {

        if (i >= k) {
            e = ngx_http_prefix_route_index_alloc(idx,
                                      sizeof(ngx_http_prefix_route_entry_t),
                                      NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
            if (e == NULL) {
                break;
            }

            ngx_memzero(e, sizeof(ngx_http_prefix_route_entry_t));

            e->node.key = (ngx_rbtree_key_t) hash[i];
            e->node.data = 1;
            e->parent = (i > 0) ? chain[i - 1] : NULL;

            if (e->parent != NULL) {
                e->parent->children++;
            }

            ngx_rbtree_insert(&sh->rbtree, &e->node);
            sh->entries++;

            chain[i] = e;
            k = i + 1;
        }

        h = ngx_http_prefix_route_index_add(idx, chain[i], up, peer);
        if (h == NULL) {
            break;
        }

        up = h;
    }

    /* the deepest block first, so that parents end up more recent */

    for (h = up; h != NULL; h = ngx_http_prefix_route_ptr(idx, h->up)) {
        ngx_queue_remove(&h->peer_lru);
        ngx_queue_insert_head(&peer->lru, &h->peer_lru);

        ngx_queue_remove(&h->zone_lru);
        ngx_queue_insert_head(&sh->lru, &h->zone_lru);
    }

    while (capacity && peer->blocks > capacity) {
        q = ngx_queue_last(&peer->lru);
        h = ngx_queue_data(q, ngx_http_prefix_route_holder_t, peer_lru);
        e = ngx_http_prefix_route_ptr(idx, h->entry);

        if (e->node.data || h->kids) {
            /* the prompt alone is larger than the capacity */
            break;
        }

        ngx_http_prefix_route_index_remove(idx, h);
        sh->forgotten++;
    }

    for (d = 0; d < k; d++) {
        chain[d]->node.data = 0;
    }

    if (i < k) {
        /* the entry whose holder had no memory: it goes if nobody holds it */
        ngx_http_prefix_route_index_release(idx, chain[i]);
    }

    return i;
}


void
ngx_http_prefix_route_index_forget(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t from, ngx_uint_t to,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h, *up;

    h = NULL;

    while (to > from && h == NULL) {
        to--;
        e = ngx_http_prefix_route_index_lookup(idx->sh, hash[to]);
        h = e ? ngx_http_prefix_route_index_holder(e, peer) : NULL;
    }

    /* a holder with kids is part of a longer prefix recorded since */

    while (h != NULL && h->kids == 0) {
        up = ngx_http_prefix_route_ptr(idx, h->up);
        ngx_http_prefix_route_index_remove(idx, h);

        if (to-- == from) {
            break;
        }

        h = up;
    }
}


ngx_int_t
ngx_http_prefix_route_index_check(ngx_http_prefix_route_index_t *idx,
    ngx_pool_t *pool, ngx_log_t *log)
{
    uintptr_t                        *byaddr, key;
    ngx_uint_t                        i, nh, ne, nc, nu, kids, bad, seen[8];
    ngx_queue_t                      *q;
    ngx_rbtree_node_t                *node;
    ngx_http_prefix_route_sh_t       *sh;
    ngx_http_prefix_route_peer_t     *peer, **peers;
    ngx_http_prefix_route_entry_t    *e, *p;
    ngx_http_prefix_route_holder_t   *h, *u;

    static const char  *what[8] = {
        "entries in the tree and their count differ",
        "an entry's holders or children are miscounted",
        "a holder is linked from another entry or peer",
        "a holder has no holder of its parent block, or a wrong one",
        "holders are miscounted in the zone queue or a peer's",
        "a parent block is less recently used than its child",
        "a holder's kids are miscounted",
        "an entry's parent is not in the tree"
    };

    sh = idx->sh;
    bad = 0;
    ngx_memzero(seen, sizeof(seen));

#define ngx_http_prefix_route_bad(k)                                         \
    do { seen[k]++; bad++; } while (0)

    peers = ngx_pcalloc(pool, (sh->npeers + 1) * sizeof(void *));
    byaddr = ngx_palloc(pool, 2 * (sh->holders + 1) * sizeof(uintptr_t));

    if (peers == NULL || byaddr == NULL) {
        return NGX_ERROR;
    }

    /* each peer's queue: its holders and their count */

    for (q = ngx_queue_head(&sh->peers);
         q != ngx_queue_sentinel(&sh->peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);

        if (peer->slot >= sh->npeers || peers[peer->slot] != NULL) {
            ngx_http_prefix_route_bad(2);
            continue;
        }

        peers[peer->slot] = peer;
        nh = 0;

        for (q = ngx_queue_head(&peer->lru);
             q != ngx_queue_sentinel(&peer->lru) && nh <= sh->holders;
             q = ngx_queue_next(q))
        {
            h = ngx_queue_data(q, ngx_http_prefix_route_holder_t, peer_lru);

            if (h->peer != peer) {
                ngx_http_prefix_route_bad(2);
            }

            nh++;
        }

        if (nh != peer->blocks) {
            ngx_http_prefix_route_bad(4);
        }

        q = &peer->queue;
    }

    /*
     * The zone queue in order, then sorted by address with each holder's
     * place in the queue: a parent holder must come first.
     */

    nh = 0;

    for (q = ngx_queue_head(&sh->lru);
         q != ngx_queue_sentinel(&sh->lru) && nh <= sh->holders;
         q = ngx_queue_next(q))
    {
        h = ngx_queue_data(q, ngx_http_prefix_route_holder_t, zone_lru);

        if (nh < sh->holders) {
            byaddr[2 * nh] = (uintptr_t) h;
            byaddr[2 * nh + 1] = nh;
        }

        nh++;
    }

    if (nh != sh->holders) {
        ngx_http_prefix_route_bad(4);
        nh = ngx_min(nh, sh->holders);
    }

    ngx_qsort(byaddr, nh, 2 * sizeof(uintptr_t),
              ngx_http_prefix_route_index_cmp);

    /* the tree: entries, their holders and children */

    ne = 0;
    nc = 0;
    nu = 0;
    kids = 0;

    node = (sh->rbtree.root == sh->rbtree.sentinel)
           ? NULL : ngx_rbtree_min(sh->rbtree.root, sh->rbtree.sentinel);

    for ( /* void */ ;
         node != NULL && ne <= sh->entries;
         node = ngx_rbtree_next(&sh->rbtree, node))
    {
        e = (ngx_http_prefix_route_entry_t *) node;
        p = e->parent;
        ne++;

        if (p != NULL) {
            nc++;

            if (ngx_http_prefix_route_index_lookup(sh, p->node.key) != p) {
                ngx_http_prefix_route_bad(7);
                p = NULL;
            }
        }

        if (e->holders == NULL && e->children == 0) {
            ngx_http_prefix_route_bad(1);
        }

        i = 0;

        for (h = e->holders; h != NULL && i <= e->nholders; h = h->next) {
            i++;
            kids += h->kids;

            if (ngx_http_prefix_route_ptr(idx, h->entry) != e
                || h->slot >= sh->npeers
                || peers[h->slot] != h->peer)
            {
                ngx_http_prefix_route_bad(2);
                continue;
            }

            u = ngx_http_prefix_route_ptr(idx, h->up);

            if (u == NULL) {
                if (e->parent != NULL) {
                    ngx_http_prefix_route_bad(3);
                }

                continue;
            }

            nu++;

            if (p == NULL
                || ngx_http_prefix_route_index_holder(p, h->peer) != u)
            {
                ngx_http_prefix_route_bad(3);
                continue;
            }

            key = (uintptr_t) u;
            u = bsearch(&key, byaddr, nh, 2 * sizeof(uintptr_t),
                        ngx_http_prefix_route_index_cmp);
            key = (uintptr_t) h;
            h = bsearch(&key, byaddr, nh, 2 * sizeof(uintptr_t),
                        ngx_http_prefix_route_index_cmp);

            if (u == NULL || h == NULL) {
                ngx_http_prefix_route_bad(4);
                break;
            }

            if (((uintptr_t *) u)[1] > ((uintptr_t *) h)[1]) {
                ngx_http_prefix_route_bad(5);
            }

            h = (ngx_http_prefix_route_holder_t *) ((uintptr_t *) h)[0];
        }

        if (i != e->nholders) {
            ngx_http_prefix_route_bad(1);
        }
    }

    if (ne != sh->entries) {
        ngx_http_prefix_route_bad(0);
    }

    if (kids != nu) {
        ngx_http_prefix_route_bad(6);
    }

    /* each entry's children: their sum is the number of parent links */

    kids = 0;

    node = (sh->rbtree.root == sh->rbtree.sentinel)
           ? NULL : ngx_rbtree_min(sh->rbtree.root, sh->rbtree.sentinel);

    for ( /* void */ ;
         node != NULL && kids <= ne;
         node = ngx_rbtree_next(&sh->rbtree, node))
    {
        kids += ((ngx_http_prefix_route_entry_t *) node)->children;
    }

    if (kids != nc) {
        ngx_http_prefix_route_bad(1);
    }

#undef ngx_http_prefix_route_bad

    for (i = 0; i < 8; i++) {
        if (seen[i]) {
            ngx_log_error(NGX_LOG_ALERT, log, 0,
                          "prefix_route index check: %s (%ui times)",
                          what[i], seen[i]);
        }
    }

    return bad;
}


size_t
ngx_http_prefix_route_index_entry_size(void)
{
    return sizeof(ngx_http_prefix_route_entry_t);
}


size_t
ngx_http_prefix_route_index_holder_size(void)
{
    return sizeof(ngx_http_prefix_route_holder_t);
}


/*
 * The longest indexed prefix of a chain of n block hashes, by binary
 * search: the indexed prefixes of a chain are closed under "one block
 * shorter", as every entry has its parent.  Returns its length in blocks
 * and its entry in *deepest (NULL for 0).
 */

static ngx_uint_t
ngx_http_prefix_route_index_deepest(ngx_http_prefix_route_sh_t *sh,
    uint64_t *hash, ngx_uint_t n, ngx_http_prefix_route_entry_t **deepest)
{
    ngx_uint_t                      lo, hi, mid;
    ngx_http_prefix_route_entry_t  *e;

    lo = 0;
    hi = n;
    *deepest = NULL;

    while (lo < hi) {
        mid = lo + (hi - lo + 1) / 2;

        e = ngx_http_prefix_route_index_lookup(sh, hash[mid - 1]);

        if (e != NULL) {
            lo = mid;
            *deepest = e;

        } else {
            hi = mid - 1;
        }
    }

    return lo;
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


/*
 * A new holder of entry "e" for "peer", below the peer's holder "up" of
 * the parent entry; NULL when the zone has no memory for it.
 */

static ngx_http_prefix_route_holder_t *
ngx_http_prefix_route_index_add(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_http_prefix_route_holder_t *up,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_holder_t  *h;

    h = ngx_http_prefix_route_index_alloc(idx,
                                  sizeof(ngx_http_prefix_route_holder_t),
                                  NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
    if (h == NULL) {
        return NULL;
    }

    h->next = e->holders;
    e->holders = h;
    e->nholders++;

    h->peer = peer;
    h->entry = ngx_http_prefix_route_off(idx, e);
    h->up = ngx_http_prefix_route_off(idx, up);
    h->kids = 0;
    h->slot = peer->slot;

    if (up != NULL) {
        up->kids++;
    }

    ngx_queue_insert_head(&peer->lru, &h->peer_lru);
    ngx_queue_insert_head(&idx->sh->lru, &h->zone_lru);

    peer->blocks++;
    idx->sh->holders++;

    return h;
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
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    sh = idx->sh;

    if (ngx_queue_empty(&sh->lru)) {
        return 0;
    }

    q = ngx_queue_last(&sh->lru);
    h = ngx_queue_data(q, ngx_http_prefix_route_holder_t, zone_lru);
    e = ngx_http_prefix_route_ptr(idx, h->entry);

    if (e->node.data || h->kids) {
        /*
         * only the blocks of the record under way are left (a parent is
         * always newer than its children, so kids is 0 at the tail)
         */
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
    ngx_http_prefix_route_holder_t  **hp, *up;

    e = ngx_http_prefix_route_ptr(idx, h->entry);

    for (hp = &e->holders; *hp != h; hp = &(*hp)->next) {
        /* void */
    }

    *hp = h->next;
    e->nholders--;

    up = ngx_http_prefix_route_ptr(idx, h->up);

    if (up != NULL) {
        up->kids--;
    }

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
           && !e->node.data)
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


static int ngx_libc_cdecl
ngx_http_prefix_route_index_cmp(const void *a, const void *b)
{
    uintptr_t  x, y;

    x = *(const uintptr_t *) a;
    y = *(const uintptr_t *) b;

    return (x > y) - (x < y);
}
