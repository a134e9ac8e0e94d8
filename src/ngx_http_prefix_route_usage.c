
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>

#include "ngx_http_prefix_route_usage.h"


/* "usage" objects tried at most in each of the head and the tail */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_TRIES  8

/* the fast path's deepest nesting: deeper, jansson reads the object */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_DEPTH  16

/* the fast path's longest integer: longer, jansson reads the object */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_DIGITS 18

/* the members read, by their keys' places below */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_PROMPT  0
#define NGX_HTTP_PREFIX_ROUTE_USAGE_INPUT   1
#define NGX_HTTP_PREFIX_ROUTE_USAGE_READ    2
#define NGX_HTTP_PREFIX_ROUTE_USAGE_MADE    3
#define NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS  4   /* then the details */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS    6

/* JSON's white space, RFC 8259 */
#define ngx_http_prefix_route_json_space(c)                                  \
    ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r')


/*
 * a member of the usage object as either reader found it; ABSENT and NULL,
 * the first two, say nothing
 */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT = 0,
    NGX_HTTP_PREFIX_ROUTE_COUNT_NULL,
    NGX_HTTP_PREFIX_ROUTE_COUNT_INTEGER,
    NGX_HTTP_PREFIX_ROUTE_COUNT_OTHER
} ngx_http_prefix_route_count_e;


typedef struct {
    ngx_http_prefix_route_count_e   kind;
    int64_t                         value;      /* an integer's */
} ngx_http_prefix_route_count_t;


/*
 * the members the counts come from, in the order of the keys below: the
 * counts, then the details objects' cached_tokens
 */
typedef struct {
    ngx_http_prefix_route_count_t   count[NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS];
} ngx_http_prefix_route_counts_t;


typedef struct {
    u_char                         *p;
    u_char                         *last;
} ngx_http_prefix_route_usage_scan_t;


static ngx_int_t ngx_http_prefix_route_usage_find(u_char *start, size_t len,
    ngx_uint_t backward, ngx_http_prefix_route_tokens_t *t);
static ngx_int_t ngx_http_prefix_route_usage_object(
    ngx_http_prefix_route_usage_scan_t *s, ngx_uint_t depth,
    ngx_http_prefix_route_counts_t *top, ngx_http_prefix_route_count_t *cached);
static ngx_int_t ngx_http_prefix_route_usage_value(
    ngx_http_prefix_route_usage_scan_t *s, ngx_uint_t depth,
    ngx_http_prefix_route_count_t *c);
static ngx_int_t ngx_http_prefix_route_usage_string(
    ngx_http_prefix_route_usage_scan_t *s, ngx_str_t *str);
static ngx_int_t ngx_http_prefix_route_usage_number(
    ngx_http_prefix_route_usage_scan_t *s, ngx_http_prefix_route_count_t *c);
static ngx_int_t ngx_http_prefix_route_usage_ws(
    ngx_http_prefix_route_usage_scan_t *s);
static void ngx_http_prefix_route_usage_member(json_t *v,
    ngx_http_prefix_route_count_t *c);
static ngx_int_t ngx_http_prefix_route_usage_tokens(
    ngx_http_prefix_route_counts_t *f, ngx_http_prefix_route_tokens_t *t);
static ngx_int_t ngx_http_prefix_route_usage_count(
    ngx_http_prefix_route_count_t *c, uint64_t *n);


/*
 * The keys of the usage members read: the counts, then the details
 * objects whose cached_tokens are read (ngx_http_prefix_route_counts_t)
 */
static ngx_str_t  ngx_http_prefix_route_usage_keys[] = {
    ngx_string("prompt_tokens"),
    ngx_string("input_tokens"),
    ngx_string("cache_read_input_tokens"),
    ngx_string("cache_creation_input_tokens"),
    ngx_string("prompt_tokens_details"),
    ngx_string("input_tokens_details")
};

void
ngx_http_prefix_route_usage_init(ngx_http_prefix_route_usage_t *u)
{
    u->total = 0;
    u->head_len = 0;
}


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
 * backslashes before it) followed by ':' and an object, which the fast
 * path reads up to its end, or jansson where the fast path cannot tell.
 */

