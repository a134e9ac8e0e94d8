
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
 * LRU list, which enforces the per-peer capacity, and in a zone-wide LRU
 * list, which gives memory back when the slab allocator runs out.  Each
 * record moves its holders to the list heads from the deepest block to
 * the first, so a parent is always more recently used than its children
 * and both lists forget the deepest blocks first: the blocks a peer holds
 * always form whole prefixes, the holders of an entry include those of its
 * children, and no holder is freed while another points up to it.
 *
 * The zone's list is segmented (SLRU): a holder recorded again, a prefix
 * the peer was sent before, is protected ("hot"); a new one is on
 * probation.  The zone forgets probation first, and protected holders
 * beyond HOT_SHARE of the zone's go back to probation, least recently
 * used first: a flood of one-off prompts churns probation only.  The
 * protected holders of a chain form a prefix of it, so in each segment a
 * parent stays more recent than its children, or protected while they
 * are not.  A peer's list stays one LRU: it stands for the engine's own
 * cache, which evicts so (docs/design.md, "The index").
 *
 * Both take one 32-byte slab chunk: they refer to each other by 32-bit
 * offsets in the zone (8-byte units), and entries are found in a hash
 * table of the zone's own rather than nginx's red-black tree, whose node
 * alone takes 40 bytes (docs/design.md, "The index").
 */

struct ngx_http_prefix_route_entry_s {
    uint64_t                         key;       /* the block hash */
    uint32_t                         next;      /* in its bucket */
    uint32_t                         parent;    /* prefix one block shorter */
    uint32_t                         holders;
    uint32_t                         children;  /* entries it is parent of */
    uint32_t                         stamp;     /* last recorded, ms */
    uint16_t                         nholders;
    u_char                           pinned;    /* by the record under way */
    u_char                           tenant;    /* slot in sh->tenants */
};


struct ngx_http_prefix_route_holder_s {
    ngx_http_prefix_route_link_t     peer_lru;
    ngx_http_prefix_route_link_t     zone_lru;
    uint32_t                         next;      /* same entry, other peer */
    uint32_t                         entry;
    uint32_t                         up;        /* 0: the first block */
    uint32_t                         slot:12;   /* peer->slot */
    uint32_t                         hot:1;     /* protected */
    uint32_t                         kids:19;   /* holders up to this one */
};


/* the version of the structs above and in the header, kept in the zone */
#define NGX_HTTP_PREFIX_ROUTE_LAYOUT                                         \
    (0x50520601 + sizeof(ngx_http_prefix_route_sh_t)                         \
     + sizeof(ngx_http_prefix_route_peer_t)                                  \
     + sizeof(ngx_http_prefix_route_entry_t)                                 \
     + sizeof(ngx_http_prefix_route_holder_t))

/*
 * ms the master waits for the zone mutex on start or reload before the
 * new configuration fails: a worker holds it for microseconds
 */
#define NGX_HTTP_PREFIX_ROUTE_LOCK_MASTER  5000

/* holders dropped at most to make room for one allocation */
#define NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES  8

/* holders a holder can have below it */
#define NGX_HTTP_PREFIX_ROUTE_MAX_KIDS     ((1 << 19) - 1)

/*
 * The protected segment's share of the zone's holders: 4/5, the split of
 * Caffeine's W-TinyLFU main space; SLRU is Karedla, Love and Wherry,
 * "Caching strategies to improve disk system performance", IEEE Computer
 * 27(3), 1994.
 */
#define NGX_HTTP_PREFIX_ROUTE_HOT_SHARE(n) ((n) / 5 * 4)

/*
 * The slots a tenant's tag may take, tried from its hash on: a tenant
 * that finds none in use or free there counts in the overflow slot
 */
#define NGX_HTTP_PREFIX_ROUTE_TENANT_PROBES 16
#define NGX_HTTP_PREFIX_ROUTE_OVERFLOW     (NGX_HTTP_PREFIX_ROUTE_TENANTS - 1)

/* zone bytes per hash bucket: a bucket per two entries at most */
#define NGX_HTTP_PREFIX_ROUTE_BUCKET_BYTES 128


#define ngx_http_prefix_route_off(idx, p)                                    \
    ((p) ? (uint32_t) (((u_char *) (p) - (u_char *) (idx)->shpool) >> 3) : 0)

#define ngx_http_prefix_route_ptr(idx, off)                                  \
    ((off) ? (void *) ((u_char *) (idx)->shpool + ((size_t) (off) << 3))    \
           : NULL)

#define ngx_http_prefix_route_bucket(sh, key)                                \
    ((((key) ^ (sh)->secret) * 0x9e3779b97f4a7c15ULL) >> (sh)->shift)

/* the holder of a zone_lru link */
#define ngx_http_prefix_route_zone_holder(l)                                 \
    ((ngx_http_prefix_route_holder_t *)                                      \
         ((u_char *) (l) - offsetof(ngx_http_prefix_route_holder_t,          \
                                    zone_lru)))

/*
 * the mend's mark of the holder at offset "off": a 32-byte chunk, or none
 * (a link into a holder must not mark or unmark it)
 */
#define ngx_http_prefix_route_live_in(idx, off)                              \
    (((off) & 3) == 0                                                        \
     && ((size_t) (off) >> 8) < (idx)->sh->nlive / sizeof(uint64_t))
#define ngx_http_prefix_route_live_set(idx, off)                             \
    do {                                                                     \
        if (ngx_http_prefix_route_live_in(idx, off)) {                       \
            (idx)->live[(off) >> 8] |= (uint64_t) 1 << (((off) >> 2) & 63);  \
        }                                                                    \
    } while (0)
#define ngx_http_prefix_route_live_clear(idx, off)                           \
    do {                                                                     \
        if (ngx_http_prefix_route_live_in(idx, off)) {                       \
            (idx)->live[(off) >> 8] &=                                       \
                ~((uint64_t) 1 << (((off) >> 2) & 63));                      \
        }                                                                    \
    } while (0)

/* sh->changing of a change that records no chain (trim, forget) */
#define NGX_HTTP_PREFIX_ROUTE_NO_CHAIN     ((ngx_uint_t) -1)

/*
 * Steps of a mend a slice takes by default: buckets, entries and holders
 * visited, list links walked; 0.5-1 ms a slice on average on this
 * project's 2-core machines, the longest measured 8 ms in a 256m zone,
 * where a step is more often a cache miss (bench/results/mend.md).
 */
#define NGX_HTTP_PREFIX_ROUTE_MEND_STEPS   16384

/* the phases of a mend, in order (sh->mend.phase) */
#define NGX_HTTP_PREFIX_ROUTE_MEND_WALK    1
#define NGX_HTTP_PREFIX_ROUTE_MEND_SIFT    2
#define NGX_HTTP_PREFIX_ROUTE_MEND_REBUILD 3
#define NGX_HTTP_PREFIX_ROUTE_MEND_FREE    4
#define NGX_HTTP_PREFIX_ROUTE_MEND_RELINK  5
#define NGX_HTTP_PREFIX_ROUTE_MEND_RECOUNT 6
#define NGX_HTTP_PREFIX_ROUTE_MEND_PINNED  7
#define NGX_HTTP_PREFIX_ROUTE_MEND_UNPIN   8

/* walkable(): the slice's steps ran out */
#define NGX_HTTP_PREFIX_ROUTE_MEND_MORE    2

/* what a phase of the mend does to each entry; 1: its bucket changed */
typedef ngx_uint_t (*ngx_http_prefix_route_visit_pt)(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);


static ngx_uint_t ngx_http_prefix_route_index_put(
    ngx_http_prefix_route_index_t *idx, uint64_t *hash, ngx_uint_t n,
    ngx_uint_t *held, ngx_http_prefix_route_peer_t *peer, uint64_t tenant,
    uint32_t stamp);
static ngx_uint_t ngx_http_prefix_route_index_begin(
    ngx_http_prefix_route_index_t *idx, ngx_uint_t mark);
static void ngx_http_prefix_route_index_end(
    ngx_http_prefix_route_index_t *idx);
static ngx_uint_t ngx_http_prefix_route_index_cut(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t capacity, uint32_t *before, ngx_uint_t limit);
static ngx_uint_t ngx_http_prefix_route_index_slice(
    ngx_http_prefix_route_index_t *idx);
static ngx_uint_t ngx_http_prefix_route_index_runs(
    ngx_http_prefix_route_running_t *run, uint32_t first, uint32_t last);
static ngx_http_prefix_route_peer_t *ngx_http_prefix_route_index_unlist(
    ngx_http_prefix_route_index_t *idx, size_t len);
static void ngx_http_prefix_route_index_relist(
    ngx_http_prefix_route_index_t *idx);
static ngx_uint_t ngx_http_prefix_route_index_free(
    ngx_http_prefix_route_sh_t *sh, ngx_http_prefix_route_peer_t *peer);
static void ngx_http_prefix_route_index_spares(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_reuse_t *reuse);
static ngx_http_prefix_route_peer_t *ngx_http_prefix_route_index_spare(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_reuse_t *reuse,
    size_t len);
