
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_prefix_route.h"
#include "ngx_http_prefix_route_extract.h"
#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_load.h"
#include "ngx_http_prefix_route_history.h"
#include "ngx_http_prefix_route_status.h"
#include "ngx_http_prefix_route_usage.h"
#include "ngx_http_prefix_route_probe.h"


/*
 * The smallest zone: the slab pool's own pages plus room for the index of
 * the longest prompt (64k / 64-byte blocks x 64 bytes a block).
 */
#define NGX_HTTP_PREFIX_ROUTE_MIN_ZONE      (128 * 1024)

/* the index's 32-bit offsets count 8-byte units: 32 GiB */
#define NGX_HTTP_PREFIX_ROUTE_MAX_ZONE      ((off_t) 32768 * 1024 * 1024)

/*
 * Holders the index lookup visits at most for an upstream of n servers:
 * each server's deepest block, then a margin; a shared prefix held by
 * most servers takes n (docs/design.md, "Bounded work").
 */
#define NGX_HTTP_PREFIX_ROUTE_VISITS(n)     (4 * (n) + 64)

/*
 * Bytes of canonical prompt per engine token until a model's own ratio is
 * learned, x 256: ~4 bytes a token, the figure of OpenAI's tokenizer
 * guide for English text, which the Llama 3 tokenizer matches.
 */
#define NGX_HTTP_PREFIX_ROUTE_RATIO         (4 * 256)

/*
 * A prediction within this many tokens of the engine's figure agrees, or
 * within one index block if that is more: one KV cache block of vLLM.
 */
#define NGX_HTTP_PREFIX_ROUTE_AGREE         16

/*
 * An engine caches whole pages of up to this many tokens (64: FlashMLA's,
 * SGLang's with MLA models); a prediction of at least one page is never
 * halved by the rounding, so only such a one may read as an eviction.
 */
#define NGX_HTTP_PREFIX_ROUTE_PAGE          64

/*
 * a model's prediction offset (tokens x 16) learns from reports within
 * 128 tokens of the prediction (8 engine blocks), 1/16 of the difference,
 * which counts up to 32 tokens: 2 tokens a report at most
 */
#define NGX_HTTP_PREFIX_ROUTE_OFFSET_NEAR   (128 * 16)
#define NGX_HTTP_PREFIX_ROUTE_OFFSET_STEP   (32 * 16)

/*
 * assistant messages of a prompt whose places are kept: the feedback's
 * prediction, and the guess for a conversation another instance placed
 */
#define NGX_HTTP_PREFIX_ROUTE_ANSWERS       64

/* how often each worker looks for dead workers' load, ms */
#define NGX_HTTP_PREFIX_ROUTE_SWEEP         1000
/* s between two notices of a zone too small for "capacity" */
#define NGX_HTTP_PREFIX_ROUTE_FULL_NOTICE   300

/* an HTTP status of success: the engine took the prompt */
#define ngx_http_prefix_route_2xx(status)                                    \
    ((status) >= 200 && (status) <= 299)

/*
 * how long, ns, after a mend's last slice a request takes the next: the
 * mend timers fire each millisecond unless timer_resolution is set
 */
#define NGX_HTTP_PREFIX_ROUTE_MEND_LATE     5000000


/* the first "prefix_route_status", for the check that it has a zone to show */
typedef struct {
    u_char                             *status_file;
    ngx_uint_t                          status_line;  /* 0: none */
} ngx_http_prefix_route_main_conf_t;

typedef struct {
    /* the round robin data first: the balancer falls back to it */
    ngx_http_upstream_rr_peer_data_t    rrp;

    ngx_http_prefix_route_srv_conf_t   *conf;
    ngx_http_request_t                 *request;
    ngx_http_prefix_route_status_e      status;
    ngx_http_prefix_route_bypass_e      bypass;      /* why, if BYPASS */
    ngx_uint_t                          backup;      /* on the backup list */

    size_t                              len;         /* prompt bytes */
    size_t                              match;       /* bytes on the peer */
    size_t                              longest;     /* on any usable one */
    size_t                              predicted;   /* on the one the cost
                                                        model chose; in
                                                        shadow mode not the
                                                        peer used */
    uint64_t                            key;         /* tie-break hash */
    size_t                              key_len;     /* bytes it hashes */
    uint64_t                           *hash;        /* block chain */
    ngx_uint_t                          nblocks;
    uint32_t                           *tokens;      /* extract.tokens, or
                                                        NULL: not token ids */
    size_t                              ntokens;     /* extract.ntokens */

    /* the attempt under way, charged to the peer's queued work */
    ngx_http_prefix_route_peer_t       *sent;
    ngx_uint_t                          cell;        /* load cell charged */
    uint64_t                            uncached;    /* bytes */
    unsigned                            started:1;   /* answering */
    unsigned                            roomed:1;    /* the index made
                                                        room for it */
    ngx_uint_t                          recorded[2]; /* blocks added to the
                                                        index for it */
    uint64_t                            hold;        /* zone mutex held
                                                        by the balancer
                                                        call, ns */

    /* the last attempt, whose response the engine's usage speaks of */
    ngx_http_prefix_route_peer_t       *peer;
    uint32_t                            epoch;       /* peer->epoch then:
                                                        moved on, "resolve"
                                                        gave the record to
                                                        another address */
    ngx_msec_t                          chosen;      /* when, ms */
    uint32_t                            stamp;       /* when its deepest
                                                        matched block was
                                                        last recorded, ms */
    unsigned                            stamped:1;
    unsigned                            whole:1;     /* prompt not cut */
    unsigned                            nontext:1;   /* images, audio,
                                                        files in it */
    unsigned                            foreign_salt:1; /* one the index
                                                        leaves out */
    unsigned                            skip_cache:1; /* the engine asked
                                                        not to read its
                                                        cache for it */
    unsigned                            batch:1;     /* answers counted
                                                        apart */
    unsigned                            read:1;      /* the response: done
                                                        or given up */
    unsigned                            reported:1;  /* cached tokens */
    uint64_t                            cached;      /* tokens reported */
    ngx_http_prefix_route_usage_t      *usage;       /* while it is read */
    ngx_uint_t                          nanswers;
    size_t                              answers[
                                           2 * NGX_HTTP_PREFIX_ROUTE_ANSWERS];
                                                     /* prompt.answers */
    uint64_t                            model;       /* prompt.model */
    uint64_t                            tenant;      /* its salts' part of
                                                        the seed, 0: none */
    /* the request's model, a byte longer than the status keeps: cut */
    u_char                              model_name[
                                       NGX_HTTP_PREFIX_ROUTE_MODEL_NAME + 1];
    size_t                              model_name_len;

    /* shadow mode: the would-be placement's charge and record, as ours */
    ngx_http_prefix_route_peer_t       *vsent;
    ngx_uint_t                          vcell;
    uint64_t                            vuncached;
    ngx_uint_t                          vrecorded[2];

    /* shadow mode: the balancer configured before prefix_route */
    void                               *next_data;
    ngx_event_get_peer_pt               next_get;
    ngx_event_free_peer_pt              next_free;
#if (NGX_HTTP_SSL)
    ngx_event_set_peer_session_pt       next_set_session;
    ngx_event_save_peer_session_pt      next_save_session;
#endif
} ngx_http_prefix_route_ctx_t;


/*
 * With "resolve": 1 while the request's lists are those it began with
 * (else round robin's rule makes it busy: its tried servers were numbered
 * in other lists) and this worker's view follows them (else no memory
 * was left to make it: round robin alone).  The config counter only
 * grows, so a view made for the request's lists is current while they
 * are.  The caller holds the peers lock.
 */
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
#define ngx_http_prefix_route_changed(ctx)                                    \
    ((ctx)->conf->resolve && (ctx)->rrp.config != *(ctx)->rrp.peers->config)
#define ngx_http_prefix_route_current(ctx)                                    \
    (!(ctx)->conf->resolve || (ctx)->conf->config == (ctx)->rrp.config)
#else
#define ngx_http_prefix_route_changed(ctx)  0
#define ngx_http_prefix_route_current(ctx)  1
#endif


