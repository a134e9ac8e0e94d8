
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Unit test of the stage from a request body to block hashes
 * (src/ngx_http_prefix_route_extract.c), TAP output: the same body read
 * from one buffer, from many, from the client body temporary file (by
 * the fast path, and by jansson in more than one 64 KiB read) and from
 * both gives the same hashes; the file's offset is left as it was; a
 * body past the memory budget, one that is not JSON, one without a prompt
 * and no body at all are declined, each with its reason.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>
#include <stdio.h>

#include "ngx_http_prefix_route_extract.h"
#include "ngx_http_prefix_route_prompt.h"
#include "ngx_http_prefix_route_hash.h"
#include "tap.h"


#define TEST_CAP     65536
#define TEST_BLOCK   64
#define TEST_PIECES  64


typedef struct {
    ngx_int_t                         rc;
    ngx_http_prefix_route_extract_t   x;
    uint64_t                          hash[TEST_CAP / TEST_BLOCK];
    uint32_t                          tokens[TEST_CAP / TEST_BLOCK];
    u_char                            buf[TEST_CAP];
    u_char                            name[32];
    size_t                            answers[2 * 8];
} test_out_t;


static void test_extract(u_char *body, size_t len, ngx_uint_t pieces,
    ngx_uint_t in_file, test_out_t *out);
static void test_reference(u_char *body, size_t len, test_out_t *out);
static ngx_uint_t test_same(test_out_t *a, test_out_t *b);
static void test_stops(test_out_t *a, test_out_t *b);
static ngx_uint_t test_stopped(u_char *body, size_t len, ngx_uint_t pieces,
    ngx_uint_t jansson, test_out_t *a, test_out_t *b);
static u_char *test_chat(size_t messages, size_t *len);


static ngx_file_t   test_file;
static ngx_uint_t   test_moved;     /* the stage moved the file's offset */
static ngx_str_t    test_salt;      /* prefix_route_salt's value */
static ngx_uint_t   test_cache_salt;
static ngx_msec_t   test_max_parse;  /* max_parse=, ms; 0: off */
static ngx_uint_t   test_own;       /* the stage's buffers, not out's */
static ngx_uint_t   test_chunked;   /* an empty last buffer, as nginx's
                                       chunked body filter appends */
static ngx_uint_t   test_jansson;   /* jansson's allocations so far */
static ngx_uint_t   test_oom;       /* jansson's allocation this many
                                       fails (1: the first), 0: none */
static ngx_int_t    test_live;      /* jansson's blocks not freed */


/* jansson's allocator, counting: a body the fast path reads takes none */

static void *
test_alloc(size_t size)
{
    void  *p;

    if (++test_jansson == test_oom) {
        return NULL;
    }

    p = malloc(size);
    test_live += (p != NULL);

    return p;
}


static void
test_free(void *p)
{
    test_live -= (p != NULL);
    free(p);
}


