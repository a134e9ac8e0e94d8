
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_INDEX_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_INDEX_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * The prefix index and the servers' shared figures, kept in a shared
 * memory slab zone that every worker sees (docs/design.md, "The index").
 *
 * Callers see block hashes, peer records and numbers; the index's entries
 * and holders stay inside ngx_http_prefix_route_index.c, and no pointer
 * to them outlives a call, so nothing a caller keeps can be freed under
 * it.  Every function below but scratch, init and lock_master expects the
 * caller to hold the zone mutex (idx->shpool->mutex).
 */


/*
 * The compiler keeps the zone's writes on either side in this order, as
 * the mend of a worker killed between them needs (..._index.c); the
 * processor may not make them visible in order, but all of a killed
 * process's writes are done by the time another takes the mutex.
 */
#define ngx_http_prefix_route_order()  __asm__ volatile ("" ::: "memory")

/*
 * Between two writes to the zone: t/unit/index_test.c builds with
 * NGX_HTTP_PREFIX_ROUTE_KILL_POINTS to end the process at each in turn,
 * as SIGKILL or the OOM killer may end a worker.
 */
#if (NGX_HTTP_PREFIX_ROUTE_KILL_POINTS)
void ngx_http_prefix_route_kill_point(void);
#else
#define ngx_http_prefix_route_kill_point()
#endif


typedef struct ngx_http_prefix_route_entry_s   ngx_http_prefix_route_entry_t;
typedef struct ngx_http_prefix_route_holder_s  ngx_http_prefix_route_holder_t;


/*
 * A link of a doubly linked list in the zone, as ngx_queue_t but with
 * 32-bit offsets from the zone's start in 8-byte units (zones up to
 * 32 GiB): half the size, which keeps a holder in 32 bytes.
 */
typedef struct {
    uint32_t                         prev;
    uint32_t                         next;
} ngx_http_prefix_route_link_t;


/* $prefix_route_status values, also the keys of the request counters */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_BYPASS = 0,
    NGX_HTTP_PREFIX_ROUTE_MISS,
    NGX_HTTP_PREFIX_ROUTE_HIT,
    NGX_HTTP_PREFIX_ROUTE_SPILL,
    NGX_HTTP_PREFIX_ROUTE_NONE,                 /* no usable server */
    NGX_HTTP_PREFIX_ROUTE_NSTATUS
} ngx_http_prefix_route_status_e;


/* their names, ..._module.c */
extern ngx_str_t  ngx_http_prefix_route_status_names[];


/*
 * Why a request is BYPASS: $prefix_route_bypass and the keys of the
 * bypassed counters (docs/reference.md, "Embedded Variables")
 */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_NO_BODY = 0,          /* none, or empty */
    NGX_HTTP_PREFIX_ROUTE_UNBUFFERED,           /* still being read */
    NGX_HTTP_PREFIX_ROUTE_BODY_REPLACED,        /* not the client's */
    NGX_HTTP_PREFIX_ROUTE_NOT_JSON,
    NGX_HTTP_PREFIX_ROUTE_NO_PROMPT,
    NGX_HTTP_PREFIX_ROUTE_PARSE_BUDGET,         /* jansson's memory */
    NGX_HTTP_PREFIX_ROUTE_MAX_PARSE,            /* time */
    NGX_HTTP_PREFIX_ROUTE_NO_MEMORY,            /* the worker's, or the
                                                   salt's value failed */
    NGX_HTTP_PREFIX_ROUTE_LISTS_CHANGED,        /* "resolve", or races */
    NGX_HTTP_PREFIX_ROUTE_NBYPASS
} ngx_http_prefix_route_bypass_e;


/* their names, ..._module.c */
extern ngx_str_t  ngx_http_prefix_route_bypass_names[];


/* a worker process's share of a server's load, ..._load.c */
typedef struct {
    uint64_t                         queued;    /* bytes of prefill */
    uint64_t                         bytes;     /* bytes of prompt */
    ngx_uint_t                       waiting;   /* requests not answering */
    ngx_uint_t                       inflight;  /* requests */
} ngx_http_prefix_route_cell_t;


/*
 * What the engine reported of one server's cache against what the index
 * predicted, ngx_http_prefix_route_module.c ("feedback"); tokens.
 */
typedef struct {
    ngx_uint_t                       responses; /* with a cached figure */
    uint64_t                         prompt;    /* tokens reported */
    uint64_t                         cached;    /* of which cached */
    uint64_t                         predicted; /* cached, as predicted */
    ngx_uint_t                       agreed;    /* within 16 tokens, or
                                                   a block if more */
    ngx_uint_t                       under;     /* the engine held less */
    ngx_uint_t                       over;      /* the engine held more */
    ngx_uint_t                       dropped;   /* holders dropped for it */
    uint32_t                         capacity;  /* blocks its engine holds
                                                   at most, learned from
                                                   its evictions
                                                   (feedback=correct), 0:
                                                   none learned; a zone's
                                                   holders are 32-byte
                                                   chunks, fewer than 2^32 */
    uint32_t                         lowered;   /* the stamp (ms) of the
                                                   newest block held when
                                                   "capacity" last fell;
                                                   0: every block held is
                                                   newer */
    uint32_t                         learning;  /* blocks it held before
                                                   a trim still going in
                                                   slices, 0: none */
    uint32_t                         block;     /* bytes of the blocks
                                                   "capacity" counts */
} ngx_http_prefix_route_feedback_t;


