
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <math.h>

#include "ngx_http_prefix_route_choice.h"


static ngx_int_t ngx_http_prefix_route_top(
    ngx_http_prefix_route_candidate_t *c, ngx_uint_t n, double limit,
    size_t match);


ngx_int_t
ngx_http_prefix_route_choose(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, ngx_uint_t affinity, size_t slack)
{
    double      credit, load, best, total, tie, weight;
    size_t      longest;
    ngx_int_t   chosen;
    ngx_uint_t  i, known, usable;

    best = HUGE_VAL;
    total = 0;
    longest = 0;
    known = 0;
    usable = 0;

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        credit = (double) c[i].match * affinity / 100;
        load = c[i].sticky ? 0 : c[i].recent - credit;

        if (load < 0) {
            load = 0;
        }

        load += c[i].queued;
        weight = c[i].weight > 0 ? c[i].weight : 1;

        c[i].cost = (load + (double) len - credit) / weight;

        if (c[i].cost < best) {
            best = c[i].cost;
        }

        total += load / weight;
        usable++;

        if (c[i].match > longest) {
            longest = c[i].match;
        }

        if (c[i].sticky && c[i].match) {
            known = 1;
        }
    }

    if (usable == 0) {
        return NGX_ERROR;
    }

    if (!known) {

        /*
         * A prompt that no peer holds as its own conversation goes to the
         * highest ranked of the peers with the longest match whose cost
         * is within half the mean load (or a quarter of the prompt) of
         * the lowest: nginx instances that do not share an index then
         * agree on where a conversation goes, as long as no peer has more
         * than about 1.5 times the mean load ("consistent hashing with
         * bounded loads", Mirrokni, Thorup and Zadimoghaddam, 2018).  The
         * half was measured with bench/: the whole mean let busy time
         * max/mean reach 1.28 on shared-prefix groups, a quarter left 3
         * instances at 0.90 of one instance's hit rate on multi-turn
         * chat (docs/design.md, "Choosing a peer").
         */

        tie = ngx_max(total / usable / 2, (double) len / 4);

        chosen = ngx_http_prefix_route_top(c, n, best + ngx_max(tie, slack),
                                           longest);
        if (chosen != NGX_ERROR) {
            return chosen;
        }
    }

    return ngx_http_prefix_route_top(c, n, best + slack, 0);
}


/*
 * The usable candidate of the highest rank among those that cost at most
 * "limit" and hold at least "match" bytes; NGX_ERROR if there is none.
 */

static ngx_int_t
ngx_http_prefix_route_top(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, double limit, size_t match)
{
    ngx_int_t   chosen;
    ngx_uint_t  i;

    chosen = NGX_ERROR;

    for (i = 0; i < n; i++) {

        if (!c[i].usable || c[i].cost > limit || c[i].match < match) {
            continue;
        }

        if (chosen == NGX_ERROR || c[i].rank > c[chosen].rank) {
            chosen = i;
        }
    }

    return chosen;
}


double
ngx_http_prefix_route_decay(double work, ngx_msec_int_t elapsed,
    ngx_msec_t half_life)
{
    if (half_life == 0) {
        return 0;
    }

    if (elapsed <= 0) {
        return work;
    }

    return work * exp2(-(double) elapsed / half_life);
}
