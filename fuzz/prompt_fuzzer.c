
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * libFuzzer target of the path from request body bytes to block hashes:
 * the module's own stage, ngx_http_prefix_route_extract(), reads the body
 * from an nginx buffer chain of pieces, some in memory and some in a file
 * (as the client body temporary file holds them), parses it with jansson
 * under the module's budget, builds the canonical prompt and hashes it.
 * The input is the body; a hash of it picks the size of the pieces, which
 * of them are in the file, a small cap and a block size, so that each
 * input is one reproducible case.
 *
 * Checked on every input, besides what ASan, UBSan and LeakSanitizer see:
 *
 *   - the stage agrees with json_loadb() of the whole body and the
 *     prompt built from that tree: the same hashes, length and key, or a
 *     decline that the reference explains (not JSON, no prompt, or the
 *     budget), and the file's offset is left as it was;
 *   - len <= size, key <= len, NGX_DECLINED writes nothing;
 *   - hash_blocks() gives len / block hashes, and at most "max";
 *   - the same body gives the same bytes, key, seed and hashes, from a
 *     second parse and from a second walk of the same tree (the walk does
 *     not change the tree);
 *   - a smaller cap gives a prefix of the larger output: min(cap, len)
 *     bytes, the key cut to them, the same seed, a prefix of the hashes;
 *   - when jansson runs out of memory during the walk (its n-th allocation
 *     fails), the output is still a prefix of the canonical prompt and
 *     nothing leaks; so too through the stage, whose parse may fail then
 *     (no memory), and through the usage reader: jansson, built with
 *     ASan, is never let go on past a failed allocation.
 *
 * The same bytes are also read as an engine's response by the usage
 * reader (src/ngx_http_prefix_route_usage.c), whole and in those pieces:
 * both give the same answer, and reported counts are in range (cached at
 * most the prompt, the prompt at most NGX_HTTP_PREFIX_ROUTE_USAGE_MAX);
 * its fast path, at the input's first 64 '{'s, answers as jansson does
 * or leaves the object to jansson;
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
#include "ngx_http_prefix_route_extract.h"
#include "ngx_http_prefix_route_scan.h"


#define FUZZ_CAP        65536       /* max_prefix=, default */
#define FUZZ_BLOCK      64          /* block=, default */
#define FUZZ_SMALL_CAP  1024        /* the small caps are 0 .. this */
#define FUZZ_PIECE      8192        /* nginx buffers of 1 .. this bytes */
#define FUZZ_NOMEM      16          /* fail one of the first allocations */
#define FUZZ_OBJECTS    64          /* usage objects tried at '{'s */



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

static void fuzz_extract(const uint8_t *data, size_t size, size_t piece,
    uint64_t h, json_t *again, ngx_uint_t nomem);
static void fuzz_scan(const uint8_t *data, size_t size, size_t cap,
    json_t *again);
static void fuzz_build(json_t *root, size_t size, size_t block,
    fuzz_out_t *out);
static void fuzz_same(const char *what, fuzz_out_t *a, fuzz_out_t *b);
static void fuzz_prefix(fuzz_out_t *big, size_t cap, json_t *root);
static void fuzz_nomem(fuzz_out_t *big, ngx_uint_t n, json_t *root);
static void fuzz_usage(const uint8_t *data, size_t size, size_t piece);
static void fuzz_usage_scan(u_char *p, u_char *last);
static void fuzz_usage_object(u_char *p, u_char *last, ngx_uint_t object);
static void fuzz_metrics(const uint8_t *data, size_t size, size_t piece);
static void *fuzz_malloc(size_t size);
static void fuzz_free(fuzz_out_t *out);
static void fuzz_fail(const char *what, fuzz_out_t *a, fuzz_out_t *b);


static ngx_uint_t  fuzz_nomem_at;   /* jansson's allocation to fail, or 0 */
static ngx_file_t  fuzz_file;       /* the body, for pieces in a file */


/*
 * jansson allocates through the module's budget and fuzz_malloc(), which
 * can fail on purpose
 */

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    FILE  *f;

    ngx_http_prefix_route_extract_init(fuzz_malloc, free);

    f = tmpfile();
    if (f == NULL) {
        fprintf(stderr, "tmpfile() failed\n");
        abort();
    }

    fuzz_file.fd = fileno(f);

    return 0;
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t         block, small, piece;
    json_t        *root, *again;
    uint64_t       h;
    fuzz_out_t     big, big2, bigb;
    json_error_t   err;

    h = XXH3_64bits(data, size);

    piece = 1 + h % FUZZ_PIECE;
    small = (h >> 16) % (FUZZ_SMALL_CAP + 1);
    block = 16 + (h >> 32) % 113;

    /* the same bytes as an engine's response, for its usage */

    fuzz_usage(data, size, piece);
    fuzz_metrics(data, size, piece);

    /* the reference: the body in one piece, the prompt from its tree */

    again = json_loadb((const char *) data, size, JSON_ALLOW_NUL, &err);

    /* as the module reads a body: the stage itself */

    fuzz_extract(data, size, piece, h, again, 0);

    /* and with one of jansson's allocations failing, parse or walk */

    fuzz_extract(data, size, piece, h, again, 1 + (h >> 40) % FUZZ_NOMEM);

    /*
     * the fast path against jansson's tree, with a small cap, the default
     * and the small one again: tools kept at one cap serve the other
     */

    fuzz_scan(data, size, small, again);
    fuzz_scan(data, size, FUZZ_CAP, again);
    fuzz_scan(data, size, small, again);

    if (again == NULL) {
        return 0;
    }

    root = json_loadb((const char *) data, size, JSON_ALLOW_NUL, &err);

    if (root == NULL) {
        fprintf(stderr, "a second json_loadb() of the body failed\n");
        abort();
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
 * The stage over the body cut into pieces of "piece" bytes, as nginx's
 * buffer chain: with h's bits, none, every other one or all of them in a
 * file, the rest in memory.  Its result must be the reference's, built
 * from "again" (the whole body's tree, NULL when jansson refused it).
 */

static void
fuzz_extract(const uint8_t *data, size_t size, size_t piece, uint64_t h,
    json_t *again, ngx_uint_t nomem)
{
    off_t                             offset;
    size_t                            n, i, pieces;
    u_char                            name[32];
    size_t                            answers[2 * 8];
    uint64_t                          key, *hash;
    ngx_int_t                         rc;
    ngx_buf_t                        *bufs;
    ngx_uint_t                        mode;
    fuzz_out_t                        ref;
    ngx_chain_t                      *chain;
    ngx_http_prefix_route_extract_t   x;

    pieces = (size + piece - 1) / piece;
    mode = (h >> 56) % 3;

    bufs = calloc(pieces + 1, sizeof(ngx_buf_t));
    chain = calloc(pieces + 1, sizeof(ngx_chain_t));
    x.buf = malloc(FUZZ_CAP);
    hash = malloc(FUZZ_CAP / FUZZ_BLOCK * sizeof(uint64_t));

    if (bufs == NULL || chain == NULL || x.buf == NULL || hash == NULL) {
        fprintf(stderr, "malloc() failed\n");
        abort();
    }

    if (mode
        && (ftruncate(fuzz_file.fd, 0) != 0
            || pwrite(fuzz_file.fd, data, size, 0) != (ssize_t) size))
    {
        fprintf(stderr, "the body file cannot be written\n");
        abort();
    }

    offset = 12345;
    fuzz_file.offset = offset;

    for (i = 0; i < pieces; i++) {
        n = ngx_min(piece, size - i * piece);

        if (mode == 2 || (mode == 1 && i % 2)) {
            bufs[i].in_file = 1;
            bufs[i].file = &fuzz_file;
            bufs[i].file_pos = i * piece;
            bufs[i].file_last = i * piece + n;

        } else {
            bufs[i].pos = (u_char *) data + i * piece;
            bufs[i].last = bufs[i].pos + n;
            bufs[i].memory = 1;
        }

        chain[i].buf = &bufs[i];
        chain[i].next = (i + 1 < pieces) ? &chain[i + 1] : NULL;
    }

    x.max_prefix = FUZZ_CAP;
    x.max_parse = 0;               /* the same result at any speed */
    x.block = FUZZ_BLOCK;
    x.hash = hash;
    x.name = name;
    x.name_size = sizeof(name);
    x.answers = answers;
    x.max_answers = 8;
    ngx_str_null(&x.salt);
    x.cache_salt = 0;

    fuzz_nomem_at = nomem;
    rc = ngx_http_prefix_route_extract(&x, pieces ? chain : NULL);
    fuzz_nomem_at = 0;

    if (fuzz_file.offset != offset) {
        fprintf(stderr, "prompt_fuzzer: the stage moved the file's offset\n");
        abort();
    }

    if (nomem) {

        /* any decline; a prompt read is a prefix of the reference's */

        if (rc == NGX_OK) {

            if (again == NULL) {
                fprintf(stderr, "prompt_fuzzer: out of memory, the stage "
                        "read a body that json_loadb() refused\n");
                abort();
            }

            fuzz_build(again, FUZZ_CAP, FUZZ_BLOCK, &ref);

            if (x.len > ref.len || ngx_memcmp(x.buf, ref.buf, x.len) != 0) {
                fprintf(stderr, "prompt_fuzzer: out of memory (allocation "
                        "%u), the stage's prompt is not a prefix\n",
                        (unsigned) nomem);
                abort();
            }

            fuzz_free(&ref);
        }

        goto done;
    }

    if (again == NULL) {
        if (rc == NGX_OK
            || (size && x.error != NGX_HTTP_PREFIX_ROUTE_EXTRACT_JSON
                && x.error != NGX_HTTP_PREFIX_ROUTE_EXTRACT_BUDGET))
        {
            fprintf(stderr, "prompt_fuzzer: the stage read a body that "
                    "json_loadb() refused (rc %d, error %d)\n",
                    (int) rc, (int) x.error);
            abort();
        }

        goto done;
    }

    fuzz_build(again, FUZZ_CAP, FUZZ_BLOCK, &ref);

    if (rc != NGX_OK) {
        if (x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_BUDGET
            || (x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_NO_PROMPT
                && (ref.rc != NGX_OK || ref.len == 0)))
        {
            fuzz_free(&ref);
            goto done;
        }

        fprintf(stderr, "prompt_fuzzer: the stage declined a body the "
                "reference reads (error %d, reference rc %d, len %zu)\n",
                (int) x.error, (int) ref.rc, ref.len);
        abort();
    }

    key = ngx_http_prefix_route_hash(ref.buf,
                                     ngx_min(ref.key,
                                             NGX_HTTP_PREFIX_ROUTE_KEY_SIZE),
                                     ref.seed);

    if (ref.rc != NGX_OK
        || x.len != ref.len
        || x.seed != ref.seed
        || x.key != key
        || x.nblocks != ref.nhash
        || ngx_memcmp(x.hash, ref.hash, ref.nhash * sizeof(uint64_t)) != 0)
    {
        fprintf(stderr, "prompt_fuzzer: the stage (pieces of %zu bytes, "
                "file mode %u) and the reference differ: len %zu vs %zu, "
                "%u vs %u blocks\n", piece, (unsigned) mode, x.len, ref.len,
                (unsigned) x.nblocks, (unsigned) ref.nhash);
        abort();
    }

    /* the ids in each block: as many as fit, never fewer than before */

    for (i = 0; x.tokens && i < x.nblocks; i++) {
        if (x.tokens[i] > (i + 1) * FUZZ_BLOCK / 2
            || (i && x.tokens[i] < x.tokens[i - 1])
            || x.tokens[i] > x.ntokens)
        {
            fprintf(stderr, "prompt_fuzzer: %u token ids in block %zu\n",
                    (unsigned) x.tokens[i], i);
            abort();
        }
    }

    fuzz_free(&ref);

done:

    free(hash);
    free(x.buf);
    free(chain);
    free(bufs);
}


/*
 * The fast path (src/ngx_http_prefix_route_scan.c) over the whole body
 * with a cap of "cap" bytes: when it accepts the body, jansson must have
 * parsed it ("again") and the prompt built from that tree must be the
 * same, byte for byte, with the same key, seed, model, name and answers.
 */

static void
fuzz_scan(const uint8_t *data, size_t size, size_t cap, json_t *again)
{
    u_char                          *buf, name[32];
    size_t                           answers[2 * 8];
    u_char                          *rbuf, rname[32];
    size_t                           ranswers[2 * 8];
    ngx_int_t                        rc, rrc;
    ngx_http_prefix_route_prompt_t   pr, ref;

    buf = malloc(cap + 1);
    rbuf = malloc(cap + 1);

    if (buf == NULL || rbuf == NULL) {
        fprintf(stderr, "malloc() failed\n");
        abort();
    }

    ngx_memzero(&pr, sizeof(pr));
    pr.buf = buf;
    pr.size = cap;
    pr.name = name;
    pr.name_size = sizeof(name);
    pr.answers = answers;
    pr.max_answers = 8;

    rc = ngx_http_prefix_route_scan((u_char *) data, size, &pr);

    if (rc != NGX_OK) {
        goto done;
    }

    if (again == NULL) {
        fprintf(stderr, "prompt_fuzzer: the fast path accepted a body "
                "jansson refuses\n");
        abort();
    }

    ref = pr;
    ref.buf = rbuf;
    ref.name = rname;
    ref.answers = ranswers;

    rrc = ngx_http_prefix_route_prompt_build(again, &ref);

    if (rrc != NGX_OK
        || pr.len != ref.len
        || ngx_memcmp(pr.buf, ref.buf, pr.len) != 0
        || pr.key != ref.key
        || pr.seed != ref.seed
        || pr.model != ref.model
        || pr.name_len != ref.name_len
        || ngx_memcmp(pr.name, ref.name, pr.name_len) != 0
        || pr.nanswers != ref.nanswers
        || (pr.nontext > 0) != (ref.nontext > 0)
        || pr.batch != ref.batch
        || pr.ids != ref.ids
        || pr.skip_cache != ref.skip_cache
        || ngx_memcmp(pr.answers, ref.answers,
                      2 * pr.nanswers * sizeof(size_t)) != 0)
    {
        fprintf(stderr, "prompt_fuzzer: the fast path and jansson differ "
                "(cap %zu): len %zu vs %zu, key %zu vs %zu, seed %s, "
                "answers %u vs %u\n", cap, pr.len, ref.len, pr.key, ref.key,
                pr.seed == ref.seed ? "same" : "differs",
                (unsigned) pr.nanswers, (unsigned) ref.nanswers);
        abort();
    }

done:

    free(rbuf);
    free(buf);
}


/*
 * The reference build from a parsed body, as the stage does it: a buffer
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
    pr.deadline = 0;               /* the same result at any speed */
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

    /*
     * jansson's allocation failing: an object it could not read is passed
     * over as one that is not JSON, so the answer may be another object's,
     * in range; no block left
     */

    fuzz_nomem_at = 1 + piece % FUZZ_NOMEM;
    ngx_memzero(&t[1], sizeof(t[1]));
    rc[1] = ngx_http_prefix_route_usage_parse(&u, &t[1]);
    fuzz_nomem_at = 0;

    if (rc[1] == NGX_OK
        && (t[1].prompt > NGX_HTTP_PREFIX_ROUTE_USAGE_MAX
            || t[1].cached > t[1].prompt))
    {
        fprintf(stderr, "prompt_fuzzer: usage out of memory out of range\n");
        abort();
    }

    /* the reader of a cut meta_info, for a prompt of 1000 token ids */

    ngx_memzero(&t, sizeof(t));
    rc[0] = ngx_http_prefix_route_usage_cut(&u, 1000, &t[0]);

    if (rc[0] == NGX_OK && (t[0].prompt != 1000 || t[0].cached > 1000)) {
        fprintf(stderr, "prompt_fuzzer: cut usage out of range: %llu "
                "cached\n", (unsigned long long) t[0].cached);
        abort();
    }

    for (i = 0, n = 0; i < size && n < FUZZ_OBJECTS; i++) {
        if (data[i] == '{') {
            fuzz_usage_scan((u_char *) data + i, (u_char *) data + size);
            n++;
        }
    }
}


/*
 * The object at p read by the fast path and by jansson, as each kind of
 * object that holds counts: the same
 */

static void
fuzz_usage_scan(u_char *p, u_char *last)
{
    ngx_uint_t  object;

    for (object = 0; object < NGX_HTTP_PREFIX_ROUTE_COUNTS_KINDS; object++) {
        fuzz_usage_object(p, last, object);
    }
}


static void
fuzz_usage_object(u_char *p, u_char *last, ngx_uint_t object)
{
    ngx_int_t                       rc[2];
    ngx_http_prefix_route_tokens_t  t[2];

    ngx_memzero(&t, sizeof(t));

    rc[0] = ngx_http_prefix_route_usage_scan(p, last, object, &t[0]);

    if (rc[0] == NGX_AGAIN) {
        return;
    }

    rc[1] = ngx_http_prefix_route_usage_json(p, last, object, &t[1]);

    if (rc[0] != rc[1]
        || (rc[0] == NGX_OK
            && (t[0].prompt != t[1].prompt || t[0].cached != t[1].cached
                || t[0].has_cached != t[1].has_cached)))
    {
        fprintf(stderr, "prompt_fuzzer: object %u: the usage fast path says "
                "%d (%llu, %llu), jansson %d (%llu, %llu), %zu bytes left\n",
                (unsigned) object, (int) rc[0],
                (unsigned long long) t[0].prompt,
                (unsigned long long) t[0].cached, (int) rc[1],
                (unsigned long long) t[1].prompt,
                (unsigned long long) t[1].cached, (size_t) (last - p));
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