/*
 * What the engine's metrics page said of one server, and how its probes
 * went, ngx_http_prefix_route_probe.c.
 */
typedef struct {
    ngx_msec_t                       read;      /* when, ms; if has_reading */
    ngx_uint_t                       waiting;   /* requests queued there */
    ngx_uint_t                       running;   /* requests running there */
    double                           others_waiting; /* of which other
                                                   clients', a moving
                                                   average over readings */
    double                           others_running;
    ngx_uint_t                       kv;        /* KV cache use, per mille;
                                                   if has_kv */
    double                           served;    /* the counter a restart
                                                   resets; if has_served */
    double                           high;      /* "served" before the last
                                                   restart; if has_high */
    unsigned                         has_reading:1;
    unsigned                         has_kv:1;
    unsigned                         has_served:1;
    unsigned                         has_high:1;
    unsigned                         fallen:1;  /* a reading below half
                                                   "served" passed over */
    unsigned                         has_mixed:1;
    uint32_t                         restarted; /* ms, of the last restart;
                                                   if has_high */
    ngx_uint_t                       fails;     /* probes failed in a row */
    ngx_uint_t                       down;      /* passed over: fails= */
    uint32_t                         probes;    /* probes kept, in all */
    uint32_t                         failures;  /* of which failed */
    uint32_t                         restarts;  /* counter resets seen */
    uint32_t                         round;     /* of the last probe kept */
    uint32_t                         mixed;     /* ms, when the counter
                                                   last came back (a page of
                                                   several engines); if
                                                   has_mixed */
} ngx_http_prefix_route_probe_t;


/*
 * A server's responses of status 500 to 599, from any worker
 * (max_errors=, ngx_http_prefix_route_module.c).
 */
typedef struct {
    ngx_uint_t                       run;       /* in a row */
    ngx_uint_t                       total;     /* in all */
    time_t                           last;      /* s, ngx_time() of the
                                                   last one */
} ngx_http_prefix_route_errors_t;


/*
 * The status page's charts (ngx_http_prefix_route_history.c): a sample of
 * the zone's figures every NGX_HTTP_PREFIX_ROUTE_INTERVAL seconds, the
 * last NGX_HTTP_PREFIX_ROUTE_SAMPLES in a ring.
 */
#define NGX_HTTP_PREFIX_ROUTE_SAMPLES      180
#define NGX_HTTP_PREFIX_ROUTE_INTERVAL     10


/* the upstream's counters at a sample, since the zone began */
typedef struct {
    uint64_t                         time;      /* s; 0: no sample */
    uint64_t                         requests[NGX_HTTP_PREFIX_ROUTE_NSTATUS];
    uint64_t                         prompt;    /* bytes of prompt */
    uint64_t                         matched;   /* bytes, chosen peers */
    uint64_t                         predicted; /* bytes, cost model's */
    uint64_t                         reported;  /* tokens the engines
                                                   reported, prompt */
    uint64_t                         cached;    /* of which cached */
} ngx_http_prefix_route_sample_t;


/* a server's gauges at a sample */
typedef struct {
    uint32_t                         inflight;  /* requests */
    uint32_t                         queued;    /* KiB of prefill */
} ngx_http_prefix_route_gauge_t;


/*
 * A server of the upstream as the zone knows it, found by its name so
 * that a reload with the same servers keeps its blocks and figures.
 */
