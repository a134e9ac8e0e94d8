
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_scan.h"

#if (defined __SSE2__)
#include <emmintrin.h>
#endif


/* the control bytes of the canonical form, as ngx_http_prefix_route_prompt.c */
#define NGX_HTTP_PREFIX_ROUTE_ESC   0x1b
#define NGX_HTTP_PREFIX_ROUTE_FS    0x1c
#define NGX_HTTP_PREFIX_ROUTE_GS    0x1d
#define NGX_HTTP_PREFIX_ROUTE_RS    0x1e
#define NGX_HTTP_PREFIX_ROUTE_US    0x1f

/* nesting the fast path follows at most (jansson: 2048) */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_DEPTH   32

/* integer digits of a number at most: below jansson's int64 overflow */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS  18

/*
 * integer digits plus a positive exponent at most: the number is below
 * 10^308 < DBL_MAX (1.8e308), where jansson refuses it ("real number
 * overflow"); an exponent of more than 3 digits is declined too
 */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_EXP     308

/* the bytes of a real number the fast path prints at most */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_REAL    64

/*
 * members of the objects being written as canonical JSON at once, along
 * one path from the outermost, and nodes of the tape (the tools,
 * functions and system values, and one message's, written as JSON): more
 * are declined
 */
#define NGX_HTTP_PREFIX_ROUTE_MEMBERS 256
#define NGX_HTTP_PREFIX_ROUTE_NODES   8192

/*
 * tools and functions values whose canonical JSON a worker keeps, and the
 * bytes of one at most (its body's and its JSON's): an agent sends the
 * same tools on every turn (bench/results/extract.md: their JSON was most
 * of a 4 KiB agent body's time); one MCP server's 60 tools are 14,081
 * tokens of JSON (anthropics/claude-code#16466), some 56 KB
 */
#define NGX_HTTP_PREFIX_ROUTE_TOOLS       4
#define NGX_HTTP_PREFIX_ROUTE_TOOLS_SIZE  131072


/*
 * Whether 8 bytes (a word, any byte order) hold a '"' or a '\\' (quote),
 * or also a control byte or one of 0x80 and above (plain): exact in
 * telling that one is there, not where (a borrow may mark the next byte
 * too).  The classic "has a zero byte" test, x - 0x01.. & ~x & 0x80..
 */
#define NGX_HTTP_PREFIX_ROUTE_ONES    0x0101010101010101ULL
#define NGX_HTTP_PREFIX_ROUTE_HIGHS   0x8080808080808080ULL

#define ngx_http_prefix_route_scan_zero(x)                                    \
    (((x) - NGX_HTTP_PREFIX_ROUTE_ONES) & ~(x) & NGX_HTTP_PREFIX_ROUTE_HIGHS)

#define ngx_http_prefix_route_scan_has(w, c)                                  \
    ngx_http_prefix_route_scan_zero((w) ^ (NGX_HTTP_PREFIX_ROUTE_ONES * (c)))

#define ngx_http_prefix_route_scan_quote(w)                                   \
    (ngx_http_prefix_route_scan_has(w, '"')                                   \
     | ngx_http_prefix_route_scan_has(w, '\\'))

#define ngx_http_prefix_route_scan_plain(w)                                   \
    (ngx_http_prefix_route_scan_quote(w)                                      \
     | ((((w) - NGX_HTTP_PREFIX_ROUTE_ONES * 0x20) | (w))                     \
        & NGX_HTTP_PREFIX_ROUTE_HIGHS))


/* a checked string without escapes is the literal "lit" */
#define ngx_http_prefix_route_scan_is(sp, lit)                                \
    (!(sp)->escaped && (sp)->len == sizeof(lit) - 1                           \
     && ngx_memcmp((sp)->data, lit, sizeof(lit) - 1) == 0)


/* a string's bytes between its quotes, checked */
typedef struct {
    u_char                          *data;
    size_t                           len;
    ngx_uint_t                       escaped;  /* holds a \ escape */
} ngx_http_prefix_route_span_t;


/* a tools or functions value as the body had it, and its canonical JSON */
typedef struct {
    size_t                           len;      /* 0: empty */
    size_t                           json_len;
    u_char                           body[NGX_HTTP_PREFIX_ROUTE_TOOLS_SIZE];
    u_char                           json[NGX_HTTP_PREFIX_ROUTE_TOOLS_SIZE];
} ngx_http_prefix_route_tools_t;


/* a member the walk writes, found by the scan */
typedef struct {
    u_char                          *value;    /* NULL: absent or null */
    u_char                          *end;      /* past the value */
    ngx_http_prefix_route_span_t     str;      /* when value is a string */
    ngx_uint_t                       seen;
    uint32_t                         node;     /* its tape, or NO_TAPE */
    ngx_http_prefix_route_tools_t   *kept;     /* its canonical JSON kept */
} ngx_http_prefix_route_field_t;


/*
 * how scan_field() reads a member: written as JSON, as parts, as tools,
 * or a string at most (anything else only checked)
 */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_JSON   0
#define NGX_HTTP_PREFIX_ROUTE_SCAN_PARTS  1
#define NGX_HTTP_PREFIX_ROUTE_SCAN_TOOLS  2
#define NGX_HTTP_PREFIX_ROUTE_SCAN_TEXT   3

#define NGX_HTTP_PREFIX_ROUTE_NO_TAPE     0xffffffff
#define NGX_HTTP_PREFIX_ROUTE_NO_OTHER    ((size_t) -1)

/* where the written bytes go: pr, or aside, counted or hashed */
#define NGX_HTTP_PREFIX_ROUTE_WRITE       0
#define NGX_HTTP_PREFIX_ROUTE_MEASURE     1
#define NGX_HTTP_PREFIX_ROUTE_DIGEST      2


typedef struct {
    u_char                          *p;
    u_char                          *last;
    ngx_http_prefix_route_prompt_t  *pr;
    ngx_uint_t                       stop;     /* pr->buf is full */
    ngx_uint_t                       keyed;    /* pr->key is set */
    ngx_uint_t                       aside;    /* the bytes go to
                                                  scan_aside(), not pr */
    size_t                           measured;
    size_t                           other;    /* the end of the first FS
                                                  of a part written by
                                                  identity, with room
                                                  after it; NO_OTHER: none */
    ngx_uint_t                       nnodes;   /* of the tape in use */
    ngx_uint_t                       tape;     /* scan_value() tapes */
    ngx_uint_t                       untaped;  /* a value it could not */
    ngx_uint_t                       reals;    /* it tapes real numbers */
    ngx_uint_t                       pinned;   /* kept tools in use, bits */
    ngx_uint_t                       norder;   /* of order[] in use */
    ngx_uint_t                       ids;      /* a prompt of token ids */
    ngx_uint_t                       work;     /* steps since the clock
                                                  was last read */
    u_char                          *clock_at; /* a string read past here
                                                  reads it too */
    uint32_t                         order[NGX_HTTP_PREFIX_ROUTE_MEMBERS];
} ngx_http_prefix_route_scan_t;


/*
 * max_parse: the clock is read once in this many steps (an element or a
 * member checked, a node written, two keys compared), 1-100 ns each: the
 * slowest bodies found, of small values, read at 64-300 MB/s; and within
 * one value, at a string's escape or UTF-8 character once in this many
 * bytes (300 MB/s and up: a string of 150 MiB of escapes held a worker
 * 0.5 s, helper-70)
 */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_CLOCK  1024
#define NGX_HTTP_PREFIX_ROUTE_SCAN_SPAN   65536

/*
 * digits after a number's point, or zeros before its exponent's digits,
 * and white space between two tokens, at most: more are declined, to
 * jansson, whose reading is timed (runs that long are hostile)
 */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_RUN    1024

#define ngx_http_prefix_route_scan_late(s)                                    \
    (++(s)->work >= NGX_HTTP_PREFIX_ROUTE_SCAN_CLOCK                          \
     && ngx_http_prefix_route_scan_clock(s, (s)->p))


/* the key ends here, at the end of the first segment not a system one */

static ngx_inline void
ngx_http_prefix_route_scan_keyed(ngx_http_prefix_route_scan_t *s)
{
    if (!s->keyed) {
        s->pr->key = s->pr->len;
        s->keyed = 1;
    }
}


/* the tools and functions values this worker wrote last (scan_tools()) */
static ngx_http_prefix_route_tools_t
    ngx_http_prefix_route_scan_tools_kept[NGX_HTTP_PREFIX_ROUTE_TOOLS];


#if (defined __SSE2__)

/*
 * The same test on the 16 bytes at p, with x86-64's baseline vector
 * unit: a bit for each byte that is '"', '\\', a control byte or 0x80
 * and above (negative as a signed byte, so below 0x20 too); the lowest
 * set bit is the first such byte
 */

static ngx_inline unsigned
ngx_http_prefix_route_scan_stops(u_char *p)
{
    __m128i  x;

    x = _mm_loadu_si128((__m128i *) p);

    return (unsigned) _mm_movemask_epi8(
               _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                         _mm_cmpeq_epi8(x,
                                                        _mm_set1_epi8('\\'))),
                            _mm_cmplt_epi8(x, _mm_set1_epi8(0x20))));
}

#endif

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


/*
 * The nodes of the values being written as canonical JSON: one value's at
 * a time (tools, a message's tool calls...), in the process: a worker
 * reads one body at a time
 */
static ngx_http_prefix_route_node_t
    ngx_http_prefix_route_scan_nodes[NGX_HTTP_PREFIX_ROUTE_NODES];


static ngx_uint_t ngx_http_prefix_route_scan_clock(
    ngx_http_prefix_route_scan_t *s, u_char *p);
static ngx_int_t ngx_http_prefix_route_scan_rendered(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f,
    ngx_http_prefix_route_field_t *before);
static ngx_uint_t ngx_http_prefix_route_scan_cache_off(
    ngx_http_prefix_route_field_t *f);
static ngx_uint_t ngx_http_prefix_route_scan_literal(
    ngx_http_prefix_route_field_t *f, char *lit);
