
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_scan.h"


/* the control bytes of the canonical form, as ngx_http_prefix_route_prompt.c */
#define NGX_HTTP_PREFIX_ROUTE_ESC   0x1b
#define NGX_HTTP_PREFIX_ROUTE_RS    0x1e
#define NGX_HTTP_PREFIX_ROUTE_US    0x1f

/* nesting the fast path follows at most (jansson: 2048) */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_DEPTH   32

/* integer digits of a number at most: below jansson's int64 overflow */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS  18


typedef struct {
    u_char                          *p;
    u_char                          *last;
    ngx_http_prefix_route_prompt_t  *pr;
    ngx_uint_t                       stop;     /* pr->buf is full */
    ngx_uint_t                       keyed;    /* pr->key is set */
} ngx_http_prefix_route_scan_t;


/* a string's bytes between its quotes, checked */
typedef struct {
    u_char                          *data;
    size_t                           len;
    ngx_uint_t                       escaped;  /* holds a \ escape */
} ngx_http_prefix_route_span_t;


/*
 * Bytes that end a string's run of plain ASCII: control bytes, '"', '\\'
 * and the first byte of a UTF-8 sequence, one table load a byte
 */
static u_char  ngx_http_prefix_route_scan_stop[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,     /* 0x00 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,     /* 0x10 */
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* 0x20 '"' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* 0x30 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* 0x40 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,     /* 0x50 '\\' */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* 0x60 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,     /* 0x70 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,     /* 0x80 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
};


static ngx_int_t ngx_http_prefix_route_scan_messages(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_message(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_key(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_span_t *key);
static ngx_int_t ngx_http_prefix_route_scan_next(
    ngx_http_prefix_route_scan_t *s, u_char close);
static ngx_int_t ngx_http_prefix_route_scan_value(
    ngx_http_prefix_route_scan_t *s, ngx_uint_t depth);
static ngx_int_t ngx_http_prefix_route_scan_string(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_span_t *sp);
static ngx_int_t ngx_http_prefix_route_scan_hex(u_char *p, u_char *last,
    uint32_t *v);
static size_t ngx_http_prefix_route_scan_utf8(u_char *p, u_char *last);
static ngx_int_t ngx_http_prefix_route_scan_number(
    ngx_http_prefix_route_scan_t *s);
static void ngx_http_prefix_route_scan_ws(ngx_http_prefix_route_scan_t *s);
static void ngx_http_prefix_route_scan_text(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp);
static void ngx_http_prefix_route_scan_write(ngx_http_prefix_route_scan_t *s,
    u_char *p, size_t n);
static void ngx_http_prefix_route_scan_byte(ngx_http_prefix_route_scan_t *s,
    u_char c);
static ngx_uint_t ngx_http_prefix_route_scan_eq(
    ngx_http_prefix_route_span_t *sp, char *str);


ngx_int_t
ngx_http_prefix_route_scan(u_char *p, size_t len,
    ngx_http_prefix_route_prompt_t *pr)
{
    ngx_int_t                      rc;
    ngx_uint_t                     seen;
    ngx_http_prefix_route_span_t   key, model, salt;
    ngx_http_prefix_route_scan_t   s;

    pr->len = 0;
    pr->nanswers = 0;
    pr->key = 0;
    pr->seed = 0;

    s.p = p;
    s.last = p + len;
    s.pr = pr;
    s.stop = (pr->size == 0);
    s.keyed = 0;

    model.data = NULL;
    salt.data = NULL;
    seen = 0;

    ngx_http_prefix_route_scan_ws(&s);

    if (s.p == s.last || *s.p++ != '{') {
        return NGX_DECLINED;
    }

    do {
        if (ngx_http_prefix_route_scan_key(&s, &key) != NGX_OK) {
            return NGX_DECLINED;
        }

        if (ngx_http_prefix_route_scan_eq(&key, "messages")) {

            if (seen
                || ngx_http_prefix_route_scan_messages(&s) != NGX_OK)
            {
                return NGX_DECLINED;
            }

            seen = 1;

        } else if (ngx_http_prefix_route_scan_eq(&key, "model")
                   || ngx_http_prefix_route_scan_eq(&key, "cache_salt"))
        {
            /* a string without escapes, once: its bytes seed the chain */

            if (s.p == s.last || *s.p != '"') {
                return NGX_DECLINED;
            }

            if (key.len == 5) {
                if (model.data != NULL
                    || ngx_http_prefix_route_scan_string(&s, &model)
                       != NGX_OK
                    || model.escaped)
                {
                    return NGX_DECLINED;
                }

            } else if (salt.data != NULL
                       || ngx_http_prefix_route_scan_string(&s, &salt)
                          != NGX_OK
                       || salt.escaped)
            {
                return NGX_DECLINED;
            }

        } else if (ngx_http_prefix_route_scan_eq(&key, "tools")
                   || ngx_http_prefix_route_scan_eq(&key, "functions")
                   || ngx_http_prefix_route_scan_eq(&key, "system")
                   || ngx_http_prefix_route_scan_eq(&key, "prompt")
                   || ngx_http_prefix_route_scan_eq(&key, "input")
                   || ngx_http_prefix_route_scan_eq(&key, "instructions"))
        {
            /* parts of the prompt the fast path does not write */
            return NGX_DECLINED;

        } else if (ngx_http_prefix_route_scan_value(&s, 1) != NGX_OK) {
            return NGX_DECLINED;
        }

        rc = ngx_http_prefix_route_scan_next(&s, '}');

    } while (rc == NGX_AGAIN);

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_ws(&s);

    if (s.p != s.last || !seen) {
        return NGX_DECLINED;
    }

    if (!s.keyed) {
        pr->key = pr->len;
    }

    /* as ngx_http_prefix_route_prompt_seed(): no model is "" */

    if (model.data == NULL) {
        model.data = (u_char *) "";
        model.len = 0;
    }

    pr->seed = ngx_http_prefix_route_hash_seed(model.data, model.len,
                                               salt.data, salt.len);
    pr->model = ngx_http_prefix_route_hash_seed(model.data, model.len,
                                                NULL, 0);

    if (pr->name != NULL && pr->name_size > 0) {
        pr->name_len = ngx_min(model.len, pr->name_size - 1);
        ngx_memcpy(pr->name, model.data, pr->name_len);
        pr->name[pr->name_len] = '\0';
    }

    return NGX_OK;
}