typedef struct {
    ngx_str_node_t                   sn;        /* in sh->names: the name's
                                                   ngx_crc32_short(), the
                                                   name itself */
    ngx_queue_t                      queue;     /* in sh->peers, by named */
    ngx_http_prefix_route_link_t     lru;       /* holders, newest first */
    ngx_uint_t                       slot;      /* number in the zone */
    ngx_uint_t                       blocks;    /* holders of this peer */

    /* load, ngx_http_prefix_route_load.c */
    ngx_http_prefix_route_cell_t     load;      /* the total of cells[] */
    ngx_http_prefix_route_cell_t    *cells;     /* [sh->nworkers + 1] */

    ngx_uint_t                       requests;  /* routed here */
    ngx_uint_t                       hits;      /* of which with a match */
    ngx_uint_t                       wiped;     /* its engine restarted
                                                   (1), or the record was
                                                   reused for another
                                                   server (2): its blocks
                                                   are not trusted and
                                                   go, in slices */
    ngx_uint_t                       stale;     /* its engine evicted:
                                                   the blocks recorded
                                                   before stale_before go,
                                                   in slices */
    uint32_t                         stale_before; /* ms, a stamp */
    ngx_uint_t                       over;      /* blocks: it holds more
                                                   than this capacity,
                                                   lowered by a reload;
                                                   the excess goes in
                                                   slices (0: none) */

    ngx_http_prefix_route_feedback_t fb;
    ngx_http_prefix_route_probe_t    probe;
    ngx_http_prefix_route_errors_t   errors;

    ngx_http_prefix_route_gauge_t    gauges[NGX_HTTP_PREFIX_ROUTE_SAMPLES];

    uint32_t                         named;     /* the newest
                                                   configuration naming it,
                                                   sh->gen's number */
    uint32_t                         fixed;     /* the newest naming it in
                                                   a "server" line, 0:
                                                   none */
    uint16_t                         views;     /* workers' views of
                                                   "resolve" lists holding
                                                   it */
    uint16_t                         loose;     /* every view let it go: 1
                                                   while requests are in
                                                   flight there, 2 on
                                                   sh->loose, 3 waiting
                                                   for room there; else 0 */
    uint32_t                         epoch;     /* its reuses: a request
                                                   or probe that took it
                                                   before checks it */
    uint32_t                         room;      /* bytes for the name */
    uint32_t                         first;     /* the oldest
                                                   configuration naming it
                                                   since it was made or
                                                   reused */
    u_char                           name[1];   /* e.g. addr:port, of
                                                   sn.str.len bytes */
} ngx_http_prefix_route_peer_t;


/* 1 while some of the peer's blocks are to go in slices, else 0 */
#define ngx_http_prefix_route_dropping(peer)                                  \
    ((peer)->wiped || (peer)->stale || (peer)->over)


/* a worker process that charges load, ngx_http_prefix_route_load.c */
typedef struct {
    uint64_t                         nonce;     /* tells processes of the
                                                   same pid apart */
    ngx_pid_t                        pid;       /* 0: a free slot */
} ngx_http_prefix_route_worker_t;


/*
 * Processes the zone keeps the configuration of, at most: the workers
 * and cache processes of the configurations still running after reloads
 * (a record none names is reused), 127 workers each for two of them
 */
#define NGX_HTTP_PREFIX_ROUTE_PROCS        256


/* a process whose configuration uses the zone */
typedef struct {
    ngx_pid_t                        pid;       /* 0: a free entry */
    uint32_t                         gen;       /* its configuration */
} ngx_http_prefix_route_proc_t;


/*
 * The configurations that may still run, by their numbers in the zone, as
 * the master found them at its last reload
 * (ngx_http_prefix_route_index_running()): no process ever goes back to
 * an older one, so the set stays true until the next
 */
typedef struct {
    uint32_t                         from;      /* this one and every newer
                                                   one; 0: all */
    uint32_t                         n;
    uint32_t                         gens[NGX_HTTP_PREFIX_ROUTE_PROCS + 1];
                                                /* older ones, ascending */
} ngx_http_prefix_route_running_t;


/* models whose bytes per token the zone learns, at most */
#define NGX_HTTP_PREFIX_ROUTE_MODELS       8
#define NGX_HTTP_PREFIX_ROUTE_MODEL_NAME   128


/*
 * Tenants the zone counts apart, at most: slot 0 is the requests without a
 * salt, the last one all salts beyond the others (docs/design.md,
 * "Tenants").
 */
#define NGX_HTTP_PREFIX_ROUTE_TENANTS      256


/* the entries and protected holders of one salt (with the model) */
typedef struct {
    uint64_t                         tag;       /* 0: never used */
    uint32_t                         entries;   /* 0: free to reuse */
    uint32_t                         hot;       /* protected holders */
} ngx_http_prefix_route_tenant_t;


/* bytes of canonical prompt per engine token, for one model */
typedef struct {
    uint64_t                         model;     /* prompt.model, 0: free */
    uint32_t                         ratio;     /* bytes a token x 256 */
    uint32_t                         samples;
    ngx_msec_t                       used;      /* its last response */
    int32_t                          offset[2]; /* tokens x 16 that the
                                                   prediction ran over the
                                                   engine's report: [1]
                                                   when it ended with an
                                                   answer */
    u_char                           name[NGX_HTTP_PREFIX_ROUTE_MODEL_NAME];
} ngx_http_prefix_route_ratio_t;


/* peers a zone can number */
#define NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS    ((1 << 12) - 1)

/* 64-bit words of a bit a slot */
#define NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS                                      \
    ((NGX_HTTP_PREFIX_ROUTE_MAX_SLOTS + 64) / 64)

/*
 * room in sh->loose: records let go beyond it wait for room, found by a
 * walk of the records once the ring is half empty (sh->unlisted)
 */
#define NGX_HTTP_PREFIX_ROUTE_LOOSE        512

/*
 * Where a mend of the index stands, between the slices it is done in
 * (ngx_http_prefix_route_index_ready()); all zero when none is under way.
 */
