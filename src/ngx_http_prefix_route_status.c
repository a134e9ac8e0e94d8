
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>

#include "ngx_http_prefix_route.h"
#include "ngx_http_prefix_route_load.h"
#include "ngx_http_prefix_route_status.h"
#include "ngx_http_prefix_route_probe.h"
#include "ngx_http_prefix_route_history.h"
#include "ngx_http_prefix_route_usage.h"

#include <link.h>


/* the HTML page: one table a upstream, reloaded every 5 s */
#define NGX_HTTP_PREFIX_ROUTE_HTML_HEAD                                       \
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"                  \
    "<meta http-equiv=\"refresh\" content=\"5\">"                            \
    "<title>prefix_route status</title><style>"                               \
    "body{font:14px sans-serif;margin:1em 2em;color:#222}"                    \
    "table{border-collapse:collapse;margin-bottom:2em}"                       \
    "th,td{padding:4px 10px;border-bottom:1px solid #ccc;text-align:right}"  \
    "th:first-child,td:first-child{text-align:left}"                         \
    "td.up{color:#080}td.backup{color:#888}"                                 \
    "td.down,td.failing,td.unhealthy,td.erring{color:#c00}"                  \
    "</style></head><body><h1>prefix_route</h1>\n"


/* figures of an upstream, in the order of ngx_http_prefix_route_ufields */
enum {
    NGX_HTTP_PREFIX_ROUTE_U_SIZE = 0,
    NGX_HTTP_PREFIX_ROUTE_U_USED,
    NGX_HTTP_PREFIX_ROUTE_U_BLOCKS,
    NGX_HTTP_PREFIX_ROUTE_U_HOLDERS,
    NGX_HTTP_PREFIX_ROUTE_U_PROTECTED,
    NGX_HTTP_PREFIX_ROUTE_U_HELD_BACK,
    NGX_HTTP_PREFIX_ROUTE_U_TENANTS,
    NGX_HTTP_PREFIX_ROUTE_U_EVICTIONS,
    NGX_HTTP_PREFIX_ROUTE_U_FORGOTTEN,
    NGX_HTTP_PREFIX_ROUTE_U_INDEX_BYTES,
    NGX_HTTP_PREFIX_ROUTE_U_CAPPED,
    NGX_HTTP_PREFIX_ROUTE_U_MENDING,
    NGX_HTTP_PREFIX_ROUTE_U_RECORDS,
    NGX_HTTP_PREFIX_ROUTE_U_PROMPT,
    NGX_HTTP_PREFIX_ROUTE_U_MATCHED,
    NGX_HTTP_PREFIX_ROUTE_U_LONGEST,
    NGX_HTTP_PREFIX_ROUTE_U_PREDICTED,
    NGX_HTTP_PREFIX_ROUTE_U_REUSABLE,
    NGX_HTTP_PREFIX_ROUTE_U_JANSSON,
    NGX_HTTP_PREFIX_ROUTE_U_PARSE_STOPPED,
    NGX_HTTP_PREFIX_ROUTE_U_PREDICTED_TOKENS,
    NGX_HTTP_PREFIX_ROUTE_U_REPORTED_TOKENS,
    NGX_HTTP_PREFIX_ROUTE_U_SHADOW,
    NGX_HTTP_PREFIX_ROUTE_U_FAIL_OPEN,
    NGX_HTTP_PREFIX_ROUTE_U_STARTED,
    NGX_HTTP_PREFIX_ROUTE_U_N
};

/* figures of a peer, in the order of ngx_http_prefix_route_pfields */
enum {
    NGX_HTTP_PREFIX_ROUTE_P_INFLIGHT = 0,
    NGX_HTTP_PREFIX_ROUTE_P_QUEUED,
    NGX_HTTP_PREFIX_ROUTE_P_BLOCKS,
    NGX_HTTP_PREFIX_ROUTE_P_DROPPING,
    NGX_HTTP_PREFIX_ROUTE_P_REQUESTS,
    NGX_HTTP_PREFIX_ROUTE_P_HITS,
    NGX_HTTP_PREFIX_ROUTE_P_ERRORS,
    NGX_HTTP_PREFIX_ROUTE_P_FB_RESPONSES,
    NGX_HTTP_PREFIX_ROUTE_P_FB_PROMPT,
    NGX_HTTP_PREFIX_ROUTE_P_FB_CACHED,
    NGX_HTTP_PREFIX_ROUTE_P_FB_PREDICTED,
    NGX_HTTP_PREFIX_ROUTE_P_FB_AGREED,
    NGX_HTTP_PREFIX_ROUTE_P_FB_UNDER,
    NGX_HTTP_PREFIX_ROUTE_P_FB_OVER,
    NGX_HTTP_PREFIX_ROUTE_P_FB_DROPPED,
    NGX_HTTP_PREFIX_ROUTE_P_FB_CAPACITY,
    NGX_HTTP_PREFIX_ROUTE_P_PROBES,
    NGX_HTTP_PREFIX_ROUTE_P_PROBE_FAILURES,
    NGX_HTTP_PREFIX_ROUTE_P_PROBE_RESTARTS,
    NGX_HTTP_PREFIX_ROUTE_P_N
};


typedef struct {
    char                              *json;     /* key in the JSON */
    char                              *metric;   /* Prometheus name */
    char                              *type;     /* gauge or counter */
    char                              *help;
} ngx_http_prefix_route_field_t;


/*
 * the engine's gauges at the last probe of a peer that was read, shown
 * while the balancer uses them (fresh); the reading's age always
 */
typedef struct {
    ngx_uint_t                         read;      /* 0: none */
    ngx_uint_t                         fresh;
    uint64_t                           waiting;
    uint64_t                           running;
    int64_t                            kv;        /* per mille, -1: none */
    uint64_t                           age;       /* ms */
} ngx_http_prefix_route_engine_stat_t;


typedef struct {
    ngx_str_t                         *name;     /* addr */
    ngx_str_t                          addr;     /* a copy: with "resolve"
                                                    the server may go */
    u_char                             data[NGX_SOCKADDR_STRLEN];
    ngx_str_t                          server;   /* the "server" directive's
                                                    address or name, a
                                                    copy */
    u_char                             sdata[NGX_MAXHOSTNAMELEN
                                             + sizeof(":65535")];
    ngx_str_t                         *state;
    uint64_t                           v[NGX_HTTP_PREFIX_ROUTE_P_N];
    ngx_http_prefix_route_engine_stat_t  engine;
    ngx_http_prefix_route_peer_t      *sp;       /* its record, or NULL */
} ngx_http_prefix_route_peer_stat_t;


typedef struct {
    ngx_str_t                         *name;
    ngx_str_t                         *zone;
    uint64_t                           v[NGX_HTTP_PREFIX_ROUTE_U_N];
    uint64_t                           requests[NGX_HTTP_PREFIX_ROUTE_NSTATUS];
    uint64_t                           bypassed[NGX_HTTP_PREFIX_ROUTE_NBYPASS];
    uint64_t                           lock[32];  /* log2 buckets of ns */
    uint64_t                           lock_sum;  /* ns */
    ngx_int_t                          errors;    /* index check, -1: none */
    ngx_uint_t                         npeers;
    ngx_http_prefix_route_peer_stat_t *peers;
    ngx_http_prefix_route_ratio_t      ratios[NGX_HTTP_PREFIX_ROUTE_MODELS];

    /* copies of the charts' ring and of each peer's gauges */
    ngx_http_prefix_route_sample_t    *samples;
    ngx_uint_t                         sample;
    ngx_http_prefix_route_gauge_t    **gauges;
    ngx_str_t                        **names;
} ngx_http_prefix_route_stat_t;


static ngx_int_t ngx_http_prefix_route_status_collect(ngx_http_request_t *r,
    ngx_array_t *stats, size_t *size);
static ngx_int_t ngx_http_prefix_route_status_room(ngx_http_request_t *r,
    ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers, ngx_http_prefix_route_stat_t *st);
static void ngx_http_prefix_route_status_peers(
    ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers, ngx_http_prefix_route_stat_t *st,
    size_t *size);
static void ngx_http_prefix_route_status_merge(
    ngx_http_prefix_route_peer_stat_t *ps, ngx_uint_t state);
static void ngx_http_prefix_route_status_roomless(
    ngx_http_prefix_route_stat_t *st);
static void ngx_http_prefix_route_status_figures(
    ngx_http_prefix_route_srv_conf_t *prcf, ngx_http_prefix_route_stat_t *st);
static ngx_int_t ngx_http_prefix_route_status_escape(ngx_http_request_t *r,
    ngx_array_t *stats, ngx_uint_t type);
static ngx_str_t *ngx_http_prefix_route_status_escaped(ngx_http_request_t *r,
    ngx_str_t *name, ngx_uint_t type);
