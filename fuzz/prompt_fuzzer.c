
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * libFuzzer target of the path from request body bytes to block hashes,
 * as ngx_http_prefix_route_prepare() walks it: the body is parsed by
 * jansson with JSON_ALLOW_NUL through json_load_callback(), fed in pieces
 * as nginx buffers would feed it, the canonical prompt is built into a
 * buffer of max_prefix bytes and cut into hashed blocks.  The input is the
 * body; a hash of it picks the size of the pieces, a small cap and a block
 * size, so that each input is one reproducible case.
 *
 * Checked on every input, besides what ASan, UBSan and LeakSanitizer see:
 *
 *   - json_load_callback() in pieces and json_loadb() agree;
 *   - len <= size, key <= len, NGX_DECLINED writes nothing;
 *   - hash_blocks() gives len / block hashes, and at most "max";
 *   - the same body gives the same bytes, key, seed and hashes, from a
 *     second parse and from a second walk of the same tree (the walk does
 *     not change the tree);
 *   - a smaller cap gives a prefix of the larger output: min(cap, len)
 *     bytes, the key cut to them, the same seed, a prefix of the hashes;
 *   - when jansson runs out of memory during the walk (its n-th allocation
 *     fails), the output is still a prefix of the canonical prompt and
 *     nothing leaks.
 *
 * The same bytes are also read as an engine's response by the usage
 * reader (src/ngx_http_prefix_route_usage.c), whole and in those pieces:
 * both give the same answer, and reported counts are in range (cached at
 * most the prompt, the prompt at most NGX_HTTP_PREFIX_ROUTE_USAGE_MAX);
 * and as an engine's metrics page by the metrics reader
 * (src/ngx_http_prefix_route_metrics.c), whole and in pieces: the same
 * gauges either way, each in range.
 *
 * A failed check prints what differs and aborts, so that libFuzzer keeps
 * the input as a crash.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>
#include <xxhash.h>
#include <stdio.h>
#include <stdlib.h>

#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_prompt.h"
#include "ngx_http_prefix_route_usage.h"
#include "ngx_http_prefix_route_metrics.h"


#define FUZZ_CAP        65536       /* max_prefix=, default */
#define FUZZ_BLOCK      64          /* block=, default */
#define FUZZ_SMALL_CAP  1024        /* the small caps are 0 .. this */
#define FUZZ_PIECE      8192        /* nginx buffers of 1 .. this bytes */
#define FUZZ_NOMEM      16          /* fail one of the first allocations */


/* the body cut into pieces, as nginx buffers hand it to the module */
typedef struct {
    const u_char  *pos;
    const u_char  *last;
    const u_char  *end;             /* the end of the current piece */
    size_t         piece;
} fuzz_body_t;


/* one build of the canonical prompt and its hashes */
typedef struct {
    ngx_int_t      rc;
    size_t         size;
    size_t         block;
    size_t         len;
    size_t         key;
    uint64_t       seed;
    uint64_t       key_hash;
    ngx_uint_t     nhash;
    u_char        *buf;
    uint64_t      *hash;
    u_char         name[32];        /* the model's name, cut */
    size_t         answers[2 * 8];  /* assistant messages' places */
} fuzz_out_t;


int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t fuzz_read(void *buffer, size_t buflen, void *data);
static void fuzz_build(json_t *root, size_t size, size_t block,
    fuzz_out_t *out);
static void fuzz_same(const char *what, fuzz_out_t *a, fuzz_out_t *b);
static void fuzz_prefix(fuzz_out_t *big, size_t cap, json_t *root);
static void fuzz_nomem(fuzz_out_t *big, ngx_uint_t n, json_t *root);
static void fuzz_usage(const uint8_t *data, size_t size, size_t piece);
static void fuzz_metrics(const uint8_t *data, size_t size, size_t piece);
static void *fuzz_malloc(size_t size);
static void fuzz_free(fuzz_out_t *out);
static void fuzz_fail(const char *what, fuzz_out_t *a, fuzz_out_t *b);


static ngx_uint_t  fuzz_nomem_at;   /* jansson's allocation to fail, or 0 */