/* "messages": an array of objects of a string role and string content */

static ngx_int_t
ngx_http_prefix_route_scan_messages(ngx_http_prefix_route_scan_t *s)
{
    ngx_int_t  rc;

    if (s->p == s->last || *s->p++ != '[') {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_ws(s);

    if (s->p < s->last && *s->p == ']') {
        s->p++;
        return NGX_OK;
    }

    do {
        ngx_http_prefix_route_scan_ws(s);

        if (ngx_http_prefix_route_scan_message(s) != NGX_OK) {
            return NGX_DECLINED;
        }

        rc = ngx_http_prefix_route_scan_next(s, ']');

    } while (rc == NGX_AGAIN);

    return rc;
}


/*
 * One message, written as ngx_http_prefix_route_prompt_message() writes
 * it: RS, the role, US 'c', the content; the key after the first message
 * that is not a system or developer one; an assistant's place kept.
 */

static ngx_int_t
ngx_http_prefix_route_scan_message(ngx_http_prefix_route_scan_t *s)
{
    size_t                           start;
    ngx_int_t                        rc;
    ngx_http_prefix_route_span_t     key, role, content, *v;
    ngx_http_prefix_route_prompt_t  *pr;

    if (s->p == s->last || *s->p++ != '{') {
        return NGX_DECLINED;
    }

    role.data = NULL;
    content.data = NULL;

    do {
        if (ngx_http_prefix_route_scan_key(s, &key) != NGX_OK) {
            return NGX_DECLINED;
        }

        if (ngx_http_prefix_route_scan_eq(&key, "role")) {
            v = &role;

        } else if (ngx_http_prefix_route_scan_eq(&key, "content")) {
            v = &content;

        } else {
            /* a name, tool calls, parts...: jansson's walk writes them */
            return NGX_DECLINED;
        }

        if (v->data != NULL || s->p == s->last || *s->p != '"'
            || ngx_http_prefix_route_scan_string(s, v) != NGX_OK)
        {
            return NGX_DECLINED;
        }

        rc = ngx_http_prefix_route_scan_next(s, '}');

    } while (rc == NGX_AGAIN);

    if (rc != NGX_OK
        || role.data == NULL || role.escaped || content.data == NULL)
    {
        return NGX_DECLINED;
    }

    /* the walk leaves the messages after a full buffer alone */

    if (s->stop) {
        return NGX_OK;
    }

    pr = s->pr;
    start = pr->len;

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);
    ngx_http_prefix_route_scan_text(s, &role);
    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_scan_byte(s, 'c');
    ngx_http_prefix_route_scan_text(s, &content);

    if (!s->keyed
        && !ngx_http_prefix_route_scan_eq(&role, "system")
        && !ngx_http_prefix_route_scan_eq(&role, "developer"))
    {
        pr->key = pr->len;
        s->keyed = 1;
    }

    if (pr->answers != NULL && pr->nanswers < pr->max_answers
        && ngx_http_prefix_route_scan_eq(&role, "assistant"))
    {
        pr->answers[2 * pr->nanswers] = start;
        pr->answers[2 * pr->nanswers + 1] = pr->len;
        pr->nanswers++;
    }

    return NGX_OK;
}