static ngx_int_t ngx_http_prefix_route_scan_ids(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f);
static ngx_int_t ngx_http_prefix_route_scan_responses(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f,
    ngx_http_prefix_route_field_t *before);
static ngx_int_t ngx_http_prefix_route_scan_item(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_prefix(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f);
static ngx_int_t ngx_http_prefix_route_scan_segments(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f);
static ngx_int_t ngx_http_prefix_route_scan_tools(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f);
static ngx_int_t ngx_http_prefix_route_scan_messages(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_message(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_field(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f,
    ngx_uint_t depth, ngx_uint_t how);
static ngx_int_t ngx_http_prefix_route_scan_known(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f);
static ngx_int_t ngx_http_prefix_route_scan_put(
    ngx_http_prefix_route_scan_t *s, u_char tag,
    ngx_http_prefix_route_field_t *f, ngx_uint_t parts);
static ngx_int_t ngx_http_prefix_route_scan_parts(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_other(
    ngx_http_prefix_route_scan_t *s);
static ngx_int_t ngx_http_prefix_route_scan_json_at(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_field_t *f);
static ngx_int_t ngx_http_prefix_route_scan_taped(
    ngx_http_prefix_route_scan_t *s, ngx_uint_t depth, ngx_uint_t *top);
static ngx_int_t ngx_http_prefix_route_scan_json(
    ngx_http_prefix_route_scan_t *s, uint32_t n);
static ngx_int_t ngx_http_prefix_route_scan_object(
    ngx_http_prefix_route_scan_t *s, uint32_t n);
static ngx_int_t ngx_http_prefix_route_scan_real(
    ngx_http_prefix_route_scan_t *s, u_char *p, size_t len);
static void ngx_http_prefix_route_scan_json_string(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_span_t *sp);
static void ngx_http_prefix_route_scan_skip(ngx_http_prefix_route_scan_t *s);
static ngx_inline void ngx_http_prefix_route_scan_span(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_span_t *sp);
static ngx_int_t ngx_http_prefix_route_scan_key(
    ngx_http_prefix_route_scan_t *s, ngx_http_prefix_route_span_t *key);
static ngx_inline ngx_int_t ngx_http_prefix_route_scan_next(
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
static ngx_uint_t ngx_http_prefix_route_scan_is_real(u_char *p, size_t len);
static ngx_inline void ngx_http_prefix_route_scan_ws(
    ngx_http_prefix_route_scan_t *s);
static u_char *ngx_http_prefix_route_scan_unescape(u_char *q, u_char *last,
    uint32_t *v);
static void ngx_http_prefix_route_scan_text(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp, ngx_uint_t json);
static void ngx_http_prefix_route_scan_escape(ngx_http_prefix_route_scan_t *s,
    uint32_t v);
static void ngx_http_prefix_route_scan_code(ngx_http_prefix_route_scan_t *s,
    uint32_t v);
static ngx_inline void ngx_http_prefix_route_scan_write(
    ngx_http_prefix_route_scan_t *s, u_char *p, size_t n);
static ngx_inline void ngx_http_prefix_route_scan_byte(
    ngx_http_prefix_route_scan_t *s, u_char c);
static ngx_uint_t ngx_http_prefix_route_scan_eq(
    ngx_http_prefix_route_span_t *sp, ngx_str_t *str);


/* the members of a body the walk writes before the messages, in its order */
static ngx_str_t  ngx_http_prefix_route_scan_before[] = {
    ngx_string("tools"), ngx_string("functions"), ngx_string("system")
};

/*
 * the members that seed the chain, strings without escapes read once:
 * the model, cache_salt, then ngx_http_prefix_route_hash_keys[]
 */
static ngx_str_t  ngx_http_prefix_route_scan_seeds[] = {
    ngx_string("model"), ngx_string("cache_salt")
};

#define NGX_HTTP_PREFIX_ROUTE_SEEDS  (2 + NGX_HTTP_PREFIX_ROUTE_KEYS)

/*
 * the members that hold the prompt of a body without messages, in the
 * order ngx_http_prefix_route_prompt_build() looks for them, then those
 * that leave SGLang's "text" to jansson (scan_rendered())
 */
static ngx_str_t  ngx_http_prefix_route_scan_prompts[] = {
    ngx_string("prompt"), ngx_string("input"), ngx_string("instructions"),
    ngx_string("text"), ngx_string("input_ids"), ngx_string("inputs"),
    ngx_string("image_data"), ngx_string("audio_data"),
    ngx_string("video_data"), ngx_string("sampling_params")
};

/*
 * the members that may ask the engine not to read its cache, read as
 * ngx_http_prefix_route_prompt_skip_cache() reads them (scan_cache_off())
 */
static ngx_str_t  ngx_http_prefix_route_scan_skip_cache[] = {
    ngx_string("prompt_logprobs"), ngx_string("skip_reading_prefix_cache"),
    ngx_string("cache_prompt"), ngx_string("echo"), ngx_string("logprobs"),
    ngx_string("return_logprob"), ngx_string("logprob_start_len")
};

#define NGX_HTTP_PREFIX_ROUTE_SCAN_CACHE                                      \
    (sizeof(ngx_http_prefix_route_scan_skip_cache) / sizeof(ngx_str_t))

/* their places in the table */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_PROMPT        0
#define NGX_HTTP_PREFIX_ROUTE_SCAN_INPUT         1
#define NGX_HTTP_PREFIX_ROUTE_SCAN_INSTRUCTIONS  2
#define NGX_HTTP_PREFIX_ROUTE_SCAN_NATIVE        3
#define NGX_HTTP_PREFIX_ROUTE_SCAN_IDS           4
#define NGX_HTTP_PREFIX_ROUTE_SCAN_INPUTS        5
#define NGX_HTTP_PREFIX_ROUTE_SCAN_MEDIA         6   /* and the 2 after */
#define NGX_HTTP_PREFIX_ROUTE_SCAN_SAMPLING      9

#define NGX_HTTP_PREFIX_ROUTE_PROMPTS                                         \
    (sizeof(ngx_http_prefix_route_scan_prompts) / sizeof(ngx_str_t))


ngx_int_t
ngx_http_prefix_route_scan(u_char *p, size_t len,
    ngx_http_prefix_route_prompt_t *pr)
{
    ngx_int_t                       rc;
    ngx_str_t                      *name;
    ngx_uint_t                      how, i, seen;
    ngx_http_prefix_route_span_t    key, seeds[NGX_HTTP_PREFIX_ROUTE_SEEDS],
                                   *sp;
    ngx_http_prefix_route_scan_t    s;
    ngx_http_prefix_route_field_t   before[3], *f,
                                    rendered[NGX_HTTP_PREFIX_ROUTE_PROMPTS],
                                    cache[NGX_HTTP_PREFIX_ROUTE_SCAN_CACHE];

    pr->len = 0;
    pr->nanswers = 0;
    pr->nontext = 0;
    pr->batch = 0;      /* bodies that may be batches are left to jansson */
    pr->ids = 0;        /* no token ids yet */
    pr->skip_cache = 0;
    pr->key = 0;
    pr->seed = 0;

    s.p = p;
    s.last = p + len;
    s.pr = pr;
    s.stop = (pr->size == 0);
    s.keyed = 0;
    s.aside = NGX_HTTP_PREFIX_ROUTE_WRITE;
    s.measured = 0;
    s.other = NGX_HTTP_PREFIX_ROUTE_NO_OTHER;
    s.nnodes = 0;
    s.tape = 0;
    s.untaped = 0;
    s.reals = 1;
    s.pinned = 0;
    s.norder = 0;
    s.ids = 0;
    s.work = 0;
    s.clock_at = p + ngx_min(len, NGX_HTTP_PREFIX_ROUTE_SCAN_SPAN);

    seen = 0;
    ngx_memzero(seeds, sizeof(seeds));
    ngx_memzero(before, sizeof(before));
    ngx_memzero(rendered, sizeof(rendered));
    ngx_memzero(cache, sizeof(cache));

    ngx_http_prefix_route_scan_ws(&s);

    if (s.p == s.last || *s.p++ != '{') {
        return NGX_DECLINED;
    }

    do {
        if (ngx_http_prefix_route_scan_key(&s, &key) != NGX_OK) {
            return NGX_DECLINED;
        }

        f = NULL;
        sp = NULL;
        how = NGX_HTTP_PREFIX_ROUTE_SCAN_TEXT;

        for (i = 0; i < 3; i++) {
            if (ngx_http_prefix_route_scan_eq(&key,
                                      &ngx_http_prefix_route_scan_before[i]))
            {
                f = &before[i];
                how = (i == 2) ? NGX_HTTP_PREFIX_ROUTE_SCAN_PARTS
                               : NGX_HTTP_PREFIX_ROUTE_SCAN_TOOLS;
            }
        }

        for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_PROMPTS; i++) {
            if (ngx_http_prefix_route_scan_eq(&key,
                                      &ngx_http_prefix_route_scan_prompts[i]))
            {
                f = &rendered[i];
            }
        }

        for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_SCAN_CACHE; i++) {
            if (ngx_http_prefix_route_scan_eq(&key,
                                    &ngx_http_prefix_route_scan_skip_cache[i]))
            {
                f = &cache[i];
            }
        }

        for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_SEEDS; i++) {
            name = (i < 2) ? &ngx_http_prefix_route_scan_seeds[i]
                           : &ngx_http_prefix_route_hash_keys[i - 2];

            if (ngx_http_prefix_route_scan_eq(&key, name)) {
                sp = &seeds[i];
            }
        }

        if (ngx_http_prefix_route_scan_is(&key, "messages")) {

            /* written first, whatever their place: moved on at the end */

            if (seen
                || ngx_http_prefix_route_scan_messages(&s) != NGX_OK)
            {
                return NGX_DECLINED;
            }

            seen = 1;

        } else if (f != NULL) {

            if (ngx_http_prefix_route_scan_field(&s, f, 1, how) != NGX_OK) {
                return NGX_DECLINED;
            }

        } else if (sp != NULL) {

            /* a string without escapes, once: its bytes seed the chain */

            if (s.p == s.last || *s.p != '"'
                || sp->data != NULL
                || ngx_http_prefix_route_scan_string(&s, sp) != NGX_OK
                || sp->escaped)
            {
                return NGX_DECLINED;
            }

        } else if (ngx_http_prefix_route_scan_value(&s, 1) != NGX_OK) {
            return NGX_DECLINED;
        }

        rc = ngx_http_prefix_route_scan_next(&s, '}');

    } while (rc == NGX_AGAIN);

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_ws(&s);

    if (s.p != s.last) {
        return NGX_DECLINED;
    }

    if (!seen) {
        /* without messages, the tools, functions and system are unread */

        if (ngx_http_prefix_route_scan_rendered(&s, rendered, before)
            != NGX_OK)
        {
            return NGX_DECLINED;
        }

    } else if ((before[0].value != NULL || before[1].value != NULL
                || before[2].value != NULL)
               && ngx_http_prefix_route_scan_prefix(&s, before) != NGX_OK)
    {
        return NGX_DECLINED;
    }

    /*
     * a step that found the deadline passed declines, but some passes take
     * another way at a decline: what they wrote is not trusted
     */

    if (pr->late) {
        return NGX_DECLINED;
    }

    if (!s.keyed) {
        pr->key = pr->len;
    }

    pr->nontext = (s.other != NGX_HTTP_PREFIX_ROUTE_NO_OTHER || s.ids);
    pr->skip_cache = ngx_http_prefix_route_scan_cache_off(cache);

    /* as ngx_http_prefix_route_prompt_seed(): no model is "" */

    if (seeds[0].data == NULL) {
        seeds[0].data = (u_char *) "";
        seeds[0].len = 0;
    }

    pr->seed = ngx_http_prefix_route_hash_seed(seeds[0].data, seeds[0].len,
                                               seeds[1].data, seeds[1].len);
    pr->model = ngx_http_prefix_route_hash_seed(seeds[0].data, seeds[0].len,
                                                NULL, 0);

    for (i = 2; i < NGX_HTTP_PREFIX_ROUTE_SEEDS; i++) {
        if (seeds[i].data != NULL) {
            pr->seed = ngx_http_prefix_route_hash_key(pr->seed, i - 2,
                                                      seeds[i].data,
                                                      seeds[i].len);
        }
    }

    if (pr->name != NULL && pr->name_size > 0) {
        pr->name_len = ngx_min(seeds[0].len, pr->name_size - 1);
        ngx_memcpy(pr->name, seeds[0].data, pr->name_len);
        pr->name[pr->name_len] = '\0';
    }

    return NGX_OK;
}


/*
 * A body without messages, taken in ngx_http_prefix_route_prompt.c's
 * order: a prompt already rendered, one string (legacy Completions'
 * "prompt", SGLang's "text", TGI's "inputs"), written as its
 * ngx_http_prefix_route_prompt_legacy() does, one list of token ids
 * (scan_ids()), or the Responses API's input and instructions
 * (scan_responses()).  Batches, and SGLang's media and parallel sampling
 * (any "n" or escape in "sampling_params"), are jansson's.
 */

static ngx_int_t
ngx_http_prefix_route_scan_rendered(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f, ngx_http_prefix_route_field_t *before)
{
    u_char                          *p;
    ngx_uint_t                       i;
    ngx_http_prefix_route_field_t   *v, *text, *sampling;

    text = &f[NGX_HTTP_PREFIX_ROUTE_SCAN_NATIVE];
    sampling = &f[NGX_HTTP_PREFIX_ROUTE_SCAN_SAMPLING];

    if (f[NGX_HTTP_PREFIX_ROUTE_SCAN_PROMPT].value != NULL) {
        v = &f[NGX_HTTP_PREFIX_ROUTE_SCAN_PROMPT];

        if (*v->value == '[') {
            return ngx_http_prefix_route_scan_ids(s, v);
        }

    } else if (f[NGX_HTTP_PREFIX_ROUTE_SCAN_INPUT].value != NULL
               || f[NGX_HTTP_PREFIX_ROUTE_SCAN_INSTRUCTIONS].value != NULL)
    {
        return ngx_http_prefix_route_scan_responses(s, f, before);

    } else if ((text->value != NULL
                && (*text->value == '"' || *text->value == '['))
               || (f[NGX_HTTP_PREFIX_ROUTE_SCAN_IDS].value != NULL
                   && *f[NGX_HTTP_PREFIX_ROUTE_SCAN_IDS].value == '['))
    {
        /* SGLang's /generate: its media and parallel sampling are jansson's */

        for (i = 0; i < 3; i++) {
            if (f[NGX_HTTP_PREFIX_ROUTE_SCAN_MEDIA + i].value != NULL) {
                return NGX_DECLINED;
            }
        }

        for (p = sampling->value; p != NULL && p < sampling->end; p++) {
            if (*p == '\\'
                || (*p == '"' && sampling->end - p >= 3
                    && p[1] == 'n' && p[2] == '"'))
            {
                return NGX_DECLINED;
            }
        }

        /* a text that is a string or a list before the ids */

        if (text->value == NULL || *text->value != '"') {
            return ngx_http_prefix_route_scan_ids(s,
                               (text->value != NULL && *text->value == '[')
                               ? text : &f[NGX_HTTP_PREFIX_ROUTE_SCAN_IDS]);
        }

        v = text;

    } else {
        v = &f[NGX_HTTP_PREFIX_ROUTE_SCAN_INPUTS];
    }

    if (v->value == NULL || *v->value != '"') {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);
    ngx_http_prefix_route_scan_write(s, (u_char *) "prompt", 6);
    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_scan_byte(s, 'c');
    ngx_http_prefix_route_scan_text(s, &v->str, 0);

    s->pr->key = s->pr->len;
    s->keyed = 1;

    return NGX_OK;
}


/*
 * Whether the request asks the engine not to read its cache, from the
 * members of ngx_http_prefix_route_scan_skip_cache[] as
 * ngx_http_prefix_route_prompt_skip_cache() reads them: a prompt_logprobs
 * neither null nor false, skip_reading_prefix_cache true, cache_prompt
 * false, echo true with logprobs neither null nor false, return_logprob
 * true with an integer logprob_start_len of 0 or more ("-0" is 0).
 */

static ngx_uint_t
ngx_http_prefix_route_scan_cache_off(ngx_http_prefix_route_field_t *f)
{
    u_char  *p;

    if ((f[0].value != NULL && !ngx_http_prefix_route_scan_literal(&f[0],
                                                                  "false"))
        || ngx_http_prefix_route_scan_literal(&f[1], "true")
        || ngx_http_prefix_route_scan_literal(&f[2], "false"))
    {
        return 1;
    }

    if (ngx_http_prefix_route_scan_literal(&f[3], "true")
        && f[4].value != NULL
        && !ngx_http_prefix_route_scan_literal(&f[4], "false"))
    {
        return 1;
    }

    if (!ngx_http_prefix_route_scan_literal(&f[5], "true")
        || f[6].value == NULL)
    {
        return 0;
    }

    /* a number, checked: an integer has no fraction (nor exponent) */

    for (p = f[6].value; p < f[6].end; p++) {
        if (*p != '-' && (*p < '0' || *p > '9')) {
            return 0;
        }
    }

    return *f[6].value != '-'
           || ngx_http_prefix_route_scan_literal(&f[6], "-0");
}


/* a checked member is the literal "lit" (true, false, -0) */

static ngx_uint_t
ngx_http_prefix_route_scan_literal(ngx_http_prefix_route_field_t *f,
    char *lit)
{
    size_t  len;

    len = ngx_strlen(lit);

    return f->value != NULL && (size_t) (f->end - f->value) == len
           && ngx_strncmp(f->value, lit, len) == 0;
}


/*
 * A prompt of token ids, one list of integers (legacy Completions'
 * "prompt", SGLang's "input_ids" or "text"), as
 * ngx_http_prefix_route_prompt_ids() writes it: RS "prompt" US 'c' FS,
 * then each id's digits as jansson prints an integer, and a comma;
 * pr->ids where the digits begin.  The list was checked with the body (no
 * exponent, at most 18 digits); a list empty or with another value (a
 * real number, prompts, lists: a batch) is jansson's.
 */

static ngx_int_t
ngx_http_prefix_route_scan_ids(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f)
{
    u_char  *p, *q, *last;

    last = f->end - 1;

    for (p = f->value + 1; p < last; p++) {
        if (*p != ',' && *p != '-' && (*p < '0' || *p > '9')
            && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
        {
            return NGX_DECLINED;
        }
    }

    s->p = f->value + 1;
    ngx_http_prefix_route_scan_ws(s);

    if (s->p == last) {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);
    ngx_http_prefix_route_scan_write(s, (u_char *) "prompt", 6);
    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_scan_byte(s, 'c');
    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);

    s->pr->ids = s->pr->len;
    s->ids = 1;

    while (s->p < last && !s->stop) {
        ngx_http_prefix_route_scan_ws(s);

        for (q = s->p; q < last && *q != ',' && *q != ' ' && *q != '\t'
                       && *q != '\n' && *q != '\r';
             q++)
        {
            /* void */
        }

        /* "-0" is jansson's 0 */

        if (q - s->p == 2 && s->p[0] == '-' && s->p[1] == '0') {
            s->p++;
        }

        ngx_http_prefix_route_scan_write(s, s->p, q - s->p);
        ngx_http_prefix_route_scan_byte(s, ',');

        s->p = q;
        ngx_http_prefix_route_scan_ws(s);

        if (s->p < last) {
            s->p++;     /* the comma */
        }
    }

    ngx_http_prefix_route_scan_keyed(s);

    return NGX_OK;
}


/*
 * The Responses API, as ngx_http_prefix_route_prompt_responses() writes
 * it: the tools segment, the instructions as the system one, then the
 * input, read again from its place (the body is checked by then): a
 * string is a user segment; in a list, an item with a role (not null) is
 * a message (scan_message()), another one is RS, its type ("item"
 * without), US, 'c', FS and its canonical JSON (scan_item()).  An input
 * of another type, and an item that is not an object, are jansson's.
 */

static ngx_int_t
ngx_http_prefix_route_scan_responses(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f, ngx_http_prefix_route_field_t *before)
{
    ngx_int_t                       rc;
    ngx_http_prefix_route_field_t   head[3], *input;

    /* the walk writes no "functions" nor "system" here */

    ngx_memzero(&head[1], sizeof(ngx_http_prefix_route_field_t));
    head[0] = before[0];
    head[2] = f[NGX_HTTP_PREFIX_ROUTE_SCAN_INSTRUCTIONS];

    if (ngx_http_prefix_route_scan_segments(s, head) != NGX_OK) {
        return NGX_DECLINED;
    }

    input = &f[NGX_HTTP_PREFIX_ROUTE_SCAN_INPUT];

    if (input->value == NULL) {
        return NGX_OK;
    }

    if (*input->value == '"') {
        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);
        ngx_http_prefix_route_scan_write(s, (u_char *) "user", 4);

        (void) ngx_http_prefix_route_scan_put(s, 'c', input, 0);
        ngx_http_prefix_route_scan_keyed(s);

        return NGX_OK;
    }

    if (*input->value != '[') {
        return NGX_DECLINED;
    }

    s->p = input->value + 1;
    ngx_http_prefix_route_scan_ws(s);

    if (*s->p == ']') {
        return NGX_OK;
    }

    do {
        ngx_http_prefix_route_scan_ws(s);

        /* the walk leaves the items after a full buffer alone */

        if (s->stop) {
            return NGX_OK;
        }

        if (ngx_http_prefix_route_scan_item(s) != NGX_OK) {
            return NGX_DECLINED;
        }

        rc = ngx_http_prefix_route_scan_next(s, ']');

    } while (rc == NGX_AGAIN);

    return rc;
}


/* one item of a Responses input list, checked before */

static ngx_int_t
ngx_http_prefix_route_scan_item(ngx_http_prefix_route_scan_t *s)
{
    u_char                         *start;
    uint32_t                        i, type;
    ngx_int_t                       rc;
    ngx_uint_t                      role, top;
    ngx_http_prefix_route_span_t    key;
    ngx_http_prefix_route_node_t   *nodes;

    start = s->p;

    if (*s->p++ != '{') {
        return NGX_DECLINED;
    }

    /* a role that is not null makes a message (jansson: the last one) */

    role = 0;
    ngx_http_prefix_route_scan_ws(s);

    if (*s->p != '}') {

        do {
            if (ngx_http_prefix_route_scan_key(s, &key) != NGX_OK) {
                return NGX_DECLINED;
            }

            if (ngx_http_prefix_route_scan_is(&key, "role")) {
                role = (ngx_strncmp(s->p, "null", 4) != 0);
            }

            ngx_http_prefix_route_scan_skip(s);

            rc = ngx_http_prefix_route_scan_next(s, '}');

        } while (rc == NGX_AGAIN);

        if (rc != NGX_OK) {
            return NGX_DECLINED;
        }
    }

    s->p = start;

    if (role) {
        return ngx_http_prefix_route_scan_message(s);
    }

    if (ngx_http_prefix_route_scan_taped(s, 2, &top) != NGX_OK) {
        return NGX_DECLINED;
    }

    nodes = ngx_http_prefix_route_scan_nodes;
    type = 0;

    for (i = top + 1; i < nodes[top].end; i = nodes[i].end) {
        if (nodes[i].klen == 4 && ngx_strncmp(nodes[i].key, "type", 4) == 0)
        {
            type = i;
        }
    }

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);

    if (type == 0 || *nodes[type].value == 'n') {
        ngx_http_prefix_route_scan_write(s, (u_char *) "item", 4);

    } else if (*nodes[type].value == '"') {
        key.data = nodes[type].value + 1;
        key.len = nodes[type].len;
        key.escaped = nodes[type].escaped;
        ngx_http_prefix_route_scan_text(s, &key, 0);

    } else {
        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);

        if (ngx_http_prefix_route_scan_json(s, type) != NGX_OK) {
            s->nnodes = top;
            return NGX_DECLINED;
        }
    }

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_scan_byte(s, 'c');
    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);

    rc = ngx_http_prefix_route_scan_json(s, top);

    s->nnodes = top;

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    ngx_http_prefix_route_scan_keyed(s);

    return NGX_OK;
}