/* jansson allocates through fuzz_malloc(), which can fail on purpose */

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    json_set_alloc_funcs(fuzz_malloc, free);

    return 0;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t         block, small;
    json_t        *root, *again;
    uint64_t       h;
    fuzz_out_t     big, big2, bigb;
    fuzz_body_t    body;
    json_error_t   err;

    h = XXH3_64bits(data, size);

    body.pos = data;
    body.last = data + size;
    body.end = data;
    body.piece = 1 + h % FUZZ_PIECE;

    small = (h >> 16) % (FUZZ_SMALL_CAP + 1);
    block = 16 + (h >> 32) % 113;

    /* the same bytes as an engine's response, for its usage */

    fuzz_usage(data, size, body.piece);
    fuzz_metrics(data, size, body.piece);

    /* as the module parses a body */

    root = json_load_callback(fuzz_read, &body, JSON_ALLOW_NUL, &err);

    /* the same bytes in one piece */

    again = json_loadb((const char *) data, size, JSON_ALLOW_NUL, &err);

    if ((root == NULL) != (again == NULL)) {
        fprintf(stderr, "json_load_callback() in pieces of %zu bytes %s, "
                "json_loadb() %s\n", body.piece,
                root ? "parsed the body" : "failed",
                again ? "parsed it" : "failed");
        abort();
    }

    if (root == NULL) {
        return 0;
    }

    fuzz_build(root, FUZZ_CAP, FUZZ_BLOCK, &big);

    /* deterministic: another parse, and another walk of the same tree */

    fuzz_build(again, FUZZ_CAP, FUZZ_BLOCK, &big2);
    fuzz_same("a second parse of the body", &big, &big2);
    fuzz_free(&big2);

    fuzz_build(root, FUZZ_CAP, FUZZ_BLOCK, &big2);
    fuzz_same("a second walk of the same tree", &big, &big2);
    fuzz_free(&big2);

    /* smaller caps: a random one, and the edges of the output */

    fuzz_build(root, FUZZ_CAP, block, &bigb);

    fuzz_prefix(&bigb, small, root);

    if (big.len > 0) {
        fuzz_prefix(&bigb, big.len - 1, root);
    }

    if (big.key < big.len && big.key != small) {
        fuzz_prefix(&bigb, big.key, root);
    }

    /* out of memory in the walk */

    fuzz_nomem(&big, 1 + (h >> 48) % FUZZ_NOMEM, root);

    fuzz_free(&bigb);
    fuzz_free(&big);

    json_decref(again);
    json_decref(root);

    return 0;
}


/*
 * jansson's input callback, the way ngx_http_prefix_route_read_body()
 * serves it: at most the rest of the current buffer at each call.
 */

static size_t
fuzz_read(void *buffer, size_t buflen, void *data)
{
    fuzz_body_t  *body = data;

    size_t  n;

    if (body->pos == body->end) {

        if (body->pos == body->last) {
            return 0;
        }

        n = ngx_min(body->piece, (size_t) (body->last - body->pos));
        body->end = body->pos + n;
    }

    n = ngx_min(buflen, (size_t) (body->end - body->pos));

    ngx_memcpy(buffer, body->pos, n);
    body->pos += n;

    return n;
}


/*
 * What ngx_http_prefix_route_prepare() does with a parsed body: a buffer
 * of exactly "size" bytes (so that ASan sees a write past it), the build,
 * max = size / block hashes and the hash of the key.
 */