static ngx_int_t ngx_http_prefix_route_init_module(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_prefix_route_init_process(ngx_cycle_t *cycle);
static void ngx_http_prefix_route_exit_process(ngx_cycle_t *cycle);
static void ngx_http_prefix_route_sweep(ngx_event_t *ev);
static void ngx_http_prefix_route_zone_full(
    ngx_http_prefix_route_index_t *idx);
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
static void ngx_http_prefix_route_sweep_view(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_refresh(
    ngx_http_prefix_route_srv_conf_t *prcf);
#else
#define ngx_http_prefix_route_refresh(prcf)
#endif
static void ngx_http_prefix_route_mend(ngx_event_t *ev);
static void ngx_http_prefix_route_mend_slice(
    ngx_http_prefix_route_index_t *idx);
static void ngx_http_prefix_route_mend_due(ngx_http_prefix_route_index_t *idx,
    uint64_t late);
static void ngx_http_prefix_route_each(ngx_cycle_t *cycle,
    void (*handler)(ngx_http_prefix_route_index_t *idx));
static ngx_http_prefix_route_srv_conf_t *ngx_http_prefix_route_upstream(
    ngx_cycle_t *cycle, ngx_uint_t *i);
static void ngx_http_prefix_route_resolves(ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_prefix_route_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static void ngx_http_prefix_route_warn_repeats(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us, ngx_http_prefix_route_srv_conf_t *prcf);
static void ngx_http_prefix_route_capacity(
    ngx_http_prefix_route_srv_conf_t *prcf);
static void ngx_http_prefix_route_repeated(
    ngx_http_prefix_route_peer_t **shared, ngx_uint_t *pos, ngx_uint_t *held,
    ngx_uint_t n);
static ngx_int_t ngx_http_prefix_route_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_uint_t ngx_http_prefix_route_body_sent(ngx_http_request_t *r);
static void ngx_http_prefix_route_prepare(ngx_http_request_t *r,
    ngx_http_prefix_route_ctx_t *ctx);
static ngx_int_t ngx_http_prefix_route_get_peer(ngx_peer_connection_t *pc,
    void *data);
static ngx_int_t ngx_http_prefix_route_round_robin(ngx_peer_connection_t *pc,
    ngx_http_prefix_route_ctx_t *ctx);
static void ngx_http_prefix_route_backups(ngx_http_prefix_route_ctx_t *ctx);
static ngx_uint_t ngx_http_prefix_route_usable(
    ngx_http_prefix_route_ctx_t *ctx, ngx_http_upstream_rr_peer_t *peer,
    ngx_uint_t i, ngx_uint_t passed, ngx_http_prefix_route_peer_t *sp,
    time_t now);
static ngx_int_t ngx_http_prefix_route_shadow_get(ngx_peer_connection_t *pc,
    ngx_http_prefix_route_ctx_t *ctx);
#if (NGX_HTTP_SSL)
static ngx_int_t ngx_http_prefix_route_set_session(ngx_peer_connection_t *pc,
    void *data);
static void ngx_http_prefix_route_save_session(ngx_peer_connection_t *pc,
    void *data);
#endif
static void ngx_http_prefix_route_no_server(ngx_http_prefix_route_ctx_t *ctx);
static ngx_uint_t ngx_http_prefix_route_collect(
    ngx_http_prefix_route_ctx_t *ctx, ngx_http_upstream_rr_peers_t *peers,
    time_t now);
static ngx_int_t ngx_http_prefix_route_pick(ngx_http_prefix_route_ctx_t *ctx,
    ngx_uint_t n, ngx_int_t forced, ngx_int_t *would);
static ngx_uint_t ngx_http_prefix_route_take(ngx_peer_connection_t *pc,
    ngx_http_prefix_route_ctx_t *ctx, ngx_uint_t k, time_t now);
static void ngx_http_prefix_route_record(ngx_http_prefix_route_ctx_t *ctx,
    ngx_int_t k, ngx_int_t would);
static ngx_uint_t ngx_http_prefix_route_passed(
    ngx_http_prefix_route_ctx_t *ctx, ngx_uint_t b,
    ngx_http_upstream_rr_peers_t *peers, time_t now);
static void ngx_http_prefix_route_free_peer(ngx_peer_connection_t *pc,
    void *data, ngx_uint_t state);
static void ngx_http_prefix_route_make_room(ngx_http_prefix_route_ctx_t *ctx);
static ngx_uint_t ngx_http_prefix_route_kept(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_http_prefix_route_peer_t *sp);
static ngx_uint_t ngx_http_prefix_route_attempt_status(ngx_http_request_t *r);
static ngx_uint_t ngx_http_prefix_route_erred(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_http_prefix_route_peer_t *sp,
    ngx_uint_t status, time_t now);
static uint64_t ngx_http_prefix_route_clock(void);
static void ngx_http_prefix_route_held(ngx_http_prefix_route_sh_t *sh,
    uint64_t ns);
static void ngx_http_prefix_route_count(void *data);

static ngx_int_t ngx_http_prefix_route_add_variables(ngx_conf_t *cf);
static ngx_int_t ngx_http_prefix_route_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_prefix_route_check(ngx_conf_t *cf);
static ngx_uint_t ngx_http_prefix_route_encoded(ngx_http_upstream_t *u);
static ngx_int_t ngx_http_prefix_route_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static void ngx_http_prefix_route_feedback(ngx_http_request_t *r,
    ngx_http_prefix_route_ctx_t *ctx, ngx_http_prefix_route_tokens_t *t);
static size_t ngx_http_prefix_route_answered(ngx_http_prefix_route_ctx_t *ctx,
    size_t match, ngx_uint_t *answer);
static uint64_t ngx_http_prefix_route_ids(ngx_http_prefix_route_ctx_t *ctx,
    size_t match);
static ngx_uint_t ngx_http_prefix_route_model_before(
    ngx_http_prefix_route_ratio_t *a, ngx_http_prefix_route_ratio_t *b);
static void ngx_http_prefix_route_model_name(u_char *dst, u_char *src,
    size_t len, uint64_t model);

static void *ngx_http_prefix_route_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_prefix_route_create_conf(ngx_conf_t *cf);
static char *ngx_http_prefix_route(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_prefix_route_duplicate(ngx_conf_t *cf,
    ngx_str_t *value, ngx_uint_t i);
static void ngx_http_prefix_route_invalid(ngx_conf_t *cf, ngx_str_t *value);
static ngx_int_t ngx_http_prefix_route_percent(ngx_str_t *value,
    size_t skip);
static char *ngx_http_prefix_route_salt(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_prefix_route_probe(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_prefix_route_status(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);


static ngx_command_t  ngx_http_prefix_route_commands[] = {

    { ngx_string("prefix_route"),
      NGX_HTTP_UPS_CONF|NGX_CONF_ANY,
      ngx_http_prefix_route,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_route_probe"),
      NGX_HTTP_UPS_CONF|NGX_CONF_ANY,
      ngx_http_prefix_route_probe,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_route_salt"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE12,
      ngx_http_prefix_route_salt,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("prefix_route_status"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_prefix_route_status,
      0,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_prefix_route_module_ctx = {
    ngx_http_prefix_route_add_variables,   /* preconfiguration */
    ngx_http_prefix_route_check,           /* postconfiguration */

    ngx_http_prefix_route_create_main_conf, /* create main configuration */
    NULL,                                  /* init main configuration */

    ngx_http_prefix_route_create_conf,     /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_prefix_route_module = {
    NGX_MODULE_V1,
    &ngx_http_prefix_route_module_ctx,     /* module context */
    ngx_http_prefix_route_commands,        /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    ngx_http_prefix_route_init_module,     /* init module */
    ngx_http_prefix_route_init_process,    /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_prefix_route_exit_process,    /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


ngx_str_t  ngx_http_prefix_route_status_names[] = {
    ngx_string("BYPASS"),
    ngx_string("MISS"),
    ngx_string("HIT"),
    ngx_string("SPILL"),
    ngx_string("NONE")
};


ngx_str_t  ngx_http_prefix_route_bypass_names[] = {
    ngx_string("no_body"),
    ngx_string("unbuffered"),
    ngx_string("body_replaced"),
    ngx_string("not_json"),
    ngx_string("no_prompt"),
    ngx_string("parse_budget"),
    ngx_string("max_parse"),
    ngx_string("no_memory"),
    ngx_string("lists_changed")
};


static ngx_http_output_body_filter_pt  ngx_http_next_body_filter;

/*
 * the sweep timer, and the timer that goes on with a mend of the index;
 * their connection only names them in debug logs
 */
static ngx_event_t       ngx_http_prefix_route_sweep_event;
static ngx_event_t       ngx_http_prefix_route_mend_event;
static ngx_connection_t  ngx_http_prefix_route_sweep_conn;

/* a zone's mend has slices left, after the mend timer's last round */
static ngx_uint_t        ngx_http_prefix_route_mending;


enum {
    NGX_HTTP_PREFIX_ROUTE_VAR_STATUS = 0,
    NGX_HTTP_PREFIX_ROUTE_VAR_MATCH,
    NGX_HTTP_PREFIX_ROUTE_VAR_LENGTH,
    NGX_HTTP_PREFIX_ROUTE_VAR_CACHED,
    NGX_HTTP_PREFIX_ROUTE_VAR_LONGEST,
    NGX_HTTP_PREFIX_ROUTE_VAR_PREDICTED,
    NGX_HTTP_PREFIX_ROUTE_VAR_BYPASS
};


static ngx_http_variable_t  ngx_http_prefix_route_vars[] = {

    { ngx_string("prefix_route_status"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_STATUS,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_route_match"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_MATCH,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_route_length"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_LENGTH,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_route_cached_tokens"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_CACHED,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_route_longest"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_LONGEST,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_route_predicted"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_PREDICTED,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("prefix_route_bypass"), NULL,
      ngx_http_prefix_route_variable, NGX_HTTP_PREFIX_ROUTE_VAR_BYPASS,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


/*
 * jansson's allocator, for the whole process: the module is its only user
 * in nginx.  Set once, before the workers start, so that every jansson
 * object is allocated and freed by the same pair.  Logs the build at
 * notice, at start and at each reload.
 */

static ngx_int_t
ngx_http_prefix_route_init_module(ngx_cycle_t *cycle)
{
    ngx_uint_t                         i;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    ngx_http_prefix_route_extract_init(malloc, free);

    /* the configuration is in place: new servers may take records now */

    i = 0;

    while ((prcf = ngx_http_prefix_route_upstream(cycle, &i)) != NULL) {
        ngx_http_prefix_route_init_records(prcf);
    }

    /* a reload keeps the build in memory: the log tells which one runs */

    if (!ngx_test_config) {
        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "prefix_route module %s, build ID %s",
                      NGX_HTTP_PREFIX_ROUTE_VERSION,
                      *ngx_http_prefix_route_build_id()
                      ? ngx_http_prefix_route_build_id()
                      : (u_char *) "none");
    }

    return NGX_OK;
}


/*
 * Each worker looks for dead workers' load on a timer of its own, so that
 * no request pays for the kill() checks, and for an index left to mend
 * (the mend timer, armed then); the timers do not keep a worker that is
 * shutting down.  Each worker also starts its engine probes of
 * the upstreams with prefix_route_probe, of which one worker at a time
 * takes each round (ngx_http_prefix_route_probe.h).
 */

static ngx_int_t
ngx_http_prefix_route_init_process(ngx_cycle_t *cycle)
{
    ngx_uint_t                         i;
    ngx_event_t                       *ev;
    ngx_http_upstream_srv_conf_t     **uscfp;
    ngx_http_upstream_main_conf_t     *umcf;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    if (ngx_process == NGX_PROCESS_HELPER) {
        /* a cache process runs its configuration too: the master sees it */
        ngx_http_prefix_route_each(cycle, ngx_http_prefix_route_index_enter);
        return NGX_OK;
    }

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    ev = &ngx_http_prefix_route_sweep_event;
    ev->handler = ngx_http_prefix_route_sweep;
    ev->log = cycle->log;
    ev->data = &ngx_http_prefix_route_sweep_conn;
    ev->cancelable = 1;

    ngx_http_prefix_route_sweep_conn.fd = (ngx_socket_t) -1;

    ev = &ngx_http_prefix_route_mend_event;
    ev->handler = ngx_http_prefix_route_mend;
    ev->log = cycle->log;
    ev->data = &ngx_http_prefix_route_sweep_conn;
    ev->cancelable = 1;

    ev = &ngx_http_prefix_route_sweep_event;

    /*
     * and once now: a worker that replaces one killed a moment ago finds
     * that one's slot free, instead of charging the shared cell, which a
     * worker's death does not give back
     */

    ngx_http_prefix_route_each(cycle, ngx_http_prefix_route_index_enter);
    ngx_http_prefix_route_each(cycle, ngx_http_prefix_route_load_sweep);
    ngx_http_prefix_route_each(cycle, ngx_http_prefix_route_mend_soon);

    ngx_add_timer(ev, NGX_HTTP_PREFIX_ROUTE_SWEEP);

    umcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_upstream_module);
    if (umcf == NULL) {
        return NGX_OK;
    }

    uscfp = umcf->upstreams.elts;

    for (i = 0; i < umcf->upstreams.nelts; i++) {

        if (uscfp[i]->srv_conf == NULL) {
            continue;
        }

        prcf = ngx_http_conf_upstream_srv_conf(uscfp[i],
                                               ngx_http_prefix_route_module);

        if (prcf->shm_zone != NULL && prcf->index.sh != NULL) {
            ngx_http_prefix_route_capacity(prcf);
        }

        /* one worker tells, once: not again when the master respawns it */

        if (prcf->resized && prcf->index.sh != NULL
            && ngx_atomic_cmp_set(&prcf->index.sh->resize_told, 0, 1))
        {
            ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                          "prefix_route zone \"%V\" is now %uz bytes, was "
                          "%uz: the new configuration starts an empty "
                          "index",
                          &prcf->shm_zone->shm.name,
                          prcf->shm_zone->shm.size, prcf->resized);
        }

        if (prcf->probe.interval && prcf->index.sh != NULL
            && ngx_http_prefix_route_probe_init(cycle, prcf) != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * This configuration's capacity, in its workers: a server above it (a
 * reload lowered it) loses its excess in slices from now, not from its
 * next record; a capacity raised or none ends such a drop.  Not in the
 * master's init_zone(): a reload that then fails (a port in use) would
 * have applied it to the running configuration (helper-40, 2026-12-06).
 */

static void
ngx_http_prefix_route_capacity(ngx_http_prefix_route_srv_conf_t *prcf)
{
    ngx_uint_t                     b, i, capacity;
    ngx_http_upstream_rr_peers_t  *peers;

    capacity = prcf->capacity / prcf->block;

    ngx_shmtx_lock(&prcf->index.shpool->mutex);

    for (b = 0, peers = prcf->peers; peers != NULL; b++, peers = peers->next)
    {
        for (i = 0; i < peers->number; i++) {
            if (prcf->shared[b][i] != NULL) {
                ngx_http_prefix_route_index_capacity(&prcf->index,
                                                     prcf->shared[b][i],
                                                     capacity);
            }
        }
    }

    /* shadow mode's records of would-be placements */

    for (i = 0; i < prcf->peers->number; i++) {
        if (prcf->vshared[i] != NULL) {
            ngx_http_prefix_route_index_capacity(&prcf->index,
                                                 prcf->vshared[i], capacity);
        }
    }

    ngx_shmtx_unlock(&prcf->index.shpool->mutex);

    ngx_http_prefix_route_mend_soon(&prcf->index);
}


static void
ngx_http_prefix_route_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_prefix_route_each(cycle, ngx_http_prefix_route_load_release);
    ngx_http_prefix_route_each(cycle, ngx_http_prefix_route_index_leave);
    ngx_http_prefix_route_extract_exit();
}


static void
ngx_http_prefix_route_sweep(ngx_event_t *ev)
{
    ngx_http_prefix_route_each((ngx_cycle_t *) ngx_cycle,
                               ngx_http_prefix_route_load_sweep);
    ngx_http_prefix_route_each((ngx_cycle_t *) ngx_cycle,
                               ngx_http_prefix_route_history_sample);
    ngx_http_prefix_route_each((ngx_cycle_t *) ngx_cycle,
                               ngx_http_prefix_route_mend_soon);
    ngx_http_prefix_route_each((ngx_cycle_t *) ngx_cycle,
                               ngx_http_prefix_route_zone_full);

    if (!ngx_exiting && !ngx_quit && !ngx_terminate) {
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
        ngx_http_prefix_route_each((ngx_cycle_t *) ngx_cycle,
                                   ngx_http_prefix_route_sweep_view);
#endif
        ngx_add_timer(ev, NGX_HTTP_PREFIX_ROUTE_SWEEP);
    }
}


/*
 * A zone that evicts (block, server) pairs for memory is smaller than
 * "capacity" needs: the index forgets prefixes the engines still hold.
 * One worker says so, at most every NGX_HTTP_PREFIX_ROUTE_FULL_NOTICE
 * seconds, with the size docs/tuning.md ("Zone size") gives for full
 * servers: servers x capacity / block x 64 bytes x 1.04.  Nothing with
 * capacity=0, where the zone is the limit chosen.
 */

static void
ngx_http_prefix_route_zone_full(ngx_http_prefix_route_index_t *idx)
{
    off_t                              need;
    time_t                             now;
    ngx_uint_t                         evicted, servers;
    ngx_http_prefix_route_sh_t        *sh;
    ngx_http_upstream_rr_peers_t      *peers;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = (ngx_http_prefix_route_srv_conf_t *)
               ((u_char *) idx - offsetof(ngx_http_prefix_route_srv_conf_t,
                                          index));
    sh = idx->sh;
    now = ngx_time();

    /* a glance without the mutex: most sweeps find nothing new */

    if (prcf->capacity == 0
        || sh->evictions == sh->noticed
        || now - sh->noticed_at < NGX_HTTP_PREFIX_ROUTE_FULL_NOTICE)
    {
        return;
    }

    ngx_shmtx_lock(&idx->shpool->mutex);

    if (sh->evictions == sh->noticed
        || now - sh->noticed_at < NGX_HTTP_PREFIX_ROUTE_FULL_NOTICE)
    {
        ngx_shmtx_unlock(&idx->shpool->mutex);
        return;
    }

    evicted = sh->evictions - sh->noticed;
    sh->noticed = sh->evictions;
    sh->noticed_at = now;

    ngx_shmtx_unlock(&idx->shpool->mutex);

    servers = 0;

    for (peers = prcf->peers; peers != NULL; peers = peers->next) {
        servers += peers->number;
    }

    need = (off_t) servers * (prcf->capacity / prcf->block) * 64 * 104 / 100;

    ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                  "prefix_route: zone \"%V\" of %uz KiB is full: it "
                  "evicted %ui (block, server) pairs, prefixes the engines "
                  "may still hold; servers (%ui) x capacity (%uz bytes) "
                  "take about %O KiB (docs/tuning.md, \"Zone size\")",
                  &prcf->shm_zone->shm.name, prcf->shm_zone->shm.size / 1024,
                  evicted, servers, prcf->capacity, need / 1024);
}


#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)

/*
 * "resolve": a worker without requests follows the lists too, so that
 * the records of addresses gone are let go within a sweep
 * (ngx_http_prefix_route_let_go()), not kept by an idle view.
 */

static void
ngx_http_prefix_route_sweep_view(ngx_http_prefix_route_index_t *idx)
{
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = (ngx_http_prefix_route_srv_conf_t *)
               ((u_char *) idx - offsetof(ngx_http_prefix_route_srv_conf_t,
                                          index));

    if (prcf->resolve) {
        ngx_http_prefix_route_refresh(prcf);
    }
}


/*
 * This worker's view follows the lists (ngx_http_prefix_route_follow(),
 * under their read lock), then lets go what it no longer has, the lock
 * given back.
 */

static void
ngx_http_prefix_route_refresh(ngx_http_prefix_route_srv_conf_t *prcf)
{
    ngx_http_upstream_rr_peers_t  *peers;

    peers = prcf->upstream->peer.data;

    ngx_http_prefix_route_lists_rlock(peers);
    (void) ngx_http_prefix_route_follow(prcf, peers);
    ngx_http_prefix_route_lists_unlock(peers);

    ngx_http_prefix_route_let_go(prcf);
}

#endif


/*
 * A zone whose index a worker's death left to mend, or with blocks to
 * drop in slices (a restarted engine's, the rest of a feedback trim): the
 * mend timer takes a slice each millisecond,
 * with or without requests, unless another holds the mutex
 * (ngx_http_prefix_route_mend_due()).  "changing" is read without the
 * mutex: a change another worker has under way arms the timer for one
 * round in vain.
 */

void
ngx_http_prefix_route_mend_soon(ngx_http_prefix_route_index_t *idx)
{
    if ((idx->sh->changing || idx->sh->dropping)
        && !ngx_http_prefix_route_mend_event.timer_set
        && !ngx_exiting && !ngx_quit && !ngx_terminate)
    {
        ngx_add_timer(&ngx_http_prefix_route_mend_event, 1);
    }
}


static void
ngx_http_prefix_route_mend(ngx_event_t *ev)
{
    ngx_http_prefix_route_mending = 0;

    ngx_http_prefix_route_each((ngx_cycle_t *) ngx_cycle,
                               ngx_http_prefix_route_mend_slice);

    if (ngx_http_prefix_route_mending
        && !ngx_exiting && !ngx_quit && !ngx_terminate)
    {
        ngx_add_timer(ev, 1);
    }
}


static void
ngx_http_prefix_route_mend_slice(ngx_http_prefix_route_index_t *idx)
{
    if (idx->sh->changing == 0 && idx->sh->dropping == 0) {
        return;
    }

    ngx_http_prefix_route_mending = 1;

    /*
     * the mutex busy (another worker's slice, a request): the next round;
     * a worker's loop does not wait behind the others' slices
     */

    if (!ngx_shmtx_trylock(&idx->shpool->mutex)) {
        return;
    }

    ngx_http_prefix_route_mend_due(idx, 0);

    ngx_shmtx_unlock(&idx->shpool->mutex);
}


/*
 * Takes a slice of the zone's mend (ngx_http_prefix_route_index_ready()),
 * or when none is left of a drop in slices
 * (ngx_http_prefix_route_index_clear()), if none was taken for "late"
 * ns: a timer's at once, a request's only when the timers are late
 * (design.md, "In slices").  The caller holds the zone mutex.
 */

static void
ngx_http_prefix_route_mend_due(ngx_http_prefix_route_index_t *idx,
    uint64_t late)
{
    ngx_http_prefix_route_sh_t  *sh;

    sh = idx->sh;

    /* a signed difference: the clock is each worker's reading */

    if ((sh->changing == 0 && sh->dropping == 0)
        || (int64_t) (ngx_http_prefix_route_clock() - sh->mend_last)
           < (int64_t) late)
    {
        return;
    }

    if (sh->changing) {
        (void) ngx_http_prefix_route_index_ready(idx);

    } else {
        (void) ngx_http_prefix_route_index_clear(idx);
    }

    sh->mend_last = ngx_http_prefix_route_clock();
}


/* calls "handler" with the zone of each prefix_route upstream of "cycle" */

static void
ngx_http_prefix_route_each(ngx_cycle_t *cycle,
    void (*handler)(ngx_http_prefix_route_index_t *idx))
{
    ngx_uint_t                         i;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    i = 0;

    while ((prcf = ngx_http_prefix_route_upstream(cycle, &i)) != NULL) {
        handler(&prcf->index);
    }
}


/*
 * The next prefix_route upstream of "cycle" with its zone set up, from
 * upstream *i on, and *i past it; NULL after the last one.
 */

static ngx_http_prefix_route_srv_conf_t *
ngx_http_prefix_route_upstream(ngx_cycle_t *cycle, ngx_uint_t *i)
{
    ngx_http_upstream_srv_conf_t     **uscfp;
    ngx_http_upstream_main_conf_t     *umcf;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    umcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_upstream_module);
    if (umcf == NULL) {
        return NULL;
    }

    uscfp = umcf->upstreams.elts;

    while (*i < umcf->upstreams.nelts) {

        if (uscfp[*i]->srv_conf == NULL) {
            (*i)++;
            continue;
        }

        prcf = ngx_http_conf_upstream_srv_conf(uscfp[(*i)++],
                                               ngx_http_prefix_route_module);

        if (prcf->shm_zone != NULL && prcf->index.sh != NULL) {
            return prcf;
        }
    }

    return NULL;
}


/*
 * nginx 1.27.3 and later resolve a server's name at run time ("server
 * name resolve;" with a zone): round robin's peer lists then change while
 * nginx runs, and each worker's view of them, and its probes, follow
 * (ngx_http_prefix_route_follow()).  Notes whether the upstream has such
 * a server.
 */

static void
ngx_http_prefix_route_resolves(ngx_http_upstream_srv_conf_t *us)
{
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)

    ngx_uint_t                         i;
    ngx_http_upstream_server_t        *server;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    if (us->servers == NULL) {
        return;
    }

    prcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_prefix_route_module);
    server = us->servers->elts;

    for (i = 0; i < us->servers->nelts; i++) {
        if (server[i].host.len) {
            prcf->resolve = 1;
        }
    }

#endif
}


static ngx_int_t
ngx_http_prefix_route_init_upstream(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_uint_t                         b, i, n;
    ngx_http_upstream_init_pt          init;
    ngx_http_upstream_rr_peer_t       *peer;
    ngx_http_upstream_rr_peers_t      *peers;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_prefix_route_module);

    ngx_http_prefix_route_resolves(us);

    /* shadow mode: the balancer configured before it, round robin if none */

    init = prcf->shadow_init_upstream ? prcf->shadow_init_upstream
                                      : ngx_http_upstream_init_round_robin;

    if (init(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    prcf->shadow_init_peer = us->peer.init;
    us->peer.init = ngx_http_prefix_route_init_peer;

    /*
     * The names of the servers, kept to find their records in the zone
     * once it exists (ngx_http_prefix_route_init_zone()).
     */

    prcf->peers = us->peer.data;
    prcf->upstream = us;

    /* a balancer call's scratch, sized for the longer list */

    n = prcf->peers->number;

    if (prcf->peers->next && prcf->peers->next->number > n) {
        n = prcf->peers->next->number;
    }

    prcf->held = ngx_palloc(cf->pool, n * sizeof(ngx_uint_t));
    prcf->vheld = ngx_palloc(cf->pool, n * sizeof(ngx_uint_t));
    prcf->cand = ngx_palloc(cf->pool,
                            n * sizeof(ngx_http_prefix_route_candidate_t));
    prcf->vshared = ngx_pcalloc(cf->pool, prcf->peers->number
                                    * sizeof(ngx_http_prefix_route_peer_t *));

    if (prcf->held == NULL
        || prcf->vheld == NULL
        || prcf->vshared == NULL
        || prcf->cand == NULL
        || ngx_http_prefix_route_index_scratch(&prcf->index, cf->pool,
                                               prcf->max_prefix / prcf->block)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    for (b = 0, peers = prcf->peers; peers != NULL; b++, peers = peers->next)
    {
        prcf->shared[b] = ngx_pcalloc(cf->pool, peers->number
                                      * sizeof(ngx_http_prefix_route_peer_t *));
        prcf->id[b] = ngx_palloc(cf->pool, peers->number * sizeof(uint64_t));

        if (prcf->shared[b] == NULL || prcf->id[b] == NULL) {
            return NGX_ERROR;
        }

        for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {
            prcf->id[b][i] = ngx_http_prefix_route_hash(peer->name.data,
                                                        peer->name.len, 0);
        }
    }

    ngx_http_prefix_route_warn_repeats(cf, us, prcf);

    return NGX_OK;
}


/*
 * Warns of each server line whose address an earlier line of the upstream
 * names: the lines share one record (reference.md, "Servers are known by
 * name"), which nginx accepts silently and a typo'd port makes likely.
 * Quadratic in the servers, at start only: 4,096 take some 20 ms.
 */

static void
ngx_http_prefix_route_warn_repeats(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us, ngx_http_prefix_route_srv_conf_t *prcf)
{
    ngx_uint_t                     b, c, i, j;
    ngx_http_upstream_rr_peer_t   *peer, *other;
    ngx_http_upstream_rr_peers_t  *peers, *earlier;

    for (b = 0, peers = prcf->peers; peers != NULL; b++, peers = peers->next)
    {
        for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            for (c = 0, earlier = prcf->peers; c <= b;
                 c++, earlier = earlier->next)
            {
                for (other = earlier->peer, j = 0;
                     other != NULL && (c < b || j < i);
                     other = other->next, j++)
                {
                    if (prcf->id[c][j] == prcf->id[b][i]
                        && other->name.len == peer->name.len
                        && ngx_memcmp(other->name.data, peer->name.data,
                                      peer->name.len)
                           == 0)
                    {
                        goto repeated;
                    }
                }
            }

            continue;

        repeated:

            ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                          "server \"%V\" is named by more than one "
                          "\"server\" line of upstream \"%V\" in %s:%ui: "
                          "prefix_route counts them as one server, with "
                          "one index record and one load",
                          &peer->name, &us->host, us->file_name, us->line);
        }
    }
}


/*
 * Server lines with one address share its record, which the index match
 * credits to the first of them (pos): the others hold what it holds.
 */

static void
ngx_http_prefix_route_repeated(ngx_http_prefix_route_peer_t **shared,
    ngx_uint_t *pos, ngx_uint_t *held, ngx_uint_t n)
{
    ngx_uint_t  i;

    for (i = 0; i < n; i++) {
        if (shared[i] != NULL) {
            held[i] = held[pos[shared[i]->slot]];
        }
    }
}


static ngx_int_t
ngx_http_prefix_route_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_pool_cleanup_t           *cln;
    ngx_http_prefix_route_ctx_t  *ctx;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_prefix_route_ctx_t));
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    ctx->conf = ngx_http_conf_upstream_srv_conf(us,
                                                ngx_http_prefix_route_module);
    ctx->request = r;
    ngx_http_set_ctx(r, ctx, ngx_http_prefix_route_module);

    /*
     * the prompt first: round robin's snapshot of the lists, below, is
     * then as close to the choice as its own ("resolve" changes them)
     */

    ngx_http_prefix_route_prepare(r, ctx);

    r->upstream->peer.data = &ctx->rrp;

    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    /* a view that cannot follow (no memory) sends it to round robin */

    if (ctx->conf->resolve) {
        ngx_http_prefix_route_refresh(ctx->conf);
    }

    if (ctx->conf->shadow) {

        /* the configured balancer's own data: it allocates it when NULL */

        r->upstream->peer.data = NULL;

        if (ctx->conf->shadow_init_peer(r, us) != NGX_OK) {
            return NGX_ERROR;
        }

        ctx->next_data = r->upstream->peer.data;
        ctx->next_get = r->upstream->peer.get;
        ctx->next_free = r->upstream->peer.free;

#if (NGX_HTTP_SSL)
        if (r->upstream->peer.set_session) {
            ctx->next_set_session = r->upstream->peer.set_session;
            ctx->next_save_session = r->upstream->peer.save_session;
            r->upstream->peer.set_session = ngx_http_prefix_route_set_session;
            r->upstream->peer.save_session =
                                           ngx_http_prefix_route_save_session;
        }
#endif

        r->upstream->peer.data = ctx;
    }

    r->upstream->peer.get = ngx_http_prefix_route_get_peer;
    r->upstream->peer.free = ngx_http_prefix_route_free_peer;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_http_prefix_route_count;
    cln->data = ctx;

    return NGX_OK;
}


/*
 * Whether the request the upstream sends carries the client's body, the
 * one the prompt is read from: 1 when it holds copies of the body's
 * buffers (proxy's, grpc's and the other modules' own requests), or is
 * its bytes after the header (a script's body, "proxy_set_body
 * $request_body", compared when the body is in memory); 0 otherwise, as
 * with "proxy_set_body" of other text or "proxy_pass_request_body off", whose
 * prompt no engine would see.  Called after the upstream module made its
 * request, which nginx does before the balancer's init.
 */

static ngx_uint_t
ngx_http_prefix_route_body_sent(ngx_http_request_t *r)
{
    size_t        len, n;
    u_char       *p;
    ngx_buf_t    *b, *first, *last;
    ngx_chain_t  *cl;

    first = r->request_body->bufs->buf;
    last = NULL;

    for (cl = r->upstream->request_bufs; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_in_memory(first)
            ? ngx_buf_in_memory(b) && b->pos == first->pos
            : b->in_file && b->file == first->file
              && b->file_pos == first->file_pos)
        {
            return 1;
        }

        last = b;
    }

    len = 0;

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        if (ngx_buf_special(cl->buf)) {
            continue;
        }

        if (!ngx_buf_in_memory(cl->buf)) {
            return 0;
        }

        len += cl->buf->last - cl->buf->pos;
    }

    /* an empty body has no prompt either way */

    if (len == 0) {
        return 1;
    }

    if (last == NULL || !ngx_buf_in_memory(last)
        || (size_t) (last->last - last->pos) < len)
    {
        return 0;
    }

    /*
     * and nothing before them but the request's header (HTTP/1.x: its
     * blank line) or nothing at all (a buffer of its own, HTTP/2):
     * "x$request_body" is another body
     */

    p = last->last - len;

    if (p != last->pos
        && (p - last->pos < 4 || ngx_memcmp(p - 4, CRLF CRLF, 4) != 0))
    {
        return 0;
    }

    for (cl = r->request_body->bufs; cl; cl = cl->next) {
        if (ngx_buf_special(cl->buf)) {
            continue;
        }

        n = cl->buf->last - cl->buf->pos;

        if (ngx_memcmp(p, cl->buf->pos, n) != 0) {
            return 0;
        }

        p += n;
    }

    return 1;
}


/*
 * Reads the request body, builds its canonical prompt and hashes it into
 * blocks.  A request whose prompt cannot be had is left as BYPASS and is
 * balanced by round robin.
 */

static void
ngx_http_prefix_route_prepare(ngx_http_request_t *r,
    ngx_http_prefix_route_ctx_t *ctx)
{
    ngx_int_t                          rc;
    ngx_http_request_body_t           *rb;
    ngx_http_prefix_route_extract_t    x;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = ctx->conf;
    rb = r->request_body;

    if (rb != NULL && (rb->rest > 0 || r->request_body_no_buffering)) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "prefix_route: request body is still being read "
                      "(proxy_request_buffering off?), round robin");
        ctx->bypass = NGX_HTTP_PREFIX_ROUTE_UNBUFFERED;
        return;
    }

    if (rb == NULL || rb->bufs == NULL) {
        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                       "prefix_route: no request body, round robin");
        ctx->bypass = NGX_HTTP_PREFIX_ROUTE_NO_BODY;
        return;
    }

    if (!ngx_http_prefix_route_body_sent(r)) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "prefix_route: the body sent to the upstream is not "
                      "the client's (proxy_set_body? "
                      "proxy_pass_request_body off?), round robin");
        ctx->bypass = NGX_HTTP_PREFIX_ROUTE_BODY_REPLACED;
        return;
    }

    /* a tenant's salt that cannot be had must not mix it with others */

    ngx_str_null(&x.salt);
    x.cache_salt = prcf->cache_salt;
    ctx->bypass = NGX_HTTP_PREFIX_ROUTE_NO_MEMORY;

    if (prcf->salt != NULL
        && ngx_http_complex_value(r, prcf->salt, &x.salt) != NGX_OK)
    {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "prefix_route: no memory for prefix_route_salt's "
                      "value, round robin");
        return;
    }

    /* the prompt and its hashes are built in the process's buffers */

    x.max_prefix = prcf->max_prefix;
    x.max_parse = prcf->max_parse;
    x.block = prcf->block;
    x.buf = NULL;
    x.hash = NULL;
    x.name = ctx->model_name;
    x.name_size = sizeof(ctx->model_name);
    x.answers = ctx->answers;
    x.max_answers = NGX_HTTP_PREFIX_ROUTE_ANSWERS;

    rc = ngx_http_prefix_route_extract(&x, rb->bufs);

    if (x.jansson) {
        (void) ngx_atomic_fetch_add(&prcf->index.sh->jansson_bodies, 1);
    }

    if (rc != NGX_OK) {

        switch (x.error) {

        case NGX_HTTP_PREFIX_ROUTE_EXTRACT_EMPTY:
            ngx_log_debug0(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                           "prefix_route: no request body, round robin");
            ctx->bypass = NGX_HTTP_PREFIX_ROUTE_NO_BODY;
            break;

        case NGX_HTTP_PREFIX_ROUTE_EXTRACT_BUDGET:
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "prefix_route: request body of %O bytes needs "
                          "more than %uz bytes to parse, round robin",
                          x.size, x.budget);
            ctx->bypass = NGX_HTTP_PREFIX_ROUTE_PARSE_BUDGET;
            break;

        case NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME:
            ctx->bypass = NGX_HTTP_PREFIX_ROUTE_MAX_PARSE;
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "prefix_route: request body of %O bytes takes "
                          "%s more than max_parse=%Mms to parse, "
                          "round robin", x.size,
                          x.jansson ? "jansson" : "the fast path",
                          x.max_parse);
            break;

        case NGX_HTTP_PREFIX_ROUTE_EXTRACT_JSON:
            /* the error text quotes the body: only its position is logged */
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "prefix_route: request body is not JSON "
                          "(%s: error %d at byte %d), round robin",
                          ngx_http_prefix_route_extract_reason(x.json_error),
                          x.json_error, x.position);
            ctx->bypass = NGX_HTTP_PREFIX_ROUTE_NOT_JSON;
            break;

        case NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY:
            ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                          "prefix_route: no memory to read a request body "
                          "of %O bytes (max_prefix=%uz), round robin",
                          x.size, x.max_prefix);
            break;

        default: /* NGX_HTTP_PREFIX_ROUTE_EXTRACT_NO_PROMPT */
            ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                          "prefix_route: request body has no prompt, "
                          "round robin");
            ctx->bypass = NGX_HTTP_PREFIX_ROUTE_NO_PROMPT;
        }

        return;
    }

    /* only the hashes are kept: the prompt text is overwritten by the next */

    ctx->hash = ngx_palloc(r->pool, x.nblocks * sizeof(uint64_t));
    if (ctx->hash == NULL) {
        ngx_log_error(NGX_LOG_ERR, r->connection->log, 0,
                      "prefix_route: no memory for the hashes of %uz "
                      "blocks, round robin", x.nblocks);
        return;
    }

    ngx_memcpy(ctx->hash, x.hash, x.nblocks * sizeof(uint64_t));
    ctx->nblocks = x.nblocks;

    /* without memory for their counts, token ids are read back as media */

    if (x.tokens && x.nblocks) {
        ctx->tokens = ngx_palloc(r->pool, x.nblocks * sizeof(uint32_t));

        if (ctx->tokens) {
            ngx_memcpy(ctx->tokens, x.tokens, x.nblocks * sizeof(uint32_t));
            ctx->ntokens = x.ntokens;
        }
    }

    ctx->len = x.len;
    ctx->whole = x.whole;
    ctx->nontext = x.nontext;
    ctx->foreign_salt = x.foreign_salt;
    ctx->skip_cache = x.skip_cache;
    ctx->batch = x.batch;
    ctx->key = x.key;
    ctx->key_len = x.key_len;
    ctx->model = x.model;
    ctx->model_name_len = x.name_len;
    ctx->tenant = x.seed ^ x.model;
    ctx->nanswers = x.nanswers;
    ctx->status = NGX_HTTP_PREFIX_ROUTE_MISS;

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_route: prompt %uz bytes, %ui blocks, "
                   "key %016xL, seed %016xL",
                   ctx->len, ctx->nblocks, ctx->key, x.seed);
}