static ngx_str_t *ngx_http_prefix_route_status_utf8(ngx_http_request_t *r,
    ngx_str_t *name);
static size_t ngx_http_prefix_route_status_utf8_len(u_char *p, size_t n);
static u_char *ngx_http_prefix_route_status_json(u_char *p,
    ngx_array_t *stats);
static u_char *ngx_http_prefix_route_status_prometheus(u_char *p,
    ngx_array_t *stats);
static u_char *ngx_http_prefix_route_status_html(u_char *p,
    ngx_array_t *stats);
static u_char *ngx_http_prefix_route_status_help(u_char *p,
    ngx_http_prefix_route_field_t *f);
static u_char *ngx_http_prefix_route_status_by(u_char *p, ngx_array_t *stats,
    char *metric, char *help, char *label, ngx_str_t *names, ngx_uint_t n,
    size_t off);
static u_char *ngx_http_prefix_route_status_lock(u_char *p,
    ngx_array_t *stats);
static u_char *ngx_http_prefix_route_status_percent(u_char *p, uint64_t part,
    uint64_t whole);
static u_char *ngx_http_prefix_route_status_ratio(u_char *p, uint32_t ratio);


static ngx_http_prefix_route_field_t  ngx_http_prefix_route_ufields[] = {
    { "zone_size", "zone_size_bytes", "gauge",
      "Size of the shared memory zone, bytes." },
    { "zone_used", "zone_used_bytes", "gauge",
      "Pages of the zone in use, bytes." },
    { "blocks", "index_blocks", "gauge",
      "Block hashes (prefixes) in the index." },
    { "holders", "index_holders", "gauge",
      "(block, peer) pairs in the index." },
    { "protected", "index_protected_holders", "gauge",
      "Of those, pairs a peer was sent again: forgotten after those on "
      "probation." },
    { "held_back", "index_held_back_total", "counter",
      "Pairs sent again but left on probation: their tenant had its "
      "tenant_share of the protected pairs." },
    { "tenants", "index_tenants", "gauge",
      "Salts (tenants) with blocks in the index; those without a salt "
      "count as one, and so do those beyond 254." },
    { "evictions", "evictions_total", "counter",
      "Index holders dropped to free zone memory." },
    { "forgotten", "forgotten_total", "counter",
      "Index holders dropped beyond a peer's capacity." },
    { "index_bytes", "index_bytes", "gauge",
      "Zone memory the index's blocks and (block, peer) pairs take, "
      "bytes." },
    { "capped", "lookups_capped_total", "counter",
      "Index lookups that stopped at their bound of holders visited." },
    { "mending", "index_mending", "gauge",
      "1 while the index is mended after a worker died changing it: "
      "requests are routed without it, by load; else 0." },
    { "records", "server_records", "gauge",
      "Server records in the zone, at most 4095: the running "
      "configurations' servers, and servers gone, whose records are "
      "reused once no process uses them." },
    { "prompt_bytes", "prompt_bytes_total", "counter",
      "Bytes of canonical prompt considered." },
    { "matched_bytes", "matched_bytes_total", "counter",
      "Bytes of canonical prompt held by the chosen peer." },
    { "longest_bytes", "longest_bytes_total", "counter",
      "Bytes of canonical prompt held by the usable peer that held most." },
    { "predicted_bytes", "predicted_bytes_total", "counter",
      "Bytes of canonical prompt held by the peer prefix_route chose; in "
      "shadow mode, would have chosen." },
    { "reusable", "reusable_requests_total", "counter",
      "Requests of which a usable peer held a prefix." },
    { "jansson_bodies", "jansson_bodies_total", "counter",
      "Request bodies the fast path left to jansson, 10 to 100 times "
      "slower, in the worker's event loop (docs/tuning.md says which)." },
    { "parse_stopped", "parse_stopped_total", "counter",
      "Request bodies whose reading (the fast path's or jansson's) was "
      "stopped at max_parse, balanced by round robin." },
    { "predicted_tokens", "predicted_cached_tokens_total", "counter",
      "Cached tokens predicted on the peers prefix_route chose (in shadow "
      "mode, would have chosen), for the responses that reported usage." },
    { "reported_tokens", "reported_prompt_tokens_total", "counter",
      "Prompt tokens of the same responses." },
    { "shadow", "shadow", "gauge",
      "1: shadow mode, the balancer configured before prefix_route "
      "chooses; 0: prefix_route chooses." },
    { "fail_open", "fail_open", "gauge",
      "1 while every primary peer round robin would use is unhealthy or "
      "erring: none is passed over, all take requests; else 0." },
    { "zone_started", "zone_start_time_seconds", "gauge",
      "When the zone was made, seconds since the epoch: its counters "
      "count from then (a new zone size or name starts a new zone)." }
};


static ngx_http_prefix_route_field_t  ngx_http_prefix_route_pfields[] = {
    { "inflight", "peer_inflight_requests", "gauge",
      "Requests sent to the peer and not finished." },
    { "queued_bytes", "peer_queued_bytes", "gauge",
      "Prefill work of the requests on the peer that have not begun "
      "to answer: their uncached prompt plus 2048 bytes each." },
    { "blocks", "peer_blocks", "gauge",
      "Index blocks the peer is believed to hold." },
    { "dropping", "peer_dropping", "gauge",
      "1 while some of the peer's blocks are being dropped, a slice at a "
      "time: its engine restarted, or reported evicting them, or a reload "
      "lowered capacity below what it holds; else 0." },
    { "requests", "peer_requests_total", "counter",
      "Attempts of requests with a prompt (not BYPASS) sent to the peer, "
      "retries included, counted as the peer is chosen." },
    { "hits", "peer_hits_total", "counter",
      "Attempts routed to the peer while it held part of their prompt." },
    { "errors", "peer_errors_total", "counter",
      "Of those attempts, the responses of status 500 to 599, counted as "
      "each attempt ends." },
    { "feedback_responses", "peer_feedback_responses_total", "counter",
      "Responses of the peer that reported cached prompt tokens." },
    { "reported_prompt_tokens", "peer_reported_prompt_tokens_total",
      "counter", "Prompt tokens those responses reported." },
    { "reported_cached_tokens", "peer_reported_cached_tokens_total",
      "counter", "Cached prompt tokens those responses reported." },
    { "predicted_cached_tokens", "peer_predicted_cached_tokens_total",
      "counter", "Cached prompt tokens the index predicted for them." },
    { "feedback_agreed", "peer_feedback_agreed_total", "counter",
      "Responses whose cached tokens were within one block of the "
      "prediction: 16 tokens, or the index's block in tokens if more." },
    { "feedback_under", "peer_feedback_under_total", "counter",
      "Responses with fewer cached tokens than predicted." },
    { "feedback_over", "peer_feedback_over_total", "counter",
      "Responses with more cached tokens than predicted." },
    { "feedback_dropped", "peer_feedback_dropped_total", "counter",
      "Index holders dropped because the peer had evicted a prefix "
      "recorded after them." },
    { "learned_capacity", "peer_learned_capacity_bytes", "gauge",
      "Bytes of canonical prompt the peer's engine holds at most, as its "
      "evictions showed (feedback=correct); the index keeps no more for "
      "the peer than this or capacity=. 0: none learned." },
    { "probes", "peer_probes_total", "counter",
      "Probes of the peer's metrics page, answered or failed (a probe "
      "that ended after a later one is not counted)." },
    { "probe_failures", "peer_probe_failures_total", "counter",
      "Probes of the peer's metrics page that failed: no connection, no "
      "answer within the timeout, not HTTP, not 2xx." },
    { "probe_restarts", "peer_probe_restarts_total", "counter",
      "Restarts of the peer's engine seen by its probes (a counter that "
      "fell); each made the index forget the peer's blocks." }
};


/* the engine's gauges in Prometheus, in engine_stat_t order */
static ngx_http_prefix_route_field_t  ngx_http_prefix_route_efields[] = {
    { "waiting", "peer_engine_waiting_requests", "gauge",
      "Requests queued at the peer's engine, by its metrics page." },
    { "running", "peer_engine_running_requests", "gauge",
      "Requests in the running batch of the peer's engine, by its metrics "
      "page." },
    { "kv_cache_usage", "peer_engine_kv_cache_usage_ratio", "gauge",
      "KV cache usage of the peer's engine, 0 to 1, by its metrics page." },
    { "age_ms", "peer_engine_reading_age_seconds", "gauge",
      "Time since the peer's metrics page was last read, seconds." }
};


static ngx_str_t  ngx_http_prefix_route_states[] = {
    ngx_string("up"),
    ngx_string("down"),
    ngx_string("failing"),
    ngx_string("backup"),
    ngx_string("unhealthy"),
    ngx_string("erring")
};

/*
 * How available each state is, by index: a server of several lines shows
 * its most available line's, as round robin sends it requests by any of
 * them
 */