static void
fuzz_build(json_t *root, size_t size, size_t block, fuzz_out_t *out)
{
    size_t                          max;
    ngx_uint_t                      i;
    ngx_http_prefix_route_prompt_t  pr;

    ngx_memzero(out, sizeof(fuzz_out_t));

    out->size = size;
    out->block = block;
    max = size / block;

    out->buf = malloc(size);
    out->hash = malloc(max * sizeof(uint64_t));

    if (out->buf == NULL || out->hash == NULL) {
        fprintf(stderr, "malloc() failed\n");
        abort();
    }

    pr.buf = out->buf;
    pr.size = size;
    pr.len = 0;
    pr.key = 0;
    pr.seed = 0;
    pr.name = out->name;
    pr.name_size = sizeof(out->name);
    pr.answers = out->answers;
    pr.max_answers = 8;

    /* the module declines a body that is not an object before the call */

    out->rc = ngx_http_prefix_route_prompt_build(root, &pr);

    out->len = pr.len;
    out->key = pr.key;
    out->seed = pr.seed;

    if (out->rc != NGX_OK && out->rc != NGX_DECLINED) {
        fuzz_fail("the build returned neither NGX_OK nor NGX_DECLINED",
                  out, NULL);
    }

    if (!json_is_object(root) && out->rc != NGX_DECLINED) {
        fuzz_fail("a body that is not an object was not declined", out, NULL);
    }

    if (out->rc == NGX_DECLINED && out->len != 0) {
        fuzz_fail("a declined body wrote a prompt", out, NULL);
    }

    if (out->len > out->size) {
        fuzz_fail("len > size", out, NULL);
    }

    if (out->key > out->len) {
        fuzz_fail("key > len", out, NULL);
    }

    for (i = 0; i < pr.nanswers; i++) {
        if (pr.answers[2 * i] >= pr.answers[2 * i + 1]
            || pr.answers[2 * i + 1] > out->len
            || (i > 0 && pr.answers[2 * i] < pr.answers[2 * i - 1]))
        {
            fuzz_fail("an answer's place is not within the prompt, in order",
                      out, NULL);
        }
    }

    out->nhash = ngx_http_prefix_route_hash_blocks(out->buf, out->len, block,
                                                   out->seed, out->hash, max);

    if (out->nhash != out->len / block) {
        fuzz_fail("the hash count is not len / block", out, NULL);
    }

    /* a max below the block count stops at max, with the same hashes */

    if (out->nhash > 1) {
        uint64_t  first;

        max = out->nhash / 2;

        if (ngx_http_prefix_route_hash_blocks(out->buf, out->len, block,
                                              out->seed, &first, 1)
            != 1
            || first != out->hash[0]
            || ngx_http_prefix_route_hash_blocks(out->buf, out->len, block,
                                                 out->seed, out->hash, max)
               != max)
        {
            fuzz_fail("hash_blocks() does not stop at max", out, NULL);
        }
    }

    out->key_hash = ngx_http_prefix_route_hash(out->buf, out->key, out->seed);
}


static void
fuzz_same(const char *what, fuzz_out_t *a, fuzz_out_t *b)
{
    if (a->rc != b->rc
        || a->len != b->len
        || a->key != b->key
        || a->seed != b->seed
        || a->key_hash != b->key_hash
        || a->nhash != b->nhash
        || ngx_memcmp(a->buf, b->buf, a->len) != 0
        || ngx_memcmp(a->hash, b->hash, a->nhash * sizeof(uint64_t)) != 0)
    {
        fuzz_fail(what, a, b);
    }
}


/*
 * The build with a cap of "cap" bytes must be the first min(cap, len)
 * bytes of the larger one, with the key cut to them and a prefix of its
 * hashes.
 */

static void
fuzz_prefix(fuzz_out_t *big, size_t cap, json_t *root)
{
    fuzz_out_t  s;

    if (cap >= big->size) {
        return;
    }

    fuzz_build(root, cap, big->block, &s);

    if (s.rc != big->rc
        || s.seed != big->seed
        || s.len != ngx_min(cap, big->len)
        || s.key != ngx_min(big->key, s.len)
        || s.nhash > big->nhash
        || ngx_memcmp(s.buf, big->buf, s.len) != 0
        || ngx_memcmp(s.hash, big->hash, s.nhash * sizeof(uint64_t)) != 0)
    {
        fuzz_fail("a smaller cap does not give a prefix", big, &s);
    }

    fuzz_free(&s);
}


/*
 * The walk with jansson's n-th allocation failing: what was written must
 * still be a prefix of the canonical prompt (the walk stops where it
 * failed; a model or cache_salt that cannot be serialised changes the
 * seed only), and what jansson allocated must be freed (LeakSanitizer).
 */

static void
fuzz_nomem(fuzz_out_t *big, ngx_uint_t n, json_t *root)
{
    fuzz_out_t  s;

    fuzz_nomem_at = n;
    fuzz_build(root, big->size, big->block, &s);
    fuzz_nomem_at = 0;

    if (s.rc != big->rc
        || s.len > big->len
        || ngx_memcmp(s.buf, big->buf, s.len) != 0)
    {
        fuzz_fail("out of memory, the prompt is not a prefix", big, &s);
    }

    fuzz_free(&s);
}


/*
 * The usage reader over the input as a response, whole and in pieces:
 * the same answer either way, counts in range, bounded work.
 */