static ngx_int_t
ngx_http_prefix_route_usage_find(u_char *start, size_t len,
    ngx_uint_t backward, ngx_http_prefix_route_tokens_t *t)
{
    u_char      *q, *s, *end;
    size_t       i, n;
    ngx_int_t    rc;
    ngx_uint_t   tries, slashes;

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

        rc = ngx_http_prefix_route_usage_scan(s, end, t);

        if (rc == NGX_AGAIN) {
            rc = ngx_http_prefix_route_usage_json(s, end, t);
        }

        if (rc == NGX_OK) {
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


ngx_int_t
ngx_http_prefix_route_usage_scan(u_char *p, u_char *last,
    ngx_http_prefix_route_tokens_t *t)
{
    ngx_int_t                           rc;
    ngx_http_prefix_route_counts_t      f;
    ngx_http_prefix_route_usage_scan_t  s;

    s.p = p;
    s.last = last;

    if (ngx_http_prefix_route_usage_ws(&s) != NGX_OK) {
        return NGX_DECLINED;
    }

    if (*s.p != '{') {
        return NGX_AGAIN;
    }

    ngx_memzero(&f, sizeof(ngx_http_prefix_route_counts_t));

    rc = ngx_http_prefix_route_usage_object(&s, 1, &f, NULL);

    if (rc != NGX_OK) {
        return rc;
    }

    return ngx_http_prefix_route_usage_tokens(&f, t);
}


/*
 * An object from its '{': NGX_OK past its '}', NGX_DECLINED when the
 * bytes end first (jansson fails there too: the object is not whole),
 * NGX_AGAIN at anything the fast path leaves to jansson (escapes, bytes
 * past ASCII and control bytes in strings, real numbers, integers of
 * more than 18 digits, nesting deeper than 16, a member read given twice,
 * a byte out of place).  In the usage object "top" gets the counts read,
 * in a details object "cached" its cached_tokens.
 */

static ngx_int_t
ngx_http_prefix_route_usage_object(ngx_http_prefix_route_usage_scan_t *s,
    ngx_uint_t depth, ngx_http_prefix_route_counts_t *top,
    ngx_http_prefix_route_count_t *cached)
{
    ngx_int_t                       rc;
    ngx_str_t                       key, *name;
    ngx_uint_t                      k, seen;
    ngx_http_prefix_route_count_t  *c, *sub;

    static ngx_str_t  cached_key = ngx_string("cached_tokens");

    s->p++;

    if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
        return NGX_DECLINED;
    }

    if (*s->p == '}') {
        s->p++;
        return NGX_OK;
    }

    seen = 0;

    for ( ;; ) {

        if (*s->p != '"') {
            return NGX_AGAIN;
        }

        rc = ngx_http_prefix_route_usage_string(s, &key);
        if (rc != NGX_OK) {
            return rc;
        }

        if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
            return NGX_DECLINED;
        }

        if (*s->p++ != ':') {
            return NGX_AGAIN;
        }

        if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
            return NGX_DECLINED;
        }

        c = NULL;
        sub = NULL;
        k = NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS;

        if (top != NULL) {
            for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS; k++) {
                name = &ngx_http_prefix_route_usage_keys[k];

                if (key.len == name->len
                    && ngx_memcmp(key.data, name->data, key.len) == 0)
                {
                    break;
                }
            }

            if (k < NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS) {
                c = &top->count[k];

            } else if (k < NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS) {
                sub = &top->count[k];
            }

        } else if (cached != NULL
                   && key.len == cached_key.len
                   && ngx_memcmp(key.data, cached_key.data, key.len) == 0)
        {
            k = 0;
            c = cached;
        }

        if (k < NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS) {

            /* jansson keeps the last of a key given twice: left to it */

            if (seen & (1 << k)) {
                return NGX_AGAIN;
            }

            seen |= 1 << k;
        }

        if (sub != NULL && *s->p == '{') {
            rc = ngx_http_prefix_route_usage_object(s, depth + 1, NULL, sub);

        } else {
            /* a details member that is not an object has no count */
            rc = ngx_http_prefix_route_usage_value(s, depth + 1, c);
        }

        if (rc != NGX_OK) {
            return rc;
        }

        if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
            return NGX_DECLINED;
        }

        if (*s->p == '}') {
            s->p++;
            return NGX_OK;
        }

        if (*s->p++ != ',') {
            return NGX_AGAIN;
        }

        if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
            return NGX_DECLINED;
        }
    }
}