/* any JSON value jansson reads, checked and passed over */

static ngx_int_t
ngx_http_prefix_route_scan_value(ngx_http_prefix_route_scan_t *s,
    ngx_uint_t depth)
{
    u_char                        c, close;
    ngx_int_t                     rc;
    ngx_http_prefix_route_span_t  sp;

    if (s->p == s->last || depth > NGX_HTTP_PREFIX_ROUTE_SCAN_DEPTH) {
        return NGX_DECLINED;
    }

    c = *s->p;

    switch (c) {

    case '"':
        return ngx_http_prefix_route_scan_string(s, &sp);

    case 't':
        if (s->last - s->p >= 4 && ngx_strncmp(s->p, "true", 4) == 0) {
            s->p += 4;
            return NGX_OK;
        }

        return NGX_DECLINED;

    case 'f':
        if (s->last - s->p >= 5 && ngx_strncmp(s->p, "false", 5) == 0) {
            s->p += 5;
            return NGX_OK;
        }

        return NGX_DECLINED;

    case 'n':
        if (s->last - s->p >= 4 && ngx_strncmp(s->p, "null", 4) == 0) {
            s->p += 4;
            return NGX_OK;
        }

        return NGX_DECLINED;

    case '{':
    case '[':
        break;

    default:
        return ngx_http_prefix_route_scan_number(s);
    }

    close = (c == '{') ? '}' : ']';
    s->p++;

    ngx_http_prefix_route_scan_ws(s);

    if (s->p < s->last && *s->p == close) {
        s->p++;
        return NGX_OK;
    }

    do {
        ngx_http_prefix_route_scan_ws(s);

        if ((c == '{' && ngx_http_prefix_route_scan_key(s, &sp) != NGX_OK)
            || ngx_http_prefix_route_scan_value(s, depth + 1) != NGX_OK)
        {
            return NGX_DECLINED;
        }

        rc = ngx_http_prefix_route_scan_next(s, close);

    } while (rc == NGX_AGAIN);

    return rc;
}


/*
 * An object member's key, a string without escapes (an escaped key may
 * hold a NUL, which jansson refuses), and its colon: the value is next.
 */