/*
 * The tools, functions and system segments go before the messages, which
 * are already written from pr->buf's start (their place in the body is
 * often after them: openai-python, anthropic).  With room under the cap,
 * they are written after the messages and swapped with them through the
 * room left; else their length is measured (parts by identity only up
 * to the cap, past which it only says that no message fits), the
 * messages' bytes that still fit are moved up and the segments written
 * before them.  The key and the answers follow: what the walk would have
 * written in its order.
 */

static ngx_int_t
ngx_http_prefix_route_scan_prefix(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f)
{
    u_char                          *buf;
    size_t                           len, size, msgs, keep, key, other, *a;
    ngx_uint_t                       i, n;
    ngx_http_prefix_route_prompt_t  *pr;

    pr = s->pr;
    buf = pr->buf;
    size = pr->size;
    msgs = pr->len;
    key = pr->key;

    /* the messages' first part by identity; the segments' found anew */

    other = s->other;
    s->other = NGX_HTTP_PREFIX_ROUTE_NO_OTHER;

    if (!s->stop) {

        if (ngx_http_prefix_route_scan_segments(s, f) != NGX_OK) {
            return NGX_DECLINED;
        }

        len = pr->len - msgs;

        if (!s->stop && msgs + 2 * len <= size) {
            ngx_memcpy(buf + msgs + len, buf + msgs, len);
            ngx_memmove(buf + len, buf, msgs);
            ngx_memcpy(buf, buf + msgs + len, len);
            goto moved;
        }

        pr->len = msgs;
    }

    s->aside = NGX_HTTP_PREFIX_ROUTE_MEASURE;
    s->measured = 0;
    s->stop = 0;

    if (ngx_http_prefix_route_scan_segments(s, f) != NGX_OK) {
        return NGX_DECLINED;
    }

    s->aside = NGX_HTTP_PREFIX_ROUTE_WRITE;
    len = s->measured;

    keep = (len < size) ? ngx_min(msgs, size - len) : 0;

    ngx_memmove(buf + len, buf, keep);

    pr->len = 0;
    s->stop = (size == 0);
    s->other = NGX_HTTP_PREFIX_ROUTE_NO_OTHER;

    /* as measured, but for max_parse */

    if (ngx_http_prefix_route_scan_segments(s, f) != NGX_OK) {
        return NGX_DECLINED;
    }

    pr->len += keep;
    s->stop = (pr->len == size);

moved:

    if (s->keyed) {
        pr->key = ngx_min(key + len, pr->len);
    }

    if (s->other == NGX_HTTP_PREFIX_ROUTE_NO_OTHER
        && other != NGX_HTTP_PREFIX_ROUTE_NO_OTHER
        && other + len < size)
    {
        s->other = other + len;
    }

    /* the answers of the messages that start before the cap */

    a = pr->answers;
    n = 0;

    for (i = 0; i < pr->nanswers; i++) {

        if (a[2 * i] + len >= size) {
            break;
        }

        a[2 * n] = a[2 * i] + len;
        a[2 * n + 1] = ngx_min(a[2 * i + 1] + len, size);
        n++;
    }

    pr->nanswers = n;

    return NGX_OK;
}