int
main(void)
{
    FILE          *f;
    u_char        *body, *p, *head;
    size_t         len, i;
    test_out_t    *a, *b;
    ngx_uint_t     ok, n, nomem;

    ngx_http_prefix_route_extract_init(test_alloc, test_free);

    f = tmpfile();
    a = malloc(sizeof(test_out_t));
    b = malloc(sizeof(test_out_t));

    if (f == NULL || a == NULL || b == NULL) {
        printf("Bail out! no memory or no temporary file\n");
        return 255;
    }

    test_file.fd = fileno(f);

    /* ~200 KB of chat: a file buffer takes several 64 KiB reads */

    body = test_chat(1500, &len);

    if (len < 3 * 65536) {
        printf("Bail out! test body of %d bytes\n", (int) len);
        return 255;
    }

    test_extract(body, len, 1, 0, a);

    test_ok(a->rc == NGX_OK && a->x.len == TEST_CAP && !a->x.whole
            && a->x.nblocks == TEST_CAP / TEST_BLOCK
            && a->x.nanswers > 0 && a->x.name_len == 5
            && ngx_strcmp(a->name, "llama") == 0,
            "a body in one buffer: a prompt cut at max_prefix, its blocks, "
            "its model and its answers");

    /* the reference: the body parsed whole, the prompt built and hashed */

    test_reference(body, len, b);
    test_ok(test_same(a, b), "the same hashes, key and seed as the prompt "
            "built from the body's tree");

    test_extract(body, len, TEST_PIECES, 0, b);
    test_ok(test_same(a, b), "in 64 buffers in memory: the same hashes");

    test_jansson = 0;
    test_extract(body, len, 1, 1, b);
    test_ok(test_same(a, b) && !test_moved && test_jansson == 0,
            "in the temporary file: the same hashes, read by the fast path "
            "(no jansson allocation), the file's offset left as it was");

    test_extract(body, len, TEST_PIECES, 1, b);
    test_ok(test_same(a, b) && !test_moved,
            "in 64 buffers, every other one in the file: the same hashes");

    test_own = 1;
    test_chunked = 1;

    test_extract(body, len, 1, 0, b);
    test_ok(test_same(a, b), "in one buffer and an empty last one, with "
            "the stage's own buffers: the same hashes");

    test_extract(body, len, TEST_PIECES, 0, b);
    test_ok(test_same(a, b), "in 64 buffers and an empty last one, with "
            "the stage's own buffers: the same hashes");

    test_extract(body, len, 3, 1, b);
    test_ok(test_same(a, b), "in 3 buffers, one in the file, and an empty "
            "last one, with the stage's own buffers: the same hashes");

    test_own = 0;
    test_chunked = 0;

    /*
     * the same turns with a model that is a number, which the fast path
     * leaves to jansson: jansson reads the file 64 KiB at a time
     */

    p = (u_char *) ngx_strstr(body, "\"model\":\"llama\"");
    ngx_memcpy(p, "\"model\":1234567", 15);

    test_extract(body, len, 1, 0, a);

    test_jansson = 0;
    test_extract(body, len, 1, 1, b);
    test_ok(a->rc == NGX_OK && a->x.nblocks == TEST_CAP / TEST_BLOCK
            && test_same(a, b) && !test_moved && test_jansson > 0,
            "a body whose model is a number, in the temporary file, read "
            "by jansson 64 KiB at a time: the same hashes as in memory, "
            "the file's offset left as it was");

    free(body);

    /* a short body: the whole prompt, key within it */

    body = test_chat(2, &len);
    test_extract(body, len, 3, 1, a);
    test_ok(a->rc == NGX_OK && a->x.whole && a->x.len < TEST_CAP
            && a->x.nblocks == a->x.len / TEST_BLOCK,
            "a short body: the whole prompt, len / block blocks");
    free(body);

    /*
     * a body over the 8 MiB the process keeps to gather one, in buffers in
     * memory and in the file: the fast path reads it all the same
     */

    body = test_chat(70000, &len);

    if (len <= 8 * 1024 * 1024) {
        printf("Bail out! test body of %d bytes\n", (int) len);
        return 255;
    }

    test_reference(body, len, a);

    test_jansson = 0;
    test_extract(body, len, TEST_PIECES, 0, b);
    ok = test_same(a, b) && !b->x.jansson;

    test_extract(body, len, 3, 1, b);
    test_ok(ok && test_same(a, b) && !b->x.jansson && !test_moved
            && test_jansson == 0,
            "a body over 8 MiB in 64 buffers, and in 3 with one in the "
            "file: jansson's hashes, read by the fast path");
    free(body);

    /*
     * max_parse on the fast path: 4,000,000 small values, which it reads
     * at some 250 MB/s (30 ms), 30 times the 1 ms allowed
     */

    len = 4000000 * 2 + 128;
    body = malloc(len);

    if (body == NULL) {
        printf("Bail out! no memory\n");
        return 255;
    }

    head = (u_char *) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"hello\"}],\"x\":[1";
    p = ngx_cpymem(body, head, ngx_strlen(head));

    for (i = 1; i < 4000000; i++) {
        p = ngx_cpymem(p, ",1", 2);
    }

    p = ngx_cpymem(p, "]}", 2);
    len = p - body;

    test_jansson = 0;
    test_ok(test_stopped(body, len, 1, 0, a, b) && test_jansson == 0,
            "a body the fast path reads for longer than max_parse is "
            "declined: time, not left to jansson; without max_parse it is "
            "read");

    /* and within one value: a string of 4,000,000 escapes (some 20 ms) */

    head = (u_char *) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"";
    p = ngx_cpymem(body, head, ngx_strlen(head));

    for (i = 0; i < 4000000; i++) {
        p = ngx_cpymem(p, "\\n", 2);
    }

    p = ngx_cpymem(p, "\"}]}", 4);
    len = p - body;

    test_jansson = 0;
    test_ok(test_stopped(body, len, 1, 0, a, b) && test_jansson == 0,
            "a string the fast path reads for longer than max_parse is "
            "declined: time; without max_parse it is read");
    free(body);

    /*
     * 400,000 empty objects need ~70 bytes of jansson a body byte; a
     * prompt that is a list, which the fast path leaves to jansson
     */

    len = 400000 * 3 + 32;
    body = malloc(len);

    if (body == NULL) {
        printf("Bail out! no memory\n");
        return 255;
    }

    p = ngx_cpymem(body, "{\"prompt\":[", 11);

    for (i = 0; i < 400000; i++) {
        p = ngx_cpymem(p, "{},", 3);
    }

    p = ngx_cpymem(p, "{}]}", 4);
    len = p - body;

    test_extract(body, len, TEST_PIECES, 0, a);
    test_ok(a->rc == NGX_DECLINED
            && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_BUDGET
            && a->x.size == (off_t) len
            && a->x.budget == NGX_HTTP_PREFIX_ROUTE_JSON_BUDGET(len),
            "a body that needs more than its budget to parse is declined: "
            "budget");
    free(body);

    /*
     * max_parse: 200,000 distinct keys (and an escaped one, which the fast
     * path leaves to jansson) take jansson some 200 ms (5-12 MB/s), 200
     * times the 1 ms allowed, where the budget lets them through
     */

    len = 200000 * 14 + 128;
    body = malloc(len);

    if (body == NULL) {
        printf("Bail out! no memory\n");
        return 255;
    }

    head = (u_char *) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"hello\"}],\"\\u0061\":1";
    p = ngx_cpymem(body, head, ngx_strlen(head));

    for (i = 0; i < 200000; i++) {
        p += sprintf((char *) p, ",\"k%07zu\":1", i);
    }

    *p++ = '}';
    len = p - body;

    test_ok(test_stopped(body, len, TEST_PIECES, 1, a, b),
            "a body jansson parses for longer than max_parse is declined: "
            "time; without max_parse it is read");
    free(body);

    body = (u_char *) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",";
    test_extract(body, ngx_strlen(body), 3, 0, a);
    test_ok(a->rc == NGX_DECLINED
            && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_JSON
            && a->x.json_error != 0 && a->x.position > 0,
            "a body cut short is declined: not JSON, with jansson's error "
            "and its byte");

    /*
     * jansson's first allocation fails (the worker's memory, not the
     * body): an escaped key leaves the body to jansson
     */

    body = (u_char *) "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                      "\"content\":\"hello\"}],\"\\u0061\":1}";
    test_jansson = 0;
    test_oom = 1;
    test_extract(body, ngx_strlen(body), 1, 0, a);
    test_oom = 0;
    test_extract(body, ngx_strlen(body), 1, 0, b);
    test_ok(a->rc == NGX_DECLINED && a->x.jansson
            && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY
            && b->rc == NGX_OK && b->x.jansson && test_live == 0,
            "a body jansson has no memory to parse is declined: memory, "
            "not JSON; read once memory is had");

    /*
     * Each of jansson's allocations fails in turn, those of a 5,000-byte
     * string's buffer among them (jansson 2.14 then reads and writes past
     * it, were it let go on): memory while it parses, a prompt cut short
     * while the walk writes, never a block left
     */

    len = 5000 + 256;
    body = malloc(len);

    if (body == NULL) {
        printf("Bail out! no memory\n");
        return 255;
    }

    head = (u_char *) "{\"model\":\"m\",\"\\u0061\":1,\"messages\":"
                      "[{\"role\":\"system\",\"content\":\"";
    p = ngx_cpymem(body, head, ngx_strlen(head));
    ngx_memset(p, 'x', 5000);
    p += 5000;
    head = (u_char *) "\"},{\"role\":\"user\",\"content\":\"hi\"}]}";
    p = ngx_cpymem(p, head, ngx_strlen(head));
    len = p - body;

    test_jansson = 0;
    test_extract(body, len, 1, 0, b);
    n = test_jansson;
    ok = (b->rc == NGX_OK && n > 4);
    nomem = 0;

    for (i = 1; ok && i <= n; i++) {
        test_jansson = 0;
        test_oom = i;
        test_extract(body, len, 1, 0, a);
        test_oom = 0;

        nomem += (a->rc == NGX_DECLINED
                  && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY);
        ok = (test_live == 0
              && ((a->rc == NGX_DECLINED
                   && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY)
                  || (a->rc == NGX_OK && a->x.len <= b->x.len
                      && ngx_memcmp(a->buf, b->buf, a->x.len) == 0)));
    }

    test_ok(ok && nomem > 1,
            "an allocation of jansson's that fails, any one, leaves no block "
            "and no error: memory, or a prompt cut short in the walk");
    free(body);

    body = (u_char *) "{\"model\":\"m\",\"input_text\":\"hello\"}";
    test_extract(body, ngx_strlen(body), 1, 0, a);
    test_ok(a->rc == NGX_DECLINED
            && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_NO_PROMPT,
            "JSON without a prompt is declined: no prompt");

    body = (u_char *) "[{\"role\":\"user\",\"content\":\"hello\"}]";
    test_extract(body, ngx_strlen(body), 1, 0, a);
    test_ok(a->rc == NGX_DECLINED
            && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_NO_PROMPT,
            "a JSON array is declined: no prompt");

    test_extract(NULL, 0, 0, 0, a);
    test_ok(a->rc == NGX_DECLINED
            && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_EMPTY,
            "no body is declined: empty");

    /*
     * prefix_route_salt: nginx's salt keys tenants apart, in place of the
     * body's cache_salt or on top of it; through the fast path (one
     * buffer) and jansson (the file) alike
     */
    {
        u_char  *one, *two, *none;

        one = (u_char *) "{\"model\":\"m\",\"cache_salt\":\"alice\","
                         "\"messages\":[{\"role\":\"user\",\"content\":"
                         "\"Summarise this text in one line, please: a "
                         "long enough text for a few blocks of 64 bytes "
                         "each, so that the hashes tell. It goes on for "
                         "another line or two, past two blocks.\"}]}";
        two = (u_char *) "{\"model\":\"m\",\"cache_salt\":\"bob\","
                         "\"messages\":[{\"role\":\"user\",\"content\":"
                         "\"Summarise this text in one line, please: a "
                         "long enough text for a few blocks of 64 bytes "
                         "each, so that the hashes tell. It goes on for "
                         "another line or two, past two blocks.\"}]}";
        none = (u_char *) "{\"model\":\"m\","
                          "\"messages\":[{\"role\":\"user\",\"content\":"
                          "\"Summarise this text in one line, please: a "
                          "long enough text for a few blocks of 64 bytes "
                          "each, so that the hashes tell. It goes on for "
                          "another line or two, past two blocks.\"}]}";

        test_extract(one, ngx_strlen(one), 1, 0, a);
        ngx_str_set(&test_salt, "");
        test_extract(one, ngx_strlen(one), 1, 1, b);
        test_ok(a->x.nblocks >= 2 && test_same(a, b),
                "an empty salt from nginx keys by the body's cache_salt, as "
                "without prefix_route_salt");

        ngx_str_set(&test_salt, "alice");
        test_extract(none, ngx_strlen(none), 1, 0, b);
        test_ok(b->rc == NGX_OK && a->x.nblocks == b->x.nblocks
                && a->hash[0] != b->hash[0] && a->x.key != b->x.key
                && !a->x.foreign_salt && !b->x.foreign_salt,
                "nginx's salt \"alice\" keys apart from a body's "
                "cache_salt \"alice\"");

        test_extract(one, ngx_strlen(one), 1, 0, a);
        test_extract(two, ngx_strlen(two), 1, 1, b);
        test_ok(test_same(a, b),
                "the same salt from nginx: the same hashes whatever the "
                "body's cache_salt (fast path and jansson)");
        test_ok(a->x.foreign_salt && b->x.foreign_salt,
                "the body's cache_salt in place of which nginx's keys is "
                "told (the engine keys by it)");

        ngx_str_set(&test_salt, "bob");
        test_extract(one, ngx_strlen(one), 1, 0, b);
        test_ok(b->rc == NGX_OK && a->x.nblocks == b->x.nblocks
                && a->hash[0] != b->hash[0]
                && a->hash[b->x.nblocks - 1] != b->hash[b->x.nblocks - 1],
                "another salt from nginx: other hashes, from the first "
                "block");

        test_cache_salt = 1;
        test_extract(one, ngx_strlen(one), 1, 0, a);
        test_extract(two, ngx_strlen(two), 1, 1, b);
        test_ok(a->rc == NGX_OK && b->rc == NGX_OK
                && a->hash[0] != b->hash[0]
                && !a->x.foreign_salt && !b->x.foreign_salt,
                "cache_salt=on: the body's cache_salt keys apart too");

        test_extract(one, ngx_strlen(one), 1, 1, b);
        test_ok(test_same(a, b),
                "cache_salt=on: the same salts, the same hashes");

        ngx_str_null(&test_salt);
        test_cache_salt = 0;
    }

    /* images, audio, files: their tokens do not follow their bytes */
    {
        u_char  *img;

        img = (u_char *) "{\"model\":\"m\",\"messages\":[{\"role\":"
                         "\"user\",\"content\":[{\"type\":\"text\","
                         "\"text\":\"What is in this picture, and what "
                         "colour is it? Say it in one line.\"},"
                         "{\"type\":\"image_url\",\"image_url\":"
                         "{\"url\":\"http://img/a.png\"}}]}]}";

        body = test_chat(2, &len);
        test_extract(img, ngx_strlen(img), 1, 0, a);
        test_extract(body, len, 1, 0, b);
        free(body);
        test_ok(a->rc == NGX_OK && a->x.nontext
                && b->rc == NGX_OK && !b->x.nontext,
                "a prompt with an image part is told from one of text");
    }

    /* token ids: the engine's tokens in each block, for feedback */
    {
        u_char      ids[4096];
        uint32_t    d, lo, hi;
        ngx_uint_t  k;

        p = ngx_cpymem(ids, "{\"input_ids\":[", 14);

        for (i = 0; i < 600; i++) {
            p += snprintf((char *) p, 8, "%s%d", i ? "," : "",
                          (int) (1000 + i));
        }

        p = ngx_cpymem(p, "]}", 2);

        test_extract(ids, p - ids, 1, 0, a);

        /* the first 300 ids: a prompt the 600 continue */
        len = 14 + 300 * 5 - 1;
        test_extract((u_char *) "{\"input_ids\":[]}", 16, 1, 0, b);
        ngx_memcpy(ids + len, "]}", 2);
        test_extract(ids, len + 2, 1, 0, b);

        /* each block of 64 bytes holds 12 or 13 ids of 4 digits */
        lo = TEST_BLOCK / 5;
        hi = (TEST_BLOCK + 4) / 5;
        ok = (a->rc == NGX_OK && a->x.tokens != NULL);

        for (k = 1; ok && k < a->x.nblocks; k++) {
            d = a->tokens[k] - a->tokens[k - 1];
            ok = (d >= lo && d <= hi);
        }

        test_ok(ok && a->x.ntokens == 600 && a->tokens[0] <= hi
                && a->tokens[a->x.nblocks - 1] > 600 - hi,
                "token ids: the ids wholly in each block, and all 600");

        ok = (b->rc == NGX_OK && b->x.ntokens == 300
              && b->x.nblocks < a->x.nblocks);

        for (k = 0; ok && k < b->x.nblocks; k++) {
            ok = (a->tokens[k] == b->tokens[k] && a->hash[k] == b->hash[k]);
        }

        test_ok(ok, "token ids: a prompt the ids continue has the same "
                    "blocks and counts");

        body = test_chat(2, &len);
        test_extract(body, len, 1, 0, b);
        free(body);
        test_ok(b->rc == NGX_OK && b->x.tokens == NULL && b->x.ntokens == 0,
                "a prompt of text has no token counts");
    }

    test_stops(a, b);

    free(a);
    free(b);

    return test_done();
}