static ngx_int_t
ngx_http_prefix_route_scan_key(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *key)
{
    ngx_http_prefix_route_scan_ws(s);

    if (s->p == s->last || *s->p != '"'
        || ngx_http_prefix_route_scan_string(s, key) != NGX_OK
        || key->escaped)
    {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_ws(s);

    if (s->p == s->last || *s->p++ != ':') {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_ws(s);

    return NGX_OK;
}


/*
 * After a member or an element: NGX_AGAIN at a comma, NGX_OK at "close",
 * NGX_DECLINED otherwise.
 */

static ngx_int_t
ngx_http_prefix_route_scan_next(ngx_http_prefix_route_scan_t *s, u_char close)
{
    ngx_http_prefix_route_scan_ws(s);

    if (s->p == s->last) {
        return NGX_DECLINED;
    }

    if (*s->p == ',') {
        s->p++;
        return NGX_AGAIN;
    }

    return (*s->p++ == close) ? NGX_OK : NGX_DECLINED;
}


/*
 * A string from its opening quote at s->p: no control byte, valid
 * escapes (a \u high surrogate followed by a low one), valid UTF-8, as
 * jansson's lexer wants them.
 */

static ngx_int_t
ngx_http_prefix_route_scan_string(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp)
{
    u_char    *p, *last, c;
    size_t     n;
    uint32_t   v, lo;

    p = s->p + 1;
    last = s->last;

    sp->data = p;
    sp->escaped = 0;

    for ( ;; ) {

        /* the run of plain ASCII, the bulk of any prompt */

        while (p < last && !ngx_http_prefix_route_scan_stop[*p]) {
            p++;
        }

        if (p == last) {
            return NGX_DECLINED;
        }

        c = *p;

        if (c == '"') {
            break;
        }

        if (c < 0x20) {
            return NGX_DECLINED;
        }

        if (c >= 0x80) {
            n = ngx_http_prefix_route_scan_utf8(p, last);

            if (n == 0) {
                return NGX_DECLINED;
            }

            p += n;
            continue;
        }

        /* a backslash */

        if (last - p < 2) {
            return NGX_DECLINED;
        }

        sp->escaped = 1;

        switch (p[1]) {

        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r':
        case 't':
            p += 2;
            continue;

        case 'u':
            break;

        default:
            return NGX_DECLINED;
        }

        if (ngx_http_prefix_route_scan_hex(p + 2, last, &v) != NGX_OK
            || (v >= 0xdc00 && v <= 0xdfff))
        {
            return NGX_DECLINED;
        }

        p += 6;

        if (v >= 0xd800 && v <= 0xdbff) {

            if (last - p < 6 || p[0] != '\\' || p[1] != 'u'
                || ngx_http_prefix_route_scan_hex(p + 2, last, &lo) != NGX_OK
                || lo < 0xdc00 || lo > 0xdfff)
            {
                return NGX_DECLINED;
            }

            p += 6;
        }
    }

    sp->len = p - sp->data;
    s->p = p + 1;

    return NGX_OK;
}


static ngx_int_t
ngx_http_prefix_route_scan_hex(u_char *p, u_char *last, uint32_t *v)
{
    u_char      c;
    ngx_uint_t  i;

    if (last - p < 4) {
        return NGX_DECLINED;
    }

    *v = 0;

    for (i = 0; i < 4; i++) {
        c = p[i];

        if (c >= '0' && c <= '9') {
            *v = *v * 16 + (c - '0');

        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            *v = *v * 16 + ((c | 0x20) - 'a' + 10);

        } else {
            return NGX_DECLINED;
        }
    }

    return NGX_OK;
}


/*
 * The length of the UTF-8 sequence at p (p[0] >= 0x80), or 0 when it is
 * not one jansson accepts: no overlong form, no surrogate, none above
 * U+10FFFF (RFC 3629).
 */

static size_t
ngx_http_prefix_route_scan_utf8(u_char *p, u_char *last)
{
    size_t    n, i;
    uint32_t  v;

    if (p[0] < 0xc2) {
        return 0;

    } else if (p[0] < 0xe0) {
        n = 2;
        v = p[0] & 0x1f;

    } else if (p[0] < 0xf0) {
        n = 3;
        v = p[0] & 0x0f;

    } else if (p[0] < 0xf5) {
        n = 4;
        v = p[0] & 0x07;

    } else {
        return 0;
    }

    if ((size_t) (last - p) < n) {
        return 0;
    }

    for (i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            return 0;
        }

        v = (v << 6) | (p[i] & 0x3f);
    }

    if (v > 0x10ffff
        || (v >= 0xd800 && v <= 0xdfff)
        || (n == 3 && v < 0x800)
        || (n == 4 && v < 0x10000))
    {
        return 0;
    }

    return n;
}


/*
 * A number of JSON's grammar; declined with an exponent or more than
 * NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS integer digits, where jansson could
 * find it out of range.
 */

static ngx_int_t
ngx_http_prefix_route_scan_number(ngx_http_prefix_route_scan_t *s)
{
    u_char  *p, *last, *digits;

    p = s->p;
    last = s->last;

    if (p < last && *p == '-') {
        p++;
    }

    digits = p;

    if (p == last || *p < '0' || *p > '9') {
        return NGX_DECLINED;
    }

    if (*p == '0') {
        p++;

        if (p < last && *p >= '0' && *p <= '9') {
            return NGX_DECLINED;
        }

    } else {
        while (p < last && *p >= '0' && *p <= '9') {
            p++;
        }
    }

    if (p - digits > NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS) {
        return NGX_DECLINED;
    }

    if (p < last && *p == '.') {
        p++;

        if (p == last || *p < '0' || *p > '9') {
            return NGX_DECLINED;
        }

        while (p < last && *p >= '0' && *p <= '9') {
            p++;
        }
    }

    if (p < last && (*p == 'e' || *p == 'E')) {
        return NGX_DECLINED;
    }

    s->p = p;

    return NGX_OK;
}


static void
ngx_http_prefix_route_scan_ws(ngx_http_prefix_route_scan_t *s)
{
    while (s->p < s->last
           && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r'
               || *s->p == '\t'))
    {
        s->p++;
    }
}