/* RS "tools" US 'c' FS JSON, RS "functions" ..., RS "system" and a field */

static ngx_int_t
ngx_http_prefix_route_scan_segments(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f)
{
    ngx_str_t   *name;
    ngx_uint_t   i;

    for (i = 0; i < 3; i++) {

        if (f[i].value == NULL) {
            continue;
        }

        name = &ngx_http_prefix_route_scan_before[i];

        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);
        ngx_http_prefix_route_scan_write(s, name->data, name->len);

        if (i == 2) {
            if (ngx_http_prefix_route_scan_put(s, 'c', &f[i], 1) != NGX_OK) {
                return NGX_DECLINED;
            }

            continue;
        }

        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_US);
        ngx_http_prefix_route_scan_byte(s, 'c');
        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);

        if (ngx_http_prefix_route_scan_tools(s, &f[i]) != NGX_OK) {
            return NGX_DECLINED;
        }
    }

    return NGX_OK;
}


/*
 * A tools or functions value (an array or object) whose canonical JSON is
 * kept: its bytes, compared whole at the body's place (no hash can make
 * two values meet), are passed over unchecked.  The same bytes are the
 * same value, checked when kept, with the same end: a container ends at
 * its own closing bracket.  Returns NGX_DECLINED when none is kept.
 */

static ngx_int_t
ngx_http_prefix_route_scan_known(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f)
{
    size_t                          len;
    ngx_uint_t                      i;
    ngx_http_prefix_route_tools_t  *t;

    len = s->last - s->p;

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_TOOLS; i++) {
        t = &ngx_http_prefix_route_scan_tools_kept[i];

        if (t->len != 0 && t->len <= len
            && ngx_memcmp(t->body, s->p, t->len) == 0)
        {
            f->value = s->p;
            f->end = s->p + t->len;
            f->kept = t;
            s->p = f->end;
            s->pinned |= (ngx_uint_t) 1 << i;

            return NGX_OK;
        }
    }

    return NGX_DECLINED;
}


/*
 * The canonical JSON of a tools or functions value (f->value to f->end):
 * the one kept for its bytes (scan_known()), else, for an array or object,
 * written whole into a slot, kept, and copied (or measured), cut where the
 * buffer is full as the writer cuts it.  So the kept JSON serves any cap
 * and place, and tools longer than the cap are kept too.  The same bytes
 * give the same JSON; a value the writer declined is never kept, one whose
 * JSON fills the slot is written from the body.  A slot another member of
 * the body uses is not taken.
 */

