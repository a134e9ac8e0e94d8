
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * The token budget of one engine step with chunked prefill: vLLM's default
 * max_num_batched_tokens on GPUs of 70 GiB or more (EngineArgs, vllm/
 * engine/arg_utils.py; SGLang's default chunked_prefill_size is the
 * same).  Each request decoding takes one token of it in every step.
 */
#define NGX_HTTP_PREFIX_ROUTE_STEP_TOKENS  8192


/*
 * Prefill work charged to a request besides its uncached prompt, in bytes
 * of prompt: the 15-30 ms fixed cost of a step measured for Llama-3-8B on
 * an H100 at 30-40 us a token is 500-750 tokens, ~2 KiB at 4 bytes a token
 * (figures collected in docs/design.md, "Choosing a server").
 */
#define NGX_HTTP_PREFIX_ROUTE_REQUEST_COST  2048


/* prefix_route policy=: how a server is chosen */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_POLICY_TTFT = 0,
    NGX_HTTP_PREFIX_ROUTE_POLICY_CACHE_AWARE
} ngx_http_prefix_route_policy_e;


/* the prefix_route parameters the choice depends on */
typedef struct {
    ngx_http_prefix_route_policy_e  policy;
    ngx_uint_t                      affinity;   /* percent: weight of the
                                                   prefill redone */
    ngx_uint_t                      max_load;   /* percent of the mean
                                                   requests in flight;
                                                   0: no bound */
    size_t                          slack;      /* bytes: equal costs */
    ngx_uint_t                      instances;  /* nginx instances in
                                                   front of the servers,
                                                   this one among them */
} ngx_http_prefix_route_choice_t;


/*
 * One server as the choice sees it.  Work figures are in bytes of
 * canonical prompt, the module's unit of prefill work (about 4 bytes per
 * token for English text with Llama-3's tokenizer).
 */
typedef struct {
    double          queued;      /* prefill work sent to it that has not
                                    started to answer */
    double          outstanding; /* prompt bytes of its requests in flight */
    ngx_uint_t      inflight;    /* requests in flight */
    ngx_uint_t      decoding;    /* of which answering (past prefill) */
    ngx_uint_t      others;      /* other clients' requests queued there,
                                    by the engine's gauges */
    ngx_uint_t      others_running; /* other clients' requests running */
    size_t          match;       /* bytes of this prompt it holds */
    ngx_uint_t      cached;      /* blocks the index has on it */
    ngx_int_t       weight;      /* server weight, >= 1 */
    uint64_t        rank;        /* tie-break: hash of prompt key, name */
    unsigned        usable:1;    /* up, not tried, under max_conns */

    /* set by ngx_http_prefix_route_choose() */
    size_t          held;        /* bytes the cost counts it to hold */
    double          cost;
    unsigned        room:1;      /* under the load bound */
} ngx_http_prefix_route_candidate_t;


/*
 * Chooses a server for a prompt of "len" bytes among the usable
 * candidates "c"; docs/design.md, "Choosing a server", gives the model,
 * its sources and why.
 *
 * policy=ttft: the lowest cost, in bytes of prompt, among the servers
 * with room under the load bound (max_load percent of the weighted mean
 * of requests in flight, plus 2; the least loaded always has room):
 *
 *     ttft = (queued + len - match)
 *            * STEP_TOKENS / (STEP_TOKENS - decoding) / weight
 *     cost = ttft + affinity / 100 * (longest - match) * evict
 *
 * "longest" is the longest match among the usable servers; "evict" is 2
 * while a holder of it has at most its weighted share of the index's
 * blocks (a copy elsewhere would evict as much there), else 1.  A server
 * whose share of the index is under 100 / max_load of its weighted share
 * (restarted, new, or given a new zone) is counted to hold ("match") the
 * longest prefix the index has on two usable servers or more, one the
 * fleet shares (a system prompt, tools): it then takes new prompts that
 * share it until it holds its share, where otherwise every server would
 * look faster and it would stay idle.  Costs within
 * max(slack, 1/8 of the lowest) of the lowest are equal; among them,
 * of those whose match falls short of the longest among them by at most
 * that tolerance, a server whose share of the index is at most max_load
 * percent of the mean, then the highest rank wins.  "expect": bytes the
 * usable server of the highest rank is expected to hold of a conversation
 * another nginx instance placed (its first answer unknown here), or with
 * instances > 1 of a prompt without answers the others may have placed,
 * when the index knows less there; 0: no guess.
 *
 * policy=cache_aware, the simple rule kept as a baseline: when the
 * servers' requests in flight differ by more than 15, the least
 * outstanding prompt bytes; otherwise the longest match, ties to the
 * least outstanding bytes, then the highest rank.  cost = outstanding.
 *
 * Other clients' requests count only as far as a server has more of them
 * than the usable server with the fewest: what every server carries alike
 * delays each choice alike and changes none, while the readings' noise
 * would; before that, each server's count loses what the other nginx
 * instances (instances= less one) are expected to send it, as many as
 * this nginx has in flight there, queued and answering apart.  Then
 * those queued are each as much work as the server's own
 * queued requests on average, this one's uncached part there and the
 * request cost counted as one more, and all are in flight; those running
 * are decoding.  "queued", "inflight" and "decoding" are changed so.
 *
 * Returns the index of the chosen candidate, or NGX_ERROR (-1) when none
 * is usable.
 */
ngx_int_t ngx_http_prefix_route_choose(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, size_t expect,
    ngx_http_prefix_route_choice_t *conf);


#endif /* _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_ */