static void ngx_http_prefix_route_index_reuse(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    ngx_str_t *name, uint32_t hash);
static void ngx_http_prefix_route_index_named(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    uint32_t gen);
static void ngx_http_prefix_route_index_rename(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_index_doom(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer);
static ngx_uint_t ngx_http_prefix_route_index_doomed(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t limit);
static void ngx_http_prefix_route_index_learn(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t held, uint32_t before);
static ngx_uint_t ngx_http_prefix_route_index_repair(
    ngx_http_prefix_route_index_t *idx);
static ngx_uint_t ngx_http_prefix_route_index_buckets(
    ngx_http_prefix_route_index_t *idx, ngx_int_t *left,
    ngx_http_prefix_route_visit_pt visit);
static ngx_uint_t ngx_http_prefix_route_index_walk(
    ngx_http_prefix_route_index_t *idx, ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_sift(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_pin(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_leaf(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_unpin(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_drop(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left, ngx_uint_t mark);
static ngx_uint_t ngx_http_prefix_route_index_walkable(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_link_t *head,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_rebuild(
    ngx_http_prefix_route_index_t *idx, ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_relink(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_unmark(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static void ngx_http_prefix_route_index_uncount(
    ngx_http_prefix_route_index_t *idx);
static ngx_uint_t ngx_http_prefix_route_index_recount(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_int_t *left);
static ngx_uint_t ngx_http_prefix_route_index_live(
    ngx_http_prefix_route_index_t *idx, uint32_t off);
static ngx_uint_t ngx_http_prefix_route_index_inside(
    ngx_http_prefix_route_index_t *idx, uint32_t off);
static ngx_uint_t ngx_http_prefix_route_index_linked(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_link_t *l);
static ngx_uint_t ngx_http_prefix_route_index_deepest(
    ngx_http_prefix_route_index_t *idx, uint64_t *hash, ngx_uint_t n,
    ngx_http_prefix_route_entry_t **deepest);
static ngx_http_prefix_route_entry_t *ngx_http_prefix_route_index_lookup(
    ngx_http_prefix_route_index_t *idx, uint64_t key);
static ngx_http_prefix_route_holder_t *ngx_http_prefix_route_index_holder(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_http_prefix_route_peer_t *peer);
static ngx_http_prefix_route_entry_t *ngx_http_prefix_route_index_entry(
    ngx_http_prefix_route_index_t *idx, uint64_t key,
    ngx_http_prefix_route_entry_t *parent, ngx_uint_t tenant);
static ngx_uint_t ngx_http_prefix_route_index_tenant(
    ngx_http_prefix_route_index_t *idx, uint64_t tag);
static ngx_http_prefix_route_holder_t *ngx_http_prefix_route_index_add(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e,
    ngx_http_prefix_route_holder_t *up, ngx_http_prefix_route_peer_t *peer);
static void *ngx_http_prefix_route_index_alloc(
    ngx_http_prefix_route_index_t *idx, size_t size, ngx_uint_t tries);
static ngx_uint_t ngx_http_prefix_route_index_evict(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_index_segment(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_holder_t *h,
    ngx_uint_t hot);
static void ngx_http_prefix_route_index_remove(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_holder_t *h);
static void ngx_http_prefix_route_index_release(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_entry_t *e);
static void ngx_http_prefix_route_link_init(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_link_t *l);
static void ngx_http_prefix_route_link_head(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_link_t *head,
    ngx_http_prefix_route_link_t *l);
static void ngx_http_prefix_route_link_remove(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_link_t *l);
static int ngx_libc_cdecl ngx_http_prefix_route_index_cmp(const void *a,
    const void *b);


/*
 * The records free to reuse, listed for one hold of a zone mutex at a
 * time: one list a process, whatever its upstreams and configurations
 */
static ngx_http_prefix_route_peer_t
    *ngx_http_prefix_route_spare[NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS];


ngx_int_t
ngx_http_prefix_route_index_scratch(ngx_http_prefix_route_index_t *idx,
    ngx_pool_t *pool, ngx_uint_t nblocks)
{
    idx->chain = ngx_palloc(pool,
                            nblocks * sizeof(ngx_http_prefix_route_entry_t *));

    return idx->chain ? NGX_OK : NGX_ERROR;
}


ngx_int_t
ngx_http_prefix_route_index_init(ngx_http_prefix_route_index_t *idx,
    ngx_slab_pool_t *shpool, ngx_http_prefix_route_index_t *old,
    ngx_uint_t nworkers)
{
    size_t                       size;
    ngx_uint_t                   bits;
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
        idx->live = sh->live;

        return NGX_OK;
    }

    sh = ngx_slab_calloc(shpool, sizeof(ngx_http_prefix_route_sh_t));
    if (sh == NULL) {
        return NGX_ERROR;
    }

    idx->sh = sh;

    /*
     * the mend's marks, a bit a 32-byte chunk (zone / 256 bytes), in the
     * zone: a mend done in slices goes on in whichever worker takes the
     * mutex next
     */

    sh->nlive = ((shpool->end - (u_char *) shpool) / 32 + 63) / 64
                * sizeof(uint64_t);
    sh->live = ngx_slab_calloc(shpool, sh->nlive);
    idx->live = sh->live;

    /* a power of two of buckets, about one per two entries the zone holds */

    size = (shpool->end - shpool->start) / NGX_HTTP_PREFIX_ROUTE_BUCKET_BYTES;

    for (bits = 8; ((size_t) 1 << (bits + 1)) <= size; bits++) {
        /* void */
    }

    sh->shift = 64 - bits;

    sh->secret = ((uint64_t) ngx_random() << 32 ^ (uint64_t) ngx_random()
                  ^ (uint64_t) ngx_time());
    sh->nslots = 16;

    sh->buckets = ngx_slab_calloc(shpool, sizeof(uint32_t) << bits);
    sh->workers = ngx_slab_calloc(shpool,
                        nworkers * sizeof(ngx_http_prefix_route_worker_t));
    sh->slots = ngx_slab_calloc(shpool, sh->nslots * sizeof(void *));

    if (sh->buckets == NULL || sh->workers == NULL || sh->slots == NULL
        || sh->live == NULL)
    {
        return NGX_ERROR;
    }

    /*
     * the pages left for entries and holders, a pair a block as most
     * blocks have one holder
     */
    sh->room = shpool->pfree * ngx_pagesize
               / (sizeof(ngx_http_prefix_route_entry_t)
                  + sizeof(ngx_http_prefix_route_holder_t));

    sh->layout = NGX_HTTP_PREFIX_ROUTE_LAYOUT;
    sh->nworkers = nworkers;
    sh->started = ngx_time();

    ngx_http_prefix_route_link_init(idx, &sh->lru);
    ngx_http_prefix_route_link_init(idx, &sh->hot);
    ngx_queue_init(&sh->peers);

    /* a function of nginx itself: its address is the same in every process */
    ngx_rbtree_init(&sh->names, &sh->sentinel, ngx_str_rbtree_insert_value);

    shpool->data = sh;

    /* the index makes room itself when the slab allocator runs out */
    shpool->log_nomem = 0;

    return NGX_OK;
}


ngx_int_t
ngx_http_prefix_route_index_lock_master(ngx_http_prefix_route_index_t *idx,
    ngx_log_t *log)
{
    ngx_pid_t     pid;
    ngx_uint_t    ms;
    siginfo_t     info;
    ngx_shmtx_t  *mtx;

    mtx = &idx->shpool->mutex;
    pid = 0;

    for (ms = 0; ms < NGX_HTTP_PREFIX_ROUTE_LOCK_MASTER; ms++) {

        if (ngx_shmtx_trylock(mtx)) {
            return NGX_OK;
        }

        pid = (ngx_pid_t) *mtx->lock;

        if (pid <= 0) {
            continue;
        }

        /* WNOWAIT: an exited worker is left for nginx to reap */

        ngx_memzero(&info, sizeof(siginfo_t));

        if ((waitid(P_PID, pid, &info, WEXITED|WNOHANG|WNOWAIT) == 0
             && info.si_pid == pid)
            || (kill(pid, 0) == -1 && ngx_errno == NGX_ESRCH))
        {
            if (ngx_shmtx_force_unlock(mtx, pid)) {
                ngx_log_error(NGX_LOG_ALERT, log, 0,
                              "prefix_route: process %P exited holding the "
                              "zone's mutex, freed", pid);
            }

            continue;
        }

        ngx_msleep(1);
    }

    ngx_log_error(NGX_LOG_EMERG, log, 0,
                  "prefix_route: process %P has held the zone's mutex for "
                  "%ui ms", pid,
                  (ngx_uint_t) NGX_HTTP_PREFIX_ROUTE_LOCK_MASTER);

    return NGX_ERROR;
}


ngx_int_t
ngx_http_prefix_route_index_running(ngx_http_prefix_route_index_t *idx,
    uint32_t running)
{
    uint32_t                          gen, *gens;
    ngx_int_t                         i;
    ngx_uint_t                        k, n, j;
    ngx_process_t                    *c;
    ngx_http_prefix_route_proc_t     *p;
    ngx_http_prefix_route_running_t  *run;

    if (ngx_process != NGX_PROCESS_MASTER
        || (running == 0 && idx->gen != 1))
    {
        return NGX_DECLINED;
    }

    /*
     * the master's table of its children, not kill(2): a pid taken again
     * by another process does not keep an entry alive; a new binary's
     * master (detached) has zones of its own.  The entries of processes
     * no longer its children are freed: cache processes exit without
     * leaving, crashed workers too.
     */

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        p = &idx->sh->procs[k];

        if (p->pid == 0) {
            continue;
        }

        for (i = 0; i < ngx_last_process; i++) {
            c = &ngx_processes[i];

            if (c->pid == p->pid && !c->exited && !c->detached) {
                break;
            }
        }

        if (i == ngx_last_process) {
            p->pid = 0;
        }
    }

    for (i = 0; i < ngx_last_process; i++) {
        c = &ngx_processes[i];

        if (c->pid == -1 || c->exited || c->detached) {
            continue;
        }

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
            if (idx->sh->procs[k].pid == c->pid) {
                break;
            }
        }

        if (k < NGX_HTTP_PREFIX_ROUTE_PROCS) {
            continue;
        }

        /*
         * a child running at the zone's first configuration is of an
         * older one, without the zone (renamed or resized), and never
         * enters: it is entered here as a configuration that names no
         * record (0), or a worker of it lingering would keep every record
         * from reuse (helper-62)
         */

        if (idx->gen != 1) {
            return NGX_DECLINED;
        }

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
            if (idx->sh->procs[k].pid == 0) {
                idx->sh->procs[k].gen = 0;
                idx->sh->procs[k].pid = c->pid;
                break;
            }
        }

        if (k == NGX_HTTP_PREFIX_ROUTE_PROCS) {
            return NGX_DECLINED;
        }
    }

    /*
     * the set, kept in order as it is made: the master's configuration
     * and its children's older than this one (at most 257), then this one
     * and every newer one, or from a process's that found no entry
     */

    run = &idx->sh->running;
    gens = run->gens;

    run->from = 0;
    run->n = 0;

    for (k = 0; k <= NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {

        if (k < NGX_HTTP_PREFIX_ROUTE_PROCS) {
            if (idx->sh->procs[k].pid == 0) {
                continue;
            }

            gen = idx->sh->procs[k].gen;

        } else {
            gen = running;
        }

        if (gen == 0) {
            continue;
        }

        for (n = 0; n < run->n && gens[n] < gen; n++) {
            /* void */
        }

        if (n < run->n && gens[n] == gen) {
            continue;
        }

        for (j = run->n; j > n; j--) {
            gens[j] = gens[j - 1];
        }

        gens[n] = gen;
        run->n++;
    }

    gen = idx->gen;

    if (idx->sh->floor && idx->sh->floor < gen) {
        gen = idx->sh->floor;
    }

    while (run->n && gens[run->n - 1] >= gen) {
        run->n--;
    }

    /* the last store: a set half made reads as all running */

    ngx_http_prefix_route_order();

    run->from = gen;

    return NGX_OK;
}


/*
 * 1 if a configuration from "first" to "last" may still run: one of them
 * may name the record (a configuration between two that name it may not,
 * but is taken to).  The caller holds the zone mutex.
 */

static ngx_uint_t
ngx_http_prefix_route_index_runs(ngx_http_prefix_route_running_t *run,
    uint32_t first, uint32_t last)
{
    ngx_uint_t  lo, hi, mid;

    if (last >= run->from) {
        return 1;
    }

    /* the first configuration of the set from "first" on */

    lo = 0;
    hi = run->n;

    while (lo < hi) {
        mid = (lo + hi) / 2;

        if (run->gens[mid] < first) {
            lo = mid + 1;

        } else {
            hi = mid;
        }
    }

    return lo < run->n && run->gens[lo] <= last;
}


/*
 * 1 if "peer" may be reused: no configuration that may run named it since
 * it was made or reused (a kill between the two stores of a reuse leaves
 * "first" above "named": the range is taken from the lower).  The caller
 * holds the zone mutex.
 */

static ngx_uint_t
ngx_http_prefix_route_index_free(ngx_http_prefix_route_sh_t *sh,
    ngx_http_prefix_route_peer_t *peer)
{
    return !ngx_http_prefix_route_index_runs(&sh->running,
                                       ngx_min(peer->first, peer->named),
                                       peer->named);
}


/*
 * Lists in ngx_http_prefix_route_spare, oldest first, the records free
 * to reuse, in one walk of sh->peers for a hold of the zone mutex: those
 * a lingering old configuration names stay at its head, and a walk for
 * each new server would pass them all each time.  Each record is put in
 * the class of the largest room seen that is at most its own, of the
 * first NGX_HTTP_PREFIX_ROUTE_ROOMS rooms seen: exact while there are no
 * more (a record's room is one of 2-3 sizes of the slab allocator for
 * names of addresses); beyond, a record may be offered only to shorter
 * names than it fits, and one shorter than every class to none.  The
 * caller holds the mutex.
 */

static void
ngx_http_prefix_route_index_spares(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_reuse_t *reuse)
{
    ngx_uint_t                     c, k;
    ngx_queue_t                   *q;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;
    reuse->listed = 1;

    for (q = ngx_queue_head(&sh->peers);
         q != ngx_queue_sentinel(&sh->peers)
         && reuse->nspare < NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS;
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);

        if (peer->named >= sh->running.from) {
            break;
        }

        if (!ngx_http_prefix_route_index_free(sh, peer)) {
            continue;
        }

        ngx_http_prefix_route_spare[reuse->nspare++] = peer;

        /* a class for each room seen, in order, while there is one left */

        for (c = 0; c < reuse->nrooms && reuse->room[c] < peer->room; c++) {
            /* void */
        }

        if ((c < reuse->nrooms && reuse->room[c] == peer->room)
            || reuse->nrooms == NGX_HTTP_PREFIX_ROUTE_ROOMS)
        {
            continue;
        }

        for (k = reuse->nrooms; k > c; k--) {
            reuse->room[k] = reuse->room[k - 1];
        }

        reuse->room[c] = peer->room;
        reuse->nrooms++;
    }
}


/*
 * The oldest listed record that a name of "len" bytes fits in and that
 * is still free (a record found by name since, or reused by way of
 * sh->loose, is not), taken off the list; or NULL.  Each class's place in
 * the list only moves on: O(classes^2 x records) for a hold of the mutex.
 * The caller holds the mutex.
 */

static ngx_http_prefix_route_peer_t *
ngx_http_prefix_route_index_spare(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_reuse_t *reuse, size_t len)
{
    ngx_uint_t                     c, k, best, i;
    ngx_http_prefix_route_peer_t  *peer;

    for ( ;; ) {
        best = reuse->nspare;

        for (c = 0; c < reuse->nrooms; c++) {

            if (reuse->room[c] < len) {
                continue;
            }

            /* the class's next: a record whose room's class is c */

            for (i = reuse->next[c]; i < reuse->nspare; i++) {
                peer = ngx_http_prefix_route_spare[i];

                if (peer == NULL || peer->room < reuse->room[c]) {
                    continue;
                }

                for (k = c + 1;
                     k < reuse->nrooms && reuse->room[k] <= peer->room;
                     k++)
                {
                    /* void */
                }

                if (k == c + 1) {
                    break;
                }
            }

            reuse->next[c] = i;

            if (i < best) {
                best = i;
            }
        }

        if (best == reuse->nspare) {
            return NULL;
        }

        peer = ngx_http_prefix_route_spare[best];
        ngx_http_prefix_route_spare[best] = NULL;

        if (peer->named < idx->sh->running.from
            && ngx_http_prefix_route_index_free(idx->sh, peer))
        {
            return peer;
        }
    }
}


void
ngx_http_prefix_route_index_enter(ngx_http_prefix_route_index_t *idx)
{
    ngx_pid_t                      pid;
    ngx_uint_t                     k, free;
    ngx_http_prefix_route_sh_t    *sh;

    sh = idx->sh;

    ngx_shmtx_lock(&idx->shpool->mutex);

    free = NGX_HTTP_PREFIX_ROUTE_PROCS;

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        pid = sh->procs[k].pid;

        if (pid == ngx_pid) {
            free = k;
            break;
        }

        if (pid == 0 && free == NGX_HTTP_PREFIX_ROUTE_PROCS) {
            free = k;
        }
    }

    /*
     * all taken: one of a process gone, looked for without the mutex and
     * checked again under it; taken meanwhile by a worker that started
     * too, its pid is alive now, and the next look finds another
     */

    while (free == NGX_HTTP_PREFIX_ROUTE_PROCS) {

        ngx_shmtx_unlock(&idx->shpool->mutex);

        pid = 0;

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
            pid = sh->procs[k].pid;

            if (pid != 0 && kill(pid, 0) == -1 && ngx_errno == NGX_ESRCH) {
                break;
            }
        }

        ngx_shmtx_lock(&idx->shpool->mutex);

        if (k == NGX_HTTP_PREFIX_ROUTE_PROCS) {
            break;
        }

        if (sh->procs[k].pid == 0
            || (sh->procs[k].pid == pid
                && kill(pid, 0) == -1 && ngx_errno == NGX_ESRCH))
        {
            free = k;
        }
    }

    if (free < NGX_HTTP_PREFIX_ROUTE_PROCS) {
        goto enter;
    }

    if (sh->floor == 0 || idx->gen < sh->floor) {
        sh->floor = idx->gen;
    }

    ngx_shmtx_unlock(&idx->shpool->mutex);

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "prefix_route: all %ui process entries of the zone are "
                  "taken, its server records are no longer reused for "
                  "new servers", (ngx_uint_t) NGX_HTTP_PREFIX_ROUTE_PROCS);
    return;

enter:

    sh->procs[free].gen = idx->gen;
    sh->procs[free].pid = ngx_pid;

    ngx_shmtx_unlock(&idx->shpool->mutex);
}


void
ngx_http_prefix_route_index_leave(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t  k;

    ngx_shmtx_lock(&idx->shpool->mutex);

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        if (idx->sh->procs[k].pid == ngx_pid) {
            idx->sh->procs[k].pid = 0;
        }
    }

    if (idx->holding) {
        ngx_http_prefix_route_index_let_go(idx, NULL);
    }

    ngx_shmtx_unlock(&idx->shpool->mutex);
}


ngx_http_prefix_route_peer_t *
ngx_http_prefix_route_index_find(ngx_http_prefix_route_index_t *idx,
    ngx_str_t *name)
{
    ngx_str_node_t                 *sn;
    ngx_http_prefix_route_sh_t     *sh;
    ngx_http_prefix_route_peer_t   *peer;

    sh = idx->sh;

    if (sh->naming) {
        ngx_http_prefix_route_index_rename(idx);
    }

    sn = ngx_str_rbtree_lookup(&sh->names, name,
                               ngx_crc32_short(name->data, name->len));
    if (sn == NULL) {
        return NULL;
    }

    peer = (ngx_http_prefix_route_peer_t *) sn;

    /* lowered first: the record is taken to be named from then on */

    if (idx->gen < peer->first) {
        peer->first = idx->gen;
    }

    if (peer->named < idx->gen) {
        sh->naming = 1;
        ngx_queue_remove(&peer->queue);
        ngx_http_prefix_route_kill_point();
        ngx_http_prefix_route_index_named(idx, peer, idx->gen);
        sh->naming = 0;
    }

    return peer;
}


ngx_http_prefix_route_peer_t *
ngx_http_prefix_route_index_peer(ngx_http_prefix_route_index_t *idx,
    ngx_str_t *name, ngx_http_prefix_route_reuse_t *reuse)
{
    size_t                          size, cells, alloc;
    uint32_t                        hash;
    ngx_http_prefix_route_sh_t     *sh;
    ngx_http_prefix_route_peer_t   *peer, **slots, **old;

    peer = ngx_http_prefix_route_index_find(idx, name);
    if (peer != NULL) {
        return peer;
    }

    sh = idx->sh;
    hash = ngx_crc32_short(name->data, name->len);

    /*
     * a record no running configuration names goes before a new one:
     * records stay as many as the running configurations name, not one a
     * server a deploy of new addresses ever brought; the oldest come first
     */

    if (!reuse->listed) {
        ngx_http_prefix_route_index_spares(idx, reuse);
    }

    peer = ngx_http_prefix_route_index_spare(idx, reuse, name->len);

    if (peer != NULL) {
        ngx_http_prefix_route_index_reuse(idx, peer, name, hash);
        reuse->reused++;
        return peer;
    }

    /*
     * then one of an address no worker's lists have any more ("resolve"),
     * once no request is in flight there: between reloads records would
     * only grow with a name whose addresses change (pods replaced); a
     * request or probe that took it before sees its epoch moved on.  The
     * oldest let go first: an address back soon finds its own
     */

    peer = ngx_http_prefix_route_index_unlist(idx, name->len);

    if (peer != NULL) {
        ngx_http_prefix_route_index_reuse(idx, peer, name, hash);
        reuse->reused++;
        return peer;
    }

    if (sh->npeers == NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS) {
        return NULL;
    }

    /*
     * it may evict: a change, on an index mended if a worker died, all
     * the mend's slices at once (a reload that adds a server, in the
     * master)
     */

    while (!ngx_http_prefix_route_index_ready(idx)) {
        /* void */
    }

    (void) ngx_http_prefix_route_index_begin(idx,
                                             NGX_HTTP_PREFIX_ROUTE_NO_CHAIN);

    peer = NULL;

    /*
     * In a zone full of index blocks the whole index may have to go to
     * free a page for a new record: at a reload, or in a worker that
     * meets a new address of "server name resolve" (one record took 13%
     * of a full 1m zone's blocks, helper-50)
     */

    if (sh->npeers == sh->nslots) {
        slots = ngx_http_prefix_route_index_alloc(idx,
                                       2 * sh->nslots * sizeof(void *),
                                       sh->holders);
        if (slots == NULL) {
            goto done;
        }

        ngx_memcpy(slots, sh->slots, sh->nslots * sizeof(void *));

        /* the new table in place before the old one is freed */

        old = sh->slots;
        sh->slots = slots;

        ngx_slab_free_locked(idx->shpool, old);

        sh->nslots *= 2;
    }

    /*
     * The record, its name and its load cells (one a worker slot and the
     * shared one) in one allocation.
     */

    cells = (sh->nworkers + 1) * sizeof(ngx_http_prefix_route_cell_t);
    size = ngx_align(sizeof(ngx_http_prefix_route_peer_t) + name->len,
                     NGX_ALIGNMENT);

    /*
     * the name gets the bytes the slab allocator would leave unused (a
     * power of two up to half a page, whole pages beyond, ngx_slab.c):
     * room for a longer name when the record is reused, at no cost
     */

    for (alloc = 8; alloc < size + cells; alloc *= 2) {
        /* void */
    }

    if (alloc > ngx_pagesize / 2) {
        alloc = ngx_align(size + cells, ngx_pagesize);
    }

    size = (alloc - cells) & ~((size_t) NGX_ALIGNMENT - 1);

    peer = ngx_http_prefix_route_index_alloc(idx, size + cells, sh->holders);
    if (peer == NULL) {
        goto done;
    }

    ngx_memzero(peer, size + cells);

    ngx_http_prefix_route_link_init(idx, &peer->lru);
    peer->slot = sh->npeers;
    peer->cells = (ngx_http_prefix_route_cell_t *) ((u_char *) peer + size);
    peer->room = (uint32_t) (size - offsetof(ngx_http_prefix_route_peer_t,
                                             name));
    peer->first = idx->gen;
    peer->named = idx->gen;
    ngx_memcpy(peer->name, name->data, name->len);

    peer->sn.node.key = hash;
    peer->sn.str.len = name->len;
    peer->sn.str.data = peer->name;

    sh->naming = 1;
    sh->slots[peer->slot] = peer;

    ngx_http_prefix_route_order();

    sh->npeers++;
    ngx_http_prefix_route_kill_point();

    ngx_rbtree_insert(&sh->names, &peer->sn.node);
    ngx_http_prefix_route_kill_point();
    ngx_http_prefix_route_index_named(idx, peer, idx->gen);
    sh->naming = 0;

done:

    ngx_http_prefix_route_index_end(idx);

    return peer;
}


void
ngx_http_prefix_route_index_hold(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer)
{
    uint64_t  bit;

    bit = (uint64_t) 1 << (peer->slot % 64);

    if (!(idx->holding[peer->slot / 64] & bit)) {
        idx->holding[peer->slot / 64] |= bit;
        peer->views++;

        if (peer->loose == 1 || peer->loose == 3) {
            peer->loose = 0;
        }
    }
}


void
ngx_http_prefix_route_index_let_go(ngx_http_prefix_route_index_t *idx,
    uint64_t *keep)
{
    uint64_t                       bits;
    ngx_uint_t                     w, k;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;

    for (w = 0; w < NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS; w++) {
        bits = idx->holding[w] & (keep ? ~keep[w] : ~(uint64_t) 0);
        idx->holding[w] &= ~bits;

        for (k = 0; bits; k++, bits >>= 1) {

            if (!(bits & 1)) {
                continue;
            }

            peer = sh->slots[w * 64 + k];

            if (peer->views == 0 || --peer->views) {
                continue;
            }

            if (peer->loose == 0) {
                peer->loose = 1;
            }

            ngx_http_prefix_route_index_loosen(idx, peer);
        }
    }
}


/*
 * The oldest record on sh->loose that a name of "len" bytes may take: let
 * go by every view, no request in flight there, named in no "server" line
 * of a configuration that may run (taken to be any from its "first" to
 * its "fixed"); taken off the ring, or NULL.  The
 * entries are hints, checked here: a record taken again by a view, or
 * named in a "server" line since, leaves the ring; one with requests in
 * flight again waits for them, one too short for the name goes back at
 * its end.  The caller holds the zone mutex.
 */

static ngx_http_prefix_route_peer_t *
ngx_http_prefix_route_index_unlist(ngx_http_prefix_route_index_t *idx,
    size_t len)
{
    ngx_uint_t                     k, slot, pass;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;

    for (pass = 0; pass < 2; pass++) {

        if (sh->unlisted && sh->nloose <= NGX_HTTP_PREFIX_ROUTE_LOOSE / 2) {
            ngx_http_prefix_route_index_relist(idx);
        }

        for (k = sh->nloose; k > 0; k--) {
            slot = sh->loose[sh->loose_head];
            peer = (slot < sh->npeers) ? sh->slots[slot] : NULL;

            if (peer && peer->loose == 2) {
                peer->loose = 0;

            } else {
                peer = NULL;
            }

            /*
             * off the ring after its state: a worker killed between loses
             * the record until a reload, not the ring's consistency
             */

            sh->nloose--;
            sh->loose_head = (sh->loose_head + 1)
                             % NGX_HTTP_PREFIX_ROUTE_LOOSE;

            if (peer == NULL) {
                continue;
            }

            if (peer->views
                || (peer->fixed
                    && ngx_http_prefix_route_index_runs(&sh->running,
                                          ngx_min(peer->first, peer->fixed),
                                          peer->fixed)))
            {
                continue;
            }

            if (peer->load.inflight || peer->room < len) {
                peer->loose = 1;
                ngx_http_prefix_route_index_loosen(idx, peer);
                continue;
            }

            return peer;
        }
    }

    return NULL;
}


/*
 * Lists the records that waited for room on sh->loose, as far as it has
 * room: a walk of the records, once the ring is half empty, after more
 * were let go at once than it holds.  The caller holds the zone mutex.
 */

static void
ngx_http_prefix_route_index_relist(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t                     i;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;
    sh->unlisted = 0;

    for (i = 0; i < sh->npeers; i++) {
        peer = sh->slots[i];

        if (peer->loose == 3) {
            peer->loose = 1;
            ngx_http_prefix_route_index_loosen(idx, peer);
        }
    }
}


void
ngx_http_prefix_route_index_loosen(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_sh_t  *sh;

    sh = idx->sh;

    if (peer->loose != 1 || peer->views || peer->load.inflight) {
        return;
    }

    if (sh->nloose == NGX_HTTP_PREFIX_ROUTE_LOOSE) {
        peer->loose = 3;
        sh->unlisted++;
        return;
    }

    /* the slot first: a worker killed between leaves it unlisted */

    sh->loose[(sh->loose_head + sh->nloose) % NGX_HTTP_PREFIX_ROUTE_LOOSE] =
                                                         (uint16_t) peer->slot;
    sh->nloose++;
    peer->loose = 2;
}


/*
 * Gives "peer", a record no running configuration names, to the server
 * "name", as a new record but for its blocks, which go in slices as a
 * restarted engine's do (wiped 2: without that notice), never found for
 * the new server.  The caller holds the zone mutex.
 */

static void
ngx_http_prefix_route_index_reuse(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_str_t *name, uint32_t hash)
{
    peer->stale = 0;
    peer->over = 0;
    peer->wiped = 0;

    if (peer->blocks) {
        ngx_http_prefix_route_index_doom(idx, peer);
        peer->wiped = 2;
    }

    /* no process charges it load: none of a configuration naming it runs */

    ngx_memzero(&peer->load, sizeof(ngx_http_prefix_route_cell_t));
    ngx_memzero(peer->cells, (idx->sh->nworkers + 1)
                             * sizeof(ngx_http_prefix_route_cell_t));

    peer->requests = 0;
    peer->hits = 0;

    /* a view that held it before is gone (views: a killed worker's) */

    peer->views = 0;
    peer->loose = 0;
    peer->fixed = 0;
    peer->epoch++;

    /* the charts' sums of the engines' usage go on from where they were */

    idx->sh->gone_prompt += peer->fb.prompt;
    idx->sh->gone_cached += peer->fb.cached;
    ngx_memzero(&peer->fb, sizeof(ngx_http_prefix_route_feedback_t));
    ngx_memzero(&peer->probe, sizeof(ngx_http_prefix_route_probe_t));
    ngx_memzero(&peer->errors, sizeof(ngx_http_prefix_route_errors_t));
    ngx_memzero(peer->gauges, sizeof(peer->gauges));

    idx->sh->naming = 1;

    ngx_rbtree_delete(&idx->sh->names, &peer->sn.node);
    ngx_http_prefix_route_kill_point();
    ngx_queue_remove(&peer->queue);
    ngx_http_prefix_route_kill_point();

    /*
     * nameless until its new name is whole: a name cut short by a kill
     * could be another server's ("10.0.0.1:80" of "10.0.0.1:8000")
     */

    peer->sn.str.len = 0;
    ngx_http_prefix_route_kill_point();

    ngx_memcpy(peer->name, name->data, name->len);
    ngx_http_prefix_route_kill_point();

    peer->sn.node.key = hash;
    peer->sn.str.len = name->len;
    ngx_http_prefix_route_kill_point();

    ngx_rbtree_insert(&idx->sh->names, &peer->sn.node);
    ngx_http_prefix_route_kill_point();

    /*
     * before "named": a kill between leaves "first" above "named" of a
     * newer configuration, the old range, free, taken from the lower
     * (ngx_http_prefix_route_index_free()); of an older one, a wider one
     */

    peer->first = idx->gen;
    ngx_http_prefix_route_index_named(idx, peer, idx->gen);

    idx->sh->naming = 0;
}


/*
 * Marks "peer", out of sh->peers, named by the configuration "gen" and
 * puts it back in the order of "named": after the last record named by
 * "gen" or before it, which is the tail unless a worker of a configuration
 * older than the newest names a server.  The caller holds the zone mutex.
 */

static void
ngx_http_prefix_route_index_named(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, uint32_t gen)
{
    ngx_queue_t                   *q;
    ngx_http_prefix_route_peer_t  *p;

    peer->named = gen;

    for (q = ngx_queue_last(&idx->sh->peers);
         q != ngx_queue_sentinel(&idx->sh->peers);
         q = ngx_queue_prev(q))
    {
        p = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);

        if (p->named <= gen) {
            break;
        }
    }

    ngx_http_prefix_route_kill_point();
    ngx_queue_insert_after(q, &peer->queue);
}


/*
 * Makes the records' tree by name and their order again from sh->slots,
 * after a worker died changing them (sh->naming found set): a few
 * thousand records at most.  A record left nameless (a reuse killed
 * before its new name was whole) is no server's, and the first to reuse.
 * The caller holds the zone mutex.
 */

static void
ngx_http_prefix_route_index_rename(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t                     i;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;

    ngx_rbtree_init(&sh->names, &sh->sentinel, ngx_str_rbtree_insert_value);
    ngx_queue_init(&sh->peers);

    for (i = 0; i < sh->npeers; i++) {
        peer = sh->slots[i];

        peer->sn.str.data = peer->name;

        if (peer->sn.str.len == 0) {
            ngx_http_prefix_route_index_named(idx, peer, 0);
            continue;
        }

        peer->sn.node.key = ngx_crc32_short(peer->name, peer->sn.str.len);

        ngx_rbtree_insert(&sh->names, &peer->sn.node);
        ngx_http_prefix_route_index_named(idx, peer, peer->named);
    }

    sh->naming = 0;

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "prefix_route: a worker died while changing the server "
                  "records; the zone's %ui records were put in order again",
                  sh->npeers);
}


ngx_uint_t
ngx_http_prefix_route_index_match(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_uint_t *pos, ngx_uint_t npos,
    ngx_uint_t npeers, ngx_uint_t budget, ngx_uint_t *match)
{
    uint32_t                         last;
    ngx_uint_t                       d, i, k, found;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    for (i = 0; i < npeers; i++) {
        match[i] = 0;
    }

    if (idx->sh->changing) {
        return 0;
    }

    d = ngx_http_prefix_route_index_deepest(idx, hash, n, &e);

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

            for (h = ngx_http_prefix_route_ptr(idx, e->holders);
                 h != NULL;
                 h = ngx_http_prefix_route_ptr(idx, h->next))
            {
                if (h->slot < npos) {
                    i = pos[h->slot];

                    if (i < npeers && match[i] == 0) {
                        match[i] = k;
                        found++;
                    }
                }
            }

            last = e->nholders;
        }

        e = ngx_http_prefix_route_ptr(idx, e->parent);
    }

    /* a restarted engine's blocks are not trusted while they go */

    if (idx->sh->dropping) {
        for (k = 0; k < ngx_min(npos, idx->sh->npeers); k++) {
            if (idx->sh->slots[k]->wiped && pos[k] < npeers) {
                match[pos[k]] = 0;
            }
        }
    }

    return d;
}