static ngx_int_t
ngx_http_prefix_route_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_prefix_route_ctx_t  *ctx = data;

    time_t                         now;
    ngx_int_t                      rc, k, would;
    ngx_uint_t                     n, tries;
    ngx_http_upstream_rr_peers_t  *peers;

    if (ctx->next_get) {
        return ngx_http_prefix_route_shadow_get(pc, ctx);
    }

    if (ctx->status == NGX_HTTP_PREFIX_ROUTE_BYPASS) {
        return ngx_http_prefix_route_round_robin(pc, ctx);
    }

    ngx_log_debug1(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "prefix_route: get peer, try: %ui", pc->tries);

    pc->cached = 0;
    pc->connection = NULL;

    now = ngx_time();
    peers = ctx->rrp.peers;

    /*
     * the choice is made with no peers lock held, from what the read
     * lock let collect, and the write lock is held only to take the
     * server, as round robin's own choice holds it: nginx never gives
     * back the lock of a worker that dies (docs/design.md, "nginx
     * versions").  When round robin's rules no longer let the server
     * take the request (another worker's failed it or filled its
     * max_conns meanwhile), the choice is made again from what they say
     * now; after NGX_HTTP_PREFIX_ROUTE_RETAKES such races, round robin
     * chooses, as it would for a request the module cannot read
     */

    for (tries = 0; /* void */ ; tries++) {

        ngx_http_upstream_rr_peers_rlock(peers);

        if (ngx_http_prefix_route_changed(ctx)) {
            ngx_http_prefix_route_no_server(ctx);
            goto busy;
        }

        if (!ngx_http_prefix_route_current(ctx)
            || tries == NGX_HTTP_PREFIX_ROUTE_RETAKES)
        {
            ngx_http_upstream_rr_peers_unlock(peers);
            ngx_http_prefix_route_no_server(ctx);
            ctx->status = NGX_HTTP_PREFIX_ROUTE_BYPASS;
            ctx->bypass = NGX_HTTP_PREFIX_ROUTE_LISTS_CHANGED;
            return ngx_http_upstream_get_round_robin_peer(pc, &ctx->rrp);
        }

        n = ngx_http_prefix_route_collect(ctx, peers, now);

        ngx_http_upstream_rr_peers_unlock(peers);

        k = ngx_http_prefix_route_pick(ctx, n, -1, &would);

        ngx_http_upstream_rr_peers_wlock(peers);

        if (ngx_http_prefix_route_changed(ctx)) {
            ngx_http_prefix_route_no_server(ctx);
            goto busy;
        }

        if (k == NGX_ERROR) {
            goto failed;
        }

        if (ngx_http_prefix_route_take(pc, ctx, k, now)) {
            break;
        }

        ngx_http_upstream_rr_peers_unlock(peers);
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    ngx_http_prefix_route_record(ctx, k, would);

    ngx_log_debug4(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                   "prefix_route: peer %V, %V, match %uz of %uz bytes",
                   pc->name,
                   &ngx_http_prefix_route_status_names[ctx->status],
                   ctx->match, ctx->len);

    return NGX_OK;

failed:

    if (peers->next) {

        ngx_log_debug0(NGX_LOG_DEBUG_HTTP, pc->log, 0,
                       "prefix_route: backup servers");

        ngx_http_prefix_route_backups(ctx);

        ngx_http_upstream_rr_peers_unlock(peers);

        rc = ngx_http_prefix_route_get_peer(pc, ctx);

        if (rc != NGX_BUSY) {
            return rc;
        }

        ngx_http_upstream_rr_peers_wlock(peers);
    }

busy:

    ngx_http_upstream_rr_peers_unlock(peers);

    pc->name = peers->name;

    return NGX_BUSY;
}


