
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_prefix_route_index.h"
#include "ngx_http_prefix_route_choice.h"


/*
 * feedback=: off; on: the engines' usage is read, counted and compared
 * with the index; correct: an eviction it shows also trims the index
 */
#define NGX_HTTP_PREFIX_ROUTE_FEEDBACK_OFF      0
#define NGX_HTTP_PREFIX_ROUTE_FEEDBACK_ON       1
#define NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT  2


/*
 * nginx 1.27.3 and later resolve a server's name while they run ("server
 * name resolve" with a "zone"): round robin's lists then change, counted
 * by *peers->config
 */
#if (NGX_HTTP_UPSTREAM_ZONE) && defined(NGX_HTTP_UPSTREAM_MODIFY)
#define NGX_HTTP_PREFIX_ROUTE_RESOLVE  1
#else
#define NGX_HTTP_PREFIX_ROUTE_RESOLVE  0
#endif


/*
 * Both of round robin's lists of an upstream ("peers", the primary one)
 * read-locked, the primary first: "resolve" changes a backup list under
 * its own lock.
 */
#define ngx_http_prefix_route_lists_rlock(peers)                              \
    ngx_http_upstream_rr_peers_rlock(peers);                                  \
    if ((peers)->next) {                                                      \
        ngx_http_upstream_rr_peers_rlock((peers)->next);                      \
    }

#define ngx_http_prefix_route_lists_unlock(peers)                             \
    if ((peers)->next) {                                                      \
        ngx_http_upstream_rr_peers_unlock((peers)->next);                     \
    }                                                                         \
    ngx_http_upstream_rr_peers_unlock(peers)


/*
 * Choices made again when another worker failed the server chosen, or
 * filled its max_conns, before it was taken, and records made again when
 * "resolve" changed the lists meanwhile (each such race is another
 * worker's progress): after that many, round robin chooses, or the view
 * stays as it was.
 */
#define NGX_HTTP_PREFIX_ROUTE_RETAKES       8


/* prefix_route_probe: the engines' metrics pages, ..._probe.c */
typedef struct {
    ngx_str_t                           uri;         /* uri= */
    ngx_msec_t                          interval;    /* ms, 0: no probes */
    ngx_msec_t                          timeout;     /* ms */
    ngx_uint_t                          fails;       /* in a row: down */
    size_t                              max_size;    /* bytes of response */
    ngx_uint_t                          load;        /* load=on: others'
                                                        requests count */
} ngx_http_prefix_route_probe_conf_t;



/* the configuration of one upstream{} that uses prefix_route */
typedef struct {
    ngx_shm_zone_t                     *shm_zone;
    u_char                             *file_name;   /* of the directive, */
    ngx_uint_t                          line;        /* for messages */
    size_t                              resized;     /* bytes: the size of
                                                        the zone of this
                                                        name it replaced,
                                                        0: none */
    ngx_http_prefix_route_index_t       index;
    ngx_cycle_t                        *cycle;       /* its worker_processes */

    size_t                              block;       /* bytes */
    size_t                              max_prefix;  /* bytes */
    ngx_msec_t                          max_parse;   /* ms of a body's
                                                        reading; 0: off */
    size_t                              capacity;    /* bytes per peer */
    ngx_http_prefix_route_choice_t      choice;      /* policy=,
                                                        affinity=,
                                                        max_load=,
                                                        instances= */
    ngx_uint_t                          feedback;    /* feedback=, what the
                                                        engines' usage does */
    ngx_uint_t                          shadow;      /* shadow: another
                                                        balancer chooses */
    ngx_http_upstream_init_pt           shadow_init_upstream; /* its init,
                                                        NULL: round robin */
    ngx_http_upstream_init_peer_pt      shadow_init_peer;
    ngx_http_complex_value_t           *salt;        /* prefix_route_salt */
    ngx_uint_t                          cache_salt;  /* its cache_salt= */
    ngx_uint_t                          max_errors;  /* max_errors=: 5xx
                                                        responses in a row
                                                        that pass a server
                                                        over; 0: off */
    ngx_http_prefix_route_probe_conf_t  probe;       /* prefix_route_probe */

    /*
     * per server of the upstream: [0] primary, [1] backup, in list order;
     * with "resolve", this worker's view of the lists in the upstream's
     * zone, remade when they change (ngx_http_prefix_route_follow())
     */
    ngx_http_upstream_rr_peers_t       *peers;
    ngx_http_upstream_srv_conf_t       *upstream;    /* its peer.data: the
                                                        lists in use */
    ngx_uint_t                          resolve;     /* a server resolves
                                                        its name at run
                                                        time */
    ngx_uint_t                          config;      /* *peers->config of
                                                        the view */
    ngx_uint_t                          release;     /* the view changed:
                                                        records it held
                                                        may be let go */
    ngx_uint_t                          number[2];   /* servers of each
                                                        list in the view */
    ngx_uint_t                          room;        /* positions the view
                                                        has room for */
    void                               *view;        /* ngx_alloc()ed: the
                                                        arrays by position,
                                                        NULL: the pool's */
    void                               *view_pos;    /* and by slot */
    ngx_http_prefix_route_peer_t      **shared[2];   /* records in zone */
    uint64_t                           *id[2];       /* hashes of names */

    /*
     * position in each list by the zone's peer slot, the first line with
     * that address; npeers: none
     */
    ngx_uint_t                         *pos[2];
    ngx_uint_t                          npos;
    ngx_uint_t                          repeats;     /* lines repeating an
                                                        earlier address */

    /*
     * shadow mode: the records of prefix_route's would-be placements, per
     * primary server, and their positions by slot
     */
    ngx_http_prefix_route_peer_t      **vshared;
    ngx_str_t                          *vnames;      /* their records' */
    ngx_str_t                          *roomless;    /* the first server
                                                        without a record */
    ngx_uint_t                         *vpos;

    /* a balancer call's scratch, for the longer list */
    ngx_uint_t                         *held;        /* blocks per peer */
    ngx_uint_t                         *vheld;       /* would-be, shadow */
    ngx_http_prefix_route_candidate_t  *cand;
} ngx_http_prefix_route_srv_conf_t;