ngx_uint_t
ngx_http_prefix_route_index_record(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_uint_t *held,
    ngx_http_prefix_route_peer_t *peer, uint64_t tenant, uint32_t stamp)
{
    ngx_uint_t  i;

    if (peer->wiped
        || !ngx_http_prefix_route_index_begin(idx, peer->slot + 1))
    {
        *held = 0;
        return 0;
    }

    i = ngx_http_prefix_route_index_put(idx, hash, n, held, peer, tenant,
                                        stamp);
    ngx_http_prefix_route_index_end(idx);

    return i;
}


void
ngx_http_prefix_route_index_room(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity, ngx_uint_t n,
    ngx_uint_t recorded)
{
    ngx_uint_t  d, keep;

    if (capacity == 0
        || peer->wiped
        || !ngx_http_prefix_route_index_begin(idx,
                                              NGX_HTTP_PREFIX_ROUTE_NO_CHAIN))
    {
        return;
    }

    /*
     * down to the capacity, or to the prompt if it is longer (its blocks,
     * the most recently used, go last); at most its blocks and one more:
     * cut short by that, the peer is above a capacity a reload lowered,
     * and its excess goes in slices (a server's quarter of a full 256m
     * zone held every worker 1.5 s)
     */

    keep = ngx_max(capacity, recorded);

    d = ngx_http_prefix_route_index_cut(idx, peer, keep, NULL, n + 1);
    idx->sh->forgotten += d;

    if (d == n + 1 && peer->blocks > keep) {
        ngx_http_prefix_route_index_doom(idx, peer);
        peer->over = keep;
    }

    ngx_http_prefix_route_index_end(idx);
}