static ngx_uint_t  ngx_http_prefix_route_state_rank[] = { 5, 0, 2, 4, 1, 1 };


ngx_int_t
ngx_http_prefix_route_status_handler(ngx_http_request_t *r)
{
    size_t        size;
    ngx_int_t     rc;
    ngx_str_t     format;
    ngx_buf_t    *b;
    ngx_uint_t    type;
    ngx_array_t   stats;
    ngx_chain_t   out;

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return NGX_HTTP_NOT_ALLOWED;
    }

    rc = ngx_http_discard_request_body(r);

    if (rc != NGX_OK) {
        return rc;
    }

    /* 0: JSON, 1: Prometheus, 2: HTML, also for a browser's Accept */

    type = 0;

    if (ngx_http_arg(r, (u_char *) "format", 6, &format) == NGX_OK) {

        if (format.len == 10
            && ngx_strncmp(format.data, "prometheus", 10) == 0)
        {
            type = 1;

        } else if (format.len == 4
                   && ngx_strncmp(format.data, "html", 4) == 0)
        {
            type = 2;

        } else if (format.len != 4
                   || ngx_strncmp(format.data, "json", 4) != 0)
        {
            return NGX_HTTP_BAD_REQUEST;
        }

    } else if (r->headers_in.accept
               && ngx_strlcasestrn(r->headers_in.accept->value.data,
                                   r->headers_in.accept->value.data
                                   + r->headers_in.accept->value.len,
                                   (u_char *) "text/html", 9 - 1)
                  != NULL)
    {
        type = 2;
    }

    if (ngx_http_prefix_route_status_collect(r, &stats, &size) != NGX_OK
        || (type != 2
            && ngx_http_prefix_route_status_escape(r, &stats, type)
               != NGX_OK))
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = ngx_create_temp_buf(r->pool, size);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    switch (type) {

    case 1:
        b->last = ngx_http_prefix_route_status_prometheus(b->last, &stats);
        ngx_str_set(&r->headers_out.content_type,
                    "text/plain; version=0.0.4; charset=utf-8");
        break;

    case 2:
        b->last = ngx_http_prefix_route_status_html(b->last, &stats);
        ngx_str_set(&r->headers_out.content_type, "text/html; charset=utf-8");
        break;

    default:
        b->last = ngx_http_prefix_route_status_json(b->last, &stats);
        ngx_str_set(&r->headers_out.content_type, "application/json");
    }

    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = b->last - b->pos;

    b->last_buf = (r == r->main) ? 1 : 0;
    b->last_in_chain = 1;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


/*
 * A snapshot of every prefix_route upstream: the counters are read without
 * a lock, the index and peer figures under the zone mutex, one zone at a
 * time.  *size is set to a bound on the output in any format: a line for
 * each figure of an upstream, each status, BYPASS reason and lock hold
 * bucket, and 4 more, and 12 more than its figures for a peer, each with
 * the names (6 times their length once escaped for HTML), a metric name
 * or a HELP text (under 128 bytes) and a figure (NGX_INT64_LEN); the HELP
 * lines (256 bytes each) and the HTML page's head.
 */

static ngx_int_t
ngx_http_prefix_route_status_collect(ngx_http_request_t *r,
    ngx_array_t *stats, size_t *size)
{
    size_t                             names;
    ngx_str_t                          arg;
    ngx_uint_t                         i, k, n, check;
    ngx_slab_pool_t                   *shpool;
    ngx_http_prefix_route_sh_t        *sh;
    ngx_http_prefix_route_stat_t      *st;
    ngx_http_upstream_rr_peers_t      *peers;
    ngx_http_upstream_srv_conf_t     **uscfp;
    ngx_http_upstream_main_conf_t     *umcf;
    ngx_http_prefix_route_srv_conf_t  *prcf;

    umcf = ngx_http_get_module_main_conf(r, ngx_http_upstream_module);
    uscfp = umcf->upstreams.elts;

    if (ngx_array_init(stats, r->pool, 4, sizeof(ngx_http_prefix_route_stat_t))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    *size = (NGX_HTTP_PREFIX_ROUTE_U_N + NGX_HTTP_PREFIX_ROUTE_P_N + 17) * 256
            + sizeof(NGX_HTTP_PREFIX_ROUTE_HTML_HEAD);

    /* "check=1": the index is walked and checked, O(its size) */
    check = (ngx_http_arg(r, (u_char *) "check", 5, &arg) == NGX_OK
             && arg.len == 1 && arg.data[0] == '1');

    for (i = 0; i < umcf->upstreams.nelts; i++) {

        if (uscfp[i]->srv_conf == NULL) {
            continue;
        }

        prcf = ngx_http_conf_upstream_srv_conf(uscfp[i],
                                               ngx_http_prefix_route_module);

        if (prcf->shm_zone == NULL || prcf->peers == NULL) {
            continue;
        }

        st = ngx_array_push(stats);
        if (st == NULL) {
            return NGX_ERROR;
        }

        /*
         * the servers in use (with "zone", a copy in that zone), locked
         * and given back before the zone mutex is taken (docs/design.md,
         * "What workers share"), and their figures' room taken under that
         * lock: with "resolve" their number changes
         * (ngx_http_prefix_route_follow())
         */

        peers = uscfp[i]->peer.data;
        sh = prcf->index.sh;
        shpool = prcf->index.shpool;

        /*
         * the check walks the whole index under the zone mutex, seconds
         * for a large zone: not under the peers lock, which nginx never
         * gives back when a worker dies holding it, and which requests
         * take to choose and to free their server
         */

        st->errors = -1;

        if (check) {
            ngx_shmtx_lock(&shpool->mutex);
            st->errors = ngx_http_prefix_route_index_check(&prcf->index,
                                                           r->pool,
                                                           r->connection->log);
            ngx_shmtx_unlock(&shpool->mutex);
        }

        ngx_http_prefix_route_lists_rlock(peers);

        if (ngx_http_prefix_route_status_room(r, prcf, peers, st) != NGX_OK) {
            ngx_http_prefix_route_lists_unlock(peers);
            return NGX_ERROR;
        }

        st->name = &uscfp[i]->host;
        st->zone = &prcf->shm_zone->shm.name;

        *size += (NGX_HTTP_PREFIX_ROUTE_U_N + NGX_HTTP_PREFIX_ROUTE_NSTATUS
                  + NGX_HTTP_PREFIX_ROUTE_NBYPASS + 32 + 4)
                 * (128 + NGX_INT64_LEN + 6 * (st->name->len + st->zone->len));

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_NSTATUS; k++) {
            st->requests[k] = sh->requests[k];
        }

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_NBYPASS; k++) {
            st->bypassed[k] = sh->bypassed[k];
        }

        for (k = 0; k < 32; k++) {
            st->lock[k] = sh->lock_ns[k];
        }

        st->lock_sum = sh->lock_ns_sum;

        st->v[NGX_HTTP_PREFIX_ROUTE_U_PROMPT] = sh->prompt_bytes;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_MATCHED] = sh->matched_bytes;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_LONGEST] = sh->longest_bytes;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_PREDICTED] = sh->predicted_bytes;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_REUSABLE] = sh->reusable;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_JANSSON] = sh->jansson_bodies;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_PARSE_STOPPED] =
                                st->bypassed[NGX_HTTP_PREFIX_ROUTE_MAX_PARSE];
        st->v[NGX_HTTP_PREFIX_ROUTE_U_SIZE] = prcf->shm_zone->shm.size;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_SHADOW] = prcf->shadow;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_STARTED] = (uint64_t) sh->started;

        /*
         * round robin's state is copied under the lists' lock and the
         * zone's figures read after it is given back: a worker killed
         * waiting for the zone mutex then leaves no lock held for good
         */

        ngx_http_prefix_route_status_peers(prcf, peers, st, size);
        ngx_http_prefix_route_lists_unlock(peers);

        ngx_http_prefix_route_let_go(prcf);

        ngx_http_prefix_route_status_roomless(st);

        /* less the lines repeating an address */
        n = st->npeers;

        /* no figure shows the requests of a worker killed meanwhile */
        ngx_http_prefix_route_load_sweep(&prcf->index);

        names = 0;

        ngx_shmtx_lock(&shpool->mutex);

        st->v[NGX_HTTP_PREFIX_ROUTE_U_USED] =
                      (uint64_t) ((shpool->end - shpool->start) / ngx_pagesize
                                  - shpool->pfree) * ngx_pagesize;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_BLOCKS] = sh->entries;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_HOLDERS] = sh->holders;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_PROTECTED] = sh->hot_holders;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_HELD_BACK] = sh->held_back;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_TENANTS] =
                             ngx_http_prefix_route_index_tenants(&prcf->index);
        st->v[NGX_HTTP_PREFIX_ROUTE_U_EVICTIONS] = sh->evictions;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_FORGOTTEN] = sh->forgotten;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_CAPPED] = sh->capped;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_MENDING] = (sh->changing != 0);
        st->v[NGX_HTTP_PREFIX_ROUTE_U_RECORDS] = sh->npeers;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_PREDICTED_TOKENS] =
                                                        sh->predicted_tokens;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_REPORTED_TOKENS] = sh->reported_tokens;
        st->v[NGX_HTTP_PREFIX_ROUTE_U_INDEX_BYTES] =
                               ngx_http_prefix_route_index_bytes(&prcf->index);

        ngx_http_prefix_route_status_figures(prcf, st);

        ngx_memcpy(st->samples, sh->samples, sizeof(sh->samples));
        st->sample = sh->sample;

        for (k = 0; k < n; k++) {
            st->names[k] = st->peers[k].name;
            names += st->names[k]->len;

            if (st->peers[k].sp != NULL) {
                ngx_memcpy(st->gauges[k], st->peers[k].sp->gauges,
                           sizeof(st->peers[k].sp->gauges));

            } else {
                ngx_memzero(st->gauges[k], sizeof(st->peers[k].sp->gauges));
            }
        }

        *size += ngx_http_prefix_route_history_size(n, names);

        ngx_memcpy(st->ratios, sh->ratios, sizeof(st->ratios));
        *size += 512 + NGX_HTTP_PREFIX_ROUTE_MODELS * 5
                 * (320 + 4 * NGX_INT64_LEN
                    + 6 * (st->name->len + NGX_HTTP_PREFIX_ROUTE_MODEL_NAME));

        ngx_shmtx_unlock(&shpool->mutex);
    }

    return NGX_OK;
}


