
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>

#include "ngx_http_prefix_route_extract.h"
#include "ngx_http_prefix_route_scan.h"
#include "ngx_http_prefix_route_usage.h"


/* objects of each kind tried at most in each of the head and the tail */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_TRIES  8

/* the members read, by their keys' places below */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_PROMPT  0   /* every prompt token */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_INPUT   1   /* also: those not cached */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_READ    2   /* those cached */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_MADE    3
#define NGX_HTTP_PREFIX_ROUTE_USAGE_CACHED  4   /* those cached, in place */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS  5   /* then the details */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS    7

/* JSON's white space, RFC 8259 */
#define ngx_http_prefix_route_json_space(c)                                  \
    ((c) == ' ' || (c) == '\t' || (c) == '\n' || (c) == '\r')

/* the key of a member on the tape is "name" (keys there are not escaped) */
#define ngx_http_prefix_route_usage_is(node, name)                           \
    ((node)->klen == (name)->len                                             \
     && ngx_memcmp((node)->key, (name)->data, (name)->len) == 0)


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


static size_t ngx_http_prefix_route_usage_tail(
    ngx_http_prefix_route_usage_t *u, u_char *buf);
static ngx_int_t ngx_http_prefix_route_usage_find(u_char *start, size_t len,
    ngx_uint_t backward, ngx_http_prefix_route_tokens_t *t);
static ngx_int_t ngx_http_prefix_route_usage_object(u_char *start,
    size_t len, ngx_uint_t backward, ngx_uint_t object,
    ngx_http_prefix_route_tokens_t *t);
static u_char *ngx_http_prefix_route_usage_key(u_char *start, u_char *end,
    u_char *q, ngx_str_t *key);
static void ngx_http_prefix_route_usage_node(
    ngx_http_prefix_route_node_t *node, ngx_http_prefix_route_count_t *c);
static void ngx_http_prefix_route_usage_member(json_t *v,
    ngx_http_prefix_route_count_t *c);
static ngx_int_t ngx_http_prefix_route_usage_tokens(
    ngx_http_prefix_route_counts_t *f, ngx_uint_t object,
    ngx_http_prefix_route_tokens_t *t);
static ngx_int_t ngx_http_prefix_route_usage_count(
    ngx_http_prefix_route_count_t *c, uint64_t *n);


/*
 * The objects that hold the counts, as quoted keys, in the order tried
 * (ngx_http_prefix_route_counts_in_e), and the keys of the members read
 * in each: the counts, then the details objects whose cached_tokens are
 * read (ngx_http_prefix_route_counts_t); an empty key is not read.
 */
static ngx_str_t  ngx_http_prefix_route_usage_objects
    [NGX_HTTP_PREFIX_ROUTE_COUNTS_KINDS] =
{
    ngx_string("\"usage\""),
    ngx_string("\"meta_info\""),
    ngx_string("\"timings\"")
};

static ngx_str_t  ngx_http_prefix_route_usage_keys
    [NGX_HTTP_PREFIX_ROUTE_COUNTS_KINDS][NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS] =
{
    /* OpenAI's APIs, the engines' OpenAI-compatible ones, Anthropic's */
    { ngx_string("prompt_tokens"),
      ngx_string("input_tokens"),
      ngx_string("cache_read_input_tokens"),
      ngx_string("cache_creation_input_tokens"),
      ngx_null_string,
      ngx_string("prompt_tokens_details"),
      ngx_string("input_tokens_details") },

    /* SGLang's native /generate */
    { ngx_string("prompt_tokens"),
      ngx_null_string,
      ngx_null_string,
      ngx_null_string,
      ngx_string("cached_tokens"),
      ngx_null_string,
      ngx_null_string },

    /* llama.cpp server's native /completion: computed and cached */
    { ngx_null_string,
      ngx_string("prompt_n"),
      ngx_string("cache_n"),
      ngx_null_string,
      ngx_null_string,
      ngx_null_string,
      ngx_null_string }
};