ngx_uint_t
ngx_http_prefix_route_index_ready(ngx_http_prefix_route_index_t *idx)
{
    if (idx->sh->changing == 0) {
        return 1;
    }

    if (!ngx_http_prefix_route_index_repair(idx)) {
        return 0;
    }

    ngx_http_prefix_route_index_end(idx);

    return 1;
}


void
ngx_http_prefix_route_index_capacity(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity)
{
    if (capacity && peer->blocks > capacity) {
        ngx_http_prefix_route_index_doom(idx, peer);
        peer->over = capacity;

    } else {
        peer->over = 0;
    }
}


ngx_uint_t
ngx_http_prefix_route_index_wipe(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_index_doom(idx, peer);
    peer->wiped = 1;

    /* a new engine, whose cache may be of another size */
    peer->fb.capacity = 0;
    peer->fb.learning = 0;

    return peer->blocks;
}


ngx_uint_t
ngx_http_prefix_route_index_clear(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t                     i, n, why, left, steps;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;

    if (sh->dropping == 0) {
        return 1;
    }

    if (!ngx_http_prefix_route_index_begin(idx,
                                           NGX_HTTP_PREFIX_ROUTE_NO_CHAIN))
    {
        return 0;
    }

    steps = ngx_http_prefix_route_index_slice(idx);
    left = 0;

    for (i = 0; i < sh->npeers; i++) {
        peer = sh->slots[i];

        if (!ngx_http_prefix_route_dropping(peer)) {
            continue;
        }

        n = ngx_http_prefix_route_index_doomed(idx, peer, steps);

        /*
         * as many as asked: the slice is done, and the loop below finds
         * this peer left; fewer: none left (or none can go, an index in
         * error)
         */

        if (n == steps) {
            break;
        }

        steps -= n;

        if (peer->fb.learning) {
            ngx_http_prefix_route_index_learn(idx, peer, peer->fb.learning,
                                              peer->stale_before);
            peer->fb.learning = 0;
        }

        ngx_http_prefix_route_kill_point();
        peer->stale = 0;
        peer->over = 0;

        if (!peer->wiped) {
            continue;
        }

        why = peer->wiped;
        peer->wiped = 0;

        if (peer->blocks == 0) {

            if (why == 2) {
                continue;    /* a reused record: its server is new */
            }

            ngx_log_error(NGX_LOG_NOTICE, ngx_cycle->log, 0,
                          "prefix_route: the blocks of server %V, whose "
                          "engine restarted, are all dropped",
                          &peer->sn.str);

        } else {
            ngx_log_error(NGX_LOG_ALERT, ngx_cycle->log, 0,
                          "prefix_route: %ui blocks of server %V, whose "
                          "engine restarted, cannot be dropped: the index "
                          "is in error (status ?check=1)",
                          peer->blocks, &peer->sn.str);
        }
    }

    /* the first peer left with some to go, where eviction looks first */

    sh->drop_from = i;

    for ( /* void */ ; i < sh->npeers; i++) {
        left |= ngx_http_prefix_route_dropping(sh->slots[i]);
    }

    ngx_http_prefix_route_kill_point();
    sh->dropping = left;

    ngx_http_prefix_route_index_end(idx);

    return !left;
}


/*
 * Marks the zone before the caller marks "peer" (wiped, stale or over):
 * a death between leaves the zone's flag set in vain, and the next
 * index_clear() resets it.
 */

static void
ngx_http_prefix_route_index_doom(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer)
{
    if (idx->sh->drop_from > peer->slot) {
        idx->sh->drop_from = peer->slot;
    }

    idx->sh->dropping = 1;
    ngx_http_prefix_route_order();
}


/*
 * Drops at most "limit" of the holders of "peer" that are to go in
 * slices, its least recently used first: all of them if its engine
 * restarted; else those recorded before peer->stale_before if its engine
 * evicted them (feedback), then those beyond peer->over blocks if a
 * reload lowered its capacity.  Inside a change.  Returns the number
 * dropped: fewer than "limit", none is left.
 */

static ngx_uint_t
ngx_http_prefix_route_index_doomed(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t limit)
{
    ngx_uint_t  n, m;

    if (peer->wiped) {
        return ngx_http_prefix_route_index_cut(idx, peer, 0, NULL, limit);
    }

    n = 0;

    if (peer->stale) {
        n = ngx_http_prefix_route_index_cut(idx, peer, 0,
                                            &peer->stale_before, limit);
        peer->fb.dropped += n;
    }

    if (peer->over && n < limit) {
        m = ngx_http_prefix_route_index_cut(idx, peer, peer->over, NULL,
                                            limit - n);
        idx->sh->forgotten += m;
        n += m;
    }

    return n;
}


/*
 * Marks the zone while the index changes ("mark": the record's peer slot
 * + 1, or NGX_HTTP_PREFIX_ROUTE_NO_CHAIN); the mutex is ours, so a mark
 * found set is a change whose worker died in it, whose mend is left to
 * ready()'s callers: a request that took a slice would wait for it and
 * make the others wait (design.md, "In slices"; the balancer takes one
 * only when the mend timers are late).  Returns 1, the change to be
 * ended by end(), or 0 while a mend is left: no change.
 */

static ngx_uint_t
ngx_http_prefix_route_index_begin(ngx_http_prefix_route_index_t *idx,
    ngx_uint_t mark)
{
    if (idx->sh->changing) {
        return 0;
    }

    idx->sh->changing = mark;

    ngx_http_prefix_route_order();

    return 1;
}


static void
ngx_http_prefix_route_index_end(ngx_http_prefix_route_index_t *idx)
{
    ngx_http_prefix_route_order();

    idx->sh->changing = 0;
}


static ngx_uint_t
ngx_http_prefix_route_index_put(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_uint_t *held,
    ngx_http_prefix_route_peer_t *peer, uint64_t tenant, uint32_t stamp)
{
    ngx_uint_t                        d, i, j, k, t, full, hot;
    ngx_http_prefix_route_sh_t       *sh;
    ngx_http_prefix_route_entry_t   **chain, *e;
    ngx_http_prefix_route_holder_t   *h, *up;

    sh = idx->sh;
    chain = idx->chain;

    /*
     * The chain's entries are pinned while the record runs: the
     * allocations below may evict, and must not free what it uses.
     */

    d = ngx_http_prefix_route_index_deepest(idx, hash, n, &e);

    for (k = d; k > 0; k--) {

        if (e == NULL) {
            /*
             * an entry without the parents its depth needs: a 64-bit
             * collision, or an index a worker killed mid-change left
             * (as match() does, nothing is trusted past it)
             */

            while (k < d) {
                chain[k++]->pinned = 0;
            }

            *held = 0;
            return 0;
        }

        e->pinned = 1;
        chain[k - 1] = e;
        e = ngx_http_prefix_route_ptr(idx, e->parent);
    }

    /* the peer's deepest holder on the chain, from the hint of match() */

    i = ngx_min(*held, d);

    while (i > 0
           && ngx_http_prefix_route_index_holder(idx, chain[i - 1], peer)
              == NULL)
    {
        i--;
    }

    while (i < d
           && ngx_http_prefix_route_index_holder(idx, chain[i], peer)
              != NULL)
    {
        i++;
    }

    *held = i;
    up = i ? ngx_http_prefix_route_index_holder(idx, chain[i - 1], peer)
           : NULL;
    k = d;

    /*
     * a tenant at its share keeps what it has protected, a prefix of the
     * chain, and gets no more: the protected holders stay a prefix
     */

    t = k ? chain[0]->tenant : ngx_http_prefix_route_index_tenant(idx, tenant);
    full = (idx->share
            && sh->tenants[t].hot
               >= NGX_HTTP_PREFIX_ROUTE_HOT_SHARE(ngx_max(sh->holders,
                                                          sh->room))
                  * idx->share / 100);

    /* from the first missing block on: running out leaves a whole prefix */

    for ( /* void */ ; i < n; i++) {

        if (i == k) {
            e = ngx_http_prefix_route_index_entry(idx, hash[i],
                                                  i ? chain[i - 1] : NULL,
                                                  t);
            if (e == NULL) {
                break;
            }

            chain[k++] = e;
        }

        h = ngx_http_prefix_route_index_add(idx, chain[i], up, peer);
        if (h == NULL) {
            break;
        }

        up = h;
    }

    /*
     * the deepest block first, so that parents end up more recent; the
     * blocks the peer held before are sent again: protected
     */

    for (h = up, j = i; h != NULL; h = ngx_http_prefix_route_ptr(idx, h->up))
    {
        ngx_http_prefix_route_link_remove(idx, &h->peer_lru);
        ngx_http_prefix_route_link_head(idx, &peer->lru, &h->peer_lru);

        hot = (--j < *held);

        if (hot && full && !h->hot) {
            hot = 0;
            sh->held_back++;
        }

        ngx_http_prefix_route_index_segment(idx, h, hot);

        e = ngx_http_prefix_route_ptr(idx, h->entry);
        e->stamp = stamp;
    }

    for (d = 0; d < k; d++) {
        chain[d]->pinned = 0;
    }

    /*
     * recorded in part: the entries from the one whose holder had no
     * memory on go if nobody holds them (eviction may have taken other
     * servers' holders of them); release() goes up from the deepest
     */

    if (i < k) {
        ngx_http_prefix_route_index_release(idx, chain[k - 1]);
    }

    return i;
}