/*
 * Room for the figures of the servers of "peers" (both lists) and their
 * charts' copies, taken before the zone mutex; the caller holds the peers
 * lock, under which this worker's view follows the lists.  Returns
 * NGX_ERROR when memory ran out.
 */

static ngx_int_t
ngx_http_prefix_route_status_room(ngx_http_request_t *r,
    ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers, ngx_http_prefix_route_stat_t *st)
{
    ngx_uint_t  k, n;

    if (ngx_http_prefix_route_follow(prcf, peers) != NGX_OK) {
        return NGX_ERROR;
    }

    n = prcf->number[0] + prcf->number[1];

    st->npeers = n;
    st->peers = ngx_pcalloc(r->pool,
                            n * sizeof(ngx_http_prefix_route_peer_stat_t));
    st->samples = ngx_palloc(r->pool, sizeof(st->samples[0])
                                      * NGX_HTTP_PREFIX_ROUTE_SAMPLES);
    st->gauges = ngx_palloc(r->pool,
                            n * sizeof(ngx_http_prefix_route_gauge_t *));
    st->names = ngx_palloc(r->pool, n * sizeof(ngx_str_t *));

    if (st->peers == NULL || st->samples == NULL || st->gauges == NULL
        || st->names == NULL)
    {
        return NGX_ERROR;
    }

    for (k = 0; k < n; k++) {
        st->gauges[k] = ngx_palloc(r->pool,
                                   sizeof(((ngx_http_prefix_route_peer_t *)
                                           NULL)->gauges));
        if (st->gauges[k] == NULL) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * The peers of both lists with their round robin state (per worker unless
 * the upstream has a "zone") and their shared records, which
 * ngx_http_prefix_route_status_figures() reads; a server line that repeats
 * an earlier one's address is left out (its figures are that line's), but
 * for its state when more available.  The caller holds both lists' locks
 * and not the zone mutex.
 */

static void
ngx_http_prefix_route_status_peers(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_upstream_rr_peers_t *peers, ngx_http_prefix_route_stat_t *st,
    size_t *size)
{
    time_t                              now;
    ngx_uint_t                          b, i, state, failing, n, passed;
    ngx_http_upstream_rr_peer_t        *peer;
    ngx_http_upstream_rr_peers_t       *list;
    ngx_http_prefix_route_peer_t       *sp;
    ngx_http_prefix_route_peer_stat_t  *ps, *first;

    now = ngx_time();
    ps = st->peers;
    n = 0;
    passed = 0;

    for (b = 0, list = peers; list != NULL; b++, list = list->next) {

        for (peer = list->peer, i = 0; peer != NULL; peer = peer->next, i++) {

            sp = prcf->shared[b][i];

            failing = peer->max_fails && peer->fails >= peer->max_fails
                      && now - peer->checked <= peer->fail_timeout;

            if (peer->down) {
                state = 1;

            } else if ((state = ngx_http_prefix_route_passed_over(prcf, peer,
                                                             sp, now)))
            {
                state = (state == 1) ? 4 : 5;

            } else if (failing) {
                state = 2;

            } else {
                state = b ? 3 : 0;
            }

            /* as ngx_http_prefix_route_passed() counts the primary list */

            if (b == 0 && !peer->down && !failing) {
                n++;
                passed += (state >= 4);
            }

            /* a line repeating an address: its state, if more available */

            if (ngx_http_prefix_route_repeat(prcf, b, i)) {
                st->npeers--;

                for (first = st->peers; first < ps; first++) {
                    if (first->sp == sp) {
                        ngx_http_prefix_route_status_merge(first, state);
                        break;
                    }
                }

                continue;
            }

            ps->addr.len = ngx_min(peer->name.len, NGX_SOCKADDR_STRLEN);
            ps->addr.data = ps->data;
            ngx_memcpy(ps->data, peer->name.data, ps->addr.len);
            ps->name = &ps->addr;
            ps->server.len = ngx_min(peer->server.len, sizeof(ps->sdata));
            ps->server.data = ps->sdata;
            ngx_memcpy(ps->sdata, peer->server.data, ps->server.len);
            ps->state = &ngx_http_prefix_route_states[state];
            ps->sp = sp;

            *size += (NGX_HTTP_PREFIX_ROUTE_P_N + 12)
                     * (160 + NGX_INT64_LEN
                        + 6 * (st->name->len + peer->name.len))
                     + 32 + 6 * ps->server.len;

            ps++;
        }
    }

    st->v[NGX_HTTP_PREFIX_ROUTE_U_FAIL_OPEN] = (n && passed == n);
}


/*
 * A server of several lines shows its most available line's state
 * (ngx_http_prefix_route_state_rank): "state" is another line's.
 */

static void
ngx_http_prefix_route_status_merge(ngx_http_prefix_route_peer_stat_t *ps,
    ngx_uint_t state)
{
    if (ngx_http_prefix_route_state_rank[state]
        > ngx_http_prefix_route_state_rank[ps->state
                                           - ngx_http_prefix_route_states])
    {
        ps->state = &ngx_http_prefix_route_states[state];
    }
}


/*
 * Servers the zone had no room for have no record to tell their lines'
 * repeats (ngx_http_prefix_route_repeat()): a line repeating the address
 * of an earlier one without a record is left out here, by name, its
 * state merged.  No lock is held: these lines are walked for each.
 */

static void
ngx_http_prefix_route_status_roomless(ngx_http_prefix_route_stat_t *st)
{
    ngx_uint_t                          j, k, n;
    ngx_http_prefix_route_peer_stat_t  *ps;

    ps = st->peers;

    for (j = 0, n = 0; j < st->npeers; j++) {

        if (ps[j].sp == NULL) {
            for (k = 0; k < n; k++) {
                if (ps[k].sp == NULL
                    && ps[k].addr.len == ps[j].addr.len
                    && ngx_memcmp(ps[k].data, ps[j].data, ps[j].addr.len)
                       == 0)
                {
                    break;
                }
            }

            if (k < n) {
                ngx_http_prefix_route_status_merge(&ps[k], ps[j].state
                                            - ngx_http_prefix_route_states);
                continue;
            }
        }

        /* moved down over the lines left out: its names point into it */

        if (n != j) {
            ps[n] = ps[j];
            ps[n].addr.data = ps[n].data;
            ps[n].name = &ps[n].addr;
            ps[n].server.data = ps[n].sdata;
        }

        n++;
    }

    st->npeers = n;
}


/*
 * The shared figures of the servers ngx_http_prefix_route_status_peers()
 * found.  The caller holds the zone mutex and no lists' lock: a record
 * stays in the zone while the configuration that named it runs.
 */

static void
ngx_http_prefix_route_status_figures(ngx_http_prefix_route_srv_conf_t *prcf,
    ngx_http_prefix_route_stat_t *st)
{
    ngx_uint_t                          k;
    ngx_http_prefix_route_peer_t       *sp;
    ngx_http_prefix_route_peer_stat_t  *ps;

    for (k = 0; k < st->npeers; k++) {
        ps = &st->peers[k];
        sp = ps->sp;

        if (sp == NULL) {
            continue;
        }

        ps->v[NGX_HTTP_PREFIX_ROUTE_P_INFLIGHT] = sp->load.inflight;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_QUEUED] = sp->load.queued;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_BLOCKS] = sp->blocks;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_DROPPING] =
                                            ngx_http_prefix_route_dropping(sp);
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_REQUESTS] = sp->requests;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_HITS] = sp->hits;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_ERRORS] = sp->errors.total;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_RESPONSES] = sp->fb.responses;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_PROMPT] = sp->fb.prompt;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_CACHED] = sp->fb.cached;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_PREDICTED] = sp->fb.predicted;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_AGREED] = sp->fb.agreed;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_UNDER] = sp->fb.under;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_OVER] = sp->fb.over;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_DROPPED] = sp->fb.dropped;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_FB_CAPACITY] =
                (uint64_t) ngx_http_prefix_route_learned(prcf, sp)
                * prcf->block;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_PROBES] = sp->probe.probes;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_PROBE_FAILURES] = sp->probe.failures;
        ps->v[NGX_HTTP_PREFIX_ROUTE_P_PROBE_RESTARTS] = sp->probe.restarts;

        ps->engine.read = prcf->probe.interval && sp->probe.has_reading;
        ps->engine.fresh = ngx_http_prefix_route_probe_fresh(prcf,
                                                             &sp->probe);
        ps->engine.waiting = sp->probe.waiting;
        ps->engine.running = sp->probe.running;
        ps->engine.kv = sp->probe.has_kv ? (int64_t) sp->probe.kv : -1;
        ps->engine.age = (ngx_msec_int_t) (ngx_current_msec - sp->probe.read)
                         > 0 ? ngx_current_msec - sp->probe.read : 0;
    }
}