/*
 * Takes the server at position "k" of the request's list for it, as
 * round robin takes the server it chose (tried, checked, its connections,
 * with "resolve" a reference), unless round robin's rules no longer let
 * it take the request: another worker's request may have failed it or
 * filled its max_conns since ngx_http_prefix_route_collect() read it.
 * Returns 1 when taken, 0 when not.  The caller holds the peers write
 * lock, and the list is the one collected (not changed since).
 */

static ngx_uint_t
ngx_http_prefix_route_take(ngx_peer_connection_t *pc,
    ngx_http_prefix_route_ctx_t *ctx, ngx_uint_t k, time_t now)
{
    uintptr_t                      m;
    ngx_uint_t                     i, n;
    ngx_http_upstream_rr_peer_t   *best;
    ngx_http_upstream_rr_peers_t  *peers;

    peers = ctx->rrp.peers;

    for (best = peers->peer, i = 0; i < k; i++) {
        best = best->next;
    }

    if (!ngx_http_prefix_route_usable(ctx, best, k, 0, NULL, now)) {
        return 0;
    }

    ctx->rrp.current = best;

    n = k / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << k % (8 * sizeof(uintptr_t));

    ctx->rrp.tried[n] |= m;

    if (now - best->checked > best->fail_timeout) {
        best->checked = now;
    }

    pc->sockaddr = best->sockaddr;
    pc->socklen = best->socklen;
    pc->name = &best->name;

    best->conns++;

#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
    /* round robin's free unrefs it: a server resolved away waits for it */
    ngx_http_upstream_rr_peer_ref(peers, best);
#endif

    return 1;
}


/*
 * BYPASS: round robin, passing over the servers the probes or their
 * errors do (ngx_http_prefix_route_passed_over()), marked as tried.
 * Round robin turns to the backups itself and clears the marks there, so
 * the turn is taken here first when no primary is usable.
 */

static ngx_int_t
ngx_http_prefix_route_round_robin(ngx_peer_connection_t *pc,
    ngx_http_prefix_route_ctx_t *ctx)
{
    time_t                             now;
    uintptr_t                          m;
    ngx_uint_t                         i, n, passed, usable;
    ngx_http_prefix_route_peer_t      *sp;
    ngx_http_upstream_rr_peer_t       *peer;
    ngx_http_upstream_rr_peers_t      *peers;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = ctx->conf;
    peers = ctx->rrp.peers;

    if (prcf->probe.interval == 0 && prcf->max_errors == 0) {
        return ngx_http_upstream_get_round_robin_peer(pc, &ctx->rrp);
    }

    /*
     * round robin turns to the backups on its own too, when another
     * worker fails the last primary after the look below: the list in
     * use tells which, the backups' having no next
     */

    ctx->backup = (peers->next == NULL && prcf->peers->next != NULL);

    now = ngx_time();

    ngx_http_upstream_rr_peers_rlock(peers);

    /* round robin itself is busy with lists changed since */

    if (ngx_http_prefix_route_changed(ctx)
        || !ngx_http_prefix_route_current(ctx))
    {
        ngx_http_upstream_rr_peers_unlock(peers);
        return ngx_http_upstream_get_round_robin_peer(pc, &ctx->rrp);
    }

    passed = ngx_http_prefix_route_passed(ctx, ctx->backup, peers, now);

    if (!passed && peers->next == NULL) {
        ngx_http_upstream_rr_peers_unlock(peers);
        return ngx_http_upstream_get_round_robin_peer(pc, &ctx->rrp);
    }

    usable = 0;

    for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {
        sp = prcf->shared[ctx->backup][i];

        if (passed && ngx_http_prefix_route_passed_over(prcf, peer, sp, now)) {
            n = i / (8 * sizeof(uintptr_t));
            m = (uintptr_t) 1 << i % (8 * sizeof(uintptr_t));
            ctx->rrp.tried[n] |= m;

        } else if (ngx_http_prefix_route_usable(ctx, peer, i, 0, sp, now)) {
            usable = 1;
        }
    }

    ngx_http_upstream_rr_peers_unlock(peers);

    if (!usable && peers->next) {
        ngx_http_prefix_route_backups(ctx);
        return ngx_http_prefix_route_round_robin(pc, ctx);
    }

    return ngx_http_upstream_get_round_robin_peer(pc, &ctx->rrp);
}


/* turns to the backup servers, none of them tried yet, as round robin */

static void
ngx_http_prefix_route_backups(ngx_http_prefix_route_ctx_t *ctx)
{
    ngx_uint_t  i, n;

    ctx->rrp.peers = ctx->rrp.peers->next;
    ctx->backup = 1;

    n = (ctx->rrp.peers->number + (8 * sizeof(uintptr_t) - 1))
            / (8 * sizeof(uintptr_t));

    for (i = 0; i < n; i++) {
        ctx->rrp.tried[i] = 0;
    }
}


/*
 * Whether round robin's rules let the server "peer" at position "i" of
 * the current list take the request (not tried, not down, not failed
 * within fail_timeout, under max_conns), and, when some are passed over
 * ("passed"), its record "sp" is not.  The caller holds the peers lock.
 */

static ngx_uint_t
ngx_http_prefix_route_usable(ngx_http_prefix_route_ctx_t *ctx,
    ngx_http_upstream_rr_peer_t *peer, ngx_uint_t i, ngx_uint_t passed,
    ngx_http_prefix_route_peer_t *sp, time_t now)
{
    uintptr_t   m;
    ngx_uint_t  n;

    n = i / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << i % (8 * sizeof(uintptr_t));

    /* a single server is never failed, as round robin has it */

    return !(ctx->rrp.tried[n] & m)
           && !peer->down
           && (ctx->rrp.peers->single
               || !(peer->max_fails
                    && peer->fails >= peer->max_fails
                    && now - peer->checked <= peer->fail_timeout))
           && !(peer->max_conns && peer->conns >= peer->max_conns)
           && !(passed
                && ngx_http_prefix_route_passed_over(ctx->conf, peer, sp,
                                                     now));
}


/*
 * Shadow mode: the balancer configured before prefix_route chooses; the
 * server it chose, found by the name it set (the round robin family sets
 * pc->name to its peer's), is charged and recorded as if prefix_route had
 * chosen it, and what the cost model would have chosen is noted.
 */

static ngx_int_t
ngx_http_prefix_route_shadow_get(ngx_peer_connection_t *pc,
    ngx_http_prefix_route_ctx_t *ctx)
{
    ngx_int_t                      rc, k, would;
    ngx_uint_t                     b, i, n;
    ngx_http_upstream_rr_peer_t   *peer;
    ngx_http_upstream_rr_peers_t  *peers;

    rc = ctx->next_get(pc, ctx->next_data);

    if (ctx->status == NGX_HTTP_PREFIX_ROUTE_BYPASS) {
        return rc;
    }

    if (rc != NGX_OK && rc != NGX_DONE) {
        ngx_http_prefix_route_no_server(ctx);
        return rc;
    }

    for (b = 0, peers = ctx->rrp.peers; peers != NULL; b++, peers = peers->next)
    {
        ngx_http_upstream_rr_peers_rlock(peers);

        /* lists changed meanwhile: the choice is not followed */

        if (ngx_http_prefix_route_changed(ctx)
            || !ngx_http_prefix_route_current(ctx))
        {
            ngx_http_upstream_rr_peers_unlock(peers);
            return rc;
        }

        for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            if (pc->name != &peer->name) {
                continue;
            }

            ctx->backup = b;
            n = ngx_http_prefix_route_collect(ctx, peers, ngx_time());

            ngx_http_upstream_rr_peers_unlock(peers);

            k = ngx_http_prefix_route_pick(ctx, n, i, &would);

            /* a retry's choice passes over the servers tried, as ours */

            if (b == 0) {
                ctx->rrp.tried[i / (8 * sizeof(uintptr_t))] |=
                                (uintptr_t) 1 << i % (8 * sizeof(uintptr_t));
            }

            ngx_http_prefix_route_record(ctx, k, would);

            return rc;
        }

        ngx_http_upstream_rr_peers_unlock(peers);
    }

    return rc;
}


#if (NGX_HTTP_SSL)

static ngx_int_t
ngx_http_prefix_route_set_session(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_prefix_route_ctx_t  *ctx = data;

    return ctx->next_set_session(pc, ctx->next_data);
}


static void
ngx_http_prefix_route_save_session(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_prefix_route_ctx_t  *ctx = data;

    ctx->next_save_session(pc, ctx->next_data);
}

#endif


/*
 * An attempt that finds no usable server (502 "no live upstreams", or a
 * retry with none left) is NONE, not a MISS: an outage must not read as
 * prompts the fleet did not hold.  What an earlier attempt of the request
 * matched is not counted or logged as its outcome.
 */

static void
ngx_http_prefix_route_no_server(ngx_http_prefix_route_ctx_t *ctx)
{
    ctx->status = NGX_HTTP_PREFIX_ROUTE_NONE;
    ctx->match = 0;
    ctx->longest = 0;
    ctx->predicted = 0;
    ctx->peer = NULL;
}


/*
 * Reads what round robin's rules say of each server of "peers" (the
 * primary or the backup list) for ngx_http_prefix_route_pick(): whether
 * it may take the request, its weight and rank, and for a server without
 * a record in the zone, round robin's count of its connections as its
 * load.  Returns the number of servers.  The caller holds the peers lock;
 * the read lock is enough, nothing is written.
 */

static ngx_uint_t
ngx_http_prefix_route_collect(ngx_http_prefix_route_ctx_t *ctx,
    ngx_http_upstream_rr_peers_t *peers, time_t now)
{
    uint64_t                           *id;
    ngx_uint_t                          i, b, passed;
    ngx_http_upstream_rr_peer_t        *peer;
    ngx_http_prefix_route_peer_t      **shared;
    ngx_http_prefix_route_srv_conf_t   *prcf;
    ngx_http_prefix_route_candidate_t  *c;

    prcf = ctx->conf;
    b = ctx->backup;
    shared = prcf->shared[b];
    id = prcf->id[b];

    passed = ngx_http_prefix_route_passed(ctx, b, peers, now);

    for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {

        c = &prcf->cand[i];

        c->usable = ngx_http_prefix_route_usable(ctx, peer, i, passed,
                                                 shared[i], now);

        c->weight = peer->weight;
        c->rank = ngx_http_prefix_route_hash((u_char *) &id[i],
                                             sizeof(uint64_t), ctx->key);

        if (shared[i] == NULL) {

            /*
             * a server without a record in the zone: round robin's count
             * of its connections (this worker's, or all workers' with
             * the upstream's own "zone") is its load, so that max_load
             * bounds it as least_conn would
             */

            c->queued = 0;
            c->outstanding = 0;
            c->inflight = peer->conns;
            c->decoding = 0;
            c->cached = 0;
            c->others = 0;
            c->others_running = 0;
        }
    }

    return peers->number;
}


/*
 * Chooses by the cost model among the "n" servers that
 * ngx_http_prefix_route_collect() read, from the index's match and a
 * snapshot of their load taken under the zone mutex.  In shadow mode the
 * configured balancer has chosen the server at position "forced" (-1:
 * none): the cost model's choice is only noted (ctx->predicted) and
 * returned in "would" for ngx_http_prefix_route_record().  Returns the
 * position of the server chosen (the forced one in shadow mode), or
 * NGX_ERROR when none is usable.  Neither the peers lock nor the zone
 * mutex is needed by the caller: the index and the loads are in the
 * zone, the servers' view is the worker's own (docs/design.md, "What
 * workers share").
 */