static ngx_str_t  ngx_http_prefix_route_usage_cached =
    ngx_string("cached_tokens");


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
    size_t  len;
    u_char  buf[NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL];

    len = ngx_http_prefix_route_usage_tail(u, buf);

    if (ngx_http_prefix_route_usage_find(buf, len, 1, t) == NGX_OK) {
        return NGX_OK;
    }

    if (u->total <= NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL) {
        /* the tail held the whole response */
        return NGX_DECLINED;
    }

    return ngx_http_prefix_route_usage_find(u->head, u->head_len, 0, t);
}


/* The tail's bytes in order into buf, TAIL bytes; returns how many */

static size_t
ngx_http_prefix_route_usage_tail(ngx_http_prefix_route_usage_t *u,
    u_char *buf)
{
    size_t  len, at, k;

    len = (size_t) ngx_min(u->total, NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL);
    at = (size_t) ((u->total - (off_t) len)
                   % NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL);

    k = ngx_min(len, NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL - at);
    ngx_memcpy(buf, u->tail + at, k);
    ngx_memcpy(buf + k, u->tail, len - k);

    return len;
}


/*
 * Tries the objects of start[0..len) that hold counts, in their order
 * (a response with "usage" is read from it whatever else it has), each
 * the last first or the first first.
 */