/* Any value, its kind and integer to "c" if not NULL: as usage_object() */

static ngx_int_t
ngx_http_prefix_route_usage_value(ngx_http_prefix_route_usage_scan_t *s,
    ngx_uint_t depth, ngx_http_prefix_route_count_t *c)
{
    size_t                         n, have;
    ngx_int_t                      rc;
    ngx_http_prefix_route_count_e  kind;

    static ngx_str_t  literals[] = {
        ngx_string("true"), ngx_string("false"), ngx_string("null")
    };

    if (depth > NGX_HTTP_PREFIX_ROUTE_USAGE_DEPTH) {
        return NGX_AGAIN;
    }

    kind = NGX_HTTP_PREFIX_ROUTE_COUNT_OTHER;

    switch (*s->p) {

    case '{':
        rc = ngx_http_prefix_route_usage_object(s, depth, NULL, NULL);
        break;

    case '[':
        s->p++;

        if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
            return NGX_DECLINED;
        }

        if (*s->p == ']') {
            s->p++;
            rc = NGX_OK;
            break;
        }

        for ( ;; ) {
            rc = ngx_http_prefix_route_usage_value(s, depth + 1, NULL);

            if (rc != NGX_OK) {
                return rc;
            }

            if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
                return NGX_DECLINED;
            }

            if (*s->p == ']') {
                s->p++;
                break;
            }

            if (*s->p++ != ',') {
                return NGX_AGAIN;
            }

            if (ngx_http_prefix_route_usage_ws(s) != NGX_OK) {
                return NGX_DECLINED;
            }
        }

        break;

    case '"':
        rc = ngx_http_prefix_route_usage_string(s, NULL);
        break;

    case 't':
    case 'f':
    case 'n':
        n = (*s->p == 't') ? 0 : (*s->p == 'f') ? 1 : 2;
        have = ngx_min((size_t) (s->last - s->p), literals[n].len);

        if (ngx_memcmp(s->p, literals[n].data, have) != 0) {
            return NGX_AGAIN;
        }

        if (have < literals[n].len) {
            return NGX_DECLINED;
        }

        s->p += have;
        kind = (n == 2) ? NGX_HTTP_PREFIX_ROUTE_COUNT_NULL
                        : NGX_HTTP_PREFIX_ROUTE_COUNT_OTHER;
        rc = NGX_OK;
        break;

    default:
        return ngx_http_prefix_route_usage_number(s, c);
    }

    if (c != NULL) {
        c->kind = kind;
    }

    return rc;
}


/*
 * A string from its opening quote, plain printable ASCII only; its bytes
 * to "str" if not NULL
 */

static ngx_int_t
ngx_http_prefix_route_usage_string(ngx_http_prefix_route_usage_scan_t *s,
    ngx_str_t *str)
{
    u_char  *p;

    for (p = s->p + 1; p < s->last; p++) {

        if (*p == '"') {
            if (str != NULL) {
                str->data = s->p + 1;
                str->len = p - (s->p + 1);
            }

            s->p = p + 1;
            return NGX_OK;
        }

        if (*p == '\\' || *p < 0x20 || *p >= 0x80) {
            return NGX_AGAIN;
        }
    }

    return NGX_DECLINED;
}


/* An integer of at most 18 digits, as jansson's lexer reads it */

static ngx_int_t
ngx_http_prefix_route_usage_number(ngx_http_prefix_route_usage_scan_t *s,
    ngx_http_prefix_route_count_t *c)
{
    u_char   *p, *digits;
    int64_t   v;

    p = s->p;

    if (*p == '-') {
        p++;
    }

    digits = p;
    v = 0;

    while (p < s->last && *p >= '0' && *p <= '9') {
        if (p - digits == NGX_HTTP_PREFIX_ROUTE_USAGE_DIGITS) {
            return NGX_AGAIN;
        }

        v = v * 10 + (*p++ - '0');
    }

    if (p == s->last) {
        return NGX_DECLINED;
    }

    /* a fraction or an exponent is a byte out of place to the caller */

    if (p == digits || (*digits == '0' && p - digits > 1)) {
        return NGX_AGAIN;
    }

    if (c != NULL) {
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_INTEGER;
        c->value = (*s->p == '-') ? -v : v;
    }

    s->p = p;

    return NGX_OK;
}