/*
 * Runs the stage over "body" cut into "pieces" buffers of a chain, those
 * of odd number in the file when "in_file" (all of them with one piece),
 * written there whole at offset 0.
 */

static void
test_extract(u_char *body, size_t len, ngx_uint_t pieces, ngx_uint_t in_file,
    test_out_t *out)
{
    off_t         start, end;
    ngx_buf_t     bufs[TEST_PIECES + 1];
    ngx_uint_t    i, n;
    ngx_chain_t   chain[TEST_PIECES + 1];

    ngx_memzero(bufs, sizeof(bufs));

    if (in_file && pwrite(test_file.fd, body, len, 0) != (ssize_t) len) {
        printf("Bail out! cannot write the temporary file\n");
        exit(255);
    }

    for (i = 0; i < pieces; i++) {
        start = len * i / pieces;
        end = len * (i + 1) / pieces;

        if (in_file && (pieces == 1 || i % 2)) {
            bufs[i].in_file = 1;
            bufs[i].file = &test_file;
            bufs[i].file_pos = start;
            bufs[i].file_last = end;

        } else {
            bufs[i].memory = 1;
            bufs[i].pos = body + start;
            bufs[i].last = body + end;
        }

        chain[i].buf = &bufs[i];
        chain[i].next = (i + 1 < pieces) ? &chain[i + 1] : NULL;
    }

    if (test_chunked && pieces) {
        bufs[pieces].last_buf = 1;
        chain[pieces].buf = &bufs[pieces];
        chain[pieces].next = NULL;
        chain[pieces - 1].next = &chain[pieces];
    }

    test_file.offset = 777;

    ngx_memzero(&out->x, sizeof(ngx_http_prefix_route_extract_t));
    out->x.max_prefix = TEST_CAP;
    out->x.block = TEST_BLOCK;
    out->x.buf = test_own ? NULL : out->buf;
    out->x.hash = test_own ? NULL : out->hash;
    out->x.name = out->name;
    out->x.name_size = sizeof(out->name);
    out->x.answers = out->answers;
    out->x.max_answers = 8;
    out->x.salt = test_salt;
    out->x.cache_salt = test_cache_salt;
    out->x.max_parse = test_max_parse;

    out->rc = ngx_http_prefix_route_extract(&out->x, pieces ? chain : NULL);

    if (test_own && out->rc == NGX_OK) {
        n = out->x.nblocks * sizeof(uint64_t);
        ngx_memcpy(out->hash, out->x.hash, ngx_min(n, sizeof(out->hash)));
    }

    if (out->rc == NGX_OK && out->x.tokens) {
        n = out->x.nblocks * sizeof(uint32_t);
        ngx_memcpy(out->tokens, out->x.tokens, ngx_min(n, sizeof(out->tokens)));
    }

    test_moved = (test_file.offset != 777);
}