static ngx_int_t
ngx_http_prefix_route_pick(ngx_http_prefix_route_ctx_t *ctx, ngx_uint_t n,
    ngx_int_t forced, ngx_int_t *would)
{
    size_t                              longest, first, expect;
    uint64_t                            t, hold;
    ngx_int_t                           k, vk;
    ngx_uint_t                          i, b, virt, mending, pending;
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_route_peer_t      **shared, *sp, *lp;
    ngx_http_prefix_route_index_t      *idx;
    ngx_http_prefix_route_srv_conf_t   *prcf;
    ngx_http_prefix_route_candidate_t  *c;

    prcf = ctx->conf;
    idx = &prcf->index;
    b = ctx->backup;
    shared = prcf->shared[b];
    shpool = idx->shpool;

    ngx_http_prefix_route_no_server(ctx);

    /* match, and a snapshot of the servers' load */

    ngx_shmtx_lock(&shpool->mutex);
    t = ngx_http_prefix_route_clock();

    (void) ngx_http_prefix_route_index_match(idx, ctx->hash, ctx->nblocks,
                                   prcf->pos[b], prcf->npos, n,
                                   NGX_HTTP_PREFIX_ROUTE_VISITS(n),
                                   prcf->held);

    /*
     * held, the mutex says a mend is left: the timer goes on with it, or
     * this request when the timers are late (timer_resolution)
     */

    mending = (idx->sh->changing != 0);
    pending = (mending || idx->sh->dropping);

    if (pending) {
        ngx_http_prefix_route_mend_due(idx, NGX_HTTP_PREFIX_ROUTE_MEND_LATE);
    }

    /*
     * shadow mode: what prefix_route would hold had it routed, in the
     * records of its would-be placements (docs/design.md, "Shadow mode")
     */

    virt = (forced >= 0 && b == 0 && prcf->vpos != NULL);

    if (virt) {
        (void) ngx_http_prefix_route_index_match(idx, ctx->hash,
                                   ctx->nblocks, prcf->vpos, prcf->npos,
                                   n,
                                   NGX_HTTP_PREFIX_ROUTE_VISITS(n),
                                   prcf->vheld);
    }

    for (i = 0; i < n; i++) {
        sp = shared[i];
        c = &prcf->cand[i];

        if (sp == NULL) {
            continue;
        }

        /* shadow mode: the load of the would-be placements */

        lp = (virt && prcf->vshared[i] != NULL) ? prcf->vshared[i] : sp;

        c->queued = (double) lp->load.queued;
        c->outstanding = (double) lp->load.bytes;
        c->inflight = lp->load.inflight;
        c->decoding = lp->load.inflight > lp->load.waiting
                      ? lp->load.inflight - lp->load.waiting : 0;
        /*
         * a mend recounts the blocks, a restarted engine's go: none
         * is trusted until then
         */
        c->cached = (mending || lp->wiped) ? 0 : lp->blocks;

        /* others' requests there, by the engine's last fresh gauges */

        (void) ngx_http_prefix_route_probe_foreign(prcf, sp, &c->others,
                                                   &c->others_running);
    }

    hold = ngx_http_prefix_route_clock() - t;
    ngx_shmtx_unlock(&shpool->mutex);

    if (pending) {
        ngx_http_prefix_route_mend_soon(idx);
    }

    if (prcf->repeats) {
        ngx_http_prefix_route_repeated(shared, prcf->pos[b], prcf->held,
                                       n);

        if (virt) {
            ngx_http_prefix_route_repeated(prcf->vshared, prcf->vpos,
                                           prcf->vheld, n);
        }
    }

    /* choose */

    longest = 0;

    for (i = 0; i < n; i++) {
        c = &prcf->cand[i];

        c->match = prcf->held[i] * prcf->block;

        if (c->usable && c->match > longest) {
            longest = c->match;
        }
    }

    /* the choice is the would-be one's, with the would-be matches */

    ctx->longest = longest;

    if (virt) {
        longest = 0;

        for (i = 0; i < n; i++) {
            c = &prcf->cand[i];
            c->match = prcf->vheld[i] * prcf->block;

            if (c->usable && c->match > longest) {
                longest = c->match;
            }
        }
    }

    /*
     * a prompt no usable server is known to hold even up to the end of
     * its first turn: if another nginx instance placed it, the rank of
     * that turn chose the top rank, which then holds it up to its last
     * answer; without answers only several instances guess, and the
     * whole prompt (docs/design.md, "Several nginx instances")
     */

    first = ctx->nanswers ? ctx->answers[0] : ctx->key_len;
    expect = 0;

    if (longest < first / prcf->block * prcf->block) {

        if (ctx->nanswers) {
            expect = ctx->answers[2 * ctx->nanswers - 1];

        } else if (prcf->choice.instances > 1) {
            expect = ctx->len;
        }

        expect = expect / prcf->block * prcf->block;
    }

    k = ngx_http_prefix_route_choose(prcf->cand, n, ctx->len,
                                     expect, &prcf->choice);

    ctx->predicted = (k == NGX_ERROR) ? 0 : prcf->cand[k].match;
    vk = k;

    if (forced >= 0) {
        k = forced;
        prcf->cand[k].match = prcf->held[k] * prcf->block;
        longest = ctx->longest;
    }

    if (k == NGX_ERROR) {
        ngx_http_prefix_route_held(idx->sh, hold);
        return NGX_ERROR;
    }

    c = &prcf->cand[k];

    ctx->match = c->match;

    if (c->match < longest) {
        ctx->status = NGX_HTTP_PREFIX_ROUTE_SPILL;

    } else if (c->match > 0) {
        ctx->status = NGX_HTTP_PREFIX_ROUTE_HIT;

    } else {
        ctx->status = NGX_HTTP_PREFIX_ROUTE_MISS;
    }

    ctx->hold = hold;
    *would = (virt && vk != NGX_ERROR) ? vk : NGX_ERROR;

    return k;
}


/*
 * Charges the request's prefill work to the server at position "k" that
 * ngx_http_prefix_route_pick() chose and get_peer took, and records the
 * prefix as held by it (in shadow mode also by the would-be one at
 * position "would", NGX_ERROR: none); counts the zone mutex's hold time
 * of the balancer call.  The caller holds no peers lock: a record of a
 * long new prompt is the longest work under the zone mutex (about 1.6 us
 * a block on a full zone, bench/results/lock.md), and nginx gives back
 * the zone mutex of a worker that dies, not the peers lock
 * (docs/design.md, "nginx versions").
 */

static void
ngx_http_prefix_route_record(ngx_http_prefix_route_ctx_t *ctx, ngx_int_t k,
    ngx_int_t would)
{
    uint64_t                            t;
    ngx_uint_t                          held;
    ngx_slab_pool_t                    *shpool;
    ngx_http_prefix_route_peer_t       *sp, *lp;
    ngx_http_prefix_route_index_t      *idx;
    ngx_http_prefix_route_srv_conf_t   *prcf;
    ngx_http_prefix_route_candidate_t  *c;

    prcf = ctx->conf;
    idx = &prcf->index;
    shpool = idx->shpool;
    sp = prcf->shared[ctx->backup][k];
    c = &prcf->cand[k];

    if (sp == NULL) {
        ngx_http_prefix_route_held(idx->sh, ctx->hold);
        return;
    }

    ctx->sent = sp;
    ctx->peer = sp;
    ctx->chosen = ngx_current_msec;
    ctx->uncached = ctx->len - c->match;
    ctx->started = 0;
    ctx->roomed = 0;
    held = prcf->held[k];

    lp = (would != NGX_ERROR) ? prcf->vshared[would] : NULL;

    ngx_shmtx_lock(&shpool->mutex);
    t = ngx_http_prefix_route_clock();

    ctx->epoch = sp->epoch;
    ctx->cell = ngx_http_prefix_route_load_charge(idx, sp,
                          ctx->uncached + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST,
                          ctx->len);
    sp->requests++;

    if (c->match) {
        sp->hits++;
    }

    /* how old the prefix is, before this record makes it new */

    ctx->stamped = held
                   && prcf->feedback == NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT
                   && ngx_http_prefix_route_index_stamp(idx,
                                                        ctx->hash[held - 1],
                                                        &ctx->stamp);

    /* capacity: the engine makes room when it takes the prompt */

    ctx->recorded[1] = ngx_http_prefix_route_index_record(idx, ctx->hash,
                                         ctx->nblocks, &held, sp,
                                         ctx->tenant, (uint32_t) ctx->chosen);
    ctx->recorded[0] = held;

    if (lp != NULL) {
        held = prcf->vheld[would];

        ctx->vsent = lp;
        ctx->vuncached = ctx->len - held * prcf->block;
        ctx->vcell = ngx_http_prefix_route_load_charge(idx, lp,
                              ctx->vuncached
                              + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST,
                              ctx->len);

        ctx->vrecorded[1] = ngx_http_prefix_route_index_record(idx,
                                         ctx->hash, ctx->nblocks, &held, lp,
                                         ctx->tenant, (uint32_t) ctx->chosen);
        ctx->vrecorded[0] = held;
    }

    ctx->hold += ngx_http_prefix_route_clock() - t;
    ngx_shmtx_unlock(&shpool->mutex);

    ngx_http_prefix_route_held(idx->sh, ctx->hold);
}


/*
 * The number of servers of list "b" ("peers") that round robin's rules
 * let take the request and that are passed over at "now" (s), or 0 when
 * all of those are: probes that fail everywhere, or errors from every
 * server, more likely come from the probes' path or the requests than
 * from the whole fleet being down, and a server that round robin's rules
 * already take out (down, failed, at max_conns, tried) must not leave
 * the request none.  The caller holds the peers lock; the zone is read
 * without its mutex: a server's state may change in the meantime.
 */

static ngx_uint_t
ngx_http_prefix_route_passed(ngx_http_prefix_route_ctx_t *ctx,
    ngx_uint_t b, ngx_http_upstream_rr_peers_t *peers, time_t now)
{
    ngx_uint_t                         i, n, passed;
    ngx_http_prefix_route_peer_t      *sp;
    ngx_http_upstream_rr_peer_t       *peer;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = ctx->conf;

    if (prcf->probe.interval == 0 && prcf->max_errors == 0) {
        return 0;
    }

    n = 0;
    passed = 0;

    for (peer = peers->peer, i = 0; peer != NULL; peer = peer->next, i++) {
        sp = prcf->shared[b][i];

        if (ngx_http_prefix_route_usable(ctx, peer, i, 0, sp, now)) {
            n++;
            passed += (ngx_http_prefix_route_passed_over(prcf, peer, sp, now)
                       != 0);
        }
    }

    return passed == n ? 0 : passed;
}


ngx_uint_t
ngx_http_prefix_route_passed_over(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peer_t *peer, ngx_http_prefix_route_peer_t *sp,
    time_t now)
{
    if (sp == NULL) {
        return 0;
    }

    if (prcf->probe.interval && sp->probe.down) {
        return 1;
    }

    if (prcf->max_errors
        && sp->errors.run >= prcf->max_errors
        && now - sp->errors.last <= peer->fail_timeout)
    {
        return 2;
    }

    return 0;
}


static void
ngx_http_prefix_route_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_prefix_route_ctx_t  *ctx = data;

    time_t                         now;
    ngx_uint_t                     status, erred;
    ngx_http_prefix_route_index_t *idx;
    ngx_http_prefix_route_peer_t  *sp, *vp;

    sp = ctx->sent;
    vp = ctx->vsent;

    if (sp != NULL) {
        idx = &ctx->conf->index;
        status = ngx_http_prefix_route_attempt_status(ctx->request);
        now = ngx_time();

        ngx_shmtx_lock(&idx->shpool->mutex);

        erred = ngx_http_prefix_route_erred(ctx->conf, sp, status, now);

        /*
         * a 2xx without a body byte, or a request the client gave up on
         * once it was sent (the engine has the prompt, and may keep what
         * it computed): either way the engine made room (helper-48)
         */

        if (!(state & NGX_PEER_FAILED)
            && (ngx_http_prefix_route_2xx(status)
                || (status == 0 && ctx->request->upstream->request_sent)))
        {
            ngx_http_prefix_route_make_room(ctx);
        }

        ngx_http_prefix_route_load_discharge(sp, ctx->cell,
                              ctx->uncached
                              + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST,
                              ctx->len, ctx->started);

        /* "resolve": a server gone gives its record up once this ends */

        ngx_http_prefix_route_index_loosen(idx, sp);

        if (vp != NULL) {
            ngx_http_prefix_route_load_discharge(vp, ctx->vcell,
                              ctx->vuncached
                              + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST,
                              ctx->len, ctx->started);
            ngx_http_prefix_route_index_loosen(idx, vp);
            ctx->vsent = NULL;
        }

        if ((state & NGX_PEER_FAILED)
            || (status != 0 && !ngx_http_prefix_route_2xx(status)))
        {
            /*
             * the peer may never have received the prompt, or refused it
             * (an unknown path or model, a body it could not read, an
             * error of its own): its cache holds nothing of it.  One not
             * connected to is down or restarting: what the index had it
             * hold of the prompt goes too.  request_sent is the attempt
             * before's when a connect fails at once (a unix socket), and
             * then nginx has no connection (helper-66).  A status read
             * is this attempt's: nginx 1.30 has closed the connection of
             * a response read whole before it frees the peer
             */
            ngx_http_prefix_route_index_forget(idx, ctx->hash,
                                  ctx->recorded[0], ctx->recorded[1], sp,
                                  (uint32_t) ctx->chosen,
                                  ctx->request->upstream->request_sent
                                  && (pc->connection != NULL
                                      || status != 0));

            /*
             * shadow mode: so is the would-be placement's, or a retry's
             * prediction would match what the failed attempt recorded
             */

            if (vp != NULL) {
                ngx_http_prefix_route_index_forget(idx, ctx->hash,
                                                   ctx->vrecorded[0],
                                                   ctx->vrecorded[1], vp,
                                                   (uint32_t) ctx->chosen,
                                                   1);
            }
        }

        ngx_shmtx_unlock(&idx->shpool->mutex);

        ngx_http_prefix_route_mend_soon(idx);

        ctx->sent = NULL;

        if (erred == 1) {
            ngx_log_error(NGX_LOG_WARN, pc->log, 0,
                          "prefix_route: server %V answered %ui responses "
                          "of status 5xx in a row, the last %ui: passed "
                          "over for its fail_timeout while another server "
                          "is usable",
                          pc->name, ctx->conf->max_errors, status);

        } else if (erred == 2) {
            ngx_log_error(NGX_LOG_NOTICE, pc->log, 0,
                          "prefix_route: server %V answered again, "
                          "status %ui", pc->name, status);
        }
    }

    if (ctx->next_free) {
        ctx->next_free(pc, ctx->next_data, state);
        return;
    }

    ngx_http_upstream_free_round_robin_peer(pc, &ctx->rrp, state);
}


/*
 * The status of the response to the attempt under way, 0 when it has none
 * (no connection, a timeout): its own upstream state's, which nginx zeroes
 * at each connect, and not headers_in's, which a connection that fails at
 * once leaves to the attempt before (helper-47).
 */

static ngx_uint_t
ngx_http_prefix_route_attempt_status(ngx_http_request_t *r)
{
    ngx_http_upstream_t  *u;

    u = r->upstream;

    return (u != NULL && u->state != NULL) ? u->state->status : 0;
}


/*
 * The engine of the attempt under way has taken its prompt (it answered
 * with a 2xx: a streamed answer's first byte comes after its prefill) and
 * made room for it in its KV cache, so the index makes room too, down to
 * capacity (the would-be server too, in shadow mode), once an attempt.
 * Not at the record: a prompt the engine rejects (vLLM's 400 for one
 * longer than max_model_len) takes no room, and forgetting its own blocks
 * could not bring back others'.  The caller holds the zone mutex.
 */

static void
ngx_http_prefix_route_make_room(ngx_http_prefix_route_ctx_t *ctx)
{
    ngx_http_prefix_route_index_t     *idx;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    if (ctx->roomed) {
        return;
    }

    ctx->roomed = 1;

    prcf = ctx->conf;
    idx = &prcf->index;

    ngx_http_prefix_route_index_room(idx, ctx->sent,
                                     ngx_http_prefix_route_kept(prcf,
                                                                ctx->sent),
                                     ctx->nblocks, ctx->recorded[1]);

    if (ctx->vsent != NULL) {
        ngx_http_prefix_route_index_room(idx, ctx->vsent,
                                         ngx_http_prefix_route_kept(prcf,
                                                                ctx->vsent),
                                         ctx->nblocks, ctx->vrecorded[1]);
    }
}


/*
 * The blocks the index keeps for the server of record "sp" (0: no limit):
 * capacity=, or the capacity learned of its engine if any.
 */

static ngx_uint_t
ngx_http_prefix_route_kept(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_prefix_route_peer_t *sp)
{
    ngx_uint_t  learned;

    learned = ngx_http_prefix_route_learned(prcf, sp);

    return learned ? learned : prcf->capacity / prcf->block;
}


ngx_uint_t
ngx_http_prefix_route_learned(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_prefix_route_peer_t *sp)
{
    ngx_uint_t  capacity;

    if (prcf->feedback != NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT
        || sp->fb.capacity == 0
        || sp->fb.block != prcf->block)
    {
        return 0;
    }

    capacity = prcf->capacity / prcf->block;

    return capacity ? ngx_min(sp->fb.capacity, capacity) : sp->fb.capacity;
}


/*
 * Counts the response of status "status" (0: none, a failure of nginx's
 * own, which max_fails counts) of the server of record "sp" at "now" (s):
 * 500 to 599 adds one to its errors in a row, any other status ends the
 * run.  A server that answers errors at once looks idle and empty to the
 * cost model, which would send it more prompts than round robin; so after
 * max_errors in a row it is passed over for its fail_timeout, the last
 * error counted from (as Envoy's outlier detection ejects a host after 5
 * consecutive 5xx, its consecutive_5xx default).  Returns 1 when this
 * response makes the run max_errors long, 2 when it ends a run that long,
 * else 0.  The caller holds the zone mutex.
 */

static ngx_uint_t
ngx_http_prefix_route_erred(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_prefix_route_peer_t *sp, ngx_uint_t status, time_t now)
{
    ngx_uint_t  run;

    run = sp->errors.run;

    if (status >= 500 && status <= 599) {
        sp->errors.total++;

        /* off: no run, which a reload turning it on would find long */

        if (prcf->max_errors == 0) {
            return 0;
        }

        sp->errors.run++;
        sp->errors.last = now;

        return (sp->errors.run == prcf->max_errors);
    }

    if (status == 0) {
        return 0;
    }

    sp->errors.run = 0;

    return (prcf->max_errors && run >= prcf->max_errors) ? 2 : 0;
}


/*
 * A monotonic clock in ns, for the zone mutex hold time (from its
 * acquisition to its release, the wait for it not included), and the log2
 * bucket of a hold time counted in the zone (lock_hold_ns_log2 in the
 * status).
 */

static uint64_t
ngx_http_prefix_route_clock(void)
{
    struct timespec  ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);

    return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}