extern ngx_module_t  ngx_http_prefix_route_module;


/*
 * The zone's init (ngx_shm_zone_t's "init", ..._records.c): sets up a new
 * zone or takes over the old one, and finds the records of the servers it
 * knows.  Runs in the master on start and reload; "data" is the previous
 * configuration's, or NULL.  Returns NGX_OK, or NGX_ERROR after an emerg
 * naming the zone (too small, made by another build, its mutex cannot be
 * taken over) or nginx's own line of memory refused: the start or reload
 * fails.
 */
ngx_int_t ngx_http_prefix_route_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);

/*
 * Gives the servers the zone did not know their records, once nginx has
 * committed the new cycle (init_module, ..._records.c).  Cannot fail: a
 * server left without a record (no room, a stuck mutex) is balanced by
 * load only, with a warn.
 */
void ngx_http_prefix_route_init_records(
    ngx_http_prefix_route_srv_conf_t *prcf);


/*
 * Whether server i of list b (0 primary, 1 backup) repeats the address of
 * an earlier server line: it shares that line's record, so the status
 * shows it and the probes poll it once, as that line.
 */
ngx_uint_t ngx_http_prefix_route_repeat(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_uint_t b, ngx_uint_t i);


/*
 * Why the server "peer" of record "sp" (NULL: none) is passed over at
 * "now" (s, ngx_time()), as if "down", while another server of its list
 * is usable (..._module.c): 1 while its probes fail (prefix_route_probe's
 * fails=), 2 while it answered max_errors= responses of status 500 to 599
 * in a row, the last within its fail_timeout; 0 when it is not.  Reads
 * the zone without its mutex.
 */
ngx_uint_t ngx_http_prefix_route_passed_over(
    ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peer_t *peer, ngx_http_prefix_route_peer_t *sp,
    time_t now);


/*
 * With "resolve" (nginx 1.27.3+), makes this worker's view of the servers
 * (the arrays above) follow round robin's lists "peers" in the upstream's
 * zone when they changed (..._records.c); the caller holds
 * both lists' locks (ngx_http_prefix_route_lists_rlock()).
 * Returns NGX_OK, or NGX_ERROR when no memory was left for it (the view
 * stays as it was).  Without "resolve" the view is the configuration's.
 */
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
ngx_int_t ngx_http_prefix_route_follow(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers);
#else
#define ngx_http_prefix_route_follow(prcf, peers)  NGX_OK
#endif

/*
 * After ngx_http_prefix_route_follow() made the view again, lets go the
 * records it no longer has (ngx_http_prefix_route_index_let_go()): an
 * address gone gives its record to a new one once every worker's view
 * let it go and no request is in flight there.  The caller holds no
 * lists lock: this takes the zone mutex (docs/design.md, "What workers
 * share").  Nothing when the view did not change.
 */
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
void ngx_http_prefix_route_let_go(ngx_http_prefix_route_srv_conf_t *prcf);
#else
#define ngx_http_prefix_route_let_go(prcf)
#endif


/*
 * The blocks the capacity learned of the engine of record "sp" keeps the
 * index to (..._module.c): with feedback=correct, the figure its
 * evictions showed (ngx_http_prefix_route_index_trim()), at most
 * capacity=; 0 when none is learned, or it was learned in blocks of
 * another size.  The caller holds the zone mutex.
 */
ngx_uint_t ngx_http_prefix_route_learned(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_http_prefix_route_peer_t *sp);


/*
 * Arms this worker's mend timer, which takes a slice of the zone's mend
 * or drop each millisecond while one is left (..._module.c); nothing if
 * none is left or the worker is exiting.
 */
void ngx_http_prefix_route_mend_soon(ngx_http_prefix_route_index_t *idx);


#endif /* _NGX_HTTP_PREFIX_ROUTE_H_INCLUDED_ */