/*
 * jansson's way, the reference the fast path must equal: the body parsed
 * whole, the prompt built from the tree and hashed; out->rc NGX_DECLINED
 * when jansson rejects the body or finds no prompt
 */

static void
test_reference(u_char *body, size_t len, test_out_t *out)
{
    json_t                          *root;
    ngx_http_prefix_route_prompt_t   pr;

    ngx_memzero(&pr, sizeof(pr));
    ngx_memzero(&out->x, sizeof(ngx_http_prefix_route_extract_t));
    pr.buf = out->buf;
    pr.size = TEST_CAP;

    root = json_loadb((char *) body, len, JSON_ALLOW_NUL, NULL);
    out->rc = (root != NULL
               && ngx_http_prefix_route_prompt_build(root, &pr) == NGX_OK)
              ? NGX_OK : NGX_DECLINED;
    json_decref(root);

    if (out->rc != NGX_OK) {
        return;
    }

    out->x.len = pr.len;
    out->x.seed = pr.seed;
    out->x.nblocks = ngx_http_prefix_route_hash_blocks(pr.buf, pr.len,
                                                       TEST_BLOCK, pr.seed,
                                                       out->hash,
                                                       TEST_CAP / TEST_BLOCK);
    out->x.key = ngx_http_prefix_route_hash(pr.buf,
                                            ngx_min(pr.key,
                                                NGX_HTTP_PREFIX_ROUTE_KEY_SIZE),
                                            pr.seed);
}


