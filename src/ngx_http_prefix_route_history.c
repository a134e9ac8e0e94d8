
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_history.h"


/*
 * a chart: px, its series' colours, and the fewest intervals its time axis
 * spans (3 minutes): it grows with the samples taken, up to all of them
 */
#define NGX_HTTP_PREFIX_ROUTE_CHART_W      540
#define NGX_HTTP_PREFIX_ROUTE_CHART_H      90
#define NGX_HTTP_PREFIX_ROUTE_COLOURS      8
#define NGX_HTTP_PREFIX_ROUTE_CHART_SPAN   18

/* bytes a chart's series takes at most: " L540.0 90.0" a point */
#define NGX_HTTP_PREFIX_ROUTE_SERIES_SIZE                                    \
    (NGX_HTTP_PREFIX_ROUTE_SAMPLES * 16 + 256)


enum {
    NGX_HTTP_PREFIX_ROUTE_CHART_HIT = 0,
    NGX_HTTP_PREFIX_ROUTE_CHART_REQUESTS,
    NGX_HTTP_PREFIX_ROUTE_CHART_INFLIGHT,
    NGX_HTTP_PREFIX_ROUTE_CHART_QUEUED
};


typedef struct {
    ngx_http_prefix_route_sample_t   *s;
    ngx_http_prefix_route_gauge_t   **gauges;
    ngx_uint_t                        order[NGX_HTTP_PREFIX_ROUTE_SAMPLES];
    ngx_uint_t                        n;        /* samples, oldest first */
} ngx_http_prefix_route_history_t;


static double ngx_http_prefix_route_history_value(
    ngx_http_prefix_route_history_t *h, ngx_uint_t chart, ngx_uint_t k,
    ngx_uint_t j);
static u_char *ngx_http_prefix_route_history_chart(u_char *p,
    ngx_http_prefix_route_history_t *h, ngx_uint_t chart, char *title,
    char *unit, ngx_uint_t nseries, ngx_str_t *labels, ngx_str_t **names);


static char  *ngx_http_prefix_route_colours[NGX_HTTP_PREFIX_ROUTE_COLOURS] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
    "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"
};


void
ngx_http_prefix_route_history_sample(ngx_http_prefix_route_index_t *idx)
{
    uint64_t                         now, n;
    ngx_uint_t                       i, k;
    ngx_queue_t                     *q;
    ngx_http_prefix_route_sh_t      *sh;
    ngx_http_prefix_route_peer_t    *peer;
    ngx_http_prefix_route_sample_t  *s;

    sh = idx->sh;
    now = (uint64_t) ngx_time();
    n = now / NGX_HTTP_PREFIX_ROUTE_INTERVAL;

    /* a glance without the mutex: most calls find the interval taken */

    if (sh->sampled == n) {
        return;
    }

    ngx_shmtx_lock(&idx->shpool->mutex);

    if (sh->sampled == n) {
        ngx_shmtx_unlock(&idx->shpool->mutex);
        return;
    }

    sh->sampled = n;
    k = (sh->sample + 1) % NGX_HTTP_PREFIX_ROUTE_SAMPLES;
    sh->sample = k;

    s = &sh->samples[k];
    s->time = now;

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_NSTATUS; i++) {
        s->requests[i] = sh->requests[i];
    }

    s->prompt = sh->prompt_bytes;
    s->matched = sh->matched_bytes;
    s->predicted = sh->predicted_bytes;
    s->reported = sh->gone_prompt;
    s->cached = sh->gone_cached;

    for (q = ngx_queue_head(&sh->peers);
         q != ngx_queue_sentinel(&sh->peers);
         q = ngx_queue_next(q))
    {
        peer = ngx_queue_data(q, ngx_http_prefix_route_peer_t, queue);

        s->reported += peer->fb.prompt;
        s->cached += peer->fb.cached;

        peer->gauges[k].inflight = (uint32_t) peer->load.inflight;
        peer->gauges[k].queued = (uint32_t) ngx_min(peer->load.queued / 1024,
                                                    0xffffffff);
    }

    ngx_shmtx_unlock(&idx->shpool->mutex);
}