/*
 * Upstream, zone and server names (a unix socket path, a quoted upstream
 * name) as JSON strings (type 0) or Prometheus label values (type 1):
 * copies in the request's pool replace them in "stats".  HTML escapes
 * them as it writes them.
 */

static ngx_int_t
ngx_http_prefix_route_status_escape(ngx_http_request_t *r,
    ngx_array_t *stats, ngx_uint_t type)
{
    ngx_str_t                          *server;
    ngx_uint_t                          i, n;
    ngx_http_prefix_route_stat_t       *st;
    ngx_http_prefix_route_peer_stat_t  *ps;

    st = stats->elts;

    for (i = 0; i < stats->nelts; i++) {
        st[i].name = ngx_http_prefix_route_status_escaped(r, st[i].name,
                                                          type);
        st[i].zone = ngx_http_prefix_route_status_escaped(r, st[i].zone,
                                                          type);

        if (st[i].name == NULL || st[i].zone == NULL) {
            return NGX_ERROR;
        }

        for (n = 0; n < st[i].npeers; n++) {
            ps = &st[i].peers[n];

            ps->name = ngx_http_prefix_route_status_escaped(r, ps->name, type);
            if (ps->name == NULL) {
                return NGX_ERROR;
            }

            /* the "server" name is in JSON only */

            if (type == 0) {
                server = ngx_http_prefix_route_status_escaped(r, &ps->server,
                                                              type);
                if (server == NULL) {
                    return NGX_ERROR;
                }

                ps->server = *server;
            }
        }
    }

    return NGX_OK;
}


/*
 * "name" escaped: for JSON by ngx_escape_json(); for a Prometheus label
 * value, backslash, double quote and line feed as \\, \" and \n (the text
 * exposition format 0.0.4); in both, bytes that are not UTF-8 replaced
 * first (ngx_http_prefix_route_status_utf8()).  Returns "name" itself when
 * nothing needs escaping, NULL without memory.  The output's size bound
 * of ngx_http_prefix_route_status_collect() counts names 6 times.
 */

static ngx_str_t *
ngx_http_prefix_route_status_escaped(ngx_http_request_t *r, ngx_str_t *name,
    ngx_uint_t type)
{
    u_char     *p, c;
    size_t      n, extra;
    ngx_str_t  *e;

    name = ngx_http_prefix_route_status_utf8(r, name);
    if (name == NULL) {
        return NULL;
    }

    if (type == 0) {
        extra = ngx_escape_json(NULL, name->data, name->len);

    } else {
        extra = 0;

        for (n = 0; n < name->len; n++) {
            c = name->data[n];
            extra += (c == '\\' || c == '"' || c == '\n');
        }
    }

    if (extra == 0) {
        return name;
    }

    e = ngx_palloc(r->pool, sizeof(ngx_str_t));
    if (e == NULL) {
        return NULL;
    }

    e->data = ngx_pnalloc(r->pool, name->len + extra);
    if (e->data == NULL) {
        return NULL;
    }

    e->len = name->len + extra;

    if (type == 0) {
        (void) ngx_escape_json(e->data, name->data, name->len);
        return e;
    }

    p = e->data;

    for (n = 0; n < name->len; n++) {
        c = name->data[n];

        if (c == '\\' || c == '"' || c == '\n') {
            *p++ = '\\';
            c = (c == '\n') ? 'n' : c;
        }

        *p++ = c;
    }

    return e;
}


/*
 * "name" with each byte that is not part of well-formed UTF-8 replaced by
 * U+FFFD, as the Unicode standard recommends (chapter 3, "U+FFFD
 * Substitution of Maximal Subparts", one for each byte here): JSON and
 * Prometheus text are UTF-8, and nginx takes any bytes in an upstream or
 * server name.  Returns "name" itself when it is well formed, a copy in
 * the request's pool (at most 3 bytes a byte), or NULL without memory.
 */

static ngx_str_t *
ngx_http_prefix_route_status_utf8(ngx_http_request_t *r, ngx_str_t *name)
{
    u_char     *p;
    size_t      i, k, bad;
    ngx_str_t  *e;

    bad = 0;

    for (i = 0; i < name->len; i += k ? k : 1) {
        k = ngx_http_prefix_route_status_utf8_len(name->data + i,
                                                  name->len - i);
        bad += (k == 0);
    }

    if (bad == 0) {
        return name;
    }

    e = ngx_palloc(r->pool, sizeof(ngx_str_t));
    if (e == NULL) {
        return NULL;
    }

    e->data = ngx_pnalloc(r->pool, name->len + 2 * bad);
    if (e->data == NULL) {
        return NULL;
    }

    p = e->data;

    for (i = 0; i < name->len; i += k ? k : 1) {
        k = ngx_http_prefix_route_status_utf8_len(name->data + i,
                                                  name->len - i);
        if (k) {
            p = ngx_cpymem(p, name->data + i, k);

        } else {
            p = ngx_cpymem(p, "\xef\xbf\xbd", 3);
        }
    }

    e->len = p - e->data;

    return e;
}


/*
 * The length in bytes of the well-formed UTF-8 sequence at "p" (1 to 4,
 * at most "n"), or 0 when none begins there: RFC 3629, section 4 (no
 * overlong forms, surrogates or code points above U+10FFFF).  nginx's
 * ngx_utf8_decode() takes any byte from 0x80 up as a continuation byte.
 */

static size_t
ngx_http_prefix_route_status_utf8_len(u_char *p, size_t n)
{
    u_char  c, lo, hi;
    size_t  i, len;

    c = p[0];

    if (c < 0x80) {
        return 1;
    }

    lo = 0x80;
    hi = 0xbf;

    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;

    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = (c == 0xe0) ? 0xa0 : 0x80;
        hi = (c == 0xed) ? 0x9f : 0xbf;

    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = (c == 0xf0) ? 0x90 : 0x80;
        hi = (c == 0xf4) ? 0x8f : 0xbf;

    } else {
        return 0;
    }

    if (n < len || p[1] < lo || p[1] > hi) {
        return 0;
    }

    for (i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xbf) {
            return 0;
        }
    }

    return len;
}