static void
ngx_http_prefix_route_held(ngx_http_prefix_route_sh_t *sh, uint64_t ns)
{
    ngx_uint_t  k;

    (void) ngx_atomic_fetch_add(&sh->lock_ns_sum, ns);

    for (k = 0; ns > 1 && k < 31; k++) {
        ns >>= 1;
    }

    (void) ngx_atomic_fetch_add(&sh->lock_ns[k], 1);
}


/*
 * Counts the request once it is over, with its last status, in the
 * counters of the zone (the status endpoint shows them).
 */

static void
ngx_http_prefix_route_count(void *data)
{
    ngx_http_prefix_route_ctx_t  *ctx = data;

    ngx_http_prefix_route_sh_t  *sh;

    sh = ctx->conf->index.sh;

    (void) ngx_atomic_fetch_add(&sh->requests[ctx->status], 1);

    if (ctx->status == NGX_HTTP_PREFIX_ROUTE_BYPASS) {
        (void) ngx_atomic_fetch_add(&sh->bypassed[ctx->bypass], 1);
    }

    /*
     * a request no server took has no place in the hit rate, nor one
     * round robin took after its prompt was read ("lists_changed")
     */

    if (ctx->len
        && ctx->status != NGX_HTTP_PREFIX_ROUTE_NONE
        && ctx->status != NGX_HTTP_PREFIX_ROUTE_BYPASS)
    {
        (void) ngx_atomic_fetch_add(&sh->prompt_bytes, ctx->len);
        (void) ngx_atomic_fetch_add(&sh->matched_bytes, ctx->match);
        (void) ngx_atomic_fetch_add(&sh->longest_bytes, ctx->longest);
        (void) ngx_atomic_fetch_add(&sh->predicted_bytes, ctx->predicted);
        (void) ngx_atomic_fetch_add(&sh->reusable, ctx->longest ? 1 : 0);
    }
}


static ngx_int_t
ngx_http_prefix_route_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_prefix_route_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


/*
 * $prefix_route_status: BYPASS, MISS, HIT, SPILL or NONE;
 * $prefix_route_match: bytes of the prompt the chosen peer held;
 * $prefix_route_length: bytes of canonical prompt considered;
 * $prefix_route_cached_tokens: the prompt tokens the engine reported it
 * had cached, known at the response's end (log phase);
 * $prefix_route_bypass: why the request is BYPASS, a bypass_names[] word.
 * None is found in a request that did not go through a prefix_route
 * upstream; $prefix_route_cached_tokens is not in a response that reported
 * no cached tokens, nor $prefix_route_bypass in a request not BYPASS.
 */

static ngx_int_t
ngx_http_prefix_route_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char                       *p;
    ngx_str_t                    *s;
    ngx_http_prefix_route_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_prefix_route_module);

    if (ctx == NULL
        || (data == NGX_HTTP_PREFIX_ROUTE_VAR_CACHED && !ctx->reported)
        || (data == NGX_HTTP_PREFIX_ROUTE_VAR_BYPASS
            && ctx->status != NGX_HTTP_PREFIX_ROUTE_BYPASS))
    {
        v->not_found = 1;
        return NGX_OK;
    }

    v->valid = 1;
    v->no_cacheable = 1;
    v->not_found = 0;

    if (data == NGX_HTTP_PREFIX_ROUTE_VAR_STATUS) {
        s = &ngx_http_prefix_route_status_names[ctx->status];
        v->len = s->len;
        v->data = s->data;
        return NGX_OK;
    }

    if (data == NGX_HTTP_PREFIX_ROUTE_VAR_BYPASS) {
        s = &ngx_http_prefix_route_bypass_names[ctx->bypass];
        v->len = s->len;
        v->data = s->data;
        return NGX_OK;
    }

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    switch (data) {

    case NGX_HTTP_PREFIX_ROUTE_VAR_CACHED:
        v->len = ngx_sprintf(p, "%uL", ctx->cached) - p;
        break;

    case NGX_HTTP_PREFIX_ROUTE_VAR_MATCH:
        v->len = ngx_sprintf(p, "%uz", ctx->match) - p;
        break;

    case NGX_HTTP_PREFIX_ROUTE_VAR_LONGEST:
        v->len = ngx_sprintf(p, "%uz", ctx->longest) - p;
        break;

    case NGX_HTTP_PREFIX_ROUTE_VAR_PREDICTED:
        v->len = ngx_sprintf(p, "%uz", ctx->predicted) - p;
        break;

    default: /* NGX_HTTP_PREFIX_ROUTE_VAR_LENGTH */
        v->len = ngx_sprintf(p, "%uz", ctx->len) - p;
    }

    v->data = p;

    return NGX_OK;
}


/*
 * A balancing directive after prefix_route ("least_conn", "hash"...) takes
 * the upstream over, as it does from any other method; nginx only warns,
 * which would leave the zone unused and the variables empty without a
 * word, so here it is an error.  Upstreams are initialised by now: the
 * balancer's init has run if prefix_route is still in charge.  Then the
 * body filter goes into the chain.
 */

static ngx_int_t
ngx_http_prefix_route_check(ngx_conf_t *cf)
{
    ngx_uint_t                          i, zones;
    ngx_http_upstream_srv_conf_t      **uscfp;
    ngx_http_upstream_main_conf_t      *umcf;
    ngx_http_prefix_route_srv_conf_t   *prcf;
    ngx_http_prefix_route_main_conf_t  *pmcf;

    umcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_upstream_module);
    uscfp = umcf->upstreams.elts;
    zones = 0;

    for (i = 0; i < umcf->upstreams.nelts; i++) {

        if (uscfp[i]->srv_conf == NULL) {
            /* an implicit upstream of proxy_pass with an address */
            continue;
        }

        prcf = ngx_http_conf_upstream_srv_conf(uscfp[i],
                                               ngx_http_prefix_route_module);

        zones += (prcf->shm_zone != NULL);

        if (prcf->salt && prcf->shm_zone == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "\"prefix_route_salt\" needs \"prefix_route\" "
                          "in upstream \"%V\" in %s:%ui",
                          &uscfp[i]->host, uscfp[i]->file_name,
                          uscfp[i]->line);
            return NGX_ERROR;
        }

        if (prcf->probe.interval && prcf->shm_zone == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "\"prefix_route_probe\" needs \"prefix_route\" "
                          "in upstream \"%V\" in %s:%ui",
                          &uscfp[i]->host, uscfp[i]->file_name,
                          uscfp[i]->line);
            return NGX_ERROR;
        }

        /* keepalive wraps the balancer and still calls its init */

        /* nginx's warn "load balancing method redefined" names its line */

        if (prcf->shm_zone != NULL && prcf->peers == NULL) {
            ngx_log_error(NGX_LOG_EMERG, cf->log, 0,
                          "another load balancing method replaces "
                          "\"prefix_route\" in upstream \"%V\" in %s:%ui: "
                          "it follows \"prefix_route\" in %s:%ui; %s",
                          &uscfp[i]->host, uscfp[i]->file_name,
                          uscfp[i]->line, prcf->file_name, prcf->line,
                          prcf->shadow
                          ? "a method left in charge in shadow mode goes "
                            "before \"prefix_route\""
                          : "remove it, or put it before \"prefix_route\" "
                            "with \"shadow\" to leave it in charge");
            return NGX_ERROR;
        }
    }

    /* a page of no upstream: a typo'd or forgotten "prefix_route" line */

    pmcf = ngx_http_conf_get_module_main_conf(cf,
                                              ngx_http_prefix_route_module);

    if (zones == 0 && pmcf->status_line) {
        ngx_log_error(NGX_LOG_WARN, cf->log, 0,
                      "\"prefix_route_status\" in %s:%ui has nothing to "
                      "show: no upstream has \"prefix_route\"",
                      pmcf->status_file, pmcf->status_line);
    }

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_prefix_route_body_filter;

    return NGX_OK;
}


/*
 * Whether the engine's response has a Content-Encoding (gzip, br...)
 * other than "identity", read from the engine's own header lines:
 * headers_out's is the client's, which nginx's gzip sets though it
 * compresses after the body filter, and headers_in.content_encoding left
 * nginx in 1.23.0.  Returns 1 or 0.
 */

static ngx_uint_t
ngx_http_prefix_route_encoded(ngx_http_upstream_t *u)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    for (part = &u->headers_in.headers.part; part != NULL; part = part->next) {
        h = part->elts;

        for (i = 0; i < part->nelts; i++) {
            if (h[i].hash != 0
                && h[i].value.len != 0
                && h[i].key.len == sizeof("Content-Encoding") - 1
                && ngx_strncasecmp(h[i].key.data,
                                   (u_char *) "Content-Encoding",
                                   sizeof("Content-Encoding") - 1)
                   == 0
                && (h[i].value.len != sizeof("identity") - 1
                    || ngx_strncasecmp(h[i].value.data,
                                       (u_char *) "identity",
                                       sizeof("identity") - 1)
                       != 0))
            {
                return 1;
            }
        }
    }

    return 0;
}


/*
 * A prefix_route response as it passes.  Its first bytes end the
 * request's prefill: a streamed answer begins when the engine's prefill of
 * the prompt is over, so the request's prefill work leaves its server's
 * queue here, and it counts as decoding until it ends (a response that is
 * not streamed begins at its end).  With feedback on, the bytes of a 2xx
 * response that is not compressed go by the usage reader, which keeps its
 * head and tail; at the last buffer the engine's usage, if any, is
 * compared with the index (ngx_http_prefix_route_feedback()).  The bytes
 * sent to the client are neither changed nor held back.
 */

static ngx_int_t
ngx_http_prefix_route_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_int_t                       rc;
    ngx_uint_t                      last, status;
    ngx_chain_t                    *cl;
    ngx_http_prefix_route_ctx_t    *ctx;
    ngx_http_prefix_route_index_t  *idx;
    ngx_http_prefix_route_tokens_t  t;

    ctx = ngx_http_get_module_ctx(r, ngx_http_prefix_route_module);

    if (ctx == NULL || ctx->peer == NULL) {
        return ngx_http_next_body_filter(r, in);
    }

    if (ctx->sent != NULL && !ctx->started) {

        for (cl = in; cl != NULL; cl = cl->next) {

            if (ngx_buf_size(cl->buf) > 0) {
                idx = &ctx->conf->index;

                ngx_shmtx_lock(&idx->shpool->mutex);
                ngx_http_prefix_route_load_start(ctx->sent, ctx->cell,
                                    ctx->uncached
                                    + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST);

                status = ngx_http_prefix_route_attempt_status(r);

                if (ngx_http_prefix_route_2xx(status)) {
                    ngx_http_prefix_route_make_room(ctx);
                }

                if (ctx->vsent != NULL) {
                    ngx_http_prefix_route_load_start(ctx->vsent, ctx->vcell,
                                    ctx->vuncached
                                    + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST);
                }

                ngx_shmtx_unlock(&idx->shpool->mutex);

                /* room above a lowered capacity left its excess to slices */

                ngx_http_prefix_route_mend_soon(idx);

                ctx->started = 1;
                break;
            }
        }
    }

    if (ctx->read) {
        return ngx_http_next_body_filter(r, in);
    }

    if (ctx->usage == NULL) {
        ctx->read = 1;

        /*
         * a batch's answers each count one prompt or sequence (SGLang's
         * and llama.cpp's native APIs), not the prompt the index matched
         */

        if (!ctx->conf->feedback
            || ctx->batch
            || r->upstream == NULL
            || !ngx_http_prefix_route_2xx(r->headers_out.status)
            || ngx_http_prefix_route_encoded(r->upstream))
        {
            return ngx_http_next_body_filter(r, in);
        }

        ctx->usage = ngx_palloc(r->pool,
                                sizeof(ngx_http_prefix_route_usage_t));
        if (ctx->usage == NULL) {
            return ngx_http_next_body_filter(r, in);
        }

        ngx_http_prefix_route_usage_init(ctx->usage);

        ctx->read = 0;
    }

    last = 0;

    for (cl = in; cl != NULL; cl = cl->next) {

        if (cl->buf->in_file && !ngx_buf_in_memory(cl->buf)) {
            /* buffered to a temporary file: its tail is not at hand */
            ctx->read = 1;
            return ngx_http_next_body_filter(r, in);
        }

        if (ngx_buf_in_memory(cl->buf)) {
            ngx_http_prefix_route_usage_feed(ctx->usage, cl->buf->pos,
                                             cl->buf->last - cl->buf->pos);
        }

        if (cl->buf->last_buf
            || (cl->buf->last_in_chain && r != r->main))
        {
            last = 1;
        }
    }

    if (last) {
        ctx->read = 1;

        rc = ngx_http_prefix_route_usage_parse(ctx->usage, &t);

        if (rc != NGX_OK && ctx->tokens && ctx->whole) {
            /* token ids, whose count is known: return_logprob's meta_info */
            rc = ngx_http_prefix_route_usage_cut(ctx->usage, ctx->ntokens,
                                                 &t);
        }

        if (rc == NGX_OK) {
            ngx_http_prefix_route_feedback(r, ctx, &t);
        }
    }

    return ngx_http_next_body_filter(r, in);
}


/*
 * What the engine said of the prompt it was sent, against what the index
 * predicted (docs/design.md, "Feedback from the engines").
 *
 * The canonical prompt's bytes per engine token turn the predicted
 * match, in bytes, into tokens: the prompt's own ratio when it was seen
 * whole and is all text, else the mean learned for the model from such
 * prompts.  A prompt of token ids alone needs no ratio: the ids in its
 * match are the engine's tokens, counted when it was hashed.  The engine
 * also holds the answer it generated last turn, which the index never
 * saw: the prediction counts the assistant message that begins where the
 * match ends.  A prediction within one block of the reported cached
 * tokens agrees: the engine's (16 tokens) or the index's, whichever is
 * more tokens (64 bytes are 40 tokens of a text at 1.6 bytes a token).
 *
 * With feedback=correct, when the engine held less than half the
 * prediction, it evicted the prefix; as it evicts the least recently
 * used first, everything the index believes the server holds that was
 * recorded before that prefix is gone too, and those holders go.  A
 * prefix recorded while this request was in flight (two requests with a
 * new prefix at once) proves nothing and is left alone (the index's
 * stamps are the low 32 bits of the ms clock, compared by signed
 * difference: the clock passes 2^32 ms after 49.7 days).  Nor does a
 * prediction made with another prompt's ratio (the model's), one of a
 * prompt with images or audio (their tokens do not follow their bytes;
 * a prompt of token ids alone is the engine's tokens, counted exactly),
 * or one of a prompt whose cache_salt the engine keys by and the index
 * does not (prefix_route_salt ... cache_salt=off): each would let one
 * client's request drop every client's blocks; nor a prediction of less
 * than an engine page, which the page's rounding may halve.  The answer
 * to a request that asked the engine not to read its cache is not
 * compared at all.  What the index has left of the server after such a
 * trim bounds its engine's capacity, which the index then keeps to
 * (ngx_http_prefix_route_index_trim()).  When the engine held more
 * (another nginx instance or a direct client warmed it), there is
 * nothing to drop: the prompt was recorded whole when the server was
 * chosen; more than twice the prediction, the capacity learned was too
 * little, and grows.
 */