typedef struct {
    ngx_uint_t                       phase;     /* 0: none begun */
    ngx_uint_t                       slicing;   /* a slice under way: found
                                                   set, its worker died */
    ngx_uint_t                       slices;    /* taken so far */
    ngx_uint_t                       all;       /* the zone's lists lost */
    ngx_uint_t                       pass;
    ngx_uint_t                       b;         /* bucket, or list, next */
    uint32_t                         off;       /* link next, 0: the
                                                   list's first */
    uint32_t                         last;      /* link last kept */
    ngx_uint_t                       steps;     /* in the list walked */
    ngx_uint_t                       k;
    ngx_uint_t                       nlost;     /* index pairs dropped */
    ngx_uint_t                       n;         /* blocks unpinned */
    uint64_t                         lost[NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS];
                                                /* lists, by slot */
} ngx_http_prefix_route_mend_t;


typedef struct {
    ngx_http_prefix_route_link_t     lru;       /* holders on probation,
                                                   newest first */
    ngx_http_prefix_route_link_t     hot;       /* protected holders */
    uint32_t                         layout;    /* of this code's structs */

    /* entries by block hash: chains of offsets, keyed with a secret */
    uint32_t                        *buckets;
    ngx_uint_t                       shift;     /* 64 - log2(buckets) */
    uint64_t                         secret;

    ngx_queue_t                      peers;     /* oldest "named" first */
    ngx_rbtree_t                     names;     /* peers by name */
    ngx_rbtree_node_t                sentinel;
    ngx_uint_t                       naming;    /* names or peers being
                                                   changed: found set, its
                                                   worker died, both are
                                                   made again from slots */
    ngx_http_prefix_route_peer_t   **slots;     /* peers by slot */
    ngx_uint_t                       npeers;    /* slots given to peers */
    uint16_t                         loose[NGX_HTTP_PREFIX_ROUTE_LOOSE];
                                                /* a ring, oldest first:
                                                   slots of records every
                                                   view let go with no
                                                   request in flight there
                                                   (each checked when
                                                   taken) */
    ngx_uint_t                       loose_head;
    ngx_uint_t                       nloose;
    ngx_uint_t                       unlisted;  /* records waiting for room
                                                   on it, about */
    ngx_uint_t                       nslots;    /* room in slots[] */

    ngx_uint_t                       entries;   /* indexed blocks */
    ngx_uint_t                       holders;   /* (block, peer) pairs */
    ngx_uint_t                       hot_holders; /* of which protected */
    ngx_uint_t                       room;      /* holders the zone has
                                                   room for, about */
    ngx_uint_t                       evictions; /* holders dropped: memory */
    ngx_uint_t                       forgotten; /* holders dropped: capacity */
    ngx_uint_t                       noticed;   /* evictions at the last
                                                   "is full" notice */
    time_t                           noticed_at; /* s: its time */
    ngx_uint_t                       capped;    /* lookups cut short */
    ngx_uint_t                       held_back; /* holders left on
                                                   probation: tenant_share */
    ngx_uint_t                       changing;  /* a change under way:
                                                   its record's peer slot
                                                   + 1, or -1 (no chain);
                                                   found set, its worker
                                                   died */
    uint32_t                         dropped;   /* holders the mend took
                                                   out, to be freed: by
                                                   "up", from the last */
    ngx_http_prefix_route_mend_t     mend;
    uint64_t                         mend_last; /* ns (CLOCK_MONOTONIC):
                                                   when the mend's last
                                                   slice ended (the
                                                   module's timers) */
    ngx_uint_t                       dropping;  /* a peer may be wiped,
                                                   stale or over: set
                                                   before it, cleared
                                                   after the last */
    ngx_uint_t                       drop_from; /* the lowest peer slot
                                                   that may have holders
                                                   to go: where eviction
                                                   looks first */

    uint64_t                        *live;      /* the mend's marks: a
                                                   bit a 32-byte chunk */
    size_t                           nlive;     /* their bytes */
    ngx_uint_t                       nworkers;  /* slots, then one shared */
    ngx_http_prefix_route_worker_t  *workers;

    /*
     * the configurations that took the zone, counted (a peer's "named"),
     * and the processes of those still running, by the master's reloads
     */
    uint32_t                         gen;
    uint32_t                         floor;     /* the oldest configuration
                                                   of a process that found
                                                   no entry; 0: none */
    ngx_http_prefix_route_proc_t     procs[NGX_HTTP_PREFIX_ROUTE_PROCS];
    ngx_http_prefix_route_running_t  running;   /* a record none of them
                                                   names is free to reuse,
                                                   in the workers too */

    /* the engines' usage counted by records since reused, for the charts */
    uint64_t                         gone_prompt;   /* tokens */
    uint64_t                         gone_cached;

    /*
     * the upstream's request counters, kept beside the index so that they
     * are shared by all workers and survive a reload with it; updated
     * without the mutex
     */
    ngx_atomic_t                     requests[NGX_HTTP_PREFIX_ROUTE_NSTATUS];
    ngx_atomic_t                     prompt_bytes;  /* canonical prompt */
    ngx_atomic_t                     matched_bytes; /* on the chosen peers */
    ngx_atomic_t                     longest_bytes; /* on any usable peer */
    ngx_atomic_t                     predicted_bytes; /* on the peers the
                                                   cost model chose (in
                                                   shadow mode, not used) */
    ngx_atomic_t                     reusable;      /* requests with a
                                                   longest match */
    ngx_atomic_t                     jansson_bodies; /* the fast path left
                                                   to jansson */
    ngx_atomic_t                     bypassed[NGX_HTTP_PREFIX_ROUTE_NBYPASS];
                                                /* BYPASS requests by
                                                   why, counted as
                                                   requests[] are */

    time_t                           started;   /* s since the epoch: made */
    ngx_atomic_t                     resize_told; /* a worker warned
                                                   that this new zone
                                                   replaced one of
                                                   another size */

    /* when the next round of engine probes is due, ms */
    ngx_msec_t                       probe_due;
    uint32_t                         probe_round;  /* rounds taken */

    /* learned from the engines' usage, under the mutex */
    ngx_http_prefix_route_ratio_t    ratios[NGX_HTTP_PREFIX_ROUTE_MODELS];
    uint64_t                         predicted_tokens; /* cached, on the
                                                   cost model's choices */
    uint64_t                         reported_tokens;  /* prompt tokens of
                                                   the same responses */

    ngx_http_prefix_route_tenant_t   tenants[NGX_HTTP_PREFIX_ROUTE_TENANTS];

    /* the charts' ring, ngx_http_prefix_route_history.c, under the mutex */
    ngx_http_prefix_route_sample_t   samples[NGX_HTTP_PREFIX_ROUTE_SAMPLES];
    ngx_uint_t                       sample;    /* the last one's place */
    uint64_t                         sampled;   /* its interval number */

    /* zone mutex hold time of the balancer, log2 buckets of ns */
    ngx_atomic_t                     lock_ns[32];
    ngx_atomic_t                     lock_ns_sum;   /* ns, of them all */
} ngx_http_prefix_route_sh_t;