static ngx_int_t
ngx_http_prefix_route_scan_tools(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f)
{
    size_t                           len;
    ngx_int_t                        rc;
    ngx_uint_t                       stop, aside, full;
    ngx_http_prefix_route_tools_t   *t;
    ngx_http_prefix_route_prompt_t  *pr, slot;

    static ngx_uint_t  next;

    if (f->kept != NULL) {
        ngx_http_prefix_route_scan_write(s, f->kept->json, f->kept->json_len);
        return NGX_OK;
    }

    len = f->end - f->value;

    if (len > NGX_HTTP_PREFIX_ROUTE_TOOLS_SIZE
        || (*f->value != '[' && *f->value != '{'))
    {
        return ngx_http_prefix_route_scan_json_at(s, f);
    }

    while (s->pinned & ((ngx_uint_t) 1 << next)) {
        next = (next + 1) % NGX_HTTP_PREFIX_ROUTE_TOOLS;
    }

    t = &ngx_http_prefix_route_scan_tools_kept[next];
    t->len = 0;

    /* written into the slot as into a prompt buffer of its size */

    ngx_memzero(&slot, sizeof(ngx_http_prefix_route_prompt_t));
    slot.buf = t->json;
    slot.size = NGX_HTTP_PREFIX_ROUTE_TOOLS_SIZE;
    slot.deadline = s->pr->deadline;

    pr = s->pr;
    stop = s->stop;
    aside = s->aside;
    s->pr = &slot;
    s->stop = 0;
    s->aside = NGX_HTTP_PREFIX_ROUTE_WRITE;

    rc = ngx_http_prefix_route_scan_json_at(s, f);

    full = s->stop;
    s->pr = pr;
    s->stop = stop;
    s->aside = aside;

    if (slot.late) {
        pr->late = 1;
    }

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    if (full) {
        /* the slot is full, whether or not the JSON goes on */
        return ngx_http_prefix_route_scan_json_at(s, f);
    }

    t->json_len = slot.len;

    s->pinned |= (ngx_uint_t) 1 << next;
    next = (next + 1) % NGX_HTTP_PREFIX_ROUTE_TOOLS;

    t->len = len;
    ngx_memcpy(t->body, f->value, len);

    f->kept = t;

    ngx_http_prefix_route_scan_write(s, t->json, t->json_len);

    return NGX_OK;
}


void
ngx_http_prefix_route_scan_forget(void)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_TOOLS; i++) {
        ngx_http_prefix_route_scan_tools_kept[i].len = 0;
    }
}


/* "messages": an array of objects */

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


/* the members of a message the walk writes, in its order, and their tags */
static ngx_str_t  ngx_http_prefix_route_scan_fields[] = {
    ngx_string("role"), ngx_string("name"), ngx_string("content"),
    ngx_string("tool_calls"), ngx_string("tool_call_id")
};
static u_char   ngx_http_prefix_route_scan_tags[] = "\0ncti";


/*
 * One message, written as ngx_http_prefix_route_prompt_message() writes
 * it: RS, the role, then US, a tag and each of name, content, tool calls
 * and tool call id; the key after the first message that is not a system
 * or developer one; an assistant's place kept.
 */

static ngx_int_t
ngx_http_prefix_route_scan_message(ngx_http_prefix_route_scan_t *s)
{
    size_t                           start;
    ngx_int_t                        rc;
    ngx_str_t                       *name;
    ngx_uint_t                       i, string, top;
    ngx_http_prefix_route_span_t     key, *role;
    ngx_http_prefix_route_field_t    f[5], *v;
    ngx_http_prefix_route_prompt_t  *pr;

    if (s->p == s->last || *s->p++ != '{') {
        return NGX_DECLINED;
    }

    ngx_memzero(f, sizeof(f));

    /* its values' tapes are dropped once it is written */

    top = s->nnodes;

    ngx_http_prefix_route_scan_ws(s);

    if (s->p < s->last && *s->p == '}') {
        s->p++;
        rc = NGX_OK;

    } else {

        do {
            if (ngx_http_prefix_route_scan_key(s, &key) != NGX_OK) {
                return NGX_DECLINED;
            }

            v = NULL;
            name = ngx_http_prefix_route_scan_fields;

            for (i = 0; i < 5; i++) {
                if (ngx_http_prefix_route_scan_eq(&key, &name[i])) {
                    v = &f[i];
                }
            }

            /* other members the walk passes over */

            rc = (v == NULL) ? ngx_http_prefix_route_scan_value(s, 3)
                 : ngx_http_prefix_route_scan_field(s, v, 3,
                                          (v == &f[2])
                                          ? NGX_HTTP_PREFIX_ROUTE_SCAN_PARTS
                                          : NGX_HTTP_PREFIX_ROUTE_SCAN_JSON);

            if (rc != NGX_OK) {
                return NGX_DECLINED;
            }

            rc = ngx_http_prefix_route_scan_next(s, '}');

        } while (rc == NGX_AGAIN);
    }

    role = &f[0].str;
    string = (f[0].value != NULL && *f[0].value == '"');

    if (rc != NGX_OK || (string && role->escaped)) {
        return NGX_DECLINED;
    }

    /* the walk leaves the messages after a full buffer alone */

    if (s->stop) {
        s->nnodes = top;
        return NGX_OK;
    }

    pr = s->pr;
    start = pr->len;

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_RS);

    if (string) {
        ngx_http_prefix_route_scan_text(s, role, 0);

    } else {
        /* a missing role is written as the JSON null it amounts to */

        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);

        if (f[0].value == NULL) {
            ngx_http_prefix_route_scan_write(s, (u_char *) "null", 4);

        } else if (ngx_http_prefix_route_scan_json_at(s, &f[0]) != NGX_OK)
        {
            return NGX_DECLINED;
        }
    }

    for (i = 1; i < 5; i++) {
        if (f[i].value != NULL
            && ngx_http_prefix_route_scan_put(s,
                                             ngx_http_prefix_route_scan_tags[i],
                                             &f[i], i == 2)
               != NGX_OK)
        {
            return NGX_DECLINED;
        }
    }

    if (!s->keyed
        && !(string && ngx_http_prefix_route_scan_is(role, "system"))
        && !(string && ngx_http_prefix_route_scan_is(role, "developer")))
    {
        pr->key = pr->len;
        s->keyed = 1;
    }

    if (pr->answers != NULL && pr->nanswers < pr->max_answers
        && string && ngx_http_prefix_route_scan_is(role, "assistant"))
    {
        pr->answers[2 * pr->nanswers] = start;
        pr->answers[2 * pr->nanswers + 1] = pr->len;
        pr->nanswers++;
    }

    s->nnodes = top;

    return NGX_OK;
}


/*
 * A member the walk writes: checked, and its place kept; null is absent.
 * A member given twice (jansson keeps the last) is declined.  An array or
 * object to be written as JSON (not content parts) is put on the tape as
 * it is checked, found once; tools may be known (scan_known()).
 */

static ngx_int_t
ngx_http_prefix_route_scan_field(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f, ngx_uint_t depth, ngx_uint_t how)
{
    ngx_int_t   rc;
    ngx_uint_t  top;

    if (f->seen || s->p == s->last) {
        return NGX_DECLINED;
    }

    f->seen = 1;
    f->node = NGX_HTTP_PREFIX_ROUTE_NO_TAPE;

    if (s->last - s->p >= 4 && ngx_strncmp(s->p, "null", 4) == 0) {
        s->p += 4;
        return NGX_OK;
    }

    if (*s->p == '"') {
        f->value = s->p;

        if (ngx_http_prefix_route_scan_string(s, &f->str) != NGX_OK) {
            return NGX_DECLINED;
        }

        f->end = s->p;

        return NGX_OK;
    }

    if (how == NGX_HTTP_PREFIX_ROUTE_SCAN_TOOLS
        && ngx_http_prefix_route_scan_known(s, f) == NGX_OK)
    {
        return NGX_OK;
    }

    f->value = s->p;
    top = s->nnodes;

    /* a message after a full buffer is not written; the top level is */

    s->tape = (!s->stop || depth == 1)
              && how != NGX_HTTP_PREFIX_ROUTE_SCAN_TEXT
              && (*s->p == '{'
                  || (*s->p == '[' && how != NGX_HTTP_PREFIX_ROUTE_SCAN_PARTS));
    s->untaped = 0;

    rc = ngx_http_prefix_route_scan_value(s, depth);

    if (s->tape && !s->untaped) {
        f->node = top;

    } else {
        s->nnodes = top;
    }

    s->tape = 0;

    f->end = s->p;

    return rc;
}


/*
 * US, the tag and the field's value, as ngx_http_prefix_route_prompt_field()
 * writes it: a string's text; with "parts", an array's content parts;
 * anything else FS and its canonical JSON.
 */

static ngx_int_t
ngx_http_prefix_route_scan_put(ngx_http_prefix_route_scan_t *s, u_char tag,
    ngx_http_prefix_route_field_t *f, ngx_uint_t parts)
{
    u_char     *p;
    ngx_int_t   rc;

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_scan_byte(s, tag);

    if (*f->value == '"') {
        ngx_http_prefix_route_scan_text(s, &f->str, 0);
        return NGX_OK;
    }

    if (!parts || *f->value != '[') {
        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);
        return ngx_http_prefix_route_scan_json_at(s, f);
    }

    p = s->p;
    s->p = f->value;

    rc = ngx_http_prefix_route_scan_parts(s);

    s->p = p;

    return rc;
}


/*
 * A content array: a text part ({"type": "text", "input_text" or
 * "output_text", "text": a string}) is GS and its text; any other part
 * (an image, audio, a file, a tool use or result) is written by
 * scan_other().
 */