static void
ngx_http_prefix_route_feedback(ngx_http_request_t *r,
    ngx_http_prefix_route_ctx_t *ctx, ngx_http_prefix_route_tokens_t *t)
{
    size_t                             m;
    size_t                             wm;
    int64_t                            d, o;
    uint64_t                           sample, bpt, predicted, would, tol;
    uint64_t                           grow, limit;
    ngx_uint_t                         i, k, a, wa, dropped, stale;
    ngx_msec_t                         now;
    ngx_http_prefix_route_sh_t        *sh;
    ngx_http_prefix_route_peer_t      *sp;
    ngx_http_prefix_route_ratio_t     *ratio;
    ngx_http_prefix_route_index_t     *idx;
    ngx_http_prefix_route_feedback_t  *fb;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    prcf = ctx->conf;
    idx = &prcf->index;
    sh = idx->sh;
    sp = ctx->peer;
    now = ngx_current_msec;
    predicted = 0;
    dropped = 0;
    stale = 0;

    ctx->reported = t->has_cached;
    ctx->cached = t->cached;

    /*
     * bytes x 256 a token, from a prompt of text seen whole; 1/256 to
     * 2^24 (an image is a few bytes of URL or many of base64, and
     * hundreds of the engine's tokens)
     */

    sample = 0;

    if (ctx->whole && !ctx->nontext && t->prompt > 0) {
        sample = ngx_max(1, ngx_min((uint64_t) ctx->len * 256 / t->prompt,
                                    (uint64_t) 1 << 24));
    }

    /* the matches as the engine holds them, last turn's answer included */

    m = ngx_http_prefix_route_answered(ctx, ctx->match, &a);
    wm = ngx_http_prefix_route_answered(ctx, ctx->predicted, &wa);

    ngx_shmtx_lock(&idx->shpool->mutex);

    ratio = NULL;
    k = 0;

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_MODELS; i++) {

        if (sh->ratios[i].model == ctx->model) {
            ratio = &sh->ratios[i];
            break;
        }

        if (ngx_http_prefix_route_model_before(&sh->ratios[i],
                                               &sh->ratios[k]))
        {
            k = i;
        }
    }

    if (ratio != NULL) {
        ratio->used = ngx_current_msec;
    }

    if (ratio == NULL && sample) {
        ratio = &sh->ratios[k];
        ratio->model = ctx->model;
        ratio->used = ngx_current_msec;
        ratio->samples = 0;
        ratio->offset[0] = 0;
        ratio->offset[1] = 0;
        ngx_http_prefix_route_model_name(ratio->name, ctx->model_name,
                                         ctx->model_name_len, ctx->model);
    }

    if (sample) {
        ratio->ratio = ngx_http_prefix_route_usage_ratio(ratio->ratio,
                                                         ratio->samples,
                                                         sample);
        ratio->samples++;
    }

    /*
     * an engine asked not to read its cache for this prompt (its prompt
     * logprobs, say) reports what it computed, not what it holds
     */

    if (!t->has_cached || ctx->skip_cache) {
        goto done;
    }

    if (ctx->tokens) {
        /*
         * a prompt of token ids: the engine's tokens are the ids, counted
         * in the matched blocks; tolerated, the coarser of the engine's
         * block and the index's, in tokens
         */
        predicted = ngx_min(ngx_http_prefix_route_ids(ctx, m), t->prompt);
        would = ngx_min(ngx_http_prefix_route_ids(ctx, wm), t->prompt);
        tol = ngx_max(NGX_HTTP_PREFIX_ROUTE_AGREE,
                      ctx->tokens[ctx->nblocks - 1] / ctx->nblocks + 1);

        /* its bytes x 256 an id, to turn tokens into blocks, as above */
        bpt = ngx_min((uint64_t) ctx->nblocks * prcf->block * 256
                      / ngx_max(ctx->tokens[ctx->nblocks - 1], 1),
                      (uint64_t) 1 << 24);

    } else {
        bpt = (ratio && ratio->samples) ? ratio->ratio
                                        : NGX_HTTP_PREFIX_ROUTE_RATIO;

        if (sample) {
            /*
             * a prompt seen whole has its own ratio, which follows its
             * mix of text and template better than the model's mean
             */
            bpt = sample;
        }

        predicted = (uint64_t) m * 256 / bpt;

        /*
         * the cost model's choice, in shadow mode not the server used: its
         * prediction in the same tokens, for the upstream's predicted hit
         * rate
         */

        would = (uint64_t) wm * 256 / bpt;

        if (would && ratio) {
            o = (int64_t) would - ratio->offset[wa] / 16;
            would = (o > 0) ? ngx_min((uint64_t) o, t->prompt) : 0;
        }

        /*
         * the engine's tokens do not follow the canonical bytes evenly
         * (the chat template's tokens around each message, the engine's
         * blocks): what the prediction ran over the reports, a moving
         * average of the reports within 8 engine blocks of it, each
         * moving it by 2 tokens at most: an eviction or another
         * instance's prefix, hundreds of tokens off, does not; apart for
         * a match that ends with an answer, whose end the template marks
         * differently
         */

        if (predicted && ratio) {
            d = ((int64_t) predicted - (int64_t) t->cached) * 16
                - ratio->offset[a];

            o = (int64_t) predicted - ratio->offset[a] / 16;
            predicted = (o > 0) ? ngx_min((uint64_t) o, t->prompt) : 0;

            if (d >= -NGX_HTTP_PREFIX_ROUTE_OFFSET_NEAR
                && d <= NGX_HTTP_PREFIX_ROUTE_OFFSET_NEAR)
            {
                d = ngx_max(-NGX_HTTP_PREFIX_ROUTE_OFFSET_STEP,
                            ngx_min(d, NGX_HTTP_PREFIX_ROUTE_OFFSET_STEP));
                ratio->offset[a] += (int32_t) (d / 16);
            }
        }

        /* the coarser of the engine's block and the index's, in tokens */
        tol = ngx_max(NGX_HTTP_PREFIX_ROUTE_AGREE,
                      (uint64_t) prcf->block * 256 / bpt);
    }

    sh->predicted_tokens += would;
    sh->reported_tokens += t->prompt;

    /*
     * the request's load was given back before its last byte: with
     * "resolve" its server may have left the lists, and its record have
     * gone to another address meanwhile
     */

    if (sp->epoch != ctx->epoch) {
        goto done;
    }

    fb = &sp->fb;
    fb->responses++;
    fb->prompt += t->prompt;
    fb->cached += t->cached;
    fb->predicted += predicted;

    if (t->cached + tol >= predicted && t->cached <= predicted + tol) {
        fb->agreed++;

    } else if (t->cached < predicted) {
        fb->under++;

        /* a restarted engine's blocks all go already */

        if (prcf->feedback == NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT
            && !sp->wiped
            && ctx->stamped
            && (sample || ctx->tokens)
            && !ctx->foreign_salt
            && predicted >= NGX_HTTP_PREFIX_ROUTE_PAGE
            && t->cached * 2 < predicted
            && (int32_t) ((uint32_t) ctx->chosen - ctx->stamp)
               > (ngx_msec_int_t) (now - ctx->chosen))
        {
            /* a capacity learned in blocks of another size (a reload) */

            if (fb->block != prcf->block) {
                fb->capacity = 0;
                fb->learning = 0;
                fb->block = (uint32_t) prcf->block;
            }

            dropped = ngx_http_prefix_route_index_trim(idx, sp, 0,
                                                       &ctx->stamp);
            fb->dropped += dropped;
            stale = sp->stale;
        }

    } else {
        fb->over++;

        /*
         * the engine held more than twice the prediction: the index had
         * forgotten blocks of this prompt that it still held, and the
         * capacity learned is too little by as much, at most the blocks
         * of the prompt the index did not count (an engine's answers,
         * which the index never saw, and what lies beyond max_prefix
         * are not the index's to count)
         */

        if (prcf->feedback == NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT
            && !sp->wiped
            && ngx_http_prefix_route_learned(prcf, sp)
            && t->cached > predicted * 2)
        {
            grow = ngx_min((t->cached - predicted) * bpt / 256 / prcf->block,
                           ctx->nblocks - ngx_min(m / prcf->block,
                                                  ctx->nblocks));

            /* no more than capacity=, or the blocks the zone has room for */

            limit = prcf->capacity ? prcf->capacity / prcf->block
                                   : ngx_max(sh->room, fb->capacity);

            /* a zone's holders are 32-byte chunks: fewer than 2^32 */
            limit = ngx_min(limit, NGX_MAX_UINT32_VALUE);

            fb->capacity = (uint32_t) ngx_min(fb->capacity + grow, limit);
        }
    }

done:

    ngx_shmtx_unlock(&idx->shpool->mutex);

    if (stale) {
        ngx_http_prefix_route_mend_soon(idx);
    }

    /* counts and the server only: when and where the index was trimmed */

    if (dropped && r->upstream && r->upstream->peer.name) {
        ngx_log_error(NGX_LOG_INFO, r->connection->log, 0,
                      "prefix_route: %V held %uL of %uL cached tokens "
                      "predicted, an eviction: %ui index pairs recorded "
                      "before the prefix dropped%s",
                      r->upstream->peer.name, t->cached, predicted, dropped,
                      stale ? ", the rest in slices" : "");
    }

    ngx_log_debug5(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "prefix_route: usage: %uL prompt tokens, %uL cached "
                   "(%s), match %uz bytes, %uz prompt bytes",
                   t->prompt, t->cached,
                   t->has_cached ? "reported" : "not reported",
                   ctx->match, ctx->len);
}


/*
 * The engine's tokens in a match of a prompt of token ids: the ids wholly
 * within its blocks.
 */

static uint64_t
ngx_http_prefix_route_ids(ngx_http_prefix_route_ctx_t *ctx, size_t match)
{
    ngx_uint_t  n;

    n = ngx_min(match / ctx->conf->block, ctx->nblocks);

    return n ? ctx->tokens[n - 1] : 0;
}


/*
 * A match as the engine holds it, bytes: the server holds the previous
 * turn's answer too, which the index never saw, so a match that ends in
 * the block before an assistant message extends to that message's end
 * (*answer is then 1).
 */

static size_t
ngx_http_prefix_route_answered(ngx_http_prefix_route_ctx_t *ctx, size_t match,
    ngx_uint_t *answer)
{
    ngx_uint_t  i;

    *answer = 0;

    for (i = 0; match > 0 && i < ctx->nanswers; i++) {
        if (ctx->answers[2 * i] >= match
            && ctx->answers[2 * i] < match + ctx->conf->block)
        {
            *answer = 1;
            return ctx->answers[2 * i + 1];
        }
    }

    return match;
}


/*
 * Whether a new model takes slot "a" of the zone's models rather than "b":
 * a free one, else one not yet learned (fewer than 16 samples) over one
 * learned, else the one whose last response is older (a signed difference
 * of ms).  Names sent a few times (a typo, a client that sprays names
 * at an engine that takes any) give way first, and a model in use is not
 * pushed out by each new name: until 2026-12-07 the least learned slot
 * went, so names of 3 requests held 6 of 8 slots for good while a new
 * model lost its slot to the next new name (helper-73).
 */

static ngx_uint_t
ngx_http_prefix_route_model_before(ngx_http_prefix_route_ratio_t *a,
    ngx_http_prefix_route_ratio_t *b)
{
    ngx_uint_t  la, lb;

    if (a->model == 0 || b->model == 0) {
        return a->model == 0 && b->model != 0;
    }

    la = a->samples >= NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN;
    lb = b->samples >= NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN;

    if (la != lb) {
        return lb;
    }

    return (ngx_msec_int_t) (a->used - b->used) < 0;
}


/*
 * The model's name as the status shows it: bytes other than letters,
 * digits and "-._:/@+" become "_"; a name so changed or cut to fit ends
 * in "~" and 8 hex digits of its hash, so that two models never show the
 * same name (a Prometheus series each).  No output format then needs to
 * escape it (it comes from the request body).
 */

static void
ngx_http_prefix_route_model_name(u_char *dst, u_char *src, size_t len,
    uint64_t model)
{
    u_char      c;
    size_t      i;
    ngx_uint_t  changed;

    changed = (len >= NGX_HTTP_PREFIX_ROUTE_MODEL_NAME);

    for (i = 0; i < len; i++) {
        c = src[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9')
              || (c != '\0' && ngx_strchr("-._:/@+", c) != NULL)))
        {
            c = '_';
            changed = 1;
        }

        dst[i] = c;
    }

    if (changed) {
        /* room for "~" and 8 hex digits before the terminating NUL */
        i = ngx_min(len, NGX_HTTP_PREFIX_ROUTE_MODEL_NAME - 10);
        i = ngx_sprintf(dst + i, "~%08xD", (uint32_t) model) - dst;
    }

    dst[i] = '\0';
}


/* Returns the main configuration, zeroed, or NULL without memory. */

static void *
ngx_http_prefix_route_create_main_conf(ngx_conf_t *cf)
{
    return ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_route_main_conf_t));
}


static void *
ngx_http_prefix_route_create_conf(ngx_conf_t *cf)
{
    ngx_http_prefix_route_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_prefix_route_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->shm_zone = NULL;
     *     conf->peers = NULL;
     */

    conf->block = 64;
    conf->max_prefix = 65536;
    conf->max_parse = 50;
    conf->capacity = 2 * 1024 * 1024;
    conf->choice.policy = NGX_HTTP_PREFIX_ROUTE_POLICY_TTFT;
    conf->choice.affinity = 100;
    conf->choice.max_load = 150;
    conf->feedback = NGX_HTTP_PREFIX_ROUTE_FEEDBACK_ON;
    conf->choice.instances = 1;
    conf->max_errors = 5;

    return conf;
}


/*
 * prefix_route zone=name:size [block=size] [max_prefix=size]
 *              [capacity=size] [affinity=number] [policy=ttft|cache_aware]
 *              [max_load=percent|off] [feedback=on|correct|off]
 *              [instances=number] [tenant_share=percent|off]
 *              [max_errors=number|off] [max_parse=time|off] [shadow];
 *
 * Sizes are bytes of canonical prompt (zone: bytes of shared memory),
 * affinity a factor with two decimals (kept in hundredths), max_load and
 * tenant_share percents, max_parse an nginx time (kept in ms);
 * docs/reference.md gives each one's range and default.  Returns
 * NGX_CONF_ERROR, after a message naming the mistake, for a value out of
 * range, a parameter unknown or given twice, a zone missing or shared,
 * and a place the balancer cannot take.  decay= is obsolete, accepted
 * with a warning until a release drops it.
 */

