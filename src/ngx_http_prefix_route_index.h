
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_INDEX_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_INDEX_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * The prefix index, kept in a shared memory slab zone and shared by all
 * workers (docs/design.md, "The index").
 *
 * An entry stands for one block hash, that is for one whole prefix of some
 * prompt; it points to the entry of the prefix one block shorter.  A holder
 * says that one peer received that prefix; holders are kept in a per-peer
 * LRU queue, which enforces the per-peer capacity, and in a zone-wide LRU
 * queue, which gives memory back when the slab allocator runs out.  Each
 * request moves its holders to the queue heads from the deepest block to
 * the first, so a parent is always more recently used than its children
 * and both queues forget the deepest blocks first: the blocks a peer holds
 * always form whole prefixes, and a lookup never believes a longer prefix
 * is held than was sent.  Peers are shared records found by name, so that
 * affinity survives a reload with the same servers.
 */


typedef struct ngx_http_prefix_route_entry_s   ngx_http_prefix_route_entry_t;
typedef struct ngx_http_prefix_route_holder_s  ngx_http_prefix_route_holder_t;
typedef struct ngx_http_prefix_route_worker_s  ngx_http_prefix_route_worker_t;


typedef struct {
    ngx_queue_t                      queue;     /* in sh->peers */
    ngx_queue_t                      lru;       /* holders, newest first */

    ngx_uint_t                       blocks;    /* holders of this peer */
    ngx_uint_t                       inflight;  /* requests not finished */
    double                           queued;    /* bytes of prefill queued */
    double                           recent;    /* bytes, decayed */
    ngx_msec_t                       recent_time;

    ngx_uint_t                       requests;  /* routed here */
    ngx_uint_t                       hits;      /* of which with a match */

    size_t                           len;
    u_char                           name[1];   /* peer name, e.g. addr:port */
} ngx_http_prefix_route_peer_t;


struct ngx_http_prefix_route_entry_s {
    ngx_rbtree_node_t                node;      /* key: the block hash */
    ngx_http_prefix_route_entry_t   *parent;    /* prefix one block shorter */
    ngx_http_prefix_route_holder_t  *holders;
    uint32_t                         children;  /* entries it is parent of */
    uint32_t                         stamp;     /* last update that used it */
};


struct ngx_http_prefix_route_holder_s {
    ngx_queue_t                      peer_lru;
    ngx_queue_t                      zone_lru;
    ngx_http_prefix_route_holder_t  *next;      /* same entry, other peer */
    ngx_http_prefix_route_entry_t   *entry;
    ngx_http_prefix_route_peer_t    *peer;
};


/*
 * The requests a worker process has in flight, each charged to a peer's
 * queued work and in-flight count.  A worker that dies without giving its
 * charges back (SIGKILL, a crash) is found by its pid and its charges are
 * given back for it (ngx_http_prefix_route_index_sweep()).
 */

struct ngx_http_prefix_route_worker_s {
    ngx_queue_t                      queue;     /* in sh->workers */
    ngx_queue_t                      charges;
    uint64_t                         nonce;     /* tells processes of the
                                                   same pid apart */
    ngx_pid_t                        pid;
};


typedef struct {
    ngx_queue_t                      queue;     /* in worker->charges */
    ngx_http_prefix_route_peer_t    *peer;
    double                           work;      /* bytes */
} ngx_http_prefix_route_charge_t;


typedef struct {
    ngx_rbtree_t                     rbtree;
    ngx_rbtree_node_t                sentinel;
    ngx_queue_t                      lru;       /* all holders, newest first */
    ngx_queue_t                      peers;
    ngx_queue_t                      workers;
    ngx_msec_t                       swept;     /* last look for dead ones */

    ngx_uint_t                       entries;   /* indexed blocks */
    ngx_uint_t                       holders;   /* (block, peer) pairs */
    ngx_uint_t                       evictions; /* holders dropped: memory */
    ngx_uint_t                       forgotten; /* holders dropped: capacity */
    uint32_t                         stamp;

    /*
     * the upstream's request counters, kept beside the index so that they
     * are shared by all workers and survive a reload with it; updated
     * without the mutex
     */
    ngx_atomic_t                     requests[4];   /* by status */
    ngx_atomic_t                     prompt_bytes;  /* canonical prompt */
    ngx_atomic_t                     matched_bytes; /* on the chosen peers */
} ngx_http_prefix_route_sh_t;