/* a process's handle of the zone, in the upstream's configuration */
typedef struct {
    ngx_http_prefix_route_sh_t      *sh;
    ngx_slab_pool_t                 *shpool;
    ngx_int_t                        slot;      /* this worker's, -1: none,
                                                   -2: the shared cell */
    ngx_uint_t                       share;     /* tenant_share, percent;
                                                   0: no limit */
    ngx_http_prefix_route_entry_t  **chain;     /* scratch, max blocks */
    uint64_t                        *live;      /* sh->live */
    ngx_int_t                        mend_steps; /* a slice of a mend
                                                   takes at most, about;
                                                   0: the default */
    uint32_t                         gen;       /* this configuration's
                                                   number in the zone */
    uint64_t                        *holding;   /* "resolve": a bit a slot,
                                                   the records this
                                                   worker's view holds;
                                                   NULL: none */
} ngx_http_prefix_route_index_t;


/*
 * Allocates from "pool" the process's scratch for records of up to
 * "nblocks" blocks, at configuration time.  Returns NGX_OK or NGX_ERROR.
 */
ngx_int_t ngx_http_prefix_route_index_scratch(
    ngx_http_prefix_route_index_t *idx, ngx_pool_t *pool, ngx_uint_t nblocks);

/*
 * Sets up the index in a new zone, or takes over the one of the previous
 * cycle's zone ("old", NULL for a new zone).  "nworkers" is the number of
 * worker processes the zone keeps load for apart, each (a reused zone
 * keeps its own).  Runs in the master on start and reload.  Returns NGX_OK,
 * NGX_DECLINED when the zone was made by another version of the module
 * (its layout differs), or NGX_ERROR (zone too small to hold it).
 */
ngx_int_t ngx_http_prefix_route_index_init(
    ngx_http_prefix_route_index_t *idx, ngx_slab_pool_t *shpool,
    ngx_http_prefix_route_index_t *old, ngx_uint_t nworkers);

/*
 * Takes the zone mutex in the master (on start and reload), where waiting
 * as a worker does would wait for ever on a worker that died holding it:
 * nginx frees such a mutex when it reaps the worker, which the master does
 * not do while it sets up a configuration (SIGCHLD is blocked until then).
 * A holder that has exited is freed of it here, as nginx would (an alert);
 * if one still running holds it for NGX_HTTP_PREFIX_ROUTE_LOCK_MASTER ms
 * (5 s), returns NGX_ERROR after an emerg message.  NGX_OK: held.
 */
ngx_int_t ngx_http_prefix_route_index_lock_master(
    ngx_http_prefix_route_index_t *idx, ngx_log_t *log);