static char *
ngx_http_prefix_route(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_route_srv_conf_t  *prcf = conf;

    u_char                        *p;
    ssize_t                        size;
    ngx_str_t                     *value, name, s;
    ngx_int_t                      n;
    ngx_uint_t                     i;
    ngx_http_upstream_srv_conf_t  *uscf;

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (prcf->shm_zone != NULL) {
        return "is duplicate";
    }

    if (uscf->servers && uscf->servers->nelts) {
        return "must come before the \"server\" directives";
    }

    value = cf->args->elts;
    size = 0;
    ngx_str_null(&name);

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_http_prefix_route_duplicate(cf, value, i) != NGX_OK) {
            return NGX_CONF_ERROR;
        }

        if (ngx_strcmp(value[i].data, "shadow") == 0) {
            prcf->shadow = 1;
            continue;
        }

        if (ngx_strncmp(value[i].data, "zone=", 5) == 0) {

            name.data = value[i].data + 5;

            p = (u_char *) ngx_strchr(name.data, ':');

            if (p == NULL) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone size in \"%V\", "
                                   "expected zone=name:size", &value[i]);
                return NGX_CONF_ERROR;
            }

            name.len = p - name.data;

            s.data = p + 1;
            s.len = value[i].data + value[i].len - s.data;

            size = ngx_parse_size(&s);

            if (name.len == 0 || size == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid zone \"%V\", expected "
                                   "zone=name:size, the size in bytes "
                                   "with k or m", &value[i]);
                return NGX_CONF_ERROR;
            }

            if (size > NGX_HTTP_PREFIX_ROUTE_MAX_ZONE) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "zone \"%V\" is too large, prefix_route "
                                   "takes at most 32768m", &name);
                return NGX_CONF_ERROR;
            }

            if (size < NGX_HTTP_PREFIX_ROUTE_MIN_ZONE) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "zone \"%V\" is too small, "
                                   "prefix_route needs at least %uzk",
                                   &name,
                                   (size_t) NGX_HTTP_PREFIX_ROUTE_MIN_ZONE
                                   / 1024);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "block=", 6) == 0) {

            s.data = value[i].data + 6;
            s.len = value[i].len - 6;

            n = ngx_parse_size(&s);

            if (n < 16 || n > 65536) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid block size \"%V\", "
                                   "it must be from 16 to 64k bytes",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->block = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_prefix=", 11) == 0) {

            s.data = value[i].data + 11;
            s.len = value[i].len - 11;

            n = ngx_parse_size(&s);

            if (n <= 0 || n > 16 * 1024 * 1024) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid max_prefix \"%V\", "
                                   "it must be from one block to 16m",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->max_prefix = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "capacity=", 9) == 0) {

            s.data = value[i].data + 9;
            s.len = value[i].len - 9;

            n = ngx_parse_size(&s);

            if (n == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid capacity \"%V\", it must be "
                                   "a size in bytes with k or m, 0 for "
                                   "no limit", &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->capacity = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "affinity=", 9) == 0) {

            n = ngx_atofp(value[i].data + 9, value[i].len - 9, 2);

            /* ngx_atofp() reads "." and "1." as numbers */

            if (n == NGX_ERROR || n > 1000
                || value[i].data[value[i].len - 1] < '0'
                || value[i].data[value[i].len - 1] > '9')
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid affinity \"%V\", it must be "
                                   "a number from 0 to 10 with at most "
                                   "two decimals",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->choice.affinity = n;
            continue;
        }

        if (ngx_strcmp(value[i].data, "max_errors=off") == 0) {
            prcf->max_errors = 0;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_errors=", 11) == 0) {

            n = ngx_atoi(value[i].data + 11, value[i].len - 11);

            if (n < 1 || n > 1000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid max_errors \"%V\", it must be "
                                   "a number from 1 to 1000, or \"off\"",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->max_errors = n;
            continue;
        }

        if (ngx_strcmp(value[i].data, "max_parse=off") == 0) {
            prcf->max_parse = 0;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_parse=", 10) == 0) {

            s.data = value[i].data + 10;
            s.len = value[i].len - 10;

            n = ngx_parse_time(&s, 0);

            if (n < 1 || n > 10000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid max_parse \"%V\", it must be "
                                   "a time from 1ms to 10s, or \"off\"",
                                   &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->max_parse = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "instances=", 10) == 0) {

            n = ngx_atoi(value[i].data + 10, value[i].len - 10);

            if (n < 1 || n > 1000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid instances \"%V\", it must be "
                                   "a number from 1 to 1000", &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->choice.instances = n;
            continue;
        }

        if (ngx_strcmp(value[i].data, "policy=ttft") == 0) {
            prcf->choice.policy = NGX_HTTP_PREFIX_ROUTE_POLICY_TTFT;
            continue;
        }

        if (ngx_strcmp(value[i].data, "policy=cache_aware") == 0) {
            prcf->choice.policy = NGX_HTTP_PREFIX_ROUTE_POLICY_CACHE_AWARE;
            continue;
        }

        if (ngx_strncmp(value[i].data, "policy=", 7) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid policy \"%V\", it must be "
                               "\"ttft\" or \"cache_aware\"", &value[i]);
            return NGX_CONF_ERROR;
        }

        if (ngx_strcmp(value[i].data, "feedback=on") == 0) {
            prcf->feedback = NGX_HTTP_PREFIX_ROUTE_FEEDBACK_ON;
            continue;
        }

        if (ngx_strcmp(value[i].data, "feedback=correct") == 0) {
            prcf->feedback = NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT;
            continue;
        }

        if (ngx_strcmp(value[i].data, "feedback=off") == 0) {
            prcf->feedback = NGX_HTTP_PREFIX_ROUTE_FEEDBACK_OFF;
            continue;
        }

        if (ngx_strncmp(value[i].data, "feedback=", 9) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid feedback \"%V\", it must be "
                               "\"on\", \"correct\" or \"off\"", &value[i]);
            return NGX_CONF_ERROR;
        }

        if (ngx_strcmp(value[i].data, "tenant_share=off") == 0) {
            prcf->index.share = 0;
            continue;
        }

        if (ngx_strncmp(value[i].data, "tenant_share=", 13) == 0) {

            n = ngx_http_prefix_route_percent(&value[i], 13);

            if (n < 1 || n > 100) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid tenant_share \"%V\", it must be "
                                   "a percentage from 1%% to 100%%, "
                                   "or \"off\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->index.share = n;
            continue;
        }

        if (ngx_strcmp(value[i].data, "max_load=off") == 0) {
            prcf->choice.max_load = 0;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_load=", 9) == 0) {

            n = ngx_http_prefix_route_percent(&value[i], 9);

            if (n < 100 || n > 10000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid max_load \"%V\", it must be "
                                   "a percentage from 100%% to 10000%%, "
                                   "or \"off\"", &value[i]);
                return NGX_CONF_ERROR;
            }

            prcf->choice.max_load = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "decay=", 6) == 0) {

            s.data = value[i].data + 6;
            s.len = value[i].len - 6;

            if (ngx_parse_time(&s, 0) == NGX_ERROR) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid decay \"%V\", it must be "
                                   "a time (500ms, 5s, 1m...)", &value[i]);
                return NGX_CONF_ERROR;
            }

            ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                               "the \"decay\" parameter is obsolete and "
                               "ignored");
            continue;
        }

        ngx_http_prefix_route_invalid(cf, &value[i]);
        return NGX_CONF_ERROR;
    }

    if (name.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"prefix_route\" must have "
                           "the \"zone=name:size\" parameter");
        return NGX_CONF_ERROR;
    }

    prcf->choice.slack = prcf->block;

    /*
     * the other instances' requests refresh a server's blocks on the
     * engine, not in this index: an eviction one instance hears of cannot
     * date its other blocks (docs/design.md, "Feedback from the engines")
     */

    if (prcf->feedback == NGX_HTTP_PREFIX_ROUTE_FEEDBACK_CORRECT
        && prcf->choice.instances > 1)
    {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "\"feedback=correct\" works as \"feedback=on\" "
                           "with \"instances=%ui\": an eviction reported "
                           "to one instance cannot date the blocks "
                           "the others keep in use",
                           prcf->choice.instances);

        prcf->feedback = NGX_HTTP_PREFIX_ROUTE_FEEDBACK_ON;
    }

    if (prcf->choice.policy == NGX_HTTP_PREFIX_ROUTE_POLICY_CACHE_AWARE) {

        for (i = 1; i < cf->args->nelts; i++) {
            if (ngx_strncmp(value[i].data, "affinity=", 9) == 0
                || ngx_strncmp(value[i].data, "max_load=", 9) == 0
                || ngx_strncmp(value[i].data, "instances=", 10) == 0)
            {
                ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                                   "\"%V\" is ignored with "
                                   "policy=cache_aware", &value[i]);
            }
        }

        /* nor does it discount others' requests by the instances' share */
        prcf->choice.instances = 1;
    }

    if (prcf->capacity && prcf->capacity < prcf->block) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "capacity=%uz is smaller than block=%uz",
                           prcf->capacity, prcf->block);
        return NGX_CONF_ERROR;
    }

    if (prcf->max_prefix < prcf->block) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "max_prefix=%uz is smaller than block=%uz",
                           prcf->max_prefix, prcf->block);
        return NGX_CONF_ERROR;
    }

    prcf->shm_zone = ngx_shared_memory_add(cf, &name, size,
                                           &ngx_http_prefix_route_module);
    if (prcf->shm_zone == NULL) {
        return NGX_CONF_ERROR;
    }

    if (prcf->shm_zone->data != NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "zone \"%V\" is already used by another "
                           "prefix_route upstream", &name);
        return NGX_CONF_ERROR;
    }

    prcf->shm_zone->init = ngx_http_prefix_route_init_zone;
    prcf->shm_zone->data = prcf;
    prcf->cycle = cf->cycle;
    prcf->file_name = cf->conf_file->file.name.data;
    prcf->line = cf->conf_file->line;

    /*
     * keepalive saves the balancer's init and wraps it: replacing that
     * init here would silently drop keepalive, or another method's; in
     * shadow mode that init balances, wrapped by this one, and its
     * server parameters stay
     */

    if (prcf->shadow) {
        prcf->shadow_init_upstream = uscf->peer.init_upstream;
        uscf->peer.init_upstream = ngx_http_prefix_route_init_upstream;
        return NGX_CONF_OK;
    }

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"prefix_route\" directive follows "
                           "\"keepalive\" or a load balancing method "
                           "(\"least_conn\", \"hash\", \"random\"...): "
                           "put \"prefix_route\" first in the upstream "
                           "(\"shadow\" instead leaves such a method in "
                           "charge, prefix_route only watching it)");
        return NGX_CONF_ERROR;
    }

    uscf->peer.init_upstream = ngx_http_prefix_route_init_upstream;

    uscf->flags = NGX_HTTP_UPSTREAM_CREATE
                  |NGX_HTTP_UPSTREAM_WEIGHT
                  |NGX_HTTP_UPSTREAM_MAX_CONNS
                  |NGX_HTTP_UPSTREAM_MAX_FAILS
                  |NGX_HTTP_UPSTREAM_FAIL_TIMEOUT
                  |NGX_HTTP_UPSTREAM_DOWN
                  |NGX_HTTP_UPSTREAM_BACKUP
#if (NGX_HTTP_PREFIX_ROUTE_RESOLVE)
                  |NGX_HTTP_UPSTREAM_MODIFY
#endif
                  ;

    return NGX_CONF_OK;
}


/*
 * Whether parameter i of a directive names one of the parameters before
 * it: a name is what comes before "=", or the whole word ("shadow").
 * Returns NGX_ERROR after a message naming it, else NGX_OK.
 */

static ngx_int_t
ngx_http_prefix_route_duplicate(ngx_conf_t *cf, ngx_str_t *value,
    ngx_uint_t i)
{
    u_char      *p;
    size_t       len;
    ngx_uint_t   j;

    p = ngx_strlchr(value[i].data, value[i].data + value[i].len, '=');
    len = (p != NULL) ? (size_t) (p - value[i].data) : value[i].len;

    /*
     * a bare word matches only itself: "zone" after "zone=..." is a ";"
     * missing before the next directive, not the parameter again
     */

    for (j = 1; j < i; j++) {

        if (value[j].len >= len
            && ngx_strncmp(value[j].data, value[i].data, len) == 0
            && (value[j].len == len
                || (p != NULL && value[j].data[len] == '=')))
        {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "duplicate parameter \"%V\"", &value[i]);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * An unknown parameter: one without "=" is most often the next directive
 * after a missing ";" (prefix_route zone=llm:1m <newline> server ...).
 */

static void
ngx_http_prefix_route_invalid(ngx_conf_t *cf, ngx_str_t *value)
{
    if (ngx_strlchr(value->data, value->data + value->len, '=') == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\": is a \";\" missing "
                           "before it?", value);
        return;
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "invalid parameter \"%V\"", value);
}


/*
 * The percentage after the first "skip" bytes of a parameter, with its
 * sign: "max_load=150%" gives 150.  Returns NGX_ERROR when it is not one.
 */

static ngx_int_t
ngx_http_prefix_route_percent(ngx_str_t *value, size_t skip)
{
    if (value->len <= skip + 1 || value->data[value->len - 1] != '%') {
        return NGX_ERROR;
    }

    return ngx_atoi(value->data + skip, value->len - skip - 1);
}


/*
 * prefix_route_salt string [cache_salt=on|off];
 *
 * The string (variables allowed) keys the index apart per value, on top of
 * the body's cache_salt, or in place of it with cache_salt=off; an empty
 * value keys a request by the body alone (docs/reference.md).
 */

static char *
ngx_http_prefix_route_salt(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_route_srv_conf_t  *prcf = conf;

    ngx_str_t                         *value;
    ngx_http_compile_complex_value_t   ccv;

    if (prcf->salt != NULL) {
        return "is duplicate";
    }

    value = cf->args->elts;

    prcf->salt = ngx_palloc(cf->pool, sizeof(ngx_http_complex_value_t));
    if (prcf->salt == NULL) {
        return NGX_CONF_ERROR;
    }

    ngx_memzero(&ccv, sizeof(ngx_http_compile_complex_value_t));

    ccv.cf = cf;
    ccv.value = &value[1];
    ccv.complex_value = prcf->salt;

    if (ngx_http_compile_complex_value(&ccv) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    if (cf->args->nelts == 2
        || ngx_strcmp(value[2].data, "cache_salt=on") == 0)
    {
        prcf->cache_salt = 1;

    } else if (ngx_strcmp(value[2].data, "cache_salt=off") == 0) {
        prcf->cache_salt = 0;

    } else {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "invalid parameter \"%V\", it must be "
                           "\"cache_salt=on\" or \"cache_salt=off\"",
                           &value[2]);
        return NGX_CONF_ERROR;
    }

    /*
     * "remote_user" for "$remote_user": one tenant for all (helper-59);
     * with cache_salt=off a fixed salt still sets the body's aside
     */

    if (prcf->salt->lengths == NULL && prcf->cache_salt) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "prefix_route_salt \"%V\" holds no variable: "
                           "every request has that salt, as if none",
                           &value[1]);
    }

    return NGX_CONF_OK;
}


/*
 * prefix_route_probe [uri=/metrics] [interval=1s] [timeout=2s] [fails=3]
 *                    [max_size=1m] [load=on|off];
 *
 * interval and timeout are times (ms, s), max_size is bytes of response;
 * defaults and the engines' metric names are in docs/reference.md.
 */

static char *
ngx_http_prefix_route_probe(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_prefix_route_srv_conf_t  *prcf = conf;

    u_char                              *p;
    ssize_t                              size;
    ngx_int_t                            n;
    ngx_str_t                           *value, s;
    ngx_uint_t                           i;
    ngx_http_prefix_route_probe_conf_t  *pc;

    pc = &prcf->probe;

    if (pc->interval) {
        return "is duplicate";
    }

    ngx_str_set(&pc->uri, "/metrics");
    pc->interval = 1000;
    pc->timeout = 2000;
    pc->fails = 3;
    pc->max_size = 1024 * 1024;
    pc->load = 1;

    value = cf->args->elts;

    for (i = 1; i < cf->args->nelts; i++) {

        if (ngx_http_prefix_route_duplicate(cf, value, i) != NGX_OK) {
            return NGX_CONF_ERROR;
        }

        if (ngx_strncmp(value[i].data, "uri=", 4) == 0) {
            pc->uri.data = value[i].data + 4;
            pc->uri.len = value[i].len - 4;

            /* it goes into the request line as it is */

            for (p = pc->uri.data; p < pc->uri.data + pc->uri.len; p++) {
                if (*p <= ' ' || *p == 0x7f) {
                    break;
                }
            }

            if (pc->uri.len == 0 || pc->uri.data[0] != '/'
                || p < pc->uri.data + pc->uri.len)
            {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid uri \"%V\", it must begin "
                                   "with \"/\" and hold no space or "
                                   "control character", &value[i]);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "interval=", 9) == 0
            || ngx_strncmp(value[i].data, "timeout=", 8) == 0)
        {
            s.data = (u_char *) ngx_strchr(value[i].data, '=') + 1;
            s.len = value[i].data + value[i].len - s.data;

            n = ngx_parse_time(&s, 0);

            if (n == NGX_ERROR || n < 10 || n > 3600 * 1000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid time \"%V\", it must be from "
                                   "10ms to 1h", &value[i]);
                return NGX_CONF_ERROR;
            }

            if (value[i].data[0] == 'i') {
                pc->interval = n;

            } else {
                pc->timeout = n;
            }

            continue;
        }

        if (ngx_strncmp(value[i].data, "fails=", 6) == 0) {
            n = ngx_atoi(value[i].data + 6, value[i].len - 6);

            if (n < 1 || n > 1000) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid fails \"%V\", it must be a "
                                   "number from 1 to 1000", &value[i]);
                return NGX_CONF_ERROR;
            }

            pc->fails = n;
            continue;
        }

        if (ngx_strncmp(value[i].data, "max_size=", 9) == 0) {
            s.data = value[i].data + 9;
            s.len = value[i].len - 9;

            size = ngx_parse_size(&s);

            if (size < 1024 || size > 64 * 1024 * 1024) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "invalid max_size \"%V\", it must be "
                                   "from 1k to 64m bytes", &value[i]);
                return NGX_CONF_ERROR;
            }

            pc->max_size = size;
            continue;
        }

        if (ngx_strcmp(value[i].data, "load=on") == 0) {
            pc->load = 1;
            continue;
        }

        if (ngx_strcmp(value[i].data, "load=off") == 0) {
            pc->load = 0;
            continue;
        }

        if (ngx_strncmp(value[i].data, "load=", 5) == 0) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "invalid load \"%V\", it must be \"on\" "
                               "or \"off\"", &value[i]);
            return NGX_CONF_ERROR;
        }

        ngx_http_prefix_route_invalid(cf, &value[i]);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/*
 * prefix_route_status; in a location: its handler serves the figures of
 * every prefix_route zone (ngx_http_prefix_route_status.c).
 */

static char *
ngx_http_prefix_route_status(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_core_loc_conf_t           *clcf;
    ngx_http_prefix_route_main_conf_t  *pmcf;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    clcf->handler = ngx_http_prefix_route_status_handler;

    pmcf = ngx_http_conf_get_module_main_conf(cf,
                                              ngx_http_prefix_route_module);

    if (pmcf->status_line == 0) {
        pmcf->status_file = cf->conf_file->file.name.data;
        pmcf->status_line = cf->conf_file->line;
    }

    return NGX_CONF_OK;
}