static void
fuzz_usage(const uint8_t *data, size_t size, size_t piece)
{
    size_t                          i, n;
    ngx_int_t                       rc[2];
    ngx_http_prefix_route_tokens_t  t[2];
    ngx_http_prefix_route_usage_t   u;

    ngx_memzero(&u, sizeof(u));
    ngx_http_prefix_route_usage_feed(&u, (u_char *) data, size);
    ngx_memzero(&t, sizeof(t));
    rc[0] = ngx_http_prefix_route_usage_parse(&u, &t[0]);

    ngx_memzero(&u, sizeof(u));

    for (i = 0; i < size; i += n) {
        n = ngx_min(piece, size - i);
        ngx_http_prefix_route_usage_feed(&u, (u_char *) data + i, n);
    }

    rc[1] = ngx_http_prefix_route_usage_parse(&u, &t[1]);

    if (rc[0] != rc[1]
        || (rc[0] == NGX_OK
            && (t[0].prompt != t[1].prompt || t[0].cached != t[1].cached
                || t[0].has_cached != t[1].has_cached)))
    {
        fprintf(stderr, "prompt_fuzzer: usage whole and in pieces of %zu "
                "bytes differ\n", piece);
        abort();
    }

    if (rc[0] == NGX_OK
        && (t[0].prompt > NGX_HTTP_PREFIX_ROUTE_USAGE_MAX
            || t[0].cached > t[0].prompt))
    {
        fprintf(stderr, "prompt_fuzzer: usage out of range: %llu cached of "
                "%llu\n", (unsigned long long) t[0].cached,
                (unsigned long long) t[0].prompt);
        abort();
    }
}


/*
 * The metrics reader over the input as a page, whole and in pieces: the
 * same gauges either way, each from 0 to the reader's maximum.
 */

static void
fuzz_metrics(const uint8_t *data, size_t size, size_t piece)
{
    size_t                           i, n;
    ngx_int_t                        rc[2];
    ngx_http_prefix_route_metrics_t  m[2];

    ngx_http_prefix_route_metrics_init(&m[0]);
    ngx_http_prefix_route_metrics_feed(&m[0], (u_char *) data, size);
    rc[0] = ngx_http_prefix_route_metrics_done(&m[0]);

    ngx_http_prefix_route_metrics_init(&m[1]);

    for (i = 0; i < size; i += n) {
        n = ngx_min(piece, size - i);
        ngx_http_prefix_route_metrics_feed(&m[1], (u_char *) data + i, n);
    }

    rc[1] = ngx_http_prefix_route_metrics_done(&m[1]);

    if (rc[0] != rc[1]
        || m[0].has_waiting != m[1].has_waiting
        || m[0].has_running != m[1].has_running
        || m[0].has_kv != m[1].has_kv
        || m[0].has_served != m[1].has_served
        || m[0].waiting != m[1].waiting || m[0].running != m[1].running
        || m[0].kv != m[1].kv || m[0].served != m[1].served)
    {
        fprintf(stderr, "prompt_fuzzer: metrics whole and in pieces of %zu "
                "bytes differ\n", piece);
        abort();
    }

    if (!(m[0].waiting >= 0 && m[0].running >= 0 && m[0].served >= 0
          && m[0].kv >= 0 && m[0].kv <= 1))
    {
        fprintf(stderr, "prompt_fuzzer: metrics out of range\n");
        abort();
    }
}


static void *
fuzz_malloc(size_t size)
{
    if (fuzz_nomem_at > 0 && --fuzz_nomem_at == 0) {
        return NULL;
    }

    return malloc(size);
}


static void
fuzz_free(fuzz_out_t *out)
{
    free(out->buf);
    free(out->hash);
}


static void
fuzz_fail(const char *what, fuzz_out_t *a, fuzz_out_t *b)
{
    size_t       i;
    fuzz_out_t  *o;

    fprintf(stderr, "prompt_fuzzer: %s\n", what);

    for (o = a; o != NULL; o = (o == a) ? b : NULL) {
        fprintf(stderr, "  size %zu block %zu: rc %d len %zu key %zu "
                "seed %016llx hashes %u\n",
                o->size, o->block, (int) o->rc, o->len, o->key,
                (unsigned long long) o->seed, (unsigned) o->nhash);
    }

    if (b != NULL) {
        for (i = 0; i < ngx_min(a->len, b->len); i++) {
            if (a->buf[i] != b->buf[i]) {
                break;
            }
        }

        fprintf(stderr, "  the bytes differ from byte %zu on\n", i);
    }

    abort();
}