static u_char *
ngx_http_prefix_route_status_json(u_char *p, ngx_array_t *stats)
{
    ngx_uint_t                          i, k, n;
    ngx_http_prefix_route_stat_t       *st;
    ngx_http_prefix_route_ratio_t      *r;
    ngx_http_prefix_route_peer_stat_t  *ps;

    st = stats->elts;

    p = ngx_sprintf(p, "{\"upstreams\":[");

    for (i = 0; i < stats->nelts; i++) {

        p = ngx_sprintf(p, "%s{\"name\":\"%V\",\"zone\":\"%V\"",
                        i ? "," : "", st[i].name, st[i].zone);

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_U_N; k++) {
            p = ngx_sprintf(p, ",\"%s\":%uL",
                            ngx_http_prefix_route_ufields[k].json,
                            st[i].v[k]);
        }

        p = ngx_sprintf(p, ",\"requests\":{");

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_NSTATUS; k++) {
            p = ngx_sprintf(p, "%s\"%V\":%uL", k ? "," : "",
                            &ngx_http_prefix_route_status_names[k],
                            st[i].requests[k]);
        }

        p = ngx_sprintf(p, "},\"bypassed\":{");

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_NBYPASS; k++) {
            p = ngx_sprintf(p, "%s\"%V\":%uL", k ? "," : "",
                            &ngx_http_prefix_route_bypass_names[k],
                            st[i].bypassed[k]);
        }

        p = ngx_sprintf(p, "},\"lock_hold_ns_log2\":[");

        for (k = 0; k < 32; k++) {
            p = ngx_sprintf(p, "%s%uL", k ? "," : "", st[i].lock[k]);
        }

        p = ngx_sprintf(p, "],\"lock_hold_ns_sum\":%uL", st[i].lock_sum);

        if (st[i].errors >= 0) {
            p = ngx_sprintf(p, ",\"index_errors\":%i", st[i].errors);
        }

        p = ngx_sprintf(p, ",\"models\":[");

        for (k = 0, n = 0; k < NGX_HTTP_PREFIX_ROUTE_MODELS; k++) {
            r = &st[i].ratios[k];

            if (r->samples == 0) {
                continue;
            }

            p = ngx_sprintf(p, "%s{\"name\":\"%s\",\"bytes_per_token\":",
                            n++ ? "," : "", r->name);
            p = ngx_http_prefix_route_status_ratio(p, r->ratio);
            p = ngx_sprintf(p, ",\"samples\":%uD,\"offset_tokens\":%D,"
                               "\"answer_offset_tokens\":%D}",
                            r->samples, r->offset[0] / 16,
                            r->offset[1] / 16);
        }

        *p++ = ']';

        p = ngx_sprintf(p, ",\"peers\":[");

        for (n = 0; n < st[i].npeers; n++) {
            ps = &st[i].peers[n];

            p = ngx_sprintf(p, "%s{\"name\":\"%V\",\"server\":\"%V\","
                               "\"state\":\"%V\"",
                            n ? "," : "", ps->name, &ps->server, ps->state);

            for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_P_N; k++) {
                p = ngx_sprintf(p, ",\"%s\":%uL",
                                ngx_http_prefix_route_pfields[k].json,
                                ps->v[k]);
            }

            if (ps->engine.read && !ps->engine.fresh) {
                p = ngx_sprintf(p, ",\"engine\":{\"age_ms\":%uL}",
                                ps->engine.age);

            } else if (ps->engine.read) {
                p = ngx_sprintf(p, ",\"engine\":{\"waiting\":%uL,"
                                   "\"running\":%uL,\"age_ms\":%uL",
                                ps->engine.waiting, ps->engine.running,
                                ps->engine.age);

                if (ps->engine.kv >= 0) {
                    p = ngx_sprintf(p, ",\"kv_cache_usage\":%uL.%03uL",
                                    ps->engine.kv / 1000,
                                    ps->engine.kv % 1000);
                }

                *p++ = '}';
            }

            *p++ = '}';
        }

        p = ngx_sprintf(p, "]}");
    }

    return ngx_sprintf(p, "],\"version\":\"%s\",\"build_id\":\"%s\"}\n",
                       NGX_HTTP_PREFIX_ROUTE_VERSION,
                       ngx_http_prefix_route_build_id());
}


/*
 * The Prometheus text exposition format: each metric once with its HELP
 * and TYPE lines, then a sample per upstream (and peer), labelled
 * "upstream" and "peer", whose values were escaped before
 * (..._status_escape()); model names keep only letters, digits and
 * "-._:/@+" (..._model_name()).
 */

static u_char *
ngx_http_prefix_route_status_prometheus(u_char *p, ngx_array_t *stats)
{
    ngx_uint_t                          i, k, n;
    ngx_http_prefix_route_stat_t       *st;
    ngx_http_prefix_route_ratio_t      *r;
    ngx_http_prefix_route_field_t      *f;
    ngx_http_prefix_route_peer_stat_t  *ps;

    st = stats->elts;

    p = ngx_sprintf(p, "# HELP nginx_prefix_route_build_info 1, the "
                       "module's version and the build ID of the file "
                       "nginx loaded.\n"
                       "# TYPE nginx_prefix_route_build_info gauge\n"
                       "nginx_prefix_route_build_info"
                       "{version=\"%s\",build_id=\"%s\"} 1\n",
                    NGX_HTTP_PREFIX_ROUTE_VERSION,
                    ngx_http_prefix_route_build_id());

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_U_N; k++) {
        f = &ngx_http_prefix_route_ufields[k];

        p = ngx_http_prefix_route_status_help(p, f);

        for (i = 0; i < stats->nelts; i++) {
            p = ngx_sprintf(p, "nginx_prefix_route_%s{upstream=\"%V\"} %uL\n",
                            f->metric, st[i].name, st[i].v[k]);
        }
    }

    p = ngx_http_prefix_route_status_by(p, stats, "requests_total",
                            "Requests by $prefix_route_status.", "status",
                            ngx_http_prefix_route_status_names,
                            NGX_HTTP_PREFIX_ROUTE_NSTATUS,
                            offsetof(ngx_http_prefix_route_stat_t, requests));

    p = ngx_http_prefix_route_status_by(p, stats, "bypassed_total",
                            "BYPASS requests by why the module did not route "
                            "them, the words of $prefix_route_bypass.",
                            "reason", ngx_http_prefix_route_bypass_names,
                            NGX_HTTP_PREFIX_ROUTE_NBYPASS,
                            offsetof(ngx_http_prefix_route_stat_t, bypassed));

    p = ngx_http_prefix_route_status_lock(p, stats);

    /* "check=1": as in JSON, no sample where the walk had no memory */

    for (i = 0, n = 0; i < stats->nelts; i++) {
        if (st[i].errors < 0) {
            continue;
        }

        if (n++ == 0) {
            p = ngx_sprintf(p, "# HELP nginx_prefix_route_index_errors "
                               "Inconsistencies a walk of the index found "
                               "(?check=1 only): a bug, please report it.\n"
                               "# TYPE nginx_prefix_route_index_errors "
                               "gauge\n");
        }

        p = ngx_sprintf(p, "nginx_prefix_route_index_errors"
                           "{upstream=\"%V\"} %i\n",
                        st[i].name, st[i].errors);
    }

    p = ngx_sprintf(p, "# HELP nginx_prefix_route_peer_state "
                       "1 for the peer's state: up, down, failing, "
                       "unhealthy, erring or backup.\n"
                       "# TYPE nginx_prefix_route_peer_state gauge\n");

    for (i = 0; i < stats->nelts; i++) {
        for (n = 0; n < st[i].npeers; n++) {
            ps = &st[i].peers[n];
            p = ngx_sprintf(p, "nginx_prefix_route_peer_state"
                               "{upstream=\"%V\",peer=\"%V\",state=\"%V\"} 1\n",
                            st[i].name, ps->name, ps->state);
        }
    }

    p = ngx_sprintf(p, "# HELP nginx_prefix_route_bytes_per_token "
                       "Bytes of canonical prompt per engine token, learned "
                       "per model from the responses' usage.\n"
                       "# TYPE nginx_prefix_route_bytes_per_token gauge\n");

    for (i = 0; i < stats->nelts; i++) {
        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_MODELS; k++) {
            r = &st[i].ratios[k];

            /* learned only: names sent a few times make no series */

            if (r->samples < NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN) {
                continue;
            }

            p = ngx_sprintf(p, "nginx_prefix_route_bytes_per_token"
                               "{upstream=\"%V\",model=\"%s\"} ",
                            st[i].name, r->name);
            p = ngx_http_prefix_route_status_ratio(p, r->ratio);
            *p++ = '\n';
        }
    }

    p = ngx_sprintf(p, "# HELP nginx_prefix_route_prediction_offset_tokens "
                       "Tokens by which the predicted cached tokens ran "
                       "over the engines' reports, learned per model; "
                       "end=\"answer\" where the match ended with an "
                       "assistant answer.\n"
                       "# TYPE nginx_prefix_route_prediction_offset_tokens "
                       "gauge\n");

    for (i = 0; i < stats->nelts; i++) {
        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_MODELS; k++) {
            r = &st[i].ratios[k];

            /* learned only: names sent a few times make no series */

            if (r->samples < NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN) {
                continue;
            }

            p = ngx_sprintf(p, "nginx_prefix_route_prediction_offset_tokens"
                               "{upstream=\"%V\",model=\"%s\",end=\"prompt\"}"
                               " %D\n"
                               "nginx_prefix_route_prediction_offset_tokens"
                               "{upstream=\"%V\",model=\"%s\",end=\"answer\"}"
                               " %D\n",
                            st[i].name, r->name, r->offset[0] / 16,
                            st[i].name, r->name, r->offset[1] / 16);
        }
    }

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_P_N; k++) {
        f = &ngx_http_prefix_route_pfields[k];

        p = ngx_http_prefix_route_status_help(p, f);

        for (i = 0; i < stats->nelts; i++) {
            for (n = 0; n < st[i].npeers; n++) {
                ps = &st[i].peers[n];
                p = ngx_sprintf(p, "nginx_prefix_route_%s"
                                   "{upstream=\"%V\",peer=\"%V\"} %uL\n",
                                f->metric, st[i].name, ps->name, ps->v[k]);
            }
        }
    }

    /* the engines' gauges, for the peers whose metrics page was read */

    for (k = 0; k < 4; k++) {
        f = &ngx_http_prefix_route_efields[k];

        p = ngx_http_prefix_route_status_help(p, f);

        for (i = 0; i < stats->nelts; i++) {
            for (n = 0; n < st[i].npeers; n++) {
                ps = &st[i].peers[n];

                if (!ps->engine.read
                    || (k < 3 && !ps->engine.fresh)
                    || (k == 2 && ps->engine.kv < 0))
                {
                    continue;
                }

                p = ngx_sprintf(p, "nginx_prefix_route_%s"
                                   "{upstream=\"%V\",peer=\"%V\"} ",
                                f->metric, st[i].name, ps->name);

                switch (k) {

                case 0:
                    p = ngx_sprintf(p, "%uL\n", ps->engine.waiting);
                    break;

                case 1:
                    p = ngx_sprintf(p, "%uL\n", ps->engine.running);
                    break;

                case 2:
                    p = ngx_sprintf(p, "%uL.%03uL\n", ps->engine.kv / 1000,
                                    ps->engine.kv % 1000);
                    break;

                default: /* 3: ms as seconds */
                    p = ngx_sprintf(p, "%uL.%03uL\n", ps->engine.age / 1000,
                                    ps->engine.age % 1000);
                }
            }
        }
    }

    return p;
}


