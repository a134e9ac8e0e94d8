
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>

#include "ngx_http_prefix_route_usage.h"


/* "usage" objects tried at most in each of the head and the tail */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_TRIES  8

/* JSON's white space, RFC 8259 */
#define ngx_http_prefix_route_json_space(c)                                  \
    ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r')


static ngx_int_t ngx_http_prefix_route_usage_find(u_char *start, size_t len,
    ngx_uint_t backward, ngx_http_prefix_route_tokens_t *t);
static ngx_int_t ngx_http_prefix_route_usage_read(json_t *usage,
    ngx_http_prefix_route_tokens_t *t);
static ngx_int_t ngx_http_prefix_route_usage_count(json_t *v, uint64_t *n);


void
ngx_http_prefix_route_usage_feed(ngx_http_prefix_route_usage_t *u, u_char *p,
    size_t n)
{
    size_t  m, at, k;

    if (u->head_len < NGX_HTTP_PREFIX_ROUTE_USAGE_HEAD) {
        m = ngx_min(n, NGX_HTTP_PREFIX_ROUTE_USAGE_HEAD - u->head_len);
        ngx_memcpy(u->head + u->head_len, p, m);
        u->head_len += m;
    }

    /* only the last TAIL bytes of the piece can stay in the ring */

    m = ngx_min(n, NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL);
    at = (size_t) ((u->total + (off_t) (n - m))
                   % NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL);
    p += n - m;

    k = ngx_min(m, NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL - at);
    ngx_memcpy(u->tail + at, p, k);
    ngx_memcpy(u->tail, p + k, m - k);

    u->total += n;
}


ngx_int_t
ngx_http_prefix_route_usage_parse(ngx_http_prefix_route_usage_t *u,
    ngx_http_prefix_route_tokens_t *t)
{
    size_t  len, at, k;
    u_char  buf[NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL];

    len = (size_t) ngx_min(u->total, NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL);
    at = (size_t) ((u->total - (off_t) len)
                   % NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL);

    k = ngx_min(len, NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL - at);
    ngx_memcpy(buf, u->tail + at, k);
    ngx_memcpy(buf + k, u->tail, len - k);

    if (ngx_http_prefix_route_usage_find(buf, len, 1, t) == NGX_OK) {
        return NGX_OK;
    }

    if (u->total <= NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL) {
        /* the tail held the whole response */
        return NGX_DECLINED;
    }

    return ngx_http_prefix_route_usage_find(u->head, u->head_len, 0, t);
}


/*
 * Tries the "usage" keys of start[0..len), the last first or the first
 * first: a key is a "usage" string not escaped (an even run of
 * backslashes before it) followed by ':' and an object, which jansson
 * parses up to its end.
 */

static ngx_int_t
ngx_http_prefix_route_usage_find(u_char *start, size_t len,
    ngx_uint_t backward, ngx_http_prefix_route_tokens_t *t)
{
    u_char        *q, *s, *end;
    size_t         i, n;
    json_t        *usage;
    ngx_int_t      rc;
    ngx_uint_t     tries, slashes;
    json_error_t   err;

    static const u_char  key[] = "\"usage\"";

    if (len < sizeof(key) - 1) {
        return NGX_DECLINED;
    }

    end = start + len;
    n = len - (sizeof(key) - 1) + 1;        /* places the key can start */
    tries = 0;

    for (i = 0; i < n; i++) {

        q = backward ? start + (n - 1 - i) : start + i;

        if (ngx_memcmp(q, key, sizeof(key) - 1) != 0) {
            continue;
        }

        for (slashes = 0, s = q; s > start && s[-1] == '\\'; s--) {
            slashes++;
        }

        if (slashes % 2) {
            continue;
        }

        s = q + sizeof(key) - 1;

        while (s < end && ngx_http_prefix_route_json_space(*s)) {
            s++;
        }

        if (s == end || *s++ != ':') {
            continue;
        }

        while (s < end && ngx_http_prefix_route_json_space(*s)) {
            s++;
        }

        if (s == end || *s != '{') {
            continue;
        }

        if (++tries > NGX_HTTP_PREFIX_ROUTE_USAGE_TRIES) {
            break;
        }

        usage = json_loadb((char *) s, end - s, JSON_DISABLE_EOF_CHECK, &err);
        if (usage == NULL) {
            continue;
        }

        rc = ngx_http_prefix_route_usage_read(usage, t);
        json_decref(usage);

        if (rc == NGX_OK) {
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


static ngx_int_t
ngx_http_prefix_route_usage_read(json_t *usage,
    ngx_http_prefix_route_tokens_t *t)
{
    json_t    *v, *read, *made, *details;
    uint64_t   in, r, m;

    t->has_cached = 0;
    t->cached = 0;

    v = json_object_get(usage, "prompt_tokens");

    if (v != NULL) {
        /* OpenAI Chat Completions and Completions, and the engines */

        if (ngx_http_prefix_route_usage_count(v, &t->prompt) != NGX_OK) {
            return NGX_DECLINED;
        }

        details = json_object_get(usage, "prompt_tokens_details");

    } else {
        v = json_object_get(usage, "input_tokens");

        if (v == NULL
            || ngx_http_prefix_route_usage_count(v, &in) != NGX_OK)
        {
            return NGX_DECLINED;
        }

        read = json_object_get(usage, "cache_read_input_tokens");
        made = json_object_get(usage, "cache_creation_input_tokens");

        if (read != NULL || made != NULL) {
            /* Anthropic: input_tokens counts only what was not cached */

            r = 0;
            m = 0;

            if ((read != NULL && !json_is_null(read)
                 && ngx_http_prefix_route_usage_count(read, &r) != NGX_OK)
                || (made != NULL && !json_is_null(made)
                    && ngx_http_prefix_route_usage_count(made, &m)
                       != NGX_OK))
            {
                return NGX_DECLINED;
            }

            t->prompt = in + r + m;
            t->cached = r;
            t->has_cached = 1;

            return t->prompt <= NGX_HTTP_PREFIX_ROUTE_USAGE_MAX
                   ? NGX_OK : NGX_DECLINED;
        }

        /* OpenAI Responses */

        t->prompt = in;
        details = json_object_get(usage, "input_tokens_details");
    }

    v = json_is_object(details) ? json_object_get(details, "cached_tokens")
                                : NULL;

    if (v == NULL || json_is_null(v)) {
        return NGX_OK;
    }

    if (ngx_http_prefix_route_usage_count(v, &t->cached) != NGX_OK
        || t->cached > t->prompt)
    {
        return NGX_DECLINED;
    }

    t->has_cached = 1;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_route_usage_count(json_t *v, uint64_t *n)
{
    json_int_t  i;

    if (!json_is_integer(v)) {
        return NGX_DECLINED;
    }

    i = json_integer_value(v);

    if (i < 0 || (uint64_t) i > NGX_HTTP_PREFIX_ROUTE_USAGE_MAX) {
        return NGX_DECLINED;
    }

    *n = (uint64_t) i;

    return NGX_OK;
}