/* Past white space: NGX_DECLINED when the bytes end there */

static ngx_int_t
ngx_http_prefix_route_usage_ws(ngx_http_prefix_route_usage_scan_t *s)
{
    while (s->p < s->last && ngx_http_prefix_route_json_space(*s->p)) {
        s->p++;
    }

    return (s->p < s->last) ? NGX_OK : NGX_DECLINED;
}


ngx_int_t
ngx_http_prefix_route_usage_json(u_char *p, u_char *last,
    ngx_http_prefix_route_tokens_t *t)
{
    json_t                          *usage, *v;
    ngx_int_t                        rc;
    ngx_uint_t                       k;
    json_error_t                     err;
    ngx_http_prefix_route_counts_t   f;

    usage = json_loadb((char *) p, last - p, JSON_DISABLE_EOF_CHECK, &err);

    if (usage == NULL) {
        return NGX_DECLINED;
    }

    if (!json_is_object(usage)) {
        json_decref(usage);
        return NGX_DECLINED;
    }

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS; k++) {
        v = json_object_get(usage,
                            (char *) ngx_http_prefix_route_usage_keys[k].data);

        if (k >= NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS) {
            v = json_is_object(v) ? json_object_get(v, "cached_tokens") : NULL;
        }

        ngx_http_prefix_route_usage_member(v, &f.count[k]);
    }

    rc = ngx_http_prefix_route_usage_tokens(&f, t);

    json_decref(usage);

    return rc;
}


static void
ngx_http_prefix_route_usage_member(json_t *v, ngx_http_prefix_route_count_t *c)
{
    c->value = 0;

    if (v == NULL) {
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT;

    } else if (json_is_null(v)) {
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_NULL;

    } else if (json_is_integer(v)) {
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_INTEGER;
        c->value = json_integer_value(v);

    } else {
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_OTHER;
    }
}


/*
 * The counts from the members, whichever reader found them: the one place
 * that decides what a usage object says.
 */

static ngx_int_t
ngx_http_prefix_route_usage_tokens(ngx_http_prefix_route_counts_t *f,
    ngx_http_prefix_route_tokens_t *t)
{
    uint64_t                        in, r, m;
    ngx_http_prefix_route_count_t  *cached, *read, *made;

    t->has_cached = 0;
    t->cached = 0;

    if (f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_PROMPT].kind
        != NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT)
    {
        /* OpenAI Chat Completions and Completions, and the engines */

        if (ngx_http_prefix_route_usage_count(
                &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_PROMPT], &t->prompt)
            != NGX_OK)
        {
            return NGX_DECLINED;
        }

        cached = &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS];

    } else {
        if (ngx_http_prefix_route_usage_count(
                &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_INPUT], &in)
            != NGX_OK)
        {
            return NGX_DECLINED;
        }

        read = &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_READ];
        made = &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_MADE];

        if (read->kind != NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT
            || made->kind != NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT)
        {
            /* Anthropic: input_tokens counts only what was not cached */

            r = 0;
            m = 0;

            if ((read->kind > NGX_HTTP_PREFIX_ROUTE_COUNT_NULL
                 && ngx_http_prefix_route_usage_count(read, &r) != NGX_OK)
                || (made->kind > NGX_HTTP_PREFIX_ROUTE_COUNT_NULL
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
        cached = &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS + 1];
    }

    if (cached->kind <= NGX_HTTP_PREFIX_ROUTE_COUNT_NULL) {
        return NGX_OK;
    }

    if (ngx_http_prefix_route_usage_count(cached, &t->cached) != NGX_OK
        || t->cached > t->prompt)
    {
        return NGX_DECLINED;
    }

    t->has_cached = 1;

    return NGX_OK;
}


/* An integer from 0 to NGX_HTTP_PREFIX_ROUTE_USAGE_MAX */

static ngx_int_t
ngx_http_prefix_route_usage_count(ngx_http_prefix_route_count_t *c,
    uint64_t *n)
{
    if (c->kind != NGX_HTTP_PREFIX_ROUTE_COUNT_INTEGER
        || c->value < 0
        || (uint64_t) c->value > NGX_HTTP_PREFIX_ROUTE_USAGE_MAX)
    {
        return NGX_DECLINED;
    }

    *n = (uint64_t) c->value;

    return NGX_OK;
}