/*
 * A checked string's text, decoded, as ngx_http_prefix_route_prompt_text()
 * writes it: a byte the format reserves (0x1b-0x1f, only from a \u
 * escape here) as ESC and the byte | 0x40.
 */

static void
ngx_http_prefix_route_scan_text(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp)
{
    u_char    *p, *last, *q, c, utf[4];
    size_t     n;
    uint32_t   v, lo;

    p = sp->data;
    last = p + sp->len;

    if (!sp->escaped) {
        ngx_http_prefix_route_scan_write(s, p, sp->len);
        return;
    }

    while (p < last && !s->stop) {

        q = p;

        while (q < last && *q != '\\') {
            q++;
        }

        ngx_http_prefix_route_scan_write(s, p, q - p);

        if (q == last) {
            return;
        }

        switch (q[1]) {

        case 'b':
            c = '\b';
            break;

        case 'f':
            c = '\f';
            break;

        case 'n':
            c = '\n';
            break;

        case 'r':
            c = '\r';
            break;

        case 't':
            c = '\t';
            break;

        case 'u':
            c = 0;
            break;

        default: /* '"', '\\', '/' */
            c = q[1];
        }

        if (q[1] != 'u') {
            ngx_http_prefix_route_scan_byte(s, c);
            p = q + 2;
            continue;
        }

        (void) ngx_http_prefix_route_scan_hex(q + 2, last, &v);
        p = q + 6;

        if (v >= 0xd800 && v <= 0xdbff) {
            (void) ngx_http_prefix_route_scan_hex(p + 2, last, &lo);
            v = 0x10000 + ((v - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
        }

        if (v >= NGX_HTTP_PREFIX_ROUTE_ESC && v <= NGX_HTTP_PREFIX_ROUTE_US) {
            ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_ESC);
            ngx_http_prefix_route_scan_byte(s, (u_char) (v | 0x40));
            continue;
        }

        if (v < 0x80) {
            utf[0] = (u_char) v;
            n = 1;

        } else if (v < 0x800) {
            utf[0] = (u_char) (0xc0 | (v >> 6));
            utf[1] = (u_char) (0x80 | (v & 0x3f));
            n = 2;

        } else if (v < 0x10000) {
            utf[0] = (u_char) (0xe0 | (v >> 12));
            utf[1] = (u_char) (0x80 | ((v >> 6) & 0x3f));
            utf[2] = (u_char) (0x80 | (v & 0x3f));
            n = 3;

        } else {
            utf[0] = (u_char) (0xf0 | (v >> 18));
            utf[1] = (u_char) (0x80 | ((v >> 12) & 0x3f));
            utf[2] = (u_char) (0x80 | ((v >> 6) & 0x3f));
            utf[3] = (u_char) (0x80 | (v & 0x3f));
            n = 4;
        }

        ngx_http_prefix_route_scan_write(s, utf, n);
    }
}


/* bytes none of which the format reserves, cut where the buffer is full */

static void
ngx_http_prefix_route_scan_write(ngx_http_prefix_route_scan_t *s, u_char *p,
    size_t n)
{
    ngx_http_prefix_route_prompt_t  *pr;

    if (s->stop || n == 0) {
        return;
    }

    pr = s->pr;
    n = ngx_min(n, pr->size - pr->len);

    ngx_memcpy(pr->buf + pr->len, p, n);
    pr->len += n;

    if (pr->len == pr->size) {
        s->stop = 1;
    }
}


static void
ngx_http_prefix_route_scan_byte(ngx_http_prefix_route_scan_t *s, u_char c)
{
    ngx_http_prefix_route_prompt_t  *pr;

    if (s->stop) {
        return;
    }

    pr = s->pr;
    pr->buf[pr->len++] = c;

    if (pr->len == pr->size) {
        s->stop = 1;
    }
}


static ngx_uint_t
ngx_http_prefix_route_scan_eq(ngx_http_prefix_route_span_t *sp, char *str)
{
    size_t  len;

    len = ngx_strlen(str);

    return !sp->escaped && sp->len == len
           && ngx_memcmp(sp->data, str, len) == 0;
}