/*
 * A string's scan takes plain bytes 16 and 8 at a time: a byte that
 * stops it (an escape, UTF-8; a control byte, a byte that is not UTF-8,
 * a surrogate) or not (DEL) at each offset of the first 48 gives
 * jansson's hashes, read by the fast path (the 5 valid ones), or is
 * declined as jansson declines it.
 */

static void
test_stops(test_out_t *a, test_out_t *b)
{
    size_t       i, k, n, len;
    u_char       body[256], *p;
    ngx_uint_t   ok, fast;

    static const char   head[] = "{\"model\":\"m\",\"messages\":"
                                 "[{\"role\":\"user\",\"content\":\"";
    static const char  *stops[] = { "\\n", "\\u00e9", "\xc3\xa9",
                                    "\xe2\x82\xac", "\x01", "\x7f",
                                    "\xff", "\xc3", "\xed\xa0\x80" };

    ok = 1;
    fast = 0;

    for (i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) {

        for (k = 0; k < 48; k++) {
            p = ngx_cpymem(body, head, sizeof(head) - 1);

            for (n = 0; n < 64; n++) {
                if (n == k) {
                    p = ngx_cpymem(p, stops[i], ngx_strlen(stops[i]));
                }

                *p++ = (u_char) ('a' + n % 26);
            }

            p = ngx_cpymem(p, "\"}]}", 4);
            len = p - body;

            test_jansson = 0;
            test_extract(body, len, 1, 0, a);
            fast += (a->rc == NGX_OK && test_jansson == 0);

            test_reference(body, len, b);

            if (b->rc == NGX_OK ? !test_same(a, b) : a->rc == NGX_OK) {
                ok = 0;
                printf("# stop %d at %d: rc %d, jansson's %d\n",
                       (int) i, (int) k, (int) a->rc, (int) b->rc);
            }
        }
    }

    test_ok(ok && fast == 5 * 48, "a byte that stops a string's scan, at "
            "each of 48 offsets: jansson's hashes, by the fast path where "
            "valid, or declined as by jansson");
}


