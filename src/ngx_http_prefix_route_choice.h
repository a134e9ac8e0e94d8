
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * One peer as the cost model sees it.  All work figures are in bytes of
 * canonical prompt, the module's unit of prefill work (about 4 bytes per
 * token for English text with Llama-3's tokenizer).
 */
typedef struct {
    double          queued;     /* prefill work sent to it and not finished */
    double          recent;     /* prefill work it finished, decayed */
    size_t          match;      /* bytes of this prompt it holds */
    ngx_int_t       weight;     /* server weight, >= 1 */
    uint64_t        rank;       /* tie-break: hash of prefix key and name */
    unsigned        usable:1;   /* up, not tried, under max_conns */
    unsigned        sticky:1;   /* it holds the prompt up to where an
                                   earlier prompt ended: a conversation */

    double          cost;       /* set by ngx_http_prefix_route_choose() */
} ngx_http_prefix_route_candidate_t;


/*
 * Estimated time to first token of a prompt of "len" bytes on each usable
 * candidate, in bytes of prefill work divided by the server weight:
 *
 *     credit = affinity / 100 * match
 *     spread = sticky ? 0 : max(0, recent - credit)
 *     cost   = (queued + spread + len - credit) / weight
 *
 * "queued" is the prefill queue the request waits behind; "len - credit"
 * is the part of the prompt the peer must compute (NVIDIA Dynamo's KV
 * router scores peers the same way).  Recent work is a longer-term load
 * signal that spreads new prompts, and new conversations behind a shared
 * preamble, over idle peers; the recent work that built the matched prefix
 * is no reason to leave a peer, so the credit is taken off it, and a peer
 * that holds the conversation itself ("sticky") is not charged recent work
 * at all, so that only queued work moves a conversation (docs/design.md,
 * "Choosing a peer").
 * When no candidate holds the prompt as its own conversation ("sticky"),
 * the highest rank wins among the candidates with the longest match
 * whose cost is within half the mean load (queued + spread, over weight)
 * or a quarter of the prompt, whichever is more, of the lowest cost:
 * separate nginx instances then place a new or unknown conversation alike
 * unless one sees its peer loaded beyond about 1.5 times the mean
 * (rendezvous hashing with bounded loads, Mirrokni, Thorup and
 * Zadimoghaddam, 2018; the bound was chosen with bench/, see
 * docs/design.md).  Otherwise, and when no such candidate is found,
 * candidates whose cost is within "slack" bytes of the lowest are equal
 * and the highest rank among them wins.
 *
 * Sets c[i].cost of the usable candidates and returns the index of the
 * chosen one, or NGX_ERROR (-1) when none is usable.
 */
ngx_int_t ngx_http_prefix_route_choose(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, ngx_uint_t affinity, size_t slack);

/*
 * Work "work" remembered "elapsed" ms ago with a half-life of "half_life"
 * ms: work * 2^(-elapsed / half_life).  A half_life of 0 forgets at once.
 * A negative "elapsed" (a time stamped by another worker, whose cached
 * clock is a little ahead) counts as 0.
 */
double ngx_http_prefix_route_decay(double work, ngx_msec_int_t elapsed,
    ngx_msec_t half_life);


#endif /* _NGX_HTTP_PREFIX_ROUTE_CHOICE_H_INCLUDED_ */