static ngx_int_t
ngx_http_prefix_route_scan_parts(ngx_http_prefix_route_scan_t *s)
{
    u_char                        *part;
    ngx_int_t                      rc;
    ngx_http_prefix_route_span_t   key;
    ngx_http_prefix_route_field_t  type, text, *v;

    /* the array is checked: passed over quickly, its texts kept */

    s->p++;
    ngx_http_prefix_route_scan_ws(s);

    if (*s->p == ']') {
        return NGX_OK;
    }

    do {
        ngx_http_prefix_route_scan_ws(s);

        part = s->p;

        if (*s->p++ != '{') {
            goto other;
        }

        ngx_memzero(&type, sizeof(ngx_http_prefix_route_field_t));
        ngx_memzero(&text, sizeof(ngx_http_prefix_route_field_t));

        do {
            if (ngx_http_prefix_route_scan_key(s, &key) != NGX_OK) {
                goto other;
            }

            v = ngx_http_prefix_route_scan_is(&key, "type") ? &type
                : ngx_http_prefix_route_scan_is(&key, "text") ? &text : NULL;

            if (v != NULL) {
                if (v->seen) {
                    /* jansson keeps the last */
                    return NGX_DECLINED;
                }

                v->seen = 1;
                v->value = (*s->p == 'n') ? NULL : s->p;

                if (*s->p == '"') {
                    ngx_http_prefix_route_scan_span(s, &v->str);
                    goto next;
                }
            }

            ngx_http_prefix_route_scan_skip(s);

        next:

            rc = ngx_http_prefix_route_scan_next(s, '}');

        } while (rc == NGX_AGAIN);

        /* the walk compares the type decoded (helper-46) */

        if (rc == NGX_OK && type.value != NULL && *type.value == '"'
            && type.str.escaped)
        {
            return NGX_DECLINED;
        }

        if (rc != NGX_OK
            || type.value == NULL || *type.value != '"'
            || text.value == NULL || *text.value != '"'
            || !(ngx_http_prefix_route_scan_is(&type.str, "text")
                 || ngx_http_prefix_route_scan_is(&type.str, "input_text")
                 || ngx_http_prefix_route_scan_is(&type.str, "output_text")))
        {
            goto other;
        }

        ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_GS);
        ngx_http_prefix_route_scan_text(s, &text.str, 0);

        goto done;

    other:

        s->p = part;

        if (ngx_http_prefix_route_scan_other(s) != NGX_OK) {
            return NGX_DECLINED;
        }

    done:

        rc = ngx_http_prefix_route_scan_next(s, ']');

    } while (rc == NGX_AGAIN);

    return rc;
}


/*
 * A content part that is not text, as ngx_http_prefix_route_prompt_part()
 * writes it, by identity: FS, then, unless the buffer is full, the 16 hex
 * digits of the digest of its canonical JSON (ngx_http_prefix_route_hash_
 * start()) and that JSON.  The part is put on the tape, which holds it
 * once for both; a part the tape cannot hold is declined.  The first
 * part's place tells whether the prompt has one (pr->nontext): messages
 * are written before the segments that go first, and moved after them.
 */

static ngx_int_t
ngx_http_prefix_route_scan_other(ngx_http_prefix_route_scan_t *s)
{
    u_char         hex[16];
    uint64_t       digest;
    ngx_int_t      rc;
    ngx_uint_t     i, top;
    static u_char  hexdigits[] = "0123456789abcdef";

    ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_FS);

    /*
     * passed over after a full buffer, and once what goes first measures
     * the cap: its length then only says that no message fits (a system
     * of 8 MB of parts took 1.3 s to measure whole, helper-69)
     */

    if (s->aside == NGX_HTTP_PREFIX_ROUTE_MEASURE
        ? s->measured >= s->pr->size : s->stop)
    {
        ngx_http_prefix_route_scan_skip(s);
        return NGX_OK;
    }

    if (ngx_http_prefix_route_scan_taped(s, 1, &top) != NGX_OK) {
        return NGX_DECLINED;
    }

    if (s->aside == NGX_HTTP_PREFIX_ROUTE_MEASURE) {
        /* the digest's length is known */
        s->measured += 16;
        goto json;
    }

    if (s->other == NGX_HTTP_PREFIX_ROUTE_NO_OTHER) {
        s->other = s->pr->len;
    }

    if (ngx_http_prefix_route_hash_start() != NGX_OK) {
        s->nnodes = top;
        return NGX_DECLINED;
    }

    s->aside = NGX_HTTP_PREFIX_ROUTE_DIGEST;
    rc = ngx_http_prefix_route_scan_json(s, top);
    s->aside = NGX_HTTP_PREFIX_ROUTE_WRITE;

    digest = ngx_http_prefix_route_hash_end();

    if (rc != NGX_OK) {
        s->nnodes = top;
        return NGX_DECLINED;
    }

    for (i = 16; i > 0; i--) {
        hex[i - 1] = hexdigits[digest & 0xf];
        digest >>= 4;
    }

    ngx_http_prefix_route_scan_write(s, hex, 16);

json:

    rc = ngx_http_prefix_route_scan_json(s, top);

    s->nnodes = top;

    return rc;
}


/*
 * The canonical JSON of a checked member: from its tape, or, for a scalar,
 * from one put on the tape's top now and dropped after.  A container
 * written is taped when checked unless the tape could not hold it (too
 * many nodes, a real number): it is declined without reading it again.
 */

static ngx_int_t
ngx_http_prefix_route_scan_json_at(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_field_t *f)
{
    u_char      *save;
    ngx_int_t    rc;
    ngx_uint_t   top;

    if (f->node != NGX_HTTP_PREFIX_ROUTE_NO_TAPE) {
        return ngx_http_prefix_route_scan_json(s, f->node);
    }

    if (*f->value == '{' || *f->value == '[') {
        return NGX_DECLINED;
    }

    save = s->p;
    s->p = f->value;

    rc = ngx_http_prefix_route_scan_taped(s, 1, &top);

    if (rc == NGX_OK) {
        rc = ngx_http_prefix_route_scan_json(s, top);
        s->nnodes = top;
    }

    s->p = save;

    return rc;
}


/*
 * The value at s->p checked and put on the tape whole: NGX_OK with its
 * node in *top, else NGX_DECLINED with the tape as it was (a value the
 * tape cannot hold, too many nodes or a real number, included).
 */

static ngx_int_t
ngx_http_prefix_route_scan_taped(ngx_http_prefix_route_scan_t *s,
    ngx_uint_t depth, ngx_uint_t *top)
{
    ngx_int_t  rc;

    *top = s->nnodes;
    s->tape = 1;
    s->untaped = 0;

    rc = ngx_http_prefix_route_scan_value(s, depth);

    s->tape = 0;

    if (rc != NGX_OK || s->untaped) {
        s->nnodes = *top;
        return NGX_DECLINED;
    }

    return NGX_OK;
}


/*
 * Node n written as jansson's json_dump_callback() writes it with
 * JSON_COMPACT|JSON_SORT_KEYS: no white space, keys in byte order, strings
 * re-escaped, integers as int64 ("-0" is 0).
 */

static ngx_int_t
ngx_http_prefix_route_scan_json(ngx_http_prefix_route_scan_t *s, uint32_t n)
{
    uint32_t                       i;
    ngx_http_prefix_route_span_t   sp;
    ngx_http_prefix_route_node_t  *node;

    if (ngx_http_prefix_route_scan_late(s)) {
        return NGX_DECLINED;
    }

    node = &ngx_http_prefix_route_scan_nodes[n];

    switch (*node->value) {

    case '"':
        sp.data = node->value + 1;
        sp.len = node->len;
        sp.escaped = node->escaped;
        ngx_http_prefix_route_scan_json_string(s, &sp);
        return NGX_OK;

    case '{':
        return ngx_http_prefix_route_scan_object(s, n);

    case '[':
        ngx_http_prefix_route_scan_byte(s, '[');

        for (i = n + 1; i < node->end;
             i = ngx_http_prefix_route_scan_nodes[i].end)
        {
            if (i > n + 1) {
                ngx_http_prefix_route_scan_byte(s, ',');
            }

            if (ngx_http_prefix_route_scan_json(s, i) != NGX_OK) {
                return NGX_DECLINED;
            }
        }

        ngx_http_prefix_route_scan_byte(s, ']');
        return NGX_OK;

    default:
        if (node->len == 2 && node->value[0] == '-' && node->value[1] == '0') {
            ngx_http_prefix_route_scan_byte(s, '0');
            return NGX_OK;
        }

        if (ngx_http_prefix_route_scan_is_real(node->value, node->len)) {
            return ngx_http_prefix_route_scan_real(s, node->value, node->len);
        }

        ngx_http_prefix_route_scan_write(s, node->value, node->len);
        return NGX_OK;
    }
}


/*
 * A checked real number as jansson's jsonp_dtostr() prints it: "%.17g" of
 * the double strtod() reads, ".0" added without a '.' or an exponent, the
 * exponent's '+' and leading zeros dropped (jansson 2.14, src/strconv.c).
 * The same libc reads and prints it.  Declined for more than 63 bytes, and
 * in a locale whose decimal point is not '.', which jansson translates.
 */

static ngx_int_t
ngx_http_prefix_route_scan_real(ngx_http_prefix_route_scan_t *s, u_char *p,
    size_t len)
{
    int      n;
    char    *end;
    u_char  *e, *q, text[NGX_HTTP_PREFIX_ROUTE_SCAN_REAL], out[32];
    double   v;

    if (len >= NGX_HTTP_PREFIX_ROUTE_SCAN_REAL) {
        return NGX_DECLINED;
    }

    ngx_memcpy(text, p, len);
    text[len] = '\0';

    v = strtod((char *) text, &end);

    if (end != (char *) text + len) {
        return NGX_DECLINED;
    }

    /* at most 24 bytes: "-", 17 digits, ".", "e-308" */

    n = snprintf((char *) out, sizeof(out) - 2, "%.17g", v);

    if (n <= 0 || (size_t) n >= sizeof(out) - 2) {
        return NGX_DECLINED;
    }

    e = NULL;

    for (q = out; q < out + n; q++) {
        if (*q == 'e') {
            e = q;

        } else if (*q != '.' && *q != '-' && *q != '+'
                   && (*q < '0' || *q > '9'))
        {
            return NGX_DECLINED;
        }
    }

    if (e == NULL) {
        if (ngx_strlchr(out, out + n, '.') == NULL) {
            out[n++] = '.';
            out[n++] = '0';
        }

        ngx_http_prefix_route_scan_write(s, out, n);
        return NGX_OK;
    }

    /* "e+020" is "e20", "e-05" is "e-5" */

    q = e + 1;

    if (*q == '-') {
        q++;
    }

    ngx_http_prefix_route_scan_write(s, out, q - out);

    for (q = (*q == '+') ? q + 1 : q; q < out + n - 1 && *q == '0'; q++) {
        /* void */
    }

    ngx_http_prefix_route_scan_write(s, q, out + n - q);

    return NGX_OK;
}


