
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <math.h>

#include "ngx_http_prefix_route_choice.h"


ngx_int_t
ngx_http_prefix_route_choose(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t n, size_t len, ngx_uint_t affinity, size_t slack)
{
    double      credit, load, best, tie;
    ngx_int_t   chosen;
    ngx_uint_t  i, known;

    best = HUGE_VAL;
    known = 0;

    for (i = 0; i < n; i++) {

        if (!c[i].usable) {
            continue;
        }

        credit = (double) c[i].match * affinity / 100;
        load = c[i].sticky ? 0 : c[i].recent - credit;

        if (load < 0) {
            load = 0;
        }

        c[i].cost = (c[i].queued + load + (double) len - credit)
                    / (c[i].weight > 0 ? c[i].weight : 1);

        if (c[i].cost < best) {
            best = c[i].cost;
        }

        if (c[i].sticky && c[i].match) {
            known = 1;
        }
    }

    /*
     * A prompt that no peer holds as its own conversation is placed by
     * the rank among the peers within a quarter of the prompt of the
     * lowest cost, so that nginx instances that do not share an index
     * agree on where a conversation goes while loads are about even.
     */

    tie = (double) slack;

    if (!known && (double) len / 4 > tie) {
        tie = (double) len / 4;
    }

    chosen = NGX_ERROR;

    for (i = 0; i < n; i++) {

        if (!c[i].usable || c[i].cost > best + tie) {
            continue;
        }

        if (chosen == NGX_ERROR || c[i].rank > c[chosen].rank) {
            chosen = i;
        }
    }

    return chosen;
}


double
ngx_http_prefix_route_decay(double work, ngx_msec_t elapsed,
    ngx_msec_t half_life)
{
    if (half_life == 0) {
        return 0;
    }

    return work * exp2(-(double) elapsed / half_life);
}