/*
 * A worker killed inside a change (SIGKILL, the OOM killer) leaves the
 * chain it recorded pinned and its new holders older than their parents,
 * and, killed inside an operation, a holder half made or half linked and
 * counts half updated: eviction, which takes only leaves at the lists'
 * tails, and not the recording server's of pinned blocks, would stop for
 * good once they reach them.  The writes are
 * ordered so that each entry's list of holders and each list's forward
 * links stay whole at any point, and the mend takes them as the truth
 * (design.md, "Failures, memory and counters").  O(the zone's holders),
 * once per such death, in slices of about idx->mend_steps steps, one a
 * call, its place kept in sh->mend: nothing else changes the index
 * between them.  The mend is a change too: a death inside a slice
 * (sh->mend.slicing found set) starts it again.  Returns 1 when it is
 * done, else 0.
 */

static ngx_uint_t
ngx_http_prefix_route_index_repair(ngx_http_prefix_route_index_t *idx)
{
    ngx_int_t                        left;
    ngx_uint_t                       i, hot;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_mend_t    *m;
    ngx_http_prefix_route_peer_t    *peer;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    sh = idx->sh;
    m = &sh->mend;

    if (m->slicing || m->phase == 0) {
        ngx_memzero(m, sizeof(ngx_http_prefix_route_mend_t));
        m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_WALK;

        ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                      "prefix_route: a worker died while changing the "
                      "index; requests are routed without it until it is "
                      "mended");
    }

    m->slicing = 1;
    m->slices++;

    ngx_http_prefix_route_order();

    left = idx->mend_steps ? idx->mend_steps
                           : NGX_HTTP_PREFIX_ROUTE_MEND_STEPS;

    i = sh->changing - 1;
    peer = (i < sh->npeers) ? sh->slots[i] : NULL;

    for ( ;; ) {

        switch (m->phase) {

        /*
         * A list that does not come back to its head loses its holders;
         * it is emptied only once they are out of their entries' lists,
         * so that a death before that finds it lost again.
         */

        case NGX_HTTP_PREFIX_ROUTE_MEND_WALK:

            if (!ngx_http_prefix_route_index_walk(idx, &left)) {
                goto slice;
            }

            ngx_memzero(idx->live, sh->nlive);
            m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_SIFT;
            break;

        /*
         * Holders half made or torn (not of this entry, or their "up" not
         * this server's holder of the parent block), or of a lost list,
         * leave their entries' lists for sh->dropped, and then their
         * kids, until none is left whose parent's holder went; pins and
         * the counts taken again below are zeroed.  The first pass marks
         * those whole in idx->live, and the mark stands for "in its
         * entry's list" after.
         */

        case NGX_HTTP_PREFIX_ROUTE_MEND_SIFT:

            if (!ngx_http_prefix_route_index_buckets(idx, &left,
                                          ngx_http_prefix_route_index_sift))
            {
                goto slice;
            }

            if (++m->pass < 2 || m->nlost != m->k) {
                m->k = m->nlost;
                break;
            }

            for (i = 0; i < sh->npeers; i++) {
                if (m->lost[i / 64] & ((uint64_t) 1 << (i % 64))) {
                    ngx_http_prefix_route_link_init(idx,
                                                    &sh->slots[i]->lru);
                }
            }

            if (m->all) {
                ngx_http_prefix_route_link_init(idx, &sh->hot);
                ngx_http_prefix_route_link_init(idx, &sh->lru);
            }

            m->b = 0;
            m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_REBUILD;
            break;

        /* each list from its forward links: its own holders, in order */

        case NGX_HTTP_PREFIX_ROUTE_MEND_REBUILD:

            for ( /* void */ ; m->b < 2 + sh->npeers; m->b++) {

                if (m->b >= 2 && sh->slots[m->b - 2] == NULL) {
                    continue;
                }

                if (!ngx_http_prefix_route_index_rebuild(idx, &left)) {
                    goto slice;
                }
            }

            m->b = 0;
            m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_FREE;
            break;

        /* no list has the holders dropped: each leaves the chain, then goes */

        case NGX_HTTP_PREFIX_ROUTE_MEND_FREE:

            while (sh->dropped) {

                if (left-- <= 0) {
                    goto slice;
                }

                h = ngx_http_prefix_route_ptr(idx, sh->dropped);
                sh->dropped = h->up;

                ngx_http_prefix_route_order();

                ngx_slab_free_locked(idx->shpool, h);

                ngx_http_prefix_route_kill_point();
            }

            m->k = 0;
            m->pass = 0;
            m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_RELINK;
            break;

        /*
         * each holder no list kept linked again, then the marks of
         * rebuild() zeroed (pass 1), then every count taken again
         */

        case NGX_HTTP_PREFIX_ROUTE_MEND_RELINK:

            if (!ngx_http_prefix_route_index_buckets(idx, &left,
                                          m->pass
                                          ? ngx_http_prefix_route_index_unmark
                                          : ngx_http_prefix_route_index_relink))
            {
                goto slice;
            }

            if (m->pass == 0 && m->k) {
                m->k = 0;
                break;
            }

            if (m->pass++ == 0) {
                break;
            }

            ngx_http_prefix_route_index_uncount(idx);
            m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_RECOUNT;
            break;

        case NGX_HTTP_PREFIX_ROUTE_MEND_RECOUNT:

            if (!ngx_http_prefix_route_index_buckets(idx, &left,
                                        ngx_http_prefix_route_index_recount))
            {
                goto slice;
            }

            m->pass = 0;
            m->off = 0;
            m->phase = peer ? NGX_HTTP_PREFIX_ROUTE_MEND_PINNED
                            : NGX_HTTP_PREFIX_ROUTE_MEND_UNPIN;
            break;

        /*
         * The dead record's chain in order, its protected blocks a prefix:
         * from its server's holder of the deepest block the record pinned,
         * not from the head of the server's list, where the record may
         * have left a block it had not protected yet, or none of its own.
         * The pinned entry no pinned entry has as its parent is marked by
         * bit 2 of "pinned" (pass 0), the first found kept (pass 1).  The
         * pins go after, so that a death before then finds the chain
         * again.
         */

        case NGX_HTTP_PREFIX_ROUTE_MEND_PINNED:

            if (!ngx_http_prefix_route_index_buckets(idx, &left,
                                          m->pass
                                          ? ngx_http_prefix_route_index_leaf
                                          : ngx_http_prefix_route_index_pin))
            {
                goto slice;
            }

            if (m->pass++ == 0) {
                break;
            }

            h = NULL;

            for (e = ngx_http_prefix_route_ptr(idx, m->off);
                 e != NULL && h == NULL;
                 e = ngx_http_prefix_route_ptr(idx, e->parent))
            {
                h = ngx_http_prefix_route_index_holder(idx, e, peer);
            }

            hot = 0;

            while (h != NULL) {
                ngx_http_prefix_route_link_remove(idx, &h->peer_lru);
                ngx_http_prefix_route_link_head(idx, &peer->lru,
                                                &h->peer_lru);

                hot |= h->hot;
                ngx_http_prefix_route_index_segment(idx, h, hot);

                h = ngx_http_prefix_route_ptr(idx, h->up);
            }

            m->phase = NGX_HTTP_PREFIX_ROUTE_MEND_UNPIN;
            break;

        /* the pins go, and what nobody holds */

        default: /* NGX_HTTP_PREFIX_ROUTE_MEND_UNPIN */

            if (!ngx_http_prefix_route_index_buckets(idx, &left,
                                          ngx_http_prefix_route_index_unpin))
            {
                goto slice;
            }

            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "prefix_route: the index is mended (%ui blocks "
                          "unpinned, %ui index pairs dropped, %ui slices)",
                          m->n, m->nlost, m->slices);

            /*
             * a death before the mark goes finds no mend begun: anew; the
             * mark stays for ready() to clear
             */

            ngx_memzero(m, sizeof(ngx_http_prefix_route_mend_t));

            ngx_http_prefix_route_order();

            sh->changing = NGX_HTTP_PREFIX_ROUTE_NO_CHAIN;

            return 1;
        }
    }

slice:

    ngx_http_prefix_route_order();

    m->slicing = 0;

    return 0;
}


/*
 * Calls "visit" on each entry of the buckets from sh->mend.b on while
 * *left steps are left, a step a bucket and an entry ("visit" counts
 * the holders it walks), and a bucket at a time: again from its first
 * entry when "visit" returns 1.  Returns 1 once past the
 * last bucket (sh->mend.b back to 0), else 0.
 */

static ngx_uint_t
ngx_http_prefix_route_index_buckets(ngx_http_prefix_route_index_t *idx,
    ngx_int_t *left, ngx_http_prefix_route_visit_pt visit)
{
    ngx_uint_t                      nb;
    ngx_http_prefix_route_sh_t     *sh;
    ngx_http_prefix_route_entry_t  *e;

    sh = idx->sh;
    nb = (ngx_uint_t) 1 << (64 - sh->shift);

    for ( /* void */ ; sh->mend.b < nb; sh->mend.b++) {

        if (*left <= 0) {
            return 0;
        }

        (*left)--;

    again:

        for (e = ngx_http_prefix_route_ptr(idx, sh->buckets[sh->mend.b]);
             e != NULL;
             e = ngx_http_prefix_route_ptr(idx, e->next))
        {
            (*left)--;

            if (visit(idx, e, left)) {
                goto again;
            }
        }
    }

    sh->mend.b = 0;

    return 1;
}


/*
 * Whether each of the zone's lists (sh->mend.b 0 and 1: protected, on
 * probation) comes back to its head, and then each server's (b 2 + its
 * slot): a list that does not is lost (sh->mend.all, sh->mend.lost[]).
 * Returns 1 once all are walked, else 0 (no steps left).
 */

static ngx_uint_t
ngx_http_prefix_route_index_walk(ngx_http_prefix_route_index_t *idx,
    ngx_int_t *left)
{
    ngx_uint_t                     s, ok;
    ngx_http_prefix_route_sh_t    *sh;
    ngx_http_prefix_route_mend_t  *m;
    ngx_http_prefix_route_peer_t  *peer;

    sh = idx->sh;
    m = &sh->mend;

    for ( /* void */ ; m->b < 2 + sh->npeers; m->b++) {
        s = m->b - 2;
        peer = (m->b >= 2) ? sh->slots[s] : NULL;

        if (m->b >= 2 && (peer == NULL || m->all)) {
            if (peer != NULL) {
                m->lost[s / 64] |= (uint64_t) 1 << (s % 64);
            }

            continue;
        }

        ok = ngx_http_prefix_route_index_walkable(idx,
                                 m->b == 0 ? &sh->hot
                                 : m->b == 1 ? &sh->lru : &peer->lru,
                                 left);

        if (ok == NGX_HTTP_PREFIX_ROUTE_MEND_MORE) {
            return 0;
        }

        if (!ok) {
            if (m->b < 2) {
                m->all = 1;

            } else {
                m->lost[s / 64] |= (uint64_t) 1 << (s % 64);
            }
        }
    }

    m->b = 0;

    return 1;
}


/*
 * Zeroes "pinned" but for bit 0, the counts taken again below, and
 * sift()s the entry's holders; a step each.
 */

static ngx_uint_t
ngx_http_prefix_route_index_sift(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    ngx_http_prefix_route_mend_t  *m;

    m = &idx->sh->mend;

    e->pinned &= 1;
    e->children = 0;
    e->nholders = 0;

    m->nlost += ngx_http_prefix_route_index_drop(idx, e, left, m->pass == 0);

    return 0;
}


/* bit 1 of "pinned": a pinned entry's parent pinned too */

static ngx_uint_t
ngx_http_prefix_route_index_pin(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    ngx_http_prefix_route_entry_t  *p;

    p = ngx_http_prefix_route_ptr(idx, e->parent);

    if ((e->pinned & 1) && p != NULL && (p->pinned & 1)) {
        p->pinned |= 2;
    }

    return 0;
}


/* the first pinned entry found that no pinned entry has as its parent */

static ngx_uint_t
ngx_http_prefix_route_index_leaf(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    if (e->pinned == 1 && idx->sh->mend.off == 0) {
        idx->sh->mend.off = ngx_http_prefix_route_off(idx, e);
    }

    return 0;
}


/* the pin goes, and the entry if nobody holds it: its bucket changes */

static ngx_uint_t
ngx_http_prefix_route_index_unpin(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    idx->sh->mend.n += e->pinned & 1;
    e->pinned = 0;

    if (e->holders == 0 && e->children == 0) {
        ngx_http_prefix_route_index_release(idx, e);
        return 1;
    }

    return 0;
}


/*
 * Takes out of entry "e"'s list the holders that are not whole (see
 * repair()) or are in a "lost" server's list, onto sh->dropped (linked
 * by "up"), and zeroes the kids of the others; returns how many went, a
 * step each holder.  The first pass ("mark") marks those it keeps in
 * idx->live; the next ones also take out those whose "up" is not marked,
 * of this server and the parent block, and unmark what they take out: a
 * mark, not a walk of the parent's list, so that a block every server
 * holds costs servers steps, not their square.
 */

static ngx_uint_t
ngx_http_prefix_route_index_drop(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left, ngx_uint_t mark)
{
    uint32_t                        *hp, off;
    uint64_t                        *lost;
    ngx_uint_t                       n;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_holder_t  *h, *up;

    sh = idx->sh;
    lost = sh->mend.lost;
    hp = &e->holders;
    n = 0;

    while (*hp) {
        (*left)--;

        off = *hp;
        h = ngx_http_prefix_route_ptr(idx, off);

        up = (!mark && ngx_http_prefix_route_index_live(idx, h->up))
             ? ngx_http_prefix_route_ptr(idx, h->up) : NULL;

        if (h->entry == ngx_http_prefix_route_off(idx, e)
            && h->slot < sh->npeers
            && sh->slots[h->slot] != NULL
            && !(lost[h->slot / 64] & ((uint64_t) 1 << (h->slot % 64)))
            && (mark
                || (ngx_http_prefix_route_index_live(idx, off)
                    && (e->parent == 0
                        ? h->up == 0
                        : (up != NULL && up->slot == h->slot
                           && up->entry == e->parent)))))
        {
            if (mark) {
                ngx_http_prefix_route_live_set(idx, off);
            }

            h->kids = 0;
            hp = &h->next;
            continue;
        }

        ngx_http_prefix_route_live_clear(idx, off);

        *hp = h->next;
        h->up = sh->dropped;

        ngx_http_prefix_route_order();

        sh->dropped = off;
        n++;

        ngx_http_prefix_route_kill_point();
    }

    return n;
}