/*
 * The page for a person: per upstream, its zone and counters, then a row
 * per peer with its state, load and hit rate; it reloads itself.
 */

static u_char *
ngx_http_prefix_route_status_html(u_char *p, ngx_array_t *stats)
{
    uint64_t                           *v;
    ngx_uint_t                          i, k, n;
    ngx_http_prefix_route_stat_t       *st;
    ngx_http_prefix_route_ratio_t      *r;
    ngx_http_prefix_route_peer_stat_t  *ps;

    st = stats->elts;

    p = ngx_cpymem(p, NGX_HTTP_PREFIX_ROUTE_HTML_HEAD,
                   sizeof(NGX_HTTP_PREFIX_ROUTE_HTML_HEAD) - 1);

    p = ngx_sprintf(p, "<p>version %s, build ID %s</p>\n",
                    NGX_HTTP_PREFIX_ROUTE_VERSION,
                    ngx_http_prefix_route_build_id());

    for (i = 0; i < stats->nelts; i++) {
        v = st[i].v;

        p = ngx_cpymem(p, "<h2>upstream ", 13);
        p = (u_char *) ngx_escape_html(p, st[i].name->data, st[i].name->len);
        p = ngx_cpymem(p, "</h2>\n<p>zone ", 14);
        p = (u_char *) ngx_escape_html(p, st[i].zone->data, st[i].zone->len);

        p = ngx_sprintf(p, ": %uL of %uL KiB used; blocks indexed: %uL; "
                           "pairs protected: %uL of %uL (held back %uL times); "
                           "tenants: %uL; evicted: %uL; "
                           "forgotten: %uL<br>requests:",
                        v[NGX_HTTP_PREFIX_ROUTE_U_USED] / 1024,
                        v[NGX_HTTP_PREFIX_ROUTE_U_SIZE] / 1024,
                        v[NGX_HTTP_PREFIX_ROUTE_U_BLOCKS],
                        v[NGX_HTTP_PREFIX_ROUTE_U_PROTECTED],
                        v[NGX_HTTP_PREFIX_ROUTE_U_HOLDERS],
                        v[NGX_HTTP_PREFIX_ROUTE_U_HELD_BACK],
                        v[NGX_HTTP_PREFIX_ROUTE_U_TENANTS],
                        v[NGX_HTTP_PREFIX_ROUTE_U_EVICTIONS],
                        v[NGX_HTTP_PREFIX_ROUTE_U_FORGOTTEN]);

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_NSTATUS; k++) {
            p = ngx_sprintf(p, " %V %uL",
                            &ngx_http_prefix_route_status_names[k],
                            st[i].requests[k]);
        }

        for (k = 0, n = 0; k < NGX_HTTP_PREFIX_ROUTE_NBYPASS; k++) {
            if (st[i].bypassed[k]) {
                p = ngx_sprintf(p, "%s%V %uL", n++ ? ", " : " (BYPASS: ",
                                &ngx_http_prefix_route_bypass_names[k],
                                st[i].bypassed[k]);
            }
        }

        if (n) {
            *p++ = ')';
        }

        p = ngx_cpymem(p, "; prompt bytes matched: ", 24);
        p = ngx_http_prefix_route_status_percent(p,
                                        v[NGX_HTTP_PREFIX_ROUTE_U_MATCHED],
                                        v[NGX_HTTP_PREFIX_ROUTE_U_PROMPT]);

        if (v[NGX_HTTP_PREFIX_ROUTE_U_SHADOW]) {
            p = ngx_sprintf(p, "<br>shadow mode: the configured balancer "
                               "routes; prefix_route would have matched ");
            p = ngx_http_prefix_route_status_percent(p,
                                        v[NGX_HTTP_PREFIX_ROUTE_U_PREDICTED],
                                        v[NGX_HTTP_PREFIX_ROUTE_U_PROMPT]);
        }

        p = ngx_sprintf(p, "; held by the best server: ");
        p = ngx_http_prefix_route_status_percent(p,
                                        v[NGX_HTTP_PREFIX_ROUTE_U_LONGEST],
                                        v[NGX_HTTP_PREFIX_ROUTE_U_PROMPT]);

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_MODELS; k++) {
            r = &st[i].ratios[k];

            if (r->samples) {
                p = ngx_sprintf(p, "<br>model %s: ", r->name);
                p = ngx_http_prefix_route_status_ratio(p, r->ratio);
                p = ngx_sprintf(p, " bytes of prompt a token (%uD responses),"
                                   " prediction offset %D tokens (%D after "
                                   "an answer)",
                                r->samples, r->offset[0] / 16,
                                r->offset[1] / 16);
            }
        }

        p = ngx_sprintf(p, "</p>\n<table><tr><th>peer</th><th>state</th>"
                           "<th>in flight</th><th>queued KiB</th>"
                           "<th>requests</th><th>hits</th><th>hit rate</th>"
                           "<th>blocks</th>"
                           "<th>engine hit rate</th><th>predicted</th>"
                           "<th>agreed</th><th>engine queue</th>"
                           "<th>engine running</th><th>KV cache</th>"
                           "</tr>\n");

        for (n = 0; n < st[i].npeers; n++) {
            ps = &st[i].peers[n];
            v = ps->v;

            p = ngx_cpymem(p, "<tr><td>", 8);
            p = (u_char *) ngx_escape_html(p, ps->name->data, ps->name->len);

            /* a resolved address: the name it came from */

            if (ps->server.len
                && ngx_memn2cmp(ps->server.data, ps->name->data,
                                ps->server.len, ps->name->len)
                   != 0)
            {
                p = ngx_cpymem(p, "<br><small>", 11);
                p = (u_char *) ngx_escape_html(p, ps->server.data,
                                               ps->server.len);
                p = ngx_cpymem(p, "</small>", 8);
            }

            p = ngx_sprintf(p, "</td><td class=\"%V\">%V</td><td>%uL</td>"
                               "<td>%uL</td><td>%uL</td><td>%uL</td><td>",
                            ps->state, ps->state,
                            v[NGX_HTTP_PREFIX_ROUTE_P_INFLIGHT],
                            v[NGX_HTTP_PREFIX_ROUTE_P_QUEUED] / 1024,
                            v[NGX_HTTP_PREFIX_ROUTE_P_REQUESTS],
                            v[NGX_HTTP_PREFIX_ROUTE_P_HITS]);

            p = ngx_http_prefix_route_status_percent(p,
                                        v[NGX_HTTP_PREFIX_ROUTE_P_HITS],
                                        v[NGX_HTTP_PREFIX_ROUTE_P_REQUESTS]);

            p = ngx_sprintf(p, "</td><td>%uL%s</td><td>",
                            v[NGX_HTTP_PREFIX_ROUTE_P_BLOCKS],
                            v[NGX_HTTP_PREFIX_ROUTE_P_DROPPING]
                            ? " (dropping)" : "");

            /* token-weighted: cached and predicted of the prompt tokens */

            p = ngx_http_prefix_route_status_percent(p,
                                    v[NGX_HTTP_PREFIX_ROUTE_P_FB_CACHED],
                                    v[NGX_HTTP_PREFIX_ROUTE_P_FB_PROMPT]);
            p = ngx_cpymem(p, "</td><td>", 9);
            p = ngx_http_prefix_route_status_percent(p,
                                    v[NGX_HTTP_PREFIX_ROUTE_P_FB_PREDICTED],
                                    v[NGX_HTTP_PREFIX_ROUTE_P_FB_PROMPT]);
            p = ngx_cpymem(p, "</td><td>", 9);
            p = ngx_http_prefix_route_status_percent(p,
                                    v[NGX_HTTP_PREFIX_ROUTE_P_FB_AGREED],
                                    v[NGX_HTTP_PREFIX_ROUTE_P_FB_RESPONSES]);

            if (ps->engine.fresh) {
                p = ngx_sprintf(p, "</td><td>%uL</td><td>%uL</td><td>",
                                ps->engine.waiting, ps->engine.running);
                p = ngx_http_prefix_route_status_percent(p,
                                        ps->engine.kv >= 0 ? ps->engine.kv : 0,
                                        ps->engine.kv >= 0 ? 1000 : 0);

            } else {
                p = ngx_cpymem(p, "</td><td>-</td><td>-</td><td>-", 30);
            }

            p = ngx_cpymem(p, "</td></tr>\n", 11);
        }

        p = ngx_cpymem(p, "</table>\n", 9);

        p = ngx_http_prefix_route_history_html(p, st[i].samples,
                                        st[i].sample,
                                        st[i].v[NGX_HTTP_PREFIX_ROUTE_U_SHADOW],
                                        st[i].npeers, st[i].names,
                                        st[i].gauges);
    }

    return ngx_cpymem(p, "</body></html>\n", 15);
}