size_t
ngx_http_prefix_route_history_size(ngx_uint_t npeers, size_t names)
{
    /* 3 + 5 series and a server's twice, their legends, the charts' text */

    return (7 + 2 * npeers) * NGX_HTTP_PREFIX_ROUTE_SERIES_SIZE
           + 2 * 6 * names + 8 * 1024;
}


u_char *
ngx_http_prefix_route_history_html(u_char *p,
    ngx_http_prefix_route_sample_t *s, ngx_uint_t last, ngx_uint_t shadow,
    ngx_uint_t npeers, ngx_str_t **names,
    ngx_http_prefix_route_gauge_t **gauges)
{
    ngx_uint_t                        i, k;
    ngx_http_prefix_route_history_t   h;

    static ngx_str_t  hit[] = {
        ngx_string("prompt bytes matched"),
        ngx_string("engines' cached tokens"),
        ngx_string("predicted by prefix_route")
    };

    h.s = s;
    h.gauges = gauges;
    h.n = 0;

    /* the samples taken, oldest first */

    for (i = 1; i <= NGX_HTTP_PREFIX_ROUTE_SAMPLES; i++) {
        k = (last + i) % NGX_HTTP_PREFIX_ROUTE_SAMPLES;

        if (s[k].time != 0
            && (h.n == 0 || s[k].time > s[h.order[h.n - 1]].time))
        {
            h.order[h.n++] = k;
        }
    }

    if (h.n < 2) {
        return ngx_sprintf(p, "<p>Charts of the last %ui minutes, a point "
                              "every %ui s, from the second sample on."
                              "</p>\n",
                           (ngx_uint_t) NGX_HTTP_PREFIX_ROUTE_SAMPLES
                           * NGX_HTTP_PREFIX_ROUTE_INTERVAL / 60,
                           (ngx_uint_t) NGX_HTTP_PREFIX_ROUTE_INTERVAL);
    }

    p = ngx_sprintf(p, "<div class=\"charts\">");

    p = ngx_http_prefix_route_history_chart(p, &h,
                                     NGX_HTTP_PREFIX_ROUTE_CHART_HIT,
                                     "hit rate", "%", shadow ? 3 : 2, hit,
                                     NULL);
    p = ngx_http_prefix_route_history_chart(p, &h,
                                     NGX_HTTP_PREFIX_ROUTE_CHART_REQUESTS,
                                     "requests", "/s",
                                     NGX_HTTP_PREFIX_ROUTE_NSTATUS,
                                     ngx_http_prefix_route_status_names,
                                     NULL);
    p = ngx_http_prefix_route_history_chart(p, &h,
                                     NGX_HTTP_PREFIX_ROUTE_CHART_INFLIGHT,
                                     "in flight", "", npeers, NULL, names);
    p = ngx_http_prefix_route_history_chart(p, &h,
                                     NGX_HTTP_PREFIX_ROUTE_CHART_QUEUED,
                                     "queued", " KiB", npeers, NULL, names);

    return ngx_sprintf(p, "</div>\n");
}


/*
 * Series k of a chart at point j (1 .. h->n - 1): over the interval from
 * sample j - 1 to sample j for rates, at sample j for gauges; -1 where
 * there is nothing to show (no prompt in the interval).
 */

static double
ngx_http_prefix_route_history_value(ngx_http_prefix_route_history_t *h,
    ngx_uint_t chart, ngx_uint_t k, ngx_uint_t j)
{
    uint64_t                         part, whole;
    ngx_http_prefix_route_sample_t  *a, *b;

    a = &h->s[h->order[j - 1]];
    b = &h->s[h->order[j]];

    switch (chart) {

    case NGX_HTTP_PREFIX_ROUTE_CHART_HIT:

        if (k == 1) {
            part = b->cached - a->cached;
            whole = b->reported - a->reported;

        } else {
            part = (k == 0) ? b->matched - a->matched
                            : b->predicted - a->predicted;
            whole = b->prompt - a->prompt;
        }

        return whole ? 100.0 * part / whole : -1;

    case NGX_HTTP_PREFIX_ROUTE_CHART_REQUESTS:
        return (double) (b->requests[k] - a->requests[k])
               / (double) (b->time - a->time);

    case NGX_HTTP_PREFIX_ROUTE_CHART_INFLIGHT:
        return h->gauges[k][h->order[j]].inflight;

    default: /* NGX_HTTP_PREFIX_ROUTE_CHART_QUEUED */
        return h->gauges[k][h->order[j]].queued;
    }
}