/*
 * Whether the list at "head" comes back to it by its forward links
 * within as many steps as the zone has room for holders: 1 or 0, or
 * NGX_HTTP_PREFIX_ROUTE_MEND_MORE when *left runs out first (the place,
 * sh->mend.off and .steps, kept for the next call).
 */

static ngx_uint_t
ngx_http_prefix_route_index_walkable(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_link_t *head, ngx_int_t *left)
{
    uint32_t                       end;
    ngx_uint_t                     max;
    ngx_http_prefix_route_mend_t  *m;

    m = &idx->sh->mend;
    max = (idx->shpool->end - (u_char *) idx->shpool)
          / sizeof(ngx_http_prefix_route_holder_t);
    end = ngx_http_prefix_route_off(idx, head);

    if (m->off == 0) {
        m->off = head->next;
        m->steps = 0;
    }

    while (m->off != end) {

        if (m->steps == max
            || !ngx_http_prefix_route_index_inside(idx, m->off))
        {
            m->off = 0;
            return 0;
        }

        if ((*left)-- <= 0) {
            return NGX_HTTP_PREFIX_ROUTE_MEND_MORE;
        }

        m->off = ((ngx_http_prefix_route_link_t *)
                      ngx_http_prefix_route_ptr(idx, m->off))->next;
        m->steps++;
    }

    m->off = 0;

    return 1;
}


/*
 * The list sh->mend.b (0: the zone's protected holders, 1: those on
 * probation, 2 + a slot: that server's), walkable, linked again both ways
 * from its forward links with the holders that are in their entries'
 * lists (marked in idx->live) and are its own.  Those kept are marked in
 * their kids field, zeroed by drop(): 1 in a server's list, 2 in the
 * zone's.  Returns 1 once at its end, else 0 (no steps left; the place,
 * sh->mend.off and .last, kept for the next call).
 */

static ngx_uint_t
ngx_http_prefix_route_index_rebuild(ngx_http_prefix_route_index_t *idx,
    ngx_int_t *left)
{
    uint32_t                         off, end;
    ngx_uint_t                       zone, which, mark;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_mend_t    *m;
    ngx_http_prefix_route_link_t    *head, *l, *last;
    ngx_http_prefix_route_holder_t  *h;

    sh = idx->sh;
    m = &sh->mend;
    zone = (m->b < 2);
    which = zone ? (m->b == 0) : m->b - 2;
    head = (m->b == 0) ? &sh->hot
           : (m->b == 1) ? &sh->lru : &sh->slots[m->b - 2]->lru;
    mark = zone ? 2 : 1;

    end = ngx_http_prefix_route_off(idx, head);

    if (m->off == 0) {
        m->off = head->next;
        m->last = end;
    }

    last = ngx_http_prefix_route_ptr(idx, m->last);

    for (off = m->off; off != end; off = l->next) {

        if ((*left)-- <= 0) {
            m->off = off;
            m->last = ngx_http_prefix_route_off(idx, last);
            return 0;
        }

        l = ngx_http_prefix_route_ptr(idx, off);
        h = zone ? ngx_http_prefix_route_zone_holder(l)
                 : (ngx_http_prefix_route_holder_t *) l;

        /*
         * a link of a holder in its entry's list (marked by drop()), or
         * of a holder gone, or the head of another list
         */

        if ((u_char *) h <= (u_char *) idx->shpool
            || !ngx_http_prefix_route_index_live(idx,
                                       ngx_http_prefix_route_off(idx, h))
            || (zone ? (h->hot != which) : (h->slot != which))
            || (h->kids & mark))
        {
            continue;
        }

        h->kids |= mark;

        last->next = off;
        l->prev = ngx_http_prefix_route_off(idx, last);
        last = l;

        ngx_http_prefix_route_kill_point();
    }

    last->next = end;
    head->prev = ngx_http_prefix_route_off(idx, last);

    m->off = 0;

    return 1;
}


/*
 * Links again each holder of the entry that no list kept, a parent
 * before its kids: right after the holder of its parent block if that is
 * in the same list (a parent stays the more recently used), else first;
 * sh->mend.k counts them, and the buckets are walked again until none is
 * left.
 */

static ngx_uint_t
ngx_http_prefix_route_index_relink(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    ngx_uint_t                       s, same;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_holder_t  *h, *up;

    sh = idx->sh;

    for (h = ngx_http_prefix_route_ptr(idx, e->holders);
         h != NULL;
         h = ngx_http_prefix_route_ptr(idx, h->next))
    {
        (*left)--;

        for (s = 1; s <= 2; s++) {
            if (h->kids & s) {
                continue;
            }

            up = ngx_http_prefix_route_ptr(idx, h->up);
            same = (up != NULL && (s == 1 || up->hot == h->hot));

            if (same && !(up->kids & s)) {
                continue;
            }

            if (s == 1) {
                ngx_http_prefix_route_link_head(idx,
                                   same ? &up->peer_lru
                                        : &sh->slots[h->slot]->lru,
                                   &h->peer_lru);

            } else {
                ngx_http_prefix_route_link_head(idx,
                                   same ? &up->zone_lru
                                        : (h->hot ? &sh->hot : &sh->lru),
                                   &h->zone_lru);
            }

            h->kids |= s;
            sh->mend.k++;
        }
    }

    return 0;
}


/* the marks of rebuild() and relink() zeroed */

static ngx_uint_t
ngx_http_prefix_route_index_unmark(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    ngx_http_prefix_route_holder_t  *h;

    for (h = ngx_http_prefix_route_ptr(idx, e->holders);
         h != NULL;
         h = ngx_http_prefix_route_ptr(idx, h->next))
    {
        (*left)--;
        h->kids = 0;
    }

    return 0;
}


/* the zone's counts zeroed, to be taken again from the links */

static void
ngx_http_prefix_route_index_uncount(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t                   i;
    ngx_http_prefix_route_sh_t  *sh;

    sh = idx->sh;

    sh->entries = 0;
    sh->holders = 0;
    sh->hot_holders = 0;

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_TENANTS; i++) {
        sh->tenants[i].entries = 0;
        sh->tenants[i].hot = 0;
    }

    for (i = 0; i < sh->npeers; i++) {
        if (sh->slots[i] != NULL) {
            sh->slots[i]->blocks = 0;
        }
    }
}


/* the entry's counts, and its share of the others', one for each link */

static ngx_uint_t
ngx_http_prefix_route_index_recount(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_int_t *left)
{
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_entry_t   *p;
    ngx_http_prefix_route_holder_t  *h, *up;

    sh = idx->sh;

    sh->entries++;
    sh->tenants[e->tenant].entries++;

    p = ngx_http_prefix_route_ptr(idx, e->parent);

    if (p != NULL) {
        p->children++;
    }

    for (h = ngx_http_prefix_route_ptr(idx, e->holders);
         h != NULL;
         h = ngx_http_prefix_route_ptr(idx, h->next))
    {
        (*left)--;

        e->nholders++;
        sh->holders++;
        sh->hot_holders += h->hot;
        sh->tenants[e->tenant].hot += h->hot;
        sh->slots[h->slot]->blocks++;

        up = ngx_http_prefix_route_ptr(idx, h->up);

        if (up != NULL) {
            up->kids++;
        }
    }

    return 0;
}


/*
 * Whether "off" is that of a 32-byte chunk of the zone the mend marked, a
 * holder in its entry's list (sift()).
 */

static ngx_uint_t
ngx_http_prefix_route_index_live(ngx_http_prefix_route_index_t *idx,
    uint32_t off)
{
    return off != 0
           && ((size_t) off << 3) + sizeof(ngx_http_prefix_route_holder_t)
              <= (size_t) (idx->shpool->end - (u_char *) idx->shpool)
           && ngx_http_prefix_route_live_in(idx, off)
           && (idx->live[off >> 8] >> ((off >> 2) & 63) & 1);
}


/* whether a link, or an entry's key, at an offset is inside the zone */


static ngx_uint_t
ngx_http_prefix_route_index_inside(ngx_http_prefix_route_index_t *idx,
    uint32_t off)
{
    return off != 0
           && ((size_t) off << 3) + sizeof(ngx_http_prefix_route_link_t)
              <= (size_t) (idx->shpool->end - (u_char *) idx->shpool);
}


/*
 * Whether a link is where its neighbours say, for the check: not if it
 * points outside the zone.
 */

static ngx_uint_t
ngx_http_prefix_route_index_linked(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_link_t *l)
{
    uint32_t                       off;
    ngx_http_prefix_route_link_t  *prev, *next;

    off = ngx_http_prefix_route_off(idx, l);

    if (!ngx_http_prefix_route_index_inside(idx, l->prev)
        || !ngx_http_prefix_route_index_inside(idx, l->next))
    {
        return 0;
    }

    prev = ngx_http_prefix_route_ptr(idx, l->prev);
    next = ngx_http_prefix_route_ptr(idx, l->next);

    return prev->next == off && next->prev == off;
}


ngx_uint_t
ngx_http_prefix_route_index_stamp(ngx_http_prefix_route_index_t *idx,
    uint64_t hash, uint32_t *stamp)
{
    ngx_http_prefix_route_entry_t  *e;

    if (idx->sh->changing) {
        return 0;
    }

    e = ngx_http_prefix_route_index_lookup(idx, hash);

    if (e == NULL) {
        return 0;
    }

    *stamp = e->stamp;

    return 1;
}


ngx_uint_t
ngx_http_prefix_route_index_trim(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity,
    uint32_t *before)
{
    ngx_uint_t  n, limit, held;

    if (!ngx_http_prefix_route_index_begin(idx,
                                           NGX_HTTP_PREFIX_ROUTE_NO_CHAIN))
    {
        return 0;
    }

    held = peer->blocks;
    limit = ngx_http_prefix_route_index_slice(idx);
    n = ngx_http_prefix_route_index_cut(idx, peer, capacity, before, limit);

    /*
     * more may be left, or a drop in slices is under way: the rest in
     * slices, up to the newest stamp asked, learned when they are done
     */

    if (before != NULL && (n == limit || peer->stale)) {

        if (n == limit) {
            ngx_http_prefix_route_index_doom(idx, peer);
        }

        if (!peer->stale || (int32_t) (*before - peer->stale_before) > 0) {
            peer->stale_before = *before;
        }

        /* a zone's holders are 32-byte chunks: fewer than 2^32 */
        peer->fb.learning = (uint32_t) ngx_max(peer->fb.learning, held);

        ngx_http_prefix_route_order();
        peer->stale = 1;

    } else if (n && before != NULL) {
        ngx_http_prefix_route_index_learn(idx, peer, held, *before);
    }

    ngx_http_prefix_route_index_end(idx);

    return n;
}


/*
 * The engine of "peer" evicted a prefix, and the holders recorded before
 * it are gone from the index, which held "held" blocks before: the
 * engine evicts the least recently used first, so it holds at most what
 * is left, which every block sent there since that prefix would fill
 * (an LRU cache of C blocks evicts a block once C others are used after
 * it).  Only when some went: if none was older, the index had forgotten
 * more than the engine and says nothing of it.  One eviction at most
 * halves the figure (the first, what the index held), a bounded
 * reaction to a report that was not one.  And only for a block
 * ("before", its stamp) recorded after the figure last fell: an engine
 * that restarted unseen (no probes) reports every older prefix gone, one
 * event that would otherwise halve the figure again at each report.
 */

static void
ngx_http_prefix_route_index_learn(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t held, uint32_t before)
{
    uint32_t                         old;
    ngx_uint_t                       c;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    /*
     * the gate is past once the least recently used block left was
     * recorded after the fall (so was every block), or once the newest
     * looks older than it: 24.8 days on, where a signed difference of
     * stamps turns, a quiet server's gate would shut its learning for
     * as long again
     */

    if (peer->fb.lowered
        && peer->lru.prev != ngx_http_prefix_route_off(idx, &peer->lru))
    {
        h = ngx_http_prefix_route_ptr(idx, peer->lru.prev);
        e = ngx_http_prefix_route_ptr(idx, h->entry);
        old = e->stamp;

        h = ngx_http_prefix_route_ptr(idx, peer->lru.next);
        e = ngx_http_prefix_route_ptr(idx, h->entry);

        if ((int32_t) (old - peer->fb.lowered) > 0
            || (int32_t) (e->stamp - peer->fb.lowered) < 0)
        {
            peer->fb.lowered = 0;
        }
    }

    if (peer->fb.capacity && peer->fb.lowered
        && (int32_t) (before - peer->fb.lowered) <= 0)
    {
        return;
    }

    c = peer->fb.capacity ? peer->fb.capacity : held;
    c = ngx_max(ngx_max(peer->blocks, c / 2), 1);

    if (peer->fb.capacity && c >= peer->fb.capacity) {
        return;
    }

    /* a zone's holders are 32-byte chunks: fewer than 2^32 */
    peer->fb.capacity = (uint32_t) c;
    peer->fb.lowered = before;

    /* the most recently used is the newest block held */

    if (peer->lru.next != ngx_http_prefix_route_off(idx, &peer->lru)) {
        h = ngx_http_prefix_route_ptr(idx, peer->lru.next);
        e = ngx_http_prefix_route_ptr(idx, h->entry);

        if ((int32_t) (e->stamp - before) > 0) {
            peer->fb.lowered = e->stamp;
        }
    }

    /* 0 is no gate; a stamp a millisecond later is as good */

    if (peer->fb.lowered == 0) {
        peer->fb.lowered = 1;
    }
}