typedef struct {
    ngx_http_prefix_route_sh_t      *sh;
    ngx_slab_pool_t                 *shpool;
    ngx_http_prefix_route_worker_t  *worker;    /* this process's record */
} ngx_http_prefix_route_index_t;


/*
 * Sets up the index in a new zone, or takes over the one of the previous
 * cycle's zone ("old", NULL for a new zone).  Runs in the master on start
 * and reload.  Returns NGX_OK or NGX_ERROR (zone too small to hold it).
 */
ngx_int_t ngx_http_prefix_route_index_init(
    ngx_http_prefix_route_index_t *idx, ngx_slab_pool_t *shpool,
    ngx_http_prefix_route_index_t *old);

/*
 * Finds the shared record of the peer named "name", creating it.  Takes
 * the zone mutex.  Returns NULL when the zone has no memory left.
 */
ngx_http_prefix_route_peer_t *ngx_http_prefix_route_index_peer(
    ngx_http_prefix_route_index_t *idx, ngx_str_t *name);

/*
 * Longest-prefix lookup of a chain of n block hashes.  Fills chain[0 .. d)
 * with the entries of the longest indexed prefix and returns d, in blocks;
 * O(log n) tree lookups plus a walk of d parent pointers.  Then, for each
 * of the npeers peers, match[i] is the number of leading blocks it holds,
 * and leaf[i] is 1 when no longer prompt went on from the last of them:
 * the prompt continues the one that peer last received there, as the next
 * turn of a conversation does, rather than branching off a prefix shared
 * with other prompts.  The caller holds the zone mutex.
 */
ngx_uint_t ngx_http_prefix_route_index_match(
    ngx_http_prefix_route_index_t *idx, uint64_t *hash, ngx_uint_t n,
    ngx_http_prefix_route_entry_t **chain, ngx_http_prefix_route_peer_t **peers,
    ngx_uint_t npeers, ngx_uint_t *match, u_char *leaf);

/*
 * Records that "peer" received the prefix of n blocks whose first d
 * entries ngx_http_prefix_route_index_match() put into chain[] (chain has
 * room for n).  Adds the missing entries and holders, makes all of them
 * the most recently used, then drops the peer's least recently used
 * holders beyond "capacity" blocks (0: no limit).  When the zone is full
 * it drops the zone's least recently used holders; if that is not enough
 * the prefix is recorded only in part.  Never fails.  The caller holds the
 * zone mutex.  Returns the number of blocks recorded.
 */
ngx_uint_t ngx_http_prefix_route_index_update(
    ngx_http_prefix_route_index_t *idx, uint64_t *hash, ngx_uint_t n,
    ngx_http_prefix_route_entry_t **chain, ngx_uint_t d,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity);


/*
 * Takes back what ngx_http_prefix_route_index_update() recorded for "peer"
 * of blocks from .. to - 1 of a chain, the deepest first, when the request
 * failed to reach it: the peer never received them.  The caller holds the
 * zone mutex.
 */
void ngx_http_prefix_route_index_forget(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t from, ngx_uint_t to,
    ngx_http_prefix_route_peer_t *peer);


/*
 * Charges "work" bytes of prefill to "peer" for a request this worker
 * sends it: adds them to the peer's queued work and counts the request in
 * flight until ngx_http_prefix_route_index_discharge().  The caller holds
 * the zone mutex.  Returns the charge, or NULL when the zone has no memory
 * for it even after dropping a few least recently used blocks: the
 * request is then not counted.
 */
ngx_http_prefix_route_charge_t *ngx_http_prefix_route_index_charge(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    double work);

/*
 * Gives back a charge once its request is over.  The caller holds the
 * zone mutex.
 */
void ngx_http_prefix_route_index_discharge(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_charge_t *charge);

/*
 * Gives back the charges of worker processes that died without doing so
 * (killed, crashed), once a second at most: a worker whose pid no longer
 * exists (kill(pid, 0) fails with ESRCH) cannot be finishing a request.
 * The caller holds the zone mutex.
 */
void ngx_http_prefix_route_index_sweep(ngx_http_prefix_route_index_t *idx);


#endif /* _NGX_HTTP_PREFIX_ROUTE_INDEX_H_INCLUDED_ */
