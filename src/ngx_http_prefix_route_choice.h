
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
    ngx_uint_t      others;      /* of which other clients' and queued, by
                                    the engine's gauges: the caller adds
                                    their work to "queued" */
    size_t          match;       /* bytes of this prompt it holds */
    ngx_uint_t      cached;      /* blocks the index has on it */
    ngx_int_t       weight;      /* server weight, >= 1 */
    uint64_t        rank;        /* tie-break: hash of prompt key, name */
    unsigned        usable:1;    /* up, not tried, under max_conns */

    /* set by ngx_http_prefix_route_choose() */
    double          cost;
    unsigned        room:1;      /* under the load bound */
} ngx_http_prefix_route_candidate_t;


/*
 * Chooses a server for a prompt of "len" bytes among the usable
 * candidates "c" (docs/design.md, "Choosing a server").
 *
 * policy=ttft: the cost is the estimated time to first token on each
 * server plus the prefill the fleet would redo there, in bytes of prompt:
 *
 *     ttft = (queued + len - match)
 *            * STEP_TOKENS / (STEP_TOKENS - decoding) / weight
 *     cost = ttft + affinity / 100 * (longest - match)
 *
 * The queue is the prefill of the requests sent there that have not begun
 * to answer (a streamed answer begins when its prefill ends); the request
 * waits behind it and then computes what the server does not hold
 * (NVIDIA Dynamo's KV router scores the same two terms).  Requests
 * decoding take one token each of every step's budget, which vLLM's
 * chunked-prefill scheduler gives to running requests first, so they slow
 * the prefill by STEP_TOKENS / (STEP_TOKENS - decoding) (at most 2x).
 * "longest" is the longest match among the usable servers: a server
 * without it recomputes the difference, GPU time lost to every request
 * that queues there later, which affinity weighs against the request's
 * own wait (1 by default: a byte recomputed costs what a byte waited).
 * Only servers with room under the load bound may win: a server's
 * requests in flight, this one included, at most max_load percent of the
 * weighted mean rounded up, plus 2 ("consistent hashing with bounded
 * loads", Mirrokni, Thorup and Zadimoghaddam, 2018); the least loaded
 * always has room.  Costs within max(slack, 1/8 of the lowest) of the
 * lowest are equal.  Among them, those whose share of the index is at
 * most max_load percent of the mean (SGLang's router sends a request
 * nothing matches to the worker with the smallest tree; here a bound, as
 * for the load), then the highest rank wins: new prompts spread over an
 * idle fleet, and nginx instances that see similar loads agree.
 *
 * "expect" is a guess for a conversation this nginx instance has not
 * seen (no usable server is known to hold its first answer): another
 * instance placed its earlier turns, on an idle enough fleet where the
 * rank of its first turn put them, so the usable server of the highest
 * rank is expected to hold "expect" bytes (up to the last answer) when
 * the index knows less there.  The guess enters the estimates, nothing
 * else: a busy server still loses, and with one instance it applies only
 * to conversations the index has forgotten or never saw.  0: no guess.
 *
 * policy=cache_aware, the simple rule of SGLang's router, AIBrix and
 * Omni-Infer's nginx module, kept as a baseline: when the servers'
 * requests in flight differ by more than 15, the least outstanding prompt
 * bytes; otherwise the longest match, ties to the least outstanding
 * bytes, then the highest rank.  It sets cost to the outstanding bytes.
 *
 * Returns the index of the chosen candidate, or NGX_ERROR (-1) when none
 * is usable.
 */
ngx_int_t ngx_http_prefix_route_choose(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, size_t expect,
    ngx_http_prefix_route_choice_t *conf);


#endif /* _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_ */