/* holders a slice of a drop takes out, at most */

static ngx_uint_t
ngx_http_prefix_route_index_slice(ngx_http_prefix_route_index_t *idx)
{
    return idx->mend_steps ? (ngx_uint_t) idx->mend_steps / 16 + 1
                           : NGX_HTTP_PREFIX_ROUTE_MEND_STEPS / 16;
}


/*
 * ngx_http_prefix_route_index_trim() inside a change already marked, of
 * at most "limit" holders (0: no limit)
 */

static ngx_uint_t
ngx_http_prefix_route_index_cut(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity,
    uint32_t *before, ngx_uint_t limit)
{
    ngx_uint_t                       n;
    ngx_http_prefix_route_link_t    *l;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    n = 0;

    while (peer->lru.prev != ngx_http_prefix_route_off(idx, &peer->lru)
           && (limit == 0 || n < limit))
    {
        l = ngx_http_prefix_route_ptr(idx, peer->lru.prev);
        h = (ngx_http_prefix_route_holder_t *) l;
        e = ngx_http_prefix_route_ptr(idx, h->entry);

        /* the least recently used holder has no kids unless pinned above */

        if (e->pinned || h->kids) {
            break;
        }

        if ((capacity || before)
            && !(capacity && peer->blocks > capacity)
            && !(before && (int32_t) (e->stamp - *before) < 0))
        {
            break;
        }

        ngx_http_prefix_route_index_remove(idx, h);
        n++;
    }

    return n;
}


void
ngx_http_prefix_route_index_forget(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t from, ngx_uint_t to,
    ngx_http_prefix_route_peer_t *peer, uint32_t stamp, ngx_uint_t reached)
{
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h, *up;

    if (!ngx_http_prefix_route_index_begin(idx,
                                           NGX_HTTP_PREFIX_ROUTE_NO_CHAIN))
    {
        return;
    }

    if (!reached) {
        from = 0;
    }

    h = NULL;

    while (to > from && h == NULL) {
        to--;
        e = ngx_http_prefix_route_index_lookup(idx, hash[to]);
        h = e ? ngx_http_prefix_route_index_holder(idx, e, peer) : NULL;
    }

    /*
     * a holder with kids is part of a longer prefix recorded since; one
     * protected and stamped later was recorded again for this peer by a
     * request after this one (its ancestors with it).  Not the stamp
     * alone: a request to another server sets it too, and kept a prefix
     * here that this server was never sent (helper-65)
     */

    while (h != NULL && h->kids == 0) {
        e = ngx_http_prefix_route_ptr(idx, h->entry);

        if (reached && h->hot && (int32_t) (e->stamp - stamp) > 0) {
            break;
        }

        up = ngx_http_prefix_route_ptr(idx, h->up);
        ngx_http_prefix_route_index_remove(idx, h);

        if (to-- == from) {
            break;
        }

        h = up;
    }

    ngx_http_prefix_route_index_end(idx);
}


ngx_int_t
ngx_http_prefix_route_index_check(ngx_http_prefix_route_index_t *idx,
    ngx_pool_t *pool, ngx_log_t *log)
{
    uint32_t                          named;
    uint64_t                          bit;
    uint64_t                          listed[NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS];
    uintptr_t                        *byaddr, key, *pu, *ph;
    ngx_uint_t                        b, i, s, nh, nt, ne, nc, nu, kids, bad;
    ngx_uint_t                        waiting, seen[13];
    uint32_t                          tenants[2][NGX_HTTP_PREFIX_ROUTE_TENANTS];
    ngx_queue_t                      *q;
    ngx_http_prefix_route_sh_t       *sh;
    ngx_http_prefix_route_link_t     *l, *head;
    ngx_http_prefix_route_peer_t     *peer;
    ngx_http_prefix_route_entry_t    *e, *p;
    ngx_http_prefix_route_holder_t   *h, *u;

    static const char  *what[13] = {
        "entries in the table and their count differ",
        "an entry's holders or children are miscounted",
        "a holder is linked from another entry or peer",
        "a holder has no holder of its parent block, or a wrong one",
        "holders are miscounted in the zone list or a peer's",
        "a parent block is less recently used than its child",
        "a holder's kids are miscounted",
        "an entry's parent is not in the table",
        "a holder is in the other segment's list, or protected holders "
        "are miscounted",
        "a tenant's entries or protected holders are miscounted",
        "a list's links back differ from its links forward",
        "a server record is not found by its name, or is out of the "
        "order of the configurations naming it",
        "a server record let go is off the ring, or held by this worker "
        "with no view counted"
    };

    /* a change a killed worker left is mended first, all of it */

    while (!ngx_http_prefix_route_index_ready(idx)) {
        /* void */
    }

    sh = idx->sh;

    if (sh->naming) {
        ngx_http_prefix_route_index_rename(idx);
    }

    bad = 0;
    ngx_memzero(seen, sizeof(seen));
    ngx_memzero(tenants, sizeof(tenants));

#define ngx_http_prefix_route_bad(k)                                         \
    do { seen[k]++; bad++; } while (0)

    byaddr = ngx_palloc(pool, 3 * (sh->holders + 1) * sizeof(uintptr_t));
    if (byaddr == NULL) {
        return NGX_ERROR;
    }

    /* the records on the ring of those let go ("resolve") */

    ngx_memzero(listed, sizeof(listed));

    if (sh->nloose > NGX_HTTP_PREFIX_ROUTE_LOOSE) {
        ngx_http_prefix_route_bad(12);
    }

    for (i = 0; i < ngx_min(sh->nloose, NGX_HTTP_PREFIX_ROUTE_LOOSE); i++) {
        s = sh->loose[(sh->loose_head + i) % NGX_HTTP_PREFIX_ROUTE_LOOSE];

        if (s >= sh->npeers) {
            ngx_http_prefix_route_bad(12);
            continue;
        }

        listed[s / 64] |= (uint64_t) 1 << (s % 64);
    }

    /* each peer's list: its holders and their count */

    i = 0;
    named = 0;
    waiting = 0;

    for (q = ngx_queue_head(&sh->peers);
         q != ngx_queue_sentinel(&sh->peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);
        i++;

        if (peer->slot >= sh->npeers || sh->slots[peer->slot] != peer) {
            ngx_http_prefix_route_bad(2);
            continue;
        }

        if (peer->named < named
            || peer->sn.str.data != peer->name
            || (peer->sn.str.len
                && (ngx_str_node_t *) peer
                   != ngx_str_rbtree_lookup(&sh->names, &peer->sn.str,
                                            peer->sn.node.key)))
        {
            ngx_http_prefix_route_bad(11);
        }

        named = peer->named;

        /*
         * a record on the ring is listed there (an entry may outlive its
         * state: entries are hints), one waiting for room is counted, and
         * one this worker's view holds has a view counted
         */

        bit = (uint64_t) 1 << (peer->slot % 64);
        waiting += (peer->loose == 3);

        if (peer->loose > 3
            || (peer->loose == 2 && !(listed[peer->slot / 64] & bit))
            || (idx->holding && (idx->holding[peer->slot / 64] & bit)
                && peer->views == 0))
        {
            ngx_http_prefix_route_bad(12);
        }

        nh = 0;

        for (l = ngx_http_prefix_route_ptr(idx, peer->lru.next);
             l != &peer->lru && nh <= sh->holders;
             l = ngx_http_prefix_route_ptr(idx, l->next))
        {
            h = (ngx_http_prefix_route_holder_t *) l;

            if (!ngx_http_prefix_route_index_linked(idx, l)) {
                ngx_http_prefix_route_bad(10);
            }

            if (h->slot != peer->slot) {
                ngx_http_prefix_route_bad(2);
            }

            nh++;
        }

        if (nh != peer->blocks) {
            ngx_http_prefix_route_bad(4);
        }
    }

    if (i != sh->npeers) {
        ngx_http_prefix_route_bad(2);
    }

    if (waiting > sh->unlisted) {
        ngx_http_prefix_route_bad(12);
    }

    /*
     * The zone lists in order, protected then probation, then sorted by
     * address with each holder's place there and in its peer's list: a
     * parent holder must come first in both.
     */

    nh = 0;
    nt = 0;

    for (s = 0; s < 2; s++) {
        head = s ? &sh->lru : &sh->hot;

        for (l = ngx_http_prefix_route_ptr(idx, head->next);
             l != head && nh <= sh->holders;
             l = ngx_http_prefix_route_ptr(idx, l->next))
        {
            h = ngx_http_prefix_route_zone_holder(l);

            if (!ngx_http_prefix_route_index_linked(idx, l)) {
                ngx_http_prefix_route_bad(10);
            }

            if (nh < sh->holders) {
                byaddr[3 * nh] = (uintptr_t) h;
                byaddr[3 * nh + 1] = nh;
                byaddr[3 * nh + 2] = 0;
            }

            if (h->hot == s) {
                ngx_http_prefix_route_bad(8);
            }

            nh++;
            nt += !s;
        }
    }

    if (nh != sh->holders) {
        ngx_http_prefix_route_bad(4);
        nh = ngx_min(nh, sh->holders);
    }

    if (nt != sh->hot_holders) {
        ngx_http_prefix_route_bad(8);
    }

    ngx_qsort(byaddr, nh, 3 * sizeof(uintptr_t),
              ngx_http_prefix_route_index_cmp);

    for (q = ngx_queue_head(&sh->peers);
         q != ngx_queue_sentinel(&sh->peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);
        i = 0;

        for (l = ngx_http_prefix_route_ptr(idx, peer->lru.next);
             l != &peer->lru && i <= sh->holders;
             l = ngx_http_prefix_route_ptr(idx, l->next))
        {
            h = (ngx_http_prefix_route_holder_t *) l;
            key = (uintptr_t) h;
            ph = bsearch(&key, byaddr, nh, 3 * sizeof(uintptr_t),
                         ngx_http_prefix_route_index_cmp);

            if (ph != NULL) {
                ph[2] = i;
            }

            i++;
        }
    }

    /* the table: entries, their holders and children */

    ne = 0;
    nc = 0;
    nu = 0;
    kids = 0;

    for (b = 0; b < ((ngx_uint_t) 1 << (64 - sh->shift)); b++) {

        for (e = ngx_http_prefix_route_ptr(idx, sh->buckets[b]);
             e != NULL && ne <= sh->entries;
             e = ngx_http_prefix_route_ptr(idx, e->next))
        {
            ne++;
            nc += e->children;
            tenants[0][e->tenant]++;

            if (ngx_http_prefix_route_bucket(sh, e->key) != b) {
                ngx_http_prefix_route_bad(0);
            }

            p = ngx_http_prefix_route_ptr(idx, e->parent);

            if (p != NULL && ngx_http_prefix_route_index_lookup(idx, p->key)
                             != p)
            {
                ngx_http_prefix_route_bad(7);
                p = NULL;
            }

            if (p != NULL) {
                nc--;
            }

            /* a child's holders hold the parent too: none is empty */

            if (e->holders == 0 || e->pinned) {
                ngx_http_prefix_route_bad(1);
            }

            i = 0;

            for (h = ngx_http_prefix_route_ptr(idx, e->holders);
                 h != NULL && i <= e->nholders;
                 h = ngx_http_prefix_route_ptr(idx, h->next))
            {
                i++;
                kids += h->kids;
                tenants[1][e->tenant] += h->hot;

                if (ngx_http_prefix_route_ptr(idx, h->entry) != e
                    || h->slot >= sh->npeers)
                {
                    ngx_http_prefix_route_bad(2);
                    continue;
                }

                u = ngx_http_prefix_route_ptr(idx, h->up);

                if (u == NULL) {
                    if (e->parent) {
                        ngx_http_prefix_route_bad(3);
                    }

                    continue;
                }

                nu++;

                if (p == NULL
                    || ngx_http_prefix_route_index_holder(idx, p,
                                                   sh->slots[h->slot])
                       != u)
                {
                    ngx_http_prefix_route_bad(3);
                    continue;
                }

                key = (uintptr_t) u;
                pu = bsearch(&key, byaddr, nh, 3 * sizeof(uintptr_t),
                             ngx_http_prefix_route_index_cmp);
                key = (uintptr_t) h;
                ph = bsearch(&key, byaddr, nh, 3 * sizeof(uintptr_t),
                             ngx_http_prefix_route_index_cmp);

                if (pu == NULL || ph == NULL) {
                    ngx_http_prefix_route_bad(4);

                } else if (pu[1] > ph[1] || pu[2] > ph[2]) {
                    ngx_http_prefix_route_bad(5);
                }
            }

            if (i != e->nholders) {
                ngx_http_prefix_route_bad(1);
            }
        }
    }

    if (ne != sh->entries) {
        ngx_http_prefix_route_bad(0);
    }

    if (kids != nu) {
        ngx_http_prefix_route_bad(6);
    }

    /* each entry's children: their sum is the number of parent links */

    if (nc != 0) {
        ngx_http_prefix_route_bad(1);
    }

    /* slot 0 and the overflow slot hold tenants of no tag of their own */

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_TENANTS; i++) {
        if (tenants[0][i] != sh->tenants[i].entries
            || tenants[1][i] != sh->tenants[i].hot
            || (i && i != NGX_HTTP_PREFIX_ROUTE_OVERFLOW
                && sh->tenants[i].entries && sh->tenants[i].tag == 0))
        {
            ngx_http_prefix_route_bad(9);
        }
    }

#undef ngx_http_prefix_route_bad

    for (i = 0; i < 13; i++) {
        if (seen[i]) {
            ngx_log_error(NGX_LOG_ALERT, log, 0,
                          "prefix_route index check: %s (%ui times)",
                          what[i], seen[i]);
        }
    }

    return bad;
}


size_t
ngx_http_prefix_route_index_bytes(ngx_http_prefix_route_index_t *idx)
{
    return idx->sh->entries * sizeof(ngx_http_prefix_route_entry_t)
           + idx->sh->holders * sizeof(ngx_http_prefix_route_holder_t);
}