/*
 * The configurations a process may still run, by their numbers in the
 * zone: the master's own ("running", 0: none), those of the children the
 * master has not reaped, as they entered them
 * (ngx_http_prefix_route_index_enter()), and idx->gen's and newer ones.
 * At the zone's first configuration (idx->gen 1) the children running
 * are of older configurations, without the zone: they are entered as
 * naming no record.  Runs in the master on a reload; the caller holds the
 * zone mutex, under which children enter.  Returns NGX_OK, the set in
 * sh->running; or NGX_DECLINED, sh->running left as it was (true still,
 * if it reuses fewer records): outside a master process, while a child
 * has not entered yet (a worker forked by an earlier reload may still be
 * starting), and at the first configuration when the zone has no free
 * entry for such a child.
 */
ngx_int_t ngx_http_prefix_route_index_running(
    ngx_http_prefix_route_index_t *idx, uint32_t running);

/*
 * A worker or cache process of the configuration idx->gen starts, or a
 * worker exits: the records that configuration names are not reused
 * while it runs.  The entry of a process that no longer exists (kill(2))
 * is taken over; with all NGX_HTTP_PREFIX_ROUTE_PROCS of running ones
 * taken, sh->floor keeps the records of this configuration and newer
 * from reuse for the zone's life.
 */
void ngx_http_prefix_route_index_enter(ngx_http_prefix_route_index_t *idx);
void ngx_http_prefix_route_index_leave(ngx_http_prefix_route_index_t *idx);

/* room classes of the records free to reuse, ngx_http_prefix_route_reuse_t */
#define NGX_HTTP_PREFIX_ROUTE_ROOMS        8

/*
 * The records free to reuse, listed once for a hold of the zone mutex
 * (in a list of the process, 4,095 pointers); the caller zeroes it before
 * the first call of the hold and passes it to each
 */
typedef struct {
    ngx_uint_t                       listed;    /* 1 once listed */
    ngx_uint_t                       nspare;    /* the list's entries */
    ngx_uint_t                       nrooms;
    uint32_t                         room[NGX_HTTP_PREFIX_ROUTE_ROOMS];
                                                /* bytes for a name, the
                                                   least of each class,
                                                   ascending */
    ngx_uint_t                       next[NGX_HTTP_PREFIX_ROUTE_ROOMS];
                                                /* each class's first entry
                                                   not yet passed */
    ngx_uint_t                       reused;    /* records reused */
} ngx_http_prefix_route_reuse_t;

/*
 * Finds the shared record of the peer named "name" (a tree by name,
 * nginx's ngx_str_rbtree) and marks it named by the configuration
 * idx->gen (its "first" lowered to it if older).  Returns NULL when the
 * zone has none.  The caller holds the
 * zone mutex.
 */
ngx_http_prefix_route_peer_t *ngx_http_prefix_route_index_find(
    ngx_http_prefix_route_index_t *idx, ngx_str_t *name);

/*
 * Finds the shared record of the peer named "name"
 * (ngx_http_prefix_route_index_find()), or creates it.  Before it takes a
 * new slot or memory it reuses, oldest first, a record that no
 * configuration that may still run named (sh->running, over the record's
 * "first" to "named": one lingering old worker keeps the records of its
 * own configuration, not of every newer one), else one that every
 * worker's view of "resolve" lists let go (sh->loose) with no request in
 * flight there and no running configuration naming it in a "server" line:
 * its counters start at 0, its epoch moves on, its blocks go in slices as
 * a restarted engine's do, and reuse->reused is incremented.  The caller
 * holds the zone mutex, finds every name it has first (a server that
 * comes back keeps its own record), and passes "reuse" to each call of
 * the hold.  Returns NULL when the zone has no record to reuse and no
 * slot (4,095) or memory left.
 */
ngx_http_prefix_route_peer_t *ngx_http_prefix_route_index_peer(
    ngx_http_prefix_route_index_t *idx, ngx_str_t *name,
    ngx_http_prefix_route_reuse_t *reuse);

/*
 * "resolve": this worker's view holds the record "peer" (idx->holding, a
 * count in peer->views, once), which no other address takes while a view
 * holds it; ..._let_go() lets go those whose bits "keep" lacks (NULL:
 * all), a record no view holds going on sh->loose once no request is in
 * flight there: ..._loosen(), called when a request there ends, lists it
 * then.  The caller holds the zone mutex.  A worker killed never lets
 * go: its records wait for a reload (ngx_http_prefix_route_index_running()).
 */
void ngx_http_prefix_route_index_hold(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer);
void ngx_http_prefix_route_index_let_go(ngx_http_prefix_route_index_t *idx,
    uint64_t *keep);
void ngx_http_prefix_route_index_loosen(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer);

/*
 * A worker process of a configuration whose capacity is "capacity"
 * blocks (0: no limit) starts: a peer above it (a reload lowered it) is
 * marked to lose its excess in slices (index_clear()); a peer at most at
 * it, or any with no limit, ends a drop of its excess under way.  In the
 * workers, not in the master, whose reload may yet fail.  The caller
 * holds the zone mutex.
 */
void ngx_http_prefix_route_index_capacity(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity);