/*
 * An object: its members sorted by key as jansson's compare_keys() sorts
 * them (bytes, then the shorter first), then each written; a key given
 * twice is declined.
 */

static ngx_int_t
ngx_http_prefix_route_scan_object(ngx_http_prefix_route_scan_t *s,
    uint32_t n)
{
    uint32_t                       i, j, t, *m;
    ngx_int_t                      c;
    ngx_uint_t                     base, k;
    ngx_http_prefix_route_node_t  *nodes, *a, *b;

    nodes = ngx_http_prefix_route_scan_nodes;
    base = s->norder;
    m = s->order;

    for (i = n + 1; i < nodes[n].end; i = nodes[i].end) {

        if (s->norder == NGX_HTTP_PREFIX_ROUTE_MEMBERS) {
            return NGX_DECLINED;
        }

        m[s->norder++] = i;
    }

    /* insertion sort: objects in requests have a few members */

    for (k = base + 1; k < s->norder; k++) {
        t = m[k];
        b = &nodes[t];

        for (j = k; j > base; j--) {
            if (ngx_http_prefix_route_scan_late(s)) {
                return NGX_DECLINED;
            }

            a = &nodes[m[j - 1]];

            /* most keys differ in their first byte: no call for them */

            c = (a->klen == 0 || b->klen == 0 || a->key[0] == b->key[0])
                ? ngx_memcmp(a->key, b->key, ngx_min(a->klen, b->klen))
                : a->key[0] - b->key[0];

            if (c == 0 && a->klen == b->klen) {
                return NGX_DECLINED;
            }

            if (c < 0 || (c == 0 && a->klen < b->klen)) {
                break;
            }

            m[j] = m[j - 1];
        }

        m[j] = t;
    }

    ngx_http_prefix_route_scan_byte(s, '{');

    for (k = base; k < s->norder; k++) {

        if (k > base) {
            ngx_http_prefix_route_scan_byte(s, ',');
        }

        /*
         * a key has no escape, so no byte jansson would escape; "key":
         * is written from the body in one piece where it is there whole
         */

        a = &nodes[m[k]];

        if (a->key[a->klen + 1] == ':') {
            ngx_http_prefix_route_scan_write(s, a->key - 1, a->klen + 3);

        } else {
            ngx_http_prefix_route_scan_byte(s, '"');
            ngx_http_prefix_route_scan_write(s, a->key, a->klen);
            ngx_http_prefix_route_scan_write(s, (u_char *) "\":", 2);
        }

        if (ngx_http_prefix_route_scan_json(s, m[k]) != NGX_OK) {
            return NGX_DECLINED;
        }
    }

    ngx_http_prefix_route_scan_byte(s, '}');

    s->norder = base;

    return NGX_OK;
}


/*
 * A checked string as jansson's dump_string() writes it: quoted, '"', '\\'
 * and control characters escaped (\b \f \n \r \t, or \u00XX), nothing else.
 */

static void
ngx_http_prefix_route_scan_json_string(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp)
{
    ngx_http_prefix_route_scan_byte(s, '"');
    ngx_http_prefix_route_scan_text(s, sp, 1);
    ngx_http_prefix_route_scan_byte(s, '"');
}


/* a code point of a string in jansson's JSON */

static void
ngx_http_prefix_route_scan_escape(ngx_http_prefix_route_scan_t *s,
    uint32_t v)
{
    u_char         esc[6];
    static u_char  hex[] = "0123456789ABCDEF";

    /* the control bytes jansson escapes with a letter */
    static u_char  letters[0x20] = {
        0, 0, 0, 0, 0, 0, 0, 0, 'b', 't', 'n', 0, 'f', 'r', 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    };

    if (v >= 0x20 && v != '"' && v != '\\') {
        ngx_http_prefix_route_scan_code(s, v);
        return;
    }

    esc[0] = '\\';
    esc[1] = (v >= 0x20) ? (u_char) v : letters[v];

    if (esc[1] != 0) {
        ngx_http_prefix_route_scan_write(s, esc, 2);
        return;
    }

    esc[1] = 'u';
    esc[2] = '0';
    esc[3] = '0';
    esc[4] = hex[v >> 4];
    esc[5] = hex[v & 0xf];
    ngx_http_prefix_route_scan_write(s, esc, 6);
}


/*
 * Any JSON value jansson reads, checked and passed over; with s->tape, put
 * on the tape too, each of its values a node in document order, its own
 * nodes after it: strings and scalars found once, not once for each level
 * of nesting, as sorting an object's members would take otherwise.  A
 * value the tape cannot hold (more nodes than it has, a real number)
 * leaves s->untaped set.
 */

static ngx_int_t
ngx_http_prefix_route_scan_value(ngx_http_prefix_route_scan_t *s,
    ngx_uint_t depth)
{
    u_char                         c, close;
    uint32_t                       child;
    ngx_int_t                      rc;
    ngx_http_prefix_route_span_t   sp;
    ngx_http_prefix_route_node_t  *node;

    if (s->p == s->last || depth > NGX_HTTP_PREFIX_ROUTE_SCAN_DEPTH) {
        return NGX_DECLINED;
    }

    node = NULL;

    if (s->tape) {
        if (s->nnodes == NGX_HTTP_PREFIX_ROUTE_NODES) {
            s->tape = 0;
            s->untaped = 1;

        } else {
            node = &ngx_http_prefix_route_scan_nodes[s->nnodes++];
            node->key = NULL;
            node->klen = 0;
            node->value = s->p;
            node->escaped = 0;
        }
    }

    c = *s->p;

    switch (c) {

    case '"':
        rc = ngx_http_prefix_route_scan_string(s, &sp);

        if (node != NULL) {
            node->len = sp.len;
            node->escaped = sp.escaped;
        }

        goto done;

    case 't':
    case 'n':
        if (s->last - s->p < 4
            || ngx_strncmp(s->p, ((c == 't') ? "true" : "null"), 4) != 0)
        {
            return NGX_DECLINED;
        }

        s->p += 4;
        rc = NGX_OK;
        goto scalar;

    case 'f':
        if (s->last - s->p < 5 || ngx_strncmp(s->p, "false", 5) != 0) {
            return NGX_DECLINED;
        }

        s->p += 5;
        rc = NGX_OK;
        goto scalar;

    case '{':
    case '[':
        break;

    default:
        rc = ngx_http_prefix_route_scan_number(s);
        goto scalar;
    }

    close = (c == '{') ? '}' : ']';
    s->p++;

    ngx_http_prefix_route_scan_ws(s);

    if (s->p < s->last && *s->p == close) {
        s->p++;
        rc = NGX_OK;
        goto done;
    }

    do {
        ngx_http_prefix_route_scan_ws(s);

        if (c == '{' && ngx_http_prefix_route_scan_key(s, &sp) != NGX_OK) {
            return NGX_DECLINED;
        }

        child = s->nnodes;

        if (ngx_http_prefix_route_scan_value(s, depth + 1) != NGX_OK) {
            return NGX_DECLINED;
        }

        if (c == '{' && s->tape) {
            ngx_http_prefix_route_scan_nodes[child].key = sp.data;
            ngx_http_prefix_route_scan_nodes[child].klen = sp.len;
        }

        rc = ngx_http_prefix_route_scan_next(s, close);

    } while (rc == NGX_AGAIN);

    goto done;

scalar:

    if (rc != NGX_OK) {
        return NGX_DECLINED;
    }

    if (node != NULL) {
        node->len = s->p - node->value;

        if (!s->reals
            && ngx_http_prefix_route_scan_is_real(node->value, node->len))
        {
            s->tape = 0;
            s->untaped = 1;
        }
    }

done:

    if (node != NULL) {
        node->end = s->nnodes;
    }

    return rc;
}


ngx_http_prefix_route_node_t *
ngx_http_prefix_route_scan_tape(u_char *p, u_char *last)
{
    ngx_http_prefix_route_scan_t  s;

    s.p = p;
    s.last = last;
    s.pr = NULL;
    s.work = 0;
    s.clock_at = last;
    s.nnodes = 0;
    s.tape = 1;
    s.untaped = 0;
    s.reals = 0;

    if (ngx_http_prefix_route_scan_value(&s, 1) != NGX_OK || s.untaped) {
        return NULL;
    }

    return ngx_http_prefix_route_scan_nodes;
}


/*
 * Past a checked value: a string's end found 8 bytes a step, a container's by
 * counting brackets outside strings, a scalar's at its first delimiter.
 */

static void
ngx_http_prefix_route_scan_skip(ngx_http_prefix_route_scan_t *s)
{
    u_char                        *p;
    ngx_uint_t                     depth;
    ngx_http_prefix_route_span_t   sp;

    p = s->p;

    if (*p == '"') {
        ngx_http_prefix_route_scan_span(s, &sp);
        return;
    }

    if (*p != '{' && *p != '[') {
        while (p < s->last && *p != ',' && *p != '}' && *p != ']'
               && *p != ' ' && *p != '\n' && *p != '\r' && *p != '\t')
        {
            p++;
        }

        s->p = p;
        return;
    }

    depth = 0;

    do {
        if (*p == '"') {
            s->p = p;
            ngx_http_prefix_route_scan_span(s, &sp);
            p = s->p;
            continue;
        }

        if (*p == '{' || *p == '[') {
            depth++;

        } else if (*p == '}' || *p == ']') {
            depth--;
        }

        p++;

    } while (depth > 0);

    s->p = p;
}


/*
 * A checked string from its opening quote: its end is the first quote
 * that no backslash escapes.
 */

