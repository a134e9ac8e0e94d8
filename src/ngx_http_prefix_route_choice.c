
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <math.h>

#include "ngx_http_prefix_route_choice.h"


/*
 * Costs within 1/CLOSE of the lowest are equal: the estimate counts
 * bytes, not the tokens and steps the engine will really run, and each
 * nginx instance sees only its own requests (docs/design.md).
 */
#define NGX_HTTP_PREFIX_ROUTE_CLOSE        8

/*
 * Requests a server may take beyond max_load of the mean: with a few
 * requests in flight, one more is a large share, and moving a
 * conversation for it costs more than the imbalance
 */
#define NGX_HTTP_PREFIX_ROUTE_ROOM         2

/* a server's weight, at least 1 */
#define ngx_http_prefix_route_weight(c)    ((c)->weight > 0 ? (c)->weight : 1)

/* policy=cache_aware: in-flight spread beyond which load alone decides */
#define NGX_HTTP_PREFIX_ROUTE_IMBALANCE    15


static void ngx_http_prefix_route_others(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, ngx_uint_t instances);
static ngx_int_t ngx_http_prefix_route_ttft(
    ngx_http_prefix_route_candidate_t *c, ngx_uint_t n, size_t len,
    size_t expect, ngx_http_prefix_route_choice_t *conf);
static ngx_int_t ngx_http_prefix_route_cache_aware(
    ngx_http_prefix_route_candidate_t *c, ngx_uint_t n);
static ngx_uint_t ngx_http_prefix_route_better(
    ngx_http_prefix_route_candidate_t *a, ngx_http_prefix_route_candidate_t *b,
    ngx_uint_t by_match);


ngx_int_t
ngx_http_prefix_route_choose(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, size_t expect,
    ngx_http_prefix_route_choice_t *conf)
{
    ngx_http_prefix_route_others(c, n, len, conf->instances);

    if (conf->policy == NGX_HTTP_PREFIX_ROUTE_POLICY_CACHE_AWARE) {
        return ngx_http_prefix_route_cache_aware(c, n);
    }

    return ngx_http_prefix_route_ttft(c, n, len, expect, conf);
}


/*
 * The other nginx instances route as this one does: each is expected to
 * send a server as many requests as this one has there, which the
 * gauges show as others'; only what is beyond that tells of a load this
 * nginx does not see (docs/design.md, "Engine probes").
 */

static void
ngx_http_prefix_route_others(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, ngx_uint_t instances)
{
    size_t      uncached;
    ngx_uint_t  i, waiting, running, own, peers;

    waiting = NGX_MAX_UINT32_VALUE;
    running = NGX_MAX_UINT32_VALUE;
    peers = instances > 1 ? instances - 1 : 0;

    for (i = 0; i < n; i++) {

        if (c[i].usable) {
            own = peers * (c[i].inflight - c[i].decoding);
            c[i].others = c[i].others > own ? c[i].others - own : 0;

            own = peers * c[i].decoding;
            c[i].others_running = c[i].others_running > own
                                  ? c[i].others_running - own : 0;

            waiting = ngx_min(waiting, c[i].others);
            running = ngx_min(running, c[i].others_running);
        }
    }

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        c[i].others -= waiting;
        c[i].others_running -= running;

        if (c[i].others) {
            own = c[i].inflight - c[i].decoding;
            uncached = len > c[i].match ? len - c[i].match : 0;

            c[i].queued += c[i].others
                           * (c[i].queued + (double) uncached
                              + NGX_HTTP_PREFIX_ROUTE_REQUEST_COST)
                           / (own + 1);
        }

        c[i].inflight += c[i].others + c[i].others_running;
        c[i].decoding += c[i].others_running;
    }
}