/*
 * The longest indexed prefix of a chain of n block hashes, by binary
 * search: the indexed prefixes of a chain are closed under "one block
 * shorter", as every entry has its parent.  Returns its length in blocks
 * and its entry in *deepest (NULL for 0).
 */

static ngx_uint_t
ngx_http_prefix_route_index_deepest(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t n, ngx_http_prefix_route_entry_t **deepest)
{
    ngx_uint_t                      lo, hi, mid;
    ngx_http_prefix_route_entry_t  *e;

    lo = 0;
    hi = n;
    *deepest = NULL;

    while (lo < hi) {
        mid = lo + (hi - lo + 1) / 2;

        e = ngx_http_prefix_route_index_lookup(idx, hash[mid - 1]);

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
ngx_http_prefix_route_index_lookup(ngx_http_prefix_route_index_t *idx,
    uint64_t key)
{
    ngx_http_prefix_route_entry_t  *e;

    for (e = ngx_http_prefix_route_ptr(idx,
                  idx->sh->buckets[ngx_http_prefix_route_bucket(idx->sh, key)]);
         e != NULL;
         e = ngx_http_prefix_route_ptr(idx, e->next))
    {
        if (e->key == key) {
            return e;
        }
    }

    return NULL;
}


static ngx_http_prefix_route_holder_t *
ngx_http_prefix_route_index_holder(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_holder_t  *h;

    for (h = ngx_http_prefix_route_ptr(idx, e->holders);
         h != NULL;
         h = ngx_http_prefix_route_ptr(idx, h->next))
    {
        if (h->slot == peer->slot) {
            return h;
        }
    }

    return NULL;
}


/*
 * A new entry for block hash "key" below "parent", pinned, in the table;
 * NULL when the zone has no memory for it.
 */

static ngx_http_prefix_route_entry_t *
ngx_http_prefix_route_index_entry(ngx_http_prefix_route_index_t *idx,
    uint64_t key, ngx_http_prefix_route_entry_t *parent, ngx_uint_t tenant)
{
    uint32_t                       *bucket;
    ngx_http_prefix_route_entry_t  *e;

    e = ngx_http_prefix_route_index_alloc(idx,
                                      sizeof(ngx_http_prefix_route_entry_t),
                                      NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
    if (e == NULL) {
        return NULL;
    }

    ngx_memzero(e, sizeof(ngx_http_prefix_route_entry_t));

    e->key = key;
    e->pinned = 1;
    e->tenant = (u_char) tenant;
    e->parent = ngx_http_prefix_route_off(idx, parent);

    if (parent != NULL) {
        parent->children++;
    }

    ngx_http_prefix_route_kill_point();

    bucket = &idx->sh->buckets[ngx_http_prefix_route_bucket(idx->sh, key)];
    e->next = *bucket;

    ngx_http_prefix_route_order();

    *bucket = ngx_http_prefix_route_off(idx, e);

    ngx_http_prefix_route_kill_point();

    idx->sh->entries++;
    idx->sh->tenants[tenant].entries++;

    return e;
}


/*
 * The slot of the tenant "tag" in sh->tenants, giving it one when it has
 * none: slot 0 for no salt, the overflow slot when none of its probes is
 * its own, never used or free (no entries).
 */

static ngx_uint_t
ngx_http_prefix_route_index_tenant(ngx_http_prefix_route_index_t *idx,
    uint64_t tag)
{
    ngx_uint_t                       i, k, free;
    ngx_http_prefix_route_tenant_t  *t;

    if (tag == 0) {
        return 0;
    }

    free = 0;
    i = 1 + (ngx_uint_t) (((tag * 0x9e3779b97f4a7c15ULL) >> 32)
                          % (NGX_HTTP_PREFIX_ROUTE_OVERFLOW - 1));

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_TENANT_PROBES; k++) {
        t = &idx->sh->tenants[i];

        if (t->tag == tag) {
            return i;
        }

        if (free == 0 && t->entries == 0) {
            free = i;
        }

        /* a slot never used ends the tags that probed past it */

        if (t->tag == 0) {
            break;
        }

        i = (i == NGX_HTTP_PREFIX_ROUTE_OVERFLOW - 1) ? 1 : i + 1;
    }

    if (free == 0) {
        return NGX_HTTP_PREFIX_ROUTE_OVERFLOW;
    }

    idx->sh->tenants[free].tag = tag;

    return free;
}


ngx_uint_t
ngx_http_prefix_route_index_tenants(ngx_http_prefix_route_index_t *idx)
{
    ngx_uint_t  i, n;

    n = 0;

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_TENANTS; i++) {
        n += (idx->sh->tenants[i].entries != 0);
    }

    return n;
}


/*
 * A new holder of entry "e" for "peer", below the peer's holder "up" of
 * the parent entry; NULL when the zone has no memory for it, or "up" has
 * as many holders below it as it can count.
 */

static ngx_http_prefix_route_holder_t *
ngx_http_prefix_route_index_add(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e, ngx_http_prefix_route_holder_t *up,
    ngx_http_prefix_route_peer_t *peer)
{
    ngx_http_prefix_route_holder_t  *h;

    if (up != NULL && up->kids == NGX_HTTP_PREFIX_ROUTE_MAX_KIDS) {
        return NULL;
    }

    h = ngx_http_prefix_route_index_alloc(idx,
                                  sizeof(ngx_http_prefix_route_holder_t),
                                  NGX_HTTP_PREFIX_ROUTE_EVICT_TRIES);
    if (h == NULL) {
        return NULL;
    }

    /* whole before it joins its entry's list: the chunk's old fields lie */

    h->entry = ngx_http_prefix_route_off(idx, e);
    h->up = ngx_http_prefix_route_off(idx, up);
    h->kids = 0;
    h->hot = 0;
    h->slot = peer->slot;
    h->next = e->holders;

    ngx_http_prefix_route_order();

    e->holders = ngx_http_prefix_route_off(idx, h);
    e->nholders++;

    ngx_http_prefix_route_kill_point();

    if (up != NULL) {
        up->kids++;
    }

    /* in its entry's list before the lists, the mend's order */

    ngx_http_prefix_route_order();

    ngx_http_prefix_route_link_head(idx, &peer->lru, &h->peer_lru);
    ngx_http_prefix_route_link_head(idx, &idx->sh->lru, &h->zone_lru);

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
        ngx_http_prefix_route_kill_point();

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
    ngx_uint_t                       s;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_link_t    *head;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *h;

    sh = idx->sh;

    /*
     * the zone is full: what it protects is at most its share, the least
     * recently used go back to probation (the tail has no protected kids)
     */

    while (sh->hot_holders > NGX_HTTP_PREFIX_ROUTE_HOT_SHARE(sh->holders)
           && sh->hot.prev != ngx_http_prefix_route_off(idx, &sh->hot))
    {
        ngx_http_prefix_route_index_segment(idx,
                                 ngx_http_prefix_route_zone_holder(
                                     ngx_http_prefix_route_ptr(idx,
                                                               sh->hot.prev)),
                                 0);
    }

    /*
     * the holders that go in slices (a restarted engine's, an evicted
     * prefix's, the excess over a lowered capacity) before anyone's the
     * fleet may still use (2026-12-05); from the first peer that may have
     * some: else a peer left with none made every eviction read all the
     * peers' marks until index_clear() (4,004 peers: 2-3 ms a record,
     * design.md)
     */

    for (s = sh->drop_from; sh->dropping && s < sh->npeers; s++) {
        if (ngx_http_prefix_route_index_doomed(idx, sh->slots[s], 1)) {
            return 1;
        }

        sh->drop_from = s + 1;
    }

    /* the tail of probation, or of the protected holders */

    for (s = 0; s < 2; s++) {
        head = s ? &sh->hot : &sh->lru;

        if (head->prev == ngx_http_prefix_route_off(idx, head)) {
            continue;
        }

        h = ngx_http_prefix_route_zone_holder(
                                   ngx_http_prefix_route_ptr(idx, head->prev));
        e = ngx_http_prefix_route_ptr(idx, h->entry);

        /*
         * A parent is always newer than its children in its segment, so
         * kids is 0 at the tail but for a protected block with some on
         * probation, or the recording server's holder a record just added
         * a kid to.  The record's own holders stay, of the server it
         * records (sh->changing - 1): it moves them last.  Another
         * server's holder of a block of the prompt may go, its entry
         * pinned: else a server sent nothing for a while, its holders of
         * a system prompt every prompt shares at the tail, stopped all
         * eviction (2026-12-05).
         */

        if ((e->pinned && (ngx_uint_t) h->slot + 1 == sh->changing)
            || h->kids)
        {
            continue;
        }

        ngx_http_prefix_route_index_remove(idx, h);
        sh->evictions++;

        return 1;
    }

    return 0;
}


/*
 * Moves a holder to the head of the zone's protected holders if "hot",
 * else to the head of those on probation.
 */

static void
ngx_http_prefix_route_index_segment(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_holder_t *h, ngx_uint_t hot)
{
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_tenant_t  *t;

    sh = idx->sh;

    ngx_http_prefix_route_link_remove(idx, &h->zone_lru);

    t = &sh->tenants[((ngx_http_prefix_route_entry_t *)
                          ngx_http_prefix_route_ptr(idx, h->entry))->tenant];

    if (h->hot) {
        sh->hot_holders--;
        t->hot--;
    }

    if (hot) {
        sh->hot_holders++;
        t->hot++;
    }

    ngx_http_prefix_route_kill_point();

    h->hot = hot ? 1 : 0;

    ngx_http_prefix_route_link_head(idx, hot ? &sh->hot : &sh->lru,
                                    &h->zone_lru);
}


static void
ngx_http_prefix_route_index_remove(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_holder_t *h)
{
    uint32_t                        *hp, off;
    ngx_http_prefix_route_entry_t   *e;
    ngx_http_prefix_route_holder_t  *up;

    e = ngx_http_prefix_route_ptr(idx, h->entry);
    off = ngx_http_prefix_route_off(idx, h);

    /*
     * its entry's list first: cut here, the mend leaves it out of the
     * lists (it has no kids) rather than link it again, first in its
     * server's list if it has no parent, ahead of a dead record's chain
     */

    for (hp = &e->holders;
         *hp != off && *hp != 0;
         hp = &((ngx_http_prefix_route_holder_t *)
                    ngx_http_prefix_route_ptr(idx, *hp))->next)
    {
        /* void */
    }

    /* always there, the index mended before a change; a guard all the same */

    if (*hp == off) {
        *hp = h->next;
        e->nholders--;
    }

    ngx_http_prefix_route_order();
    ngx_http_prefix_route_kill_point();

    ngx_http_prefix_route_link_remove(idx, &h->peer_lru);
    ngx_http_prefix_route_link_remove(idx, &h->zone_lru);

    ngx_http_prefix_route_kill_point();

    up = ngx_http_prefix_route_ptr(idx, h->up);

    if (up != NULL) {
        up->kids--;
    }

    idx->sh->slots[h->slot]->blocks--;
    idx->sh->holders--;
    idx->sh->hot_holders -= h->hot;
    idx->sh->tenants[e->tenant].hot -= h->hot;

    ngx_http_prefix_route_kill_point();

    ngx_slab_free_locked(idx->shpool, h);

    ngx_http_prefix_route_kill_point();

    ngx_http_prefix_route_index_release(idx, e);
}


static void
ngx_http_prefix_route_index_release(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_entry_t *e)
{
    uint32_t                       *ep, off;
    ngx_http_prefix_route_sh_t     *sh;
    ngx_http_prefix_route_entry_t  *parent;

    sh = idx->sh;

    /* an entry lives while a peer holds it or a longer prefix needs it */

    while (e != NULL && e->holders == 0 && e->children == 0 && !e->pinned) {

        off = ngx_http_prefix_route_off(idx, e);

        for (ep = &sh->buckets[ngx_http_prefix_route_bucket(sh, e->key)];
             *ep != off;
             ep = &((ngx_http_prefix_route_entry_t *)
                        ngx_http_prefix_route_ptr(idx, *ep))->next)
        {
            /* void */
        }

        *ep = e->next;

        ngx_http_prefix_route_kill_point();

        parent = ngx_http_prefix_route_ptr(idx, e->parent);

        sh->tenants[e->tenant].entries--;

        ngx_slab_free_locked(idx->shpool, e);
        sh->entries--;

        ngx_http_prefix_route_kill_point();

        if (parent != NULL) {
            parent->children--;
        }

        e = parent;
    }
}


static void
ngx_http_prefix_route_link_init(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_link_t *l)
{
    l->prev = ngx_http_prefix_route_off(idx, l);
    l->next = l->prev;
}


static void
ngx_http_prefix_route_link_head(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_link_t *head, ngx_http_prefix_route_link_t *l)
{
    ngx_http_prefix_route_link_t  *next;

    ngx_http_prefix_route_kill_point();

    next = ngx_http_prefix_route_ptr(idx, head->next);

    l->next = head->next;
    l->prev = ngx_http_prefix_route_off(idx, head);
    next->prev = ngx_http_prefix_route_off(idx, l);

    /* the link forward last: the mend walks those */

    ngx_http_prefix_route_order();
    ngx_http_prefix_route_kill_point();

    head->next = next->prev;
}


static void
ngx_http_prefix_route_link_remove(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_link_t *l)
{
    ngx_http_prefix_route_link_t  *prev, *next;

    ngx_http_prefix_route_kill_point();

    prev = ngx_http_prefix_route_ptr(idx, l->prev);
    next = ngx_http_prefix_route_ptr(idx, l->next);

    prev->next = l->next;

    ngx_http_prefix_route_order();
    ngx_http_prefix_route_kill_point();

    next->prev = l->prev;
}


static int ngx_libc_cdecl
ngx_http_prefix_route_index_cmp(const void *a, const void *b)
{
    uintptr_t  x, y;

    x = *(const uintptr_t *) a;
    y = *(const uintptr_t *) b;

    return (x > y) - (x < y);
}