/*
 * Whether the index may be used.  A change of the index that another
 * process left under way (it died holding the zone mutex) is mended in
 * slices of at most idx->mend_steps steps (buckets, entries and holders
 * visited, list links walked: NGX_HTTP_PREFIX_ROUTE_MEND_STEPS if 0),
 * one a call of this function, whichever process makes it (each worker's
 * mend timer, the balancer when the timers are late, a reload that adds
 * a server, the check); until the last, the functions below find nothing
 * in the index and record nothing in it, and take no slice themselves,
 * so requests are routed by load alone at their usual cost.  The caller
 * holds the zone mutex.  Returns 1 when no mend is left, else 0.
 */
ngx_uint_t ngx_http_prefix_route_index_ready(
    ngx_http_prefix_route_index_t *idx);

/*
 * A restarted engine's blocks (prefix_route_probe): from this call on the
 * index believes "peer" holds nothing, match() finds none of its blocks
 * and record() keeps none for it, until its holders are all dropped by
 * ngx_http_prefix_route_index_clear(), as a mend is done, in slices: at
 * once under the mutex, a full 256m zone held every worker 0.4-0.55 s
 * (design.md, "Engine probes"); the capacity learned of its engine is
 * forgotten.  Returns the number of blocks it held (low during a mend,
 * which recounts them).
 */
ngx_uint_t ngx_http_prefix_route_index_wipe(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer);

/*
 * Drops a sixteenth of idx->mend_steps holders at most, 1,024 by default
 * (a removal, its entry often freed too, costs as much as 16 of the
 * mend's steps: a quarter gave slices of up to 17 ms in a 256m zone where
 * the mend's took 6, bench/mend/mend_bench.c), of the servers
 * ngx_http_prefix_route_index_wipe() marked and of those whose trim by a
 * stamp was left in part (ngx_http_prefix_route_index_trim()), their
 * least recently used first, as one change: a death inside it is mended,
 * and the drop goes on after.  Nothing while a mend is left.  The caller
 * holds the zone mutex.  Returns 1 when no drop is left, else 0.
 */
ngx_uint_t ngx_http_prefix_route_index_clear(
    ngx_http_prefix_route_index_t *idx);

/*
 * Longest-prefix lookup of a chain of n block hashes for the peers whose
 * slots "pos" maps to a position (pos[slot] < npeers; "npos" slots are
 * mapped, others are not candidates).  Sets match[i], in blocks, to the
 * number of leading blocks the peer at position i holds.  One hash-table
 * lookup a block plus a walk of the matched blocks that visits holders
 * only where their number changes, at most "budget" of them:
 * peers not met by then keep 0 (counted in sh->capped), and so do those
 * whose engine restarted while their blocks go
 * (ngx_http_prefix_route_index_wipe()).  Returns the number of blocks of
 * the longest indexed prefix; 0, and no match, while a mend is under way.
 */
ngx_uint_t ngx_http_prefix_route_index_match(
    ngx_http_prefix_route_index_t *idx, uint64_t *hash, ngx_uint_t n,
    ngx_uint_t *pos, ngx_uint_t npos, ngx_uint_t npeers, ngx_uint_t budget,
    ngx_uint_t *match);

/*
 * Records that "peer" received the prefix of n blocks, of the tenant
 * "tenant" (a hash of its salts and model, 0: no salt).  On input *held
 * is the number of blocks ngx_http_prefix_route_index_match() found it
 * held, a hint: the index may have changed since; on output, the number
 * it held before this record.  Adds the missing entries and holders, makes
 * all of them the most recently used (in the zone's lists, those it held
 * before protected, the new ones on probation) and stamps their blocks
 * with "stamp" (ms); the peer's capacity is left to
 * ngx_http_prefix_route_index_room(), once the engine has taken the
 * prompt.  A tenant that already has
 * idx->share percent of the protected holders the zone keeps when full
 * (4/5 of sh->room, or of its holders if more) gets no more protected,
 * only keeps those it has (sh->held_back counts the others).  When the
 * zone is full it drops the zone's least recently used holders, on
 * probation first, never this server's holders of this prompt; if that
 * is not enough the prefix is recorded only in part.  A record another
 * worker left under way (it died holding the mutex) is left to
 * ngx_http_prefix_route_index_ready() to mend: until the mend ends,
 * nothing is recorded and *held is 0; nor for a peer whose engine
 * restarted until its blocks are gone.  Never fails.  Returns the
 * number of blocks recorded, from the first.
 */
ngx_uint_t ngx_http_prefix_route_index_record(
    ngx_http_prefix_route_index_t *idx, uint64_t *hash, ngx_uint_t n,
    ngx_uint_t *held, ngx_http_prefix_route_peer_t *peer, uint64_t tenant,
    uint32_t stamp);