static ngx_int_t
ngx_http_prefix_route_ttft(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, size_t expect,
    ngx_http_prefix_route_choice_t *conf)
{
    double      decode, weight, total, room, best, limit, share,
                affinity;
    size_t      longest, guess, most, shared, next;
    uint64_t    cached;
    ngx_int_t   chosen, any, top;
    ngx_uint_t  i, inflight, bounded;

    total = 0;
    inflight = 0;
    cached = 0;
    longest = 0;
    shared = 0;
    top = NGX_ERROR;

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        /* "shared": the second longest match, held by two servers */

        next = ngx_min(longest, c[i].match);
        shared = ngx_max(shared, next);
        longest = ngx_max(longest, c[i].match);

        if (top == NGX_ERROR || c[i].rank > c[top].rank) {
            top = i;
        }
    }

    /* the guess for a conversation another instance placed */

    guess = ngx_min(expect, len);

    if (expect <= longest) {
        top = NGX_ERROR;

    } else {
        longest = guess;
    }

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        /* the guess for the top rank, the index's match for the others */

        c[i].held = ((ngx_int_t) i == top) ? guess : c[i].match;

        total += ngx_http_prefix_route_weight(&c[i]);
        inflight += c[i].inflight;
        cached += c[i].cached;
    }

    if (total == 0) {
        return NGX_ERROR;
    }

    /*
     * a copy of the prefix on another server also takes as much of its
     * cache, evicting prefixes others will redo: the prefill redone counts
     * twice while a holder of the longest match has at most its share of
     * the index; beyond, that pull would pile prefixes, and their requests,
     * on it (docs/design.md)
     */

    affinity = (double) conf->affinity / 100;

    for (i = 0; i < n; i++) {

        if (c[i].usable
            && c[i].held == longest
            && (double) c[i].cached * total
               <= (double) cached * ngx_http_prefix_route_weight(&c[i]))
        {
            affinity *= 2;
            break;
        }
    }

    /*
     * a server far under its share of the index is counted to hold what
     * the fleet shares: each other server looks faster for a new prompt
     * by that prefix, and it would never fill; recorded, its own match
     * takes over (docs/design.md, "Choosing a server")
     */

    for (i = 0; i < n; i++) {

        if (c[i].usable && conf->max_load
            && (double) c[i].cached * total * conf->max_load
               < (double) cached * ngx_http_prefix_route_weight(&c[i]) * 100)
        {
            c[i].held = ngx_max(c[i].held, shared);
        }
    }

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        decode = ngx_min(c[i].decoding, NGX_HTTP_PREFIX_ROUTE_STEP_TOKENS / 2);
        weight = ngx_http_prefix_route_weight(&c[i]);

        c[i].cost = (c[i].queued + (double) (len - c[i].held))
                    * NGX_HTTP_PREFIX_ROUTE_STEP_TOKENS
                    / (NGX_HTTP_PREFIX_ROUTE_STEP_TOKENS - decode) / weight
                    + (double) (longest - c[i].held) * affinity;
    }

    /* the load bound: room for this request, rounded up */

    bounded = 0;

    for (i = 0; i < n; i++) {

        c[i].room = 0;

        if (!c[i].usable) {
            continue;
        }

        weight = ngx_http_prefix_route_weight(&c[i]);
        room = ceil((double) conf->max_load / 100 * (inflight + 1) * weight
                    / total)
               + NGX_HTTP_PREFIX_ROUTE_ROOM;

        if (conf->max_load == 0 || c[i].inflight + 1 <= room) {
            c[i].room = 1;
            bounded++;
        }
    }

    /* with weights the least loaded may have no room: then all have */

    if (bounded == 0) {
        for (i = 0; i < n; i++) {
            c[i].room = c[i].usable;
        }
    }

    best = HUGE_VAL;

    for (i = 0; i < n; i++) {

        if (c[i].room && c[i].cost < best) {
            best = c[i].cost;
        }
    }

    limit = best + ngx_max((double) conf->slack,
                           best / NGX_HTTP_PREFIX_ROUTE_CLOSE);

    /*
     * among equal costs, a server that would redo more prefill than the
     * costs' tolerance, against the longest match among them, is passed
     * over: that work is no error of the estimate
     */

    most = 0;

    for (i = 0; i < n; i++) {

        if (c[i].room && c[i].cost <= limit) {
            most = ngx_max(most, c[i].held);
        }
    }

    /*
     * of the others, the highest rank of those whose share of the index
     * is under the bound, or, when none is, of them all
     */

    chosen = NGX_ERROR;
    any = NGX_ERROR;

    for (i = 0; i < n; i++) {

        if (!c[i].room || c[i].cost > limit
            || (double) (most - c[i].held) > limit - best)
        {
            continue;
        }

        if (any == NGX_ERROR || c[i].rank > c[any].rank) {
            any = i;
        }

        weight = ngx_http_prefix_route_weight(&c[i]);
        share = (double) conf->max_load / 100 * cached * weight / total;

        if (conf->max_load && c[i].cached > share) {
            continue;
        }

        if (chosen == NGX_ERROR || c[i].rank > c[chosen].rank) {
            chosen = i;
        }
    }

    return chosen != NGX_ERROR ? chosen : any;
}


static ngx_int_t
ngx_http_prefix_route_cache_aware(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n)
{
    ngx_int_t   chosen;
    ngx_uint_t  i, most, least, by_match;

    most = 0;
    least = NGX_MAX_UINT32_VALUE;

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        c[i].cost = c[i].outstanding;

        most = ngx_max(most, c[i].inflight);
        least = ngx_min(least, c[i].inflight);
    }

    by_match = (most - least <= NGX_HTTP_PREFIX_ROUTE_IMBALANCE);
    chosen = NGX_ERROR;

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        if (chosen == NGX_ERROR
            || ngx_http_prefix_route_better(&c[i], &c[chosen], by_match))
        {
            chosen = i;
        }
    }

    return chosen;
}


/*
 * policy=cache_aware: whether "a" goes before "b": the longer match if
 * "by_match", then the fewer outstanding bytes, then the higher rank.
 */

static ngx_uint_t
ngx_http_prefix_route_better(ngx_http_prefix_route_candidate_t *a,
    ngx_http_prefix_route_candidate_t *b, ngx_uint_t by_match)
{
    if (by_match && a->match != b->match) {
        return a->match > b->match;
    }

    if (a->cost != b->cost) {
        return a->cost < b->cost;
    }

    return a->rank > b->rank;
}
