
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_METRICS_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_METRICS_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * A reader of an engine's metrics page, the Prometheus text exposition
 * format, fed in pieces as they arrive and never kept whole: it keeps one
 * line at a time, so that a page of any size costs the same memory
 * (docs/design.md, "Engine probes").  It knows the gauges of four
 * engines, by their documented names:
 *
 *   engine     waiting                    running
 *   vLLM       vllm:num_requests_waiting  vllm:num_requests_running
 *   SGLang     sglang:num_queue_reqs      sglang:num_running_reqs
 *   TGI        tgi_queue_size             tgi_batch_current_size
 *   llama.cpp  llamacpp:requests_deferred llamacpp:requests_processing
 *
 * KV cache usage (0 to 1): vllm:kv_cache_usage_perc (older releases:
 * vllm:gpu_cache_usage_perc), sglang:token_usage,
 * llamacpp:kv_cache_usage_ratio (older llama-server builds); TGI has none.
 * A counter that only a restart lowers: vllm:prompt_tokens_total,
 * sglang:prompt_tokens_total, tgi_request_count,
 * llamacpp:prompt_tokens_total.
 *
 * Sources: vLLM's docs, "Production Metrics"; SGLang's docs, "Production
 * Metrics"; TGI's docs, reference/metrics; llama.cpp's
 * tools/server/server-task.cpp (served with --metrics).  Series of one
 * name with different labels (a model, a data parallel rank) are summed;
 * KV usage takes the highest.
 */

/* longer lines are skipped: none of the names above needs one */
#define NGX_HTTP_PREFIX_ROUTE_METRICS_LINE  512

/*
 * a value above this is out of range: the line is not believed; a sum of
 * lines stops there, so that it stays a whole number of requests
 */
#define NGX_HTTP_PREFIX_ROUTE_METRICS_MAX   1e15


typedef struct {
    double      waiting;               /* requests queued, not started */
    double      running;               /* requests in the running batch */
    double      kv;                    /* KV cache usage, 0 to 1 */
    double      served;                /* the counter a restart resets */

    unsigned    has_waiting:1;
    unsigned    has_running:1;
    unsigned    has_kv:1;
    unsigned    has_served:1;
    unsigned    skip:1;                /* in a line too long */

    ngx_uint_t  bad;                   /* lines of a known name not read */
    size_t      len;
    u_char      line[NGX_HTTP_PREFIX_ROUTE_METRICS_LINE];
} ngx_http_prefix_route_metrics_t;


/* Starts a page. */
void ngx_http_prefix_route_metrics_init(ngx_http_prefix_route_metrics_t *m);

/* Reads the next n bytes of the page. */
void ngx_http_prefix_route_metrics_feed(ngx_http_prefix_route_metrics_t *m,
    u_char *p, size_t n);

/*
 * Ends the page: reads its last line if it had no newline.  Returns NGX_OK
 * when both the waiting and the running gauge of one engine were found,
 * else NGX_DECLINED (the fields found are set all the same).
 */
ngx_int_t ngx_http_prefix_route_metrics_done(
    ngx_http_prefix_route_metrics_t *m);


#endif /* _NGX_HTTP_PREFIX_ROUTE_METRICS_H_INCLUDED_ */