/*
 * Makes room for a prompt of n blocks the engine of "peer" has taken (it
 * answered with a 2xx), of which the record kept "recorded": drops the
 * peer's least recently used holders beyond "capacity" blocks (0: no
 * limit), or beyond the prompt's if more, which is kept whole, at most
 * n + 1 of them: a peer far above it ("capacity" lowered by a reload) is
 * marked (peer->over, the capacity or this prompt's blocks if more), and
 * the rest go in slices, as a restarted engine's blocks do.  Not at the
 * record: a prompt the engine rejects takes no room in its cache.
 * Nothing while a mend is under way or for a peer whose engine restarted.
 * The caller holds the zone mutex.
 */
void ngx_http_prefix_route_index_room(ngx_http_prefix_route_index_t *idx,
    ngx_http_prefix_route_peer_t *peer, ngx_uint_t capacity, ngx_uint_t n,
    ngx_uint_t recorded);

/*
 * The number of tenants that have entries in the zone, at most
 * NGX_HTTP_PREFIX_ROUTE_TENANTS - 1 and the overflow slot.  The caller
 * holds the zone mutex.
 */
ngx_uint_t ngx_http_prefix_route_index_tenants(
    ngx_http_prefix_route_index_t *idx);

/*
 * The time, in ms ("stamp" of the last record()), when the prefix ending
 * at the block "hash" was last recorded for any peer.  Returns 1, or 0
 * when the index does not hold that block or a mend is under way.
 */
ngx_uint_t ngx_http_prefix_route_index_stamp(
    ngx_http_prefix_route_index_t *idx, uint64_t hash, uint32_t *stamp);

/*
 * Drops "peer"'s least recently used holders while it holds more than
 * "capacity" blocks (0: no limit), or while the block of its least
 * recently used holder was last recorded before *before (ms, a signed
 * difference of 32-bit stamps: a block not recorded for 24.8 days looks
 * recent; NULL: no such limit); with neither limit, all of them (a
 * restarted engine's go by ngx_http_prefix_route_index_wipe()).  At most
 * a slice of them now (ngx_http_prefix_route_index_clear()'s, 1,024);
 * with "before", the rest in slices (peer->stale), while they are still
 * found: a feedback trim of a full 256m zone's server held every worker
 * 0.4 s at once.  A trim by "before" that drops some learns the capacity
 * of the peer's engine, at once or when its last slice is done: at most
 * the blocks left, at least half the figure before, or of the blocks
 * held before if none (peer->fb.capacity, a figure that only falls
 * here), and only from a block recorded after its last fall.  Returns
 * the number dropped now: 0 while a mend is under way.
 */
ngx_uint_t ngx_http_prefix_route_index_trim(
    ngx_http_prefix_route_index_t *idx, ngx_http_prefix_route_peer_t *peer,
    ngx_uint_t capacity, uint32_t *before);

/*
 * Takes back, after a failed attempt, the deepest first, what "peer"
 * holds of the blocks up to to - 1 of a chain; "stamp" is the attempt's
 * record's (ms).  "reached": 1 when the request was sent (an error or a
 * 5xx after that): only blocks from "from" on, those
 * ngx_http_prefix_route_index_record() added, and of those not one
 * recorded again for this peer since (protected, stamped later: another
 * request there may be answered); 0 when it was not (the connection
 * failed): the peer is unreachable, and every block of the chain goes,
 * the others' requests there failing too.  A block of a longer prefix
 * the peer holds stays: that request's own failure takes it back.
 * Nothing is taken while a mend is under way.
 */
void ngx_http_prefix_route_index_forget(ngx_http_prefix_route_index_t *idx,
    uint64_t *hash, ngx_uint_t from, ngx_uint_t to,
    ngx_http_prefix_route_peer_t *peer, uint32_t stamp, ngx_uint_t reached);

/*
 * Walks the whole index and checks its counts and links: entries and
 * holders against sh's counts, each entry's children and holders, each
 * holder's entry and parent holder, each peer's blocks and LRU queue,
 * each tenant's entries and protected holders, that a parent is more
 * recently used than its child, and the records let go ("resolve"): on
 * sh->loose if said to be, those waiting for room counted, those this
 * worker's view holds with a view counted.  O(n log n) in the holders,
 * which it sorts; for tests and the status endpoint's "check" argument,
 * after mending what a worker killed inside a change left, all the slices
 * left at once (the mutex held, as for the others).  Logs each kind of
 * inconsistency found once, at alert level, and returns the number found
 * (0: consistent), or NGX_ERROR when "pool" has no memory for the walk.
 */
ngx_int_t ngx_http_prefix_route_index_check(
    ngx_http_prefix_route_index_t *idx, ngx_pool_t *pool, ngx_log_t *log);

/*
 * Bytes of zone memory the index's entries and holders take, their slab
 * chunks of 32 bytes (the hash table's buckets, 4 bytes per 128 bytes of
 * zone, are not counted).  The caller holds the zone mutex.
 */
size_t ngx_http_prefix_route_index_bytes(ngx_http_prefix_route_index_t *idx);


#endif /* _NGX_HTTP_PREFIX_ROUTE_INDEX_H_INCLUDED_ */