static ngx_int_t
ngx_http_prefix_route_usage_find(u_char *start, size_t len,
    ngx_uint_t backward, ngx_http_prefix_route_tokens_t *t)
{
    ngx_uint_t  object;

    for (object = 0; object < NGX_HTTP_PREFIX_ROUTE_COUNTS_KINDS; object++) {
        if (ngx_http_prefix_route_usage_object(start, len, backward, object,
                                               t)
            == NGX_OK)
        {
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/*
 * Tries the keys of one such object in start[0..len): a key is the quoted
 * name not escaped (an even run of backslashes before it) followed by ':'
 * and an object, which the fast path reads up to its end, or jansson
 * where the fast path cannot tell.
 */

static ngx_int_t
ngx_http_prefix_route_usage_object(u_char *start, size_t len,
    ngx_uint_t backward, ngx_uint_t object, ngx_http_prefix_route_tokens_t *t)
{
    u_char      *q, *s, *end;
    size_t       i, n;
    ngx_int_t    rc;
    ngx_str_t   *key;
    ngx_uint_t   tries;

    key = &ngx_http_prefix_route_usage_objects[object];

    if (len < key->len) {
        return NGX_DECLINED;
    }

    end = start + len;
    n = len - key->len + 1;                 /* places the key can start */
    tries = 0;

    for (i = 0; i < n; i++) {

        q = backward ? start + (n - 1 - i) : start + i;

        s = ngx_http_prefix_route_usage_key(start, end, q, key);

        if (s == NULL || *s != '{') {
            continue;
        }

        if (++tries > NGX_HTTP_PREFIX_ROUTE_USAGE_TRIES) {
            break;
        }

        rc = ngx_http_prefix_route_usage_scan(s, end, object, t);

        if (rc == NGX_AGAIN) {
            rc = ngx_http_prefix_route_usage_json(s, end, object, t);
        }

        if (rc == NGX_OK) {
            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/*
 * The value of the member whose key, quoted, is at q in start[0..end): the
 * key not escaped (an even run of backslashes before it), then ':'; NULL
 * when it is not one, or the value is not in the bytes.
 */

static u_char *
ngx_http_prefix_route_usage_key(u_char *start, u_char *end, u_char *q,
    ngx_str_t *key)
{
    u_char      *s;
    ngx_uint_t   slashes;

    if (ngx_memcmp(q, key->data, key->len) != 0) {
        return NULL;
    }

    for (slashes = 0, s = q; s > start && s[-1] == '\\'; s--) {
        slashes++;
    }

    if (slashes % 2) {
        return NULL;
    }

    s = q + key->len;

    while (s < end && ngx_http_prefix_route_json_space(*s)) {
        s++;
    }

    if (s == end || *s++ != ':') {
        return NULL;
    }

    while (s < end && ngx_http_prefix_route_json_space(*s)) {
        s++;
    }

    return (s < end) ? s : NULL;
}


ngx_int_t
ngx_http_prefix_route_usage_cut(ngx_http_prefix_route_usage_t *u,
    uint64_t prompt, ngx_http_prefix_route_tokens_t *t)
{
    u_char                         *q, *s, *end;
    size_t                          len;
    json_t                         *cut;
    json_error_t                    err;
    ngx_http_prefix_route_count_t   c;
    u_char                          buf[NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL];

    static ngx_str_t  key = ngx_string("\"cached_tokens\"");

    len = ngx_http_prefix_route_usage_tail(u, buf);
    end = buf + len;

    if (len < key.len) {
        return NGX_DECLINED;
    }

    for (q = end - key.len; q > buf; q--) {

        if (ngx_http_prefix_route_usage_key(buf, end, q, &key) == NULL) {
            continue;
        }

        /*
         * a member after another: a quote after a comma is no string's
         * (a string's quotes are escaped), whatever the tail cut off
         */

        for (s = q; s > buf && ngx_http_prefix_route_json_space(s[-1]); s--) {
            /* void */
        }

        if (s == buf || s[-1] != ',') {
            return NGX_DECLINED;
        }

        s[-1] = '{';

        cut = ngx_http_prefix_route_json_load((char *) s - 1, end - s + 1,
                                              NULL, NULL,
                                              JSON_DISABLE_EOF_CHECK
                                              | JSON_ALLOW_NUL, &err);

        if (cut == NULL) {
            return NGX_DECLINED;
        }

        ngx_http_prefix_route_usage_member(json_object_get(cut,
                                                           "cached_tokens"),
                                           &c);
        json_decref(cut);

        if (ngx_http_prefix_route_usage_count(&c, &t->cached) != NGX_OK
            || t->cached > prompt)
        {
            return NGX_DECLINED;
        }

        t->prompt = prompt;
        t->has_cached = 1;

        return NGX_OK;
    }

    return NGX_DECLINED;
}


ngx_int_t
ngx_http_prefix_route_usage_scan(u_char *p, u_char *last, ngx_uint_t object,
    ngx_http_prefix_route_tokens_t *t)
{
    uint32_t                         i, j;
    ngx_str_t                       *keys;
    ngx_uint_t                       k;
    ngx_http_prefix_route_node_t    *node;
    ngx_http_prefix_route_counts_t   f;

    while (p < last && ngx_http_prefix_route_json_space(*p)) {
        p++;
    }

    node = ngx_http_prefix_route_scan_tape(p, last);

    if (node == NULL) {
        return NGX_AGAIN;
    }

    if (*node[0].value != '{') {
        return NGX_DECLINED;
    }

    ngx_memzero(&f, sizeof(ngx_http_prefix_route_counts_t));
    keys = ngx_http_prefix_route_usage_keys[object];

    /* of a key given twice, the last counts, as jansson keeps it */

    for (i = 1; i < node[0].end; i = node[i].end) {

        for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS; k++) {
            if (keys[k].len && ngx_http_prefix_route_usage_is(&node[i],
                                                              &keys[k]))
            {
                break;
            }
        }

        if (k < NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS) {
            ngx_http_prefix_route_usage_node(&node[i], &f.count[k]);
            continue;
        }

        if (k == NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS) {
            continue;
        }

        /* a details member that is not an object has no count */

        f.count[k].kind = NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT;

        if (*node[i].value != '{') {
            continue;
        }

        for (j = i + 1; j < node[i].end; j = node[j].end) {
            if (ngx_http_prefix_route_usage_is(&node[j],
                                        &ngx_http_prefix_route_usage_cached))
            {
                ngx_http_prefix_route_usage_node(&node[j], &f.count[k]);
            }
        }
    }

    return ngx_http_prefix_route_usage_tokens(&f, object, t);
}


/* A checked value on the tape as a member of the usage object */

static void
ngx_http_prefix_route_usage_node(ngx_http_prefix_route_node_t *node,
    ngx_http_prefix_route_count_t *c)
{
    u_char   *p, *last;
    int64_t   v;

    c->value = 0;

    switch (*node->value) {

    case 'n':
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_NULL;
        return;

    case '"':
    case '{':
    case '[':
    case 't':
    case 'f':
        c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_OTHER;
        return;
    }

    /* an integer of at most 18 digits: the tape takes no other number */

    p = node->value + (*node->value == '-');
    last = node->value + node->len;

    for (v = 0; p < last; p++) {
        v = v * 10 + (*p - '0');
    }

    c->kind = NGX_HTTP_PREFIX_ROUTE_COUNT_INTEGER;
    c->value = (*node->value == '-') ? -v : v;
}


ngx_int_t
ngx_http_prefix_route_usage_json(u_char *p, u_char *last, ngx_uint_t object,
    ngx_http_prefix_route_tokens_t *t)
{
    json_t                          *usage, *v;
    ngx_str_t                       *keys;
    ngx_int_t                        rc;
    ngx_uint_t                       k;
    json_error_t                     err;
    ngx_http_prefix_route_counts_t   f;

    /* JSON_ALLOW_NUL as for bodies: "\u0000" in a string is valid JSON */

    usage = ngx_http_prefix_route_json_load((char *) p, last - p, NULL, NULL,
                                            JSON_DISABLE_EOF_CHECK
                                            | JSON_ALLOW_NUL, &err);

    if (usage == NULL) {
        return NGX_DECLINED;
    }

    if (!json_is_object(usage)) {
        json_decref(usage);
        return NGX_DECLINED;
    }

    keys = ngx_http_prefix_route_usage_keys[object];

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_USAGE_KEYS; k++) {
        v = keys[k].len ? json_object_get(usage, (char *) keys[k].data)
                        : NULL;

        if (k >= NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS) {
            v = json_is_object(v)
                ? json_object_get(v,
                          (char *) ngx_http_prefix_route_usage_cached.data)
                : NULL;
        }

        ngx_http_prefix_route_usage_member(v, &f.count[k]);
    }

    rc = ngx_http_prefix_route_usage_tokens(&f, object, t);

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
    ngx_uint_t object, ngx_http_prefix_route_tokens_t *t)
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

        /* SGLang's native meta_info has its cached_tokens in place */

        cached = (object == NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_META_INFO)
                 ? &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_CACHED]
                 : &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_COUNTS];

    } else {
        if (ngx_http_prefix_route_usage_count(
                &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_INPUT], &in)
            != NGX_OK)
        {
            return NGX_DECLINED;
        }

        read = &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_READ];
        made = &f->count[NGX_HTTP_PREFIX_ROUTE_USAGE_MADE];

        if (object == NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_TIMINGS
            && read->kind != NGX_HTTP_PREFIX_ROUTE_COUNT_INTEGER)
        {
            /* llama.cpp's prompt_n alone: the tokens computed, not all */
            return NGX_DECLINED;
        }

        if (read->kind != NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT
            || made->kind != NGX_HTTP_PREFIX_ROUTE_COUNT_ABSENT)
        {
            /*
             * Anthropic: input_tokens counts only what was not cached; so
             * does llama.cpp's prompt_n beside cache_n
             */

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


uint32_t
ngx_http_prefix_route_usage_ratio(uint32_t ratio, uint64_t samples,
    uint64_t sample)
{
    uint64_t  n;

    if (samples >= NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN) {
        sample = ngx_max(ngx_min(sample, (uint64_t) ratio * 2), ratio / 2);
    }

    n = ngx_min(samples, NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN - 1);

    return (uint32_t) (((uint64_t) ratio * n + sample) / (n + 1));
}