static ngx_inline void
ngx_http_prefix_route_scan_span(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp)
{
    u_char    *p;
    uint64_t   w;

    p = s->p + 1;

    sp->data = p;
    sp->escaped = 0;

    for ( ;; ) {

        while (s->last - p >= 8) {
            ngx_memcpy(&w, p, 8);

            if (ngx_http_prefix_route_scan_quote(w)) {
                break;
            }

            p += 8;
        }

        while (*p != '"' && *p != '\\') {
            p++;
        }

        if (*p == '"') {
            break;
        }

        /* past a backslash and the byte it escapes (\u's digits are plain) */

        sp->escaped = 1;
        p += 2;
    }

    sp->len = p - sp->data;
    s->p = p + 1;
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

static ngx_inline ngx_int_t
ngx_http_prefix_route_scan_next(ngx_http_prefix_route_scan_t *s, u_char close)
{
    if (ngx_http_prefix_route_scan_late(s)) {
        return NGX_DECLINED;
    }

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
 * The clock, once in NGX_HTTP_PREFIX_ROUTE_SCAN_CLOCK steps, or at p, in a
 * string, past s->clock_at: whether pr->deadline has passed.  Apart from
 * the callers, which it would keep from being inlined.
 */

static ngx_uint_t
ngx_http_prefix_route_scan_clock(ngx_http_prefix_route_scan_t *s, u_char *p)
{
    s->work = 0;
    s->clock_at = p + ngx_min((size_t) (s->last - p),
                              NGX_HTTP_PREFIX_ROUTE_SCAN_SPAN);

    /*
     * the steps counted as a KiB, which reads the clock; a tape of a
     * response's usage has no prompt, nor a deadline
     */

    return s->pr ? ngx_http_prefix_route_prompt_late(s->pr, 1024) : 0;
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
    uint64_t   w;
#if (defined __SSE2__)
    unsigned   m;
#endif

    p = s->p + 1;
    last = s->last;

    sp->data = p;
    sp->escaped = 0;

    for ( ;; ) {

        /*
         * the run of plain ASCII, the bulk of any prompt: 16 bytes a step
         * with SSE2, else 8
         */

#if (defined __SSE2__)

        while (last - p >= 16) {
            m = ngx_http_prefix_route_scan_stops(p);

            if (m) {
                /* the 8-byte test and the table stop at once there */
                p += __builtin_ctz(m);
                break;
            }

            p += 16;
        }

#endif

        while (last - p >= 8) {
            ngx_memcpy(&w, p, 8);

            if (ngx_http_prefix_route_scan_plain(w)) {
                break;
            }

            p += 8;
        }

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

        if (p >= s->clock_at && ngx_http_prefix_route_scan_clock(s, p)) {
            return NGX_DECLINED;
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
 * A number of JSON's grammar; declined with more than
 * NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS integer digits or an exponent of more
 * than 3 digits, or one that could take it past a double's range: where
 * jansson could find it out of range.
 */

static ngx_int_t
ngx_http_prefix_route_scan_number(ngx_http_prefix_route_scan_t *s)
{
    u_char      *p, *last, *digits, *end;
    size_t       n, whole;
    ngx_uint_t   exp, minus;

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
        end = p + ngx_min((size_t) (last - p),
                          NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS + 1);

        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    }

    whole = p - digits;

    if (whole > NGX_HTTP_PREFIX_ROUTE_SCAN_DIGITS) {
        return NGX_DECLINED;
    }

    if (p < last && *p == '.') {
        p++;

        if (p == last || *p < '0' || *p > '9') {
            return NGX_DECLINED;
        }

        end = p + ngx_min((size_t) (last - p), NGX_HTTP_PREFIX_ROUTE_SCAN_RUN);

        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }

        if (p < last && *p >= '0' && *p <= '9') {
            return NGX_DECLINED;
        }
    }

    if (p == last || (*p != 'e' && *p != 'E')) {
        s->p = p;
        return NGX_OK;
    }

    p++;
    minus = 0;

    if (p < last && (*p == '+' || *p == '-')) {
        minus = (*p++ == '-');
    }

    if (p == last || *p < '0' || *p > '9') {
        return NGX_DECLINED;
    }

    end = p + ngx_min((size_t) (last - p), NGX_HTTP_PREFIX_ROUTE_SCAN_RUN);

    while (p < end && *p == '0') {
        p++;
    }

    if (p < last && *p == '0') {
        return NGX_DECLINED;
    }

    exp = 0;

    for (n = 0; p < last && *p >= '0' && *p <= '9'; n++) {

        if (n == 3) {
            return NGX_DECLINED;
        }

        exp = exp * 10 + (*p++ - '0');
    }

    /* below 10^(whole + exp); far below DBL_MIN is 0, as jansson's */

    if (!minus && whole + exp > NGX_HTTP_PREFIX_ROUTE_SCAN_EXP) {
        return NGX_DECLINED;
    }

    s->p = p;

    return NGX_OK;
}


/*
 * A checked scalar is a real number to jansson: a number with a fraction
 * or an exponent (true and false have an 'e' too).
 */

static ngx_uint_t
ngx_http_prefix_route_scan_is_real(u_char *p, size_t len)
{
    u_char  *last;

    if (*p != '-' && (*p < '0' || *p > '9')) {
        return 0;
    }

    for (last = p + len; p < last; p++) {
        if (*p == '.' || *p == 'e' || *p == 'E') {
            return 1;
        }
    }

    return 0;
}


static ngx_inline void
ngx_http_prefix_route_scan_ws(ngx_http_prefix_route_scan_t *s)
{
    u_char  *start;

    start = s->p;

    while (s->p < s->last
           && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r'
               || *s->p == '\t'))
    {
        /* a longer run stops on a blank, where no token starts: declined */

        if (++s->p - start == NGX_HTTP_PREFIX_ROUTE_SCAN_RUN) {
            break;
        }
    }
}


/*
 * The code point of the checked escape at q, and the byte after it: a
 * surrogate pair is one code point.
 */

static u_char *
ngx_http_prefix_route_scan_unescape(u_char *q, u_char *last, uint32_t *v)
{
    uint32_t  lo;

    switch (q[1]) {

    case 'b':
        *v = '\b';
        return q + 2;

    case 'f':
        *v = '\f';
        return q + 2;

    case 'n':
        *v = '\n';
        return q + 2;

    case 'r':
        *v = '\r';
        return q + 2;

    case 't':
        *v = '\t';
        return q + 2;

    case 'u':
        break;

    default: /* '"', '\\', '/' */
        *v = q[1];
        return q + 2;
    }

    (void) ngx_http_prefix_route_scan_hex(q + 2, last, v);
    q += 6;

    if (*v >= 0xd800 && *v <= 0xdbff) {
        (void) ngx_http_prefix_route_scan_hex(q + 2, last, &lo);
        *v = 0x10000 + ((*v - 0xd800) << 10) + (lo - 0xdc00);
        q += 6;
    }

    return q;
}


/*
 * A checked string's text, decoded, as ngx_http_prefix_route_prompt_text()
 * writes it: a byte the format reserves (0x1b-0x1f, only from a \u
 * escape here) as ESC and the byte | 0x40; with "json", each escaped code
 * point as jansson escapes it instead.
 */

static void
ngx_http_prefix_route_scan_text(ngx_http_prefix_route_scan_t *s,
    ngx_http_prefix_route_span_t *sp, ngx_uint_t json)
{
    u_char    *p, *last, *q;
    uint32_t   v;

    p = sp->data;
    last = p + sp->len;

    if (!sp->escaped) {
        ngx_http_prefix_route_scan_write(s, p, sp->len);
        return;
    }

    while (p < last && !s->stop) {

        q = ngx_strlchr(p, last, '\\');

        if (q == NULL) {
            q = last;
        }

        ngx_http_prefix_route_scan_write(s, p, q - p);

        if (q == last) {
            return;
        }

        p = ngx_http_prefix_route_scan_unescape(q, last, &v);

        if (json) {
            ngx_http_prefix_route_scan_escape(s, v);

        } else if (v >= NGX_HTTP_PREFIX_ROUTE_ESC
                   && v <= NGX_HTTP_PREFIX_ROUTE_US)
        {
            ngx_http_prefix_route_scan_byte(s, NGX_HTTP_PREFIX_ROUTE_ESC);
            ngx_http_prefix_route_scan_byte(s, (u_char) (v | 0x40));

        } else {
            ngx_http_prefix_route_scan_code(s, v);
        }
    }
}


/* a code point as UTF-8 */

static void
ngx_http_prefix_route_scan_code(ngx_http_prefix_route_scan_t *s, uint32_t v)
{
    u_char  utf[4];
    size_t  n;

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


/*
 * Bytes not written: counted while the length of what goes first is
 * measured, hashed while a part's digest is taken.
 */

static void
ngx_http_prefix_route_scan_aside(ngx_http_prefix_route_scan_t *s, u_char *p,
    size_t n)
{
    if (s->aside == NGX_HTTP_PREFIX_ROUTE_DIGEST) {
        ngx_http_prefix_route_hash_add(p, n);

    } else {
        s->measured += n;
    }
}


/*
 * Bytes none of which the format reserves, cut where the buffer is full,
 * or set aside.
 */

static ngx_inline void
ngx_http_prefix_route_scan_write(ngx_http_prefix_route_scan_t *s, u_char *p,
    size_t n)
{
    ngx_http_prefix_route_prompt_t  *pr;

    if (s->aside) {
        ngx_http_prefix_route_scan_aside(s, p, n);
        return;
    }

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


static ngx_inline void
ngx_http_prefix_route_scan_byte(ngx_http_prefix_route_scan_t *s, u_char c)
{
    ngx_http_prefix_route_prompt_t  *pr;

    if (s->aside) {
        ngx_http_prefix_route_scan_aside(s, &c, 1);
        return;
    }

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
ngx_http_prefix_route_scan_eq(ngx_http_prefix_route_span_t *sp, ngx_str_t *str)
{
    return !sp->escaped && sp->len == str->len
           && ngx_memcmp(sp->data, str->data, str->len) == 0;
}