/*
 * One chart: its title, its largest value, its legend (the labels, or the
 * server names, escaped), and an SVG path a series, scaled to the largest
 * value (100 for a hit rate), with a gap where a value is missing.
 */

static u_char *
ngx_http_prefix_route_history_chart(u_char *p,
    ngx_http_prefix_route_history_t *h, ngx_uint_t chart, char *title,
    char *unit, ngx_uint_t nseries, ngx_str_t *labels, ngx_str_t **names)
{
    double      v, max, x, y;
    ngx_str_t  *l;
    ngx_uint_t  j, k, gap, span;

    max = (chart == NGX_HTTP_PREFIX_ROUTE_CHART_HIT) ? 100 : 0;

    for (k = 0; k < nseries; k++) {
        for (j = 1; j < h->n; j++) {
            v = ngx_http_prefix_route_history_value(h, chart, k, j);
            max = ngx_max(max, v);
        }
    }

    p = ngx_sprintf(p, "<figure><figcaption><b>%s</b>", title);

    for (k = 0; k < nseries; k++) {
        l = labels ? &labels[k] : names[k];

        p = ngx_sprintf(p, " <span style=\"color:%s\">&#9632; ",
                        ngx_http_prefix_route_colours[
                            k % NGX_HTTP_PREFIX_ROUTE_COLOURS]);
        p = (u_char *) ngx_escape_html(p, l->data, l->len);
        p = ngx_sprintf(p, "</span>");
    }

    p = ngx_sprintf(p, "</figcaption><svg width=\"%d\" height=\"%d\" "
                       "viewBox=\"0 0 %d %d\" "
                       "style=\"border:1px solid #ccc\">",
                    NGX_HTTP_PREFIX_ROUTE_CHART_W,
                    NGX_HTTP_PREFIX_ROUTE_CHART_H,
                    NGX_HTTP_PREFIX_ROUTE_CHART_W,
                    NGX_HTTP_PREFIX_ROUTE_CHART_H);

    span = ngx_max(h->n - 1, NGX_HTTP_PREFIX_ROUTE_CHART_SPAN);

    /* the axes' ends: the largest value at the top, the time span below */

    p = ngx_sprintf(p, "<g font-size=\"10\" font-family=\"sans-serif\" "
                       "fill=\"#777\"><text x=\"2\" y=\"10\">%.1f%s"
                       "</text><text x=\"2\" y=\"%d\">-%ui min</text>"
                       "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">"
                       "now</text></g>",
                    max, unit, NGX_HTTP_PREFIX_ROUTE_CHART_H - 2,
                    span * NGX_HTTP_PREFIX_ROUTE_INTERVAL / 60,
                    NGX_HTTP_PREFIX_ROUTE_CHART_W - 2,
                    NGX_HTTP_PREFIX_ROUTE_CHART_H - 2);

    for (k = 0; k < nseries; k++) {
        p = ngx_sprintf(p, "<path fill=\"none\" stroke=\"%s\" d=\"",
                        ngx_http_prefix_route_colours[
                            k % NGX_HTTP_PREFIX_ROUTE_COLOURS]);
        gap = 1;

        for (j = 1; j < h->n; j++) {
            v = ngx_http_prefix_route_history_value(h, chart, k, j);

            if (v < 0) {
                gap = 1;
                continue;
            }

            /* the newest at the right edge */

            x = NGX_HTTP_PREFIX_ROUTE_CHART_W
                - (double) (h->n - 1 - j) * NGX_HTTP_PREFIX_ROUTE_CHART_W
                  / span;
            y = NGX_HTTP_PREFIX_ROUTE_CHART_H
                - (max > 0 ? v / max : 0) * (NGX_HTTP_PREFIX_ROUTE_CHART_H - 2)
                - 1;

            p = ngx_sprintf(p, "%s%.1f %.1f", gap ? " M" : " L", x, y);
            gap = 0;
        }

        p = ngx_sprintf(p, "\"/>");
    }

    return ngx_sprintf(p, "</svg></figure>\n");
}
