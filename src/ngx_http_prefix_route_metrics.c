
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <math.h>

#include "ngx_http_prefix_route_metrics.h"


enum {
    NGX_HTTP_PREFIX_ROUTE_M_WAITING = 0,
    NGX_HTTP_PREFIX_ROUTE_M_RUNNING,
    NGX_HTTP_PREFIX_ROUTE_M_KV,
    NGX_HTTP_PREFIX_ROUTE_M_SERVED
};


typedef struct {
    ngx_str_t   name;
    ngx_uint_t  field;
} ngx_http_prefix_route_metric_t;


/* the names of ngx_http_prefix_route_metrics.h */
static ngx_http_prefix_route_metric_t  ngx_http_prefix_route_metric_names[] = {
    { ngx_string("vllm:num_requests_waiting"),
      NGX_HTTP_PREFIX_ROUTE_M_WAITING },
    { ngx_string("vllm:num_requests_running"),
      NGX_HTTP_PREFIX_ROUTE_M_RUNNING },
    { ngx_string("vllm:kv_cache_usage_perc"), NGX_HTTP_PREFIX_ROUTE_M_KV },
    { ngx_string("vllm:gpu_cache_usage_perc"), NGX_HTTP_PREFIX_ROUTE_M_KV },
    { ngx_string("vllm:prompt_tokens_total"), NGX_HTTP_PREFIX_ROUTE_M_SERVED },

    { ngx_string("sglang:num_queue_reqs"), NGX_HTTP_PREFIX_ROUTE_M_WAITING },
    { ngx_string("sglang:num_running_reqs"), NGX_HTTP_PREFIX_ROUTE_M_RUNNING },
    { ngx_string("sglang:token_usage"), NGX_HTTP_PREFIX_ROUTE_M_KV },
    { ngx_string("sglang:prompt_tokens_total"),
      NGX_HTTP_PREFIX_ROUTE_M_SERVED },

    { ngx_string("tgi_queue_size"), NGX_HTTP_PREFIX_ROUTE_M_WAITING },
    { ngx_string("tgi_batch_current_size"), NGX_HTTP_PREFIX_ROUTE_M_RUNNING },
    { ngx_string("tgi_request_count"), NGX_HTTP_PREFIX_ROUTE_M_SERVED },

    { ngx_string("llamacpp:requests_deferred"),
      NGX_HTTP_PREFIX_ROUTE_M_WAITING },
    { ngx_string("llamacpp:requests_processing"),
      NGX_HTTP_PREFIX_ROUTE_M_RUNNING },
    { ngx_string("llamacpp:kv_cache_usage_ratio"),
      NGX_HTTP_PREFIX_ROUTE_M_KV },
    { ngx_string("llamacpp:prompt_tokens_total"),
      NGX_HTTP_PREFIX_ROUTE_M_SERVED },

    { ngx_null_string, 0 }
};


static void ngx_http_prefix_route_metrics_line(
    ngx_http_prefix_route_metrics_t *m);


void
ngx_http_prefix_route_metrics_init(ngx_http_prefix_route_metrics_t *m)
{
    m->waiting = 0;
    m->running = 0;
    m->kv = 0;
    m->served = 0;
    m->has_waiting = 0;
    m->has_running = 0;
    m->has_kv = 0;
    m->has_served = 0;
    m->skip = 0;
    m->bad = 0;
    m->len = 0;
}


void
ngx_http_prefix_route_metrics_feed(ngx_http_prefix_route_metrics_t *m,
    u_char *p, size_t n)
{
    u_char  *last, *nl;
    size_t   size;

    last = p + n;

    while (p < last) {
        nl = ngx_strlchr(p, last, '\n');
        size = (nl ? nl : last) - p;

        if (!m->skip) {
            if (m->len + size < NGX_HTTP_PREFIX_ROUTE_METRICS_LINE) {
                ngx_memcpy(m->line + m->len, p, size);
                m->len += size;

            } else {
                m->skip = 1;
            }
        }

        if (nl == NULL) {
            return;
        }

        if (!m->skip) {
            ngx_http_prefix_route_metrics_line(m);
        }

        m->skip = 0;
        m->len = 0;
        p = nl + 1;
    }
}


ngx_int_t
ngx_http_prefix_route_metrics_done(ngx_http_prefix_route_metrics_t *m)
{
    if (!m->skip && m->len) {
        ngx_http_prefix_route_metrics_line(m);
    }

    m->skip = 0;
    m->len = 0;

    return (m->has_waiting && m->has_running) ? NGX_OK : NGX_DECLINED;
}


/*
 * One line of m->line: "name value", "name{labels} value" or either with
 * a timestamp after; comments, other names and lines that are not of this
 * form are passed over.
 */

static void
ngx_http_prefix_route_metrics_line(ngx_http_prefix_route_metrics_t *m)
{
    u_char                          *p, *last, *name, *end;
    double                           v;
    size_t                           len;
    ngx_uint_t                       quoted;
    ngx_http_prefix_route_metric_t  *mn;

    p = m->line;
    last = m->line + m->len;

    if (last > p && last[-1] == '\r') {
        last--;
    }

    *last = '\0';

    if (p == last || *p == '#') {
        return;
    }

    name = p;

    while (p < last && *p != '{' && *p != ' ' && *p != '\t') {
        p++;
    }

    len = p - name;

    for (mn = ngx_http_prefix_route_metric_names; mn->name.len; mn++) {
        if (mn->name.len == len && ngx_strncmp(mn->name.data, name, len) == 0)
        {
            break;
        }
    }

    if (mn->name.len == 0) {
        return;
    }

    /* labels: a "}" or "\"" inside a quoted value does not end them */

    if (p < last && *p == '{') {
        quoted = 0;

        for (p++; p < last; p++) {

            if (quoted && *p == '\\' && p + 1 < last) {
                p++;

            } else if (*p == '"') {
                quoted = !quoted;

            } else if (!quoted && *p == '}') {
                break;
            }
        }

        if (p == last) {
            goto bad;
        }

        p++;
    }

    if (p == last || (*p != ' ' && *p != '\t')) {
        goto bad;
    }

    while (p < last && (*p == ' ' || *p == '\t')) {
        p++;
    }

    /* strtod() stops at the space before a timestamp, or at the end */

    errno = 0;
    v = strtod((char *) p, (char **) &end);

    if (end == p
        || (end < last && *end != ' ' && *end != '\t')
        || errno == ERANGE
        || !(v >= 0 && v <= NGX_HTTP_PREFIX_ROUTE_METRICS_MAX))
    {
        goto bad;
    }

    switch (mn->field) {

    case NGX_HTTP_PREFIX_ROUTE_M_WAITING:
        m->waiting = ngx_min(m->waiting + v,
                             NGX_HTTP_PREFIX_ROUTE_METRICS_MAX);
        m->has_waiting = 1;
        break;

    case NGX_HTTP_PREFIX_ROUTE_M_RUNNING:
        m->running = ngx_min(m->running + v,
                             NGX_HTTP_PREFIX_ROUTE_METRICS_MAX);
        m->has_running = 1;
        break;

    case NGX_HTTP_PREFIX_ROUTE_M_KV:
        if (v > 1) {
            goto bad;
        }

        m->kv = ngx_max(m->kv, v);
        m->has_kv = 1;
        break;

    default: /* NGX_HTTP_PREFIX_ROUTE_M_SERVED */
        m->served = ngx_min(m->served + v,
                            NGX_HTTP_PREFIX_ROUTE_METRICS_MAX);
        m->has_served = 1;
        break;
    }

    return;

bad:

    m->bad++;
}