static ngx_uint_t
test_same(test_out_t *a, test_out_t *b)
{
    return a->rc == NGX_OK && b->rc == NGX_OK
           && a->x.len == b->x.len
           && a->x.key == b->x.key
           && a->x.seed == b->x.seed
           && a->x.nblocks == b->x.nblocks
           && ngx_memcmp(a->hash, b->hash, a->x.nblocks * sizeof(uint64_t))
              == 0;
}


/*
 * The body read with max_parse=1ms into a, declined for time, and without
 * a limit into b, read; by jansson both times, or by the fast path both
 * times, as "jansson" says
 */

static ngx_uint_t
test_stopped(u_char *body, size_t len, ngx_uint_t pieces, ngx_uint_t jansson,
    test_out_t *a, test_out_t *b)
{
    test_max_parse = 1;
    test_extract(body, len, pieces, 0, a);
    test_max_parse = 0;
    test_extract(body, len, pieces, 0, b);

    return a->rc == NGX_DECLINED
           && a->x.error == NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME
           && a->x.jansson == jansson && b->rc == NGX_OK
           && b->x.jansson == jansson;
}


/*
 * A chat completion request of "messages" turns after a system prompt,
 * user and assistant in turn, ~130 bytes each; the model is "llama".
 */

static u_char *
test_chat(size_t messages, size_t *len)
{
    u_char  *body, *p;
    size_t   i;

    body = malloc(256 + messages * 160);
    if (body == NULL) {
        printf("Bail out! no memory\n");
        exit(255);
    }

    p = body + sprintf((char *) body, "{\"model\":\"llama\",\"messages\":"
                       "[{\"role\":\"system\",\"content\":\"You are a "
                       "helpful assistant.\"}");

    for (i = 0; i < messages; i++) {
        p += sprintf((char *) p, ",{\"role\":\"%s\",\"content\":\"Turn %u: "
                     "a sentence about the number %u, long enough to fill a "
                     "few blocks of the canonical prompt.\"}",
                     i % 2 ? "assistant" : "user", (unsigned) i,
                     (unsigned) (i * 7));
    }

    p = ngx_cpymem(p, "],\"stream\":true}", 16);
    *len = p - body;

    return body;
}