/*
 * A Prometheus counter of each upstream by a label of its own: "names"
 * are the label's "n" values, "off" where their counts begin in
 * ngx_http_prefix_route_stat_t.
 */

static u_char *
ngx_http_prefix_route_status_by(u_char *p, ngx_array_t *stats, char *metric,
    char *help, char *label, ngx_str_t *names, ngx_uint_t n, size_t off)
{
    uint64_t                      *v;
    ngx_uint_t                     i, k;
    ngx_http_prefix_route_stat_t  *st;

    st = stats->elts;

    p = ngx_sprintf(p, "# HELP nginx_prefix_route_%s %s\n"
                       "# TYPE nginx_prefix_route_%s counter\n",
                    metric, help, metric);

    for (i = 0; i < stats->nelts; i++) {
        v = (uint64_t *) ((u_char *) &st[i] + off);

        for (k = 0; k < n; k++) {
            p = ngx_sprintf(p, "nginx_prefix_route_%s"
                               "{upstream=\"%V\",%s=\"%V\"} %uL\n",
                            metric, st[i].name, label, &names[k], v[k]);
        }
    }

    return p;
}

/*
 * The zone mutex hold times of lock_hold_ns_log2 as a Prometheus
 * histogram in seconds: a hold of whole ns from 2^k to 2^(k+1) - 1 is in
 * the bucket of le = 2^(k+1) - 1 ns exactly.  Buckets from 255 ns to
 * 2.1 s: the shortest take no lock work, the longest are a stuck worker.
 */

static u_char *
ngx_http_prefix_route_status_lock(u_char *p, ngx_array_t *stats)
{
    uint64_t                       n, le;
    ngx_uint_t                     i, k;
    ngx_http_prefix_route_stat_t  *st;

    st = stats->elts;

    p = ngx_sprintf(p, "# HELP nginx_prefix_route_lock_hold_seconds "
                       "Time each balancer call held the zone mutex, from "
                       "taking it to giving it back.\n"
                       "# TYPE nginx_prefix_route_lock_hold_seconds "
                       "histogram\n");

    for (i = 0; i < stats->nelts; i++) {

        for (k = 0, n = 0; k < 32; k++) {
            n += st[i].lock[k];

            if (k < 7 || k == 31) {
                continue;
            }

            le = ((uint64_t) 2 << k) - 1;

            p = ngx_sprintf(p, "nginx_prefix_route_lock_hold_seconds_bucket"
                               "{upstream=\"%V\",le=\"%uL.%09uL\"} %uL\n",
                            st[i].name, le / 1000000000, le % 1000000000, n);
        }

        p = ngx_sprintf(p, "nginx_prefix_route_lock_hold_seconds_bucket"
                           "{upstream=\"%V\",le=\"+Inf\"} %uL\n"
                           "nginx_prefix_route_lock_hold_seconds_sum"
                           "{upstream=\"%V\"} %uL.%09uL\n"
                           "nginx_prefix_route_lock_hold_seconds_count"
                           "{upstream=\"%V\"} %uL\n",
                        st[i].name, n, st[i].name,
                        st[i].lock_sum / 1000000000,
                        st[i].lock_sum % 1000000000, st[i].name, n);
    }

    return p;
}


/* a Prometheus metric's HELP and TYPE lines */

static u_char *
ngx_http_prefix_route_status_help(u_char *p, ngx_http_prefix_route_field_t *f)
{
    return ngx_sprintf(p, "# HELP nginx_prefix_route_%s %s\n"
                          "# TYPE nginx_prefix_route_%s %s\n",
                       f->metric, f->help, f->metric, f->type);
}


/* "part/whole" as a percentage with one decimal, "-" when whole is 0 */

static u_char *
ngx_http_prefix_route_status_percent(u_char *p, uint64_t part, uint64_t whole)
{
    uint64_t  permille;

    if (whole == 0) {
        *p++ = '-';
        return p;
    }

    permille = part * 1000 / whole;

    return ngx_sprintf(p, "%uL.%uL%%", permille / 10, permille % 10);
}


/* a ratio kept x 256 with two decimals */

static u_char *
ngx_http_prefix_route_status_ratio(u_char *p, uint32_t ratio)
{
    uint32_t  hundredths;

    hundredths = (uint32_t) (((uint64_t) ratio * 100 + 128) / 256);

    return ngx_sprintf(p, "%uD.%02uD", hundredths / 100, hundredths % 100);
}


/* a GNU build ID is 20 bytes (SHA-1) by default; longer ones are cut */
#define NGX_HTTP_PREFIX_ROUTE_BUILD_ID_LEN  32


static int ngx_http_prefix_route_build_id_note(struct dl_phdr_info *info,
    size_t size, void *data);


u_char *
ngx_http_prefix_route_build_id(void)
{
    static ngx_uint_t  read;
    static u_char      id[2 * NGX_HTTP_PREFIX_ROUTE_BUILD_ID_LEN + 1];

    if (!read) {
        read = 1;
        (void) dl_iterate_phdr(ngx_http_prefix_route_build_id_note, id);
    }

    return id;
}


/*
 * dl_iterate_phdr()'s callback: for the loaded object whose segments hold
 * this module's data, writes the hex of its NT_GNU_BUILD_ID note, if any,
 * to "data" and stops the walk (returns 1); 0 for another object.
 */

static int
ngx_http_prefix_route_build_id_note(struct dl_phdr_info *info, size_t size,
    void *data)
{
    u_char            *p, *end, *name, *desc, *next;
    size_t             len;
    uintptr_t          self, start;
    ngx_uint_t         i, ours;
    ElfW(Nhdr)        *nh;
    const ElfW(Phdr)  *ph;

    self = (uintptr_t) &ngx_http_prefix_route_module;
    ours = 0;

    for (i = 0; i < info->dlpi_phnum; i++) {
        ph = &info->dlpi_phdr[i];
        start = info->dlpi_addr + ph->p_vaddr;

        if (ph->p_type == PT_LOAD
            && self >= start && self < start + ph->p_memsz)
        {
            ours = 1;
        }
    }

    if (!ours) {
        return 0;
    }

    for (i = 0; i < info->dlpi_phnum; i++) {
        ph = &info->dlpi_phdr[i];

        if (ph->p_type != PT_NOTE) {
            continue;
        }

        p = (u_char *) (info->dlpi_addr + ph->p_vaddr);
        end = p + ph->p_memsz;

        while ((size_t) (end - p) >= sizeof(ElfW(Nhdr))) {
            nh = (ElfW(Nhdr) *) p;
            name = p + sizeof(ElfW(Nhdr));
            desc = name + ngx_align(nh->n_namesz, 4);

            if (desc > end
                || (size_t) (end - desc) < ngx_align(nh->n_descsz, 4))
            {
                break;
            }

            next = desc + ngx_align(nh->n_descsz, 4);

            if (nh->n_type == NT_GNU_BUILD_ID
                && nh->n_namesz == sizeof("GNU")
                && ngx_memcmp(name, "GNU", sizeof("GNU")) == 0)
            {
                len = ngx_min(nh->n_descsz,
                              NGX_HTTP_PREFIX_ROUTE_BUILD_ID_LEN);
                *ngx_hex_dump(data, desc, len) = '\0';
                return 1;
            }

            p = next;
        }
    }

    return 1;
}
