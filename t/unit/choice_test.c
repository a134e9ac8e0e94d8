
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Unit test of block hashing (src/ngx_http_prefix_route_hash.c) and of the
 * peer cost model (src/ngx_http_prefix_route_choice.c), TAP output.  The
 * expected choices are worked out by hand from the formula in
 * src/ngx_http_prefix_route_choice.h.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <stdio.h>
#include <xxhash.h>

#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_choice.h"


static void test_ok(ngx_uint_t ok, const char *name);
static void test_hash(void);
static void test_choice(void);
static void test_set(ngx_http_prefix_route_candidate_t *c, size_t match,
    double queued, double recent, ngx_uint_t sticky, uint64_t rank);


static ngx_uint_t  test_n, test_failed;


int
main(void)
{
    test_hash();
    test_choice();

    printf("1..%u\n", (unsigned) test_n);

    return test_failed ? 1 : 0;
}


static void
test_ok(ngx_uint_t ok, const char *name)
{
    test_n++;

    if (!ok) {
        test_failed++;
    }

    printf("%sok %u - %s\n", ok ? "" : "not ", (unsigned) test_n, name);
}


static void
test_hash(void)
{
    uint64_t    seed, s1, s2, a[8], b[8];
    ngx_uint_t  n, m;
    u_char      text[256];

    ngx_memset(text, 'x', sizeof(text));
    text[100] = 'y';

    seed = ngx_http_prefix_route_hash_seed((u_char *) "llama", 5, NULL, 0);

    test_ok(seed == XXH3_64bits("llama", 5),
            "seed without cache_salt is XXH3 of the model");

    s1 = ngx_http_prefix_route_hash_seed((u_char *) "llama", 5,
                                         (u_char *) "a", 1);
    s2 = ngx_http_prefix_route_hash_seed((u_char *) "llama", 5,
                                         (u_char *) "b", 1);

    test_ok(s1 != s2 && s1 != seed, "cache_salt changes the seed");

    s2 = ngx_http_prefix_route_hash_seed((u_char *) "llama", 5,
                                         (u_char *) "", 0);

    test_ok(s2 != seed, "an empty cache_salt differs from none");

    n = ngx_http_prefix_route_hash_blocks(text, 200, 64, seed, a, 8);

    test_ok(n == 3, "200 bytes in 64-byte blocks: 3 full blocks");

    test_ok(a[0] == XXH3_64bits_withSeed(text, 64, seed)
            && a[1] == XXH3_64bits_withSeed(text + 64, 64, a[0])
            && a[2] == XXH3_64bits_withSeed(text + 128, 64, a[1]),
            "each block is hashed seeded with the previous block's hash");

    m = ngx_http_prefix_route_hash_blocks(text, 100, 64, seed, b, 8);

    test_ok(m == 1 && b[0] == a[0],
            "a prefix of a prompt has the same leading block hashes");

    text[10] = 'z';
    m = ngx_http_prefix_route_hash_blocks(text, 200, 64, seed, b, 8);

    test_ok(m == 3 && b[0] != a[0] && b[1] != a[1] && b[2] != a[2],
            "a change in block 0 changes every later block hash");

    text[10] = 'x';
    text[150] = 'z';
    m = ngx_http_prefix_route_hash_blocks(text, 200, 64, seed, b, 8);

    test_ok(m == 3 && b[0] == a[0] && b[1] == a[1] && b[2] != a[2],
            "a change in block 2 keeps blocks 0 and 1");

    m = ngx_http_prefix_route_hash_blocks(text, 200, 64, seed, b, 2);

    test_ok(m == 2, "at most max hashes are written");

    m = ngx_http_prefix_route_hash_blocks(text, 200, 64, s1, b, 8);

    test_ok(m == 3 && b[0] != a[0], "another seed gives another chain");
}


static void
test_set(ngx_http_prefix_route_candidate_t *c, size_t match, double queued,
    double recent, ngx_uint_t sticky, uint64_t rank)
{
    c->match = match;
    c->queued = queued;
    c->recent = recent;
    c->sticky = sticky;
    c->rank = rank;
    c->weight = 1;
    c->usable = 1;
    c->cost = 0;
}


static void
test_choice(void)
{
    double                             d;
    ngx_msec_t                         now, then;
    ngx_int_t                          k;
    ngx_http_prefix_route_candidate_t  c[4];

    /* an idle fleet: the longest match wins */

    test_set(&c[0], 0, 0, 0, 0, 4);
    test_set(&c[1], 1024, 0, 0, 0, 1);
    test_set(&c[2], 512, 0, 0, 0, 3);
    test_set(&c[3], 0, 0, 0, 0, 2);

    k = ngx_http_prefix_route_choose(c, 4, 2000, 100, 64);
    test_ok(k == 1 && c[1].cost == 976 && c[0].cost == 2000,
            "idle fleet: the peer with the longest match, cost 2000 - 1024");

    /* a queue longer than the match is worth moves the request */

    c[1].queued = 1100;
    k = ngx_http_prefix_route_choose(c, 4, 2000, 100, 64);
    test_ok(k == 2, "queued work beyond the match's worth: next best match");

    c[2].queued = 3000;
    k = ngx_http_prefix_route_choose(c, 4, 2000, 100, 64);
    test_ok(k == 1, "the longest match 76 bytes dearer than an idle peer, "
            "within half the mean load (512): it stays");

    c[1].queued = 5000;
    k = ngx_http_prefix_route_choose(c, 4, 2000, 100, 64);
    test_ok(k == 0, "every holder's cost beyond the lowest plus half the "
            "mean load: equal idle peers, highest rank wins");

    /* affinity 0 ignores the cache */

    test_set(&c[0], 0, 10, 0, 0, 1);
    test_set(&c[1], 1024, 600, 0, 0, 2);
    k = ngx_http_prefix_route_choose(c, 2, 2000, 0, 0);
    test_ok(k == 0, "affinity=0: least queued work");

    k = ngx_http_prefix_route_choose(c, 2, 2000, 100, 0);
    test_ok(k == 1, "affinity=1: the holder despite 590 more queued bytes");

    /* weight divides the cost */

    test_set(&c[0], 0, 1000, 0, 0, 1);
    test_set(&c[1], 0, 1500, 0, 0, 2);
    c[1].weight = 2;
    k = ngx_http_prefix_route_choose(c, 2, 1000, 100, 0);
    test_ok(k == 1 && c[1].cost == 1250 && c[0].cost == 2000,
            "weight=2 halves the cost");

    /* recent work spreads new prompts: bounded loads */

    test_set(&c[0], 0, 0, 900, 0, 4);
    test_set(&c[1], 0, 0, 0, 0, 1);
    test_set(&c[2], 0, 0, 300, 0, 3);
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 64);
    test_ok(k == 1, "a miss: the least loaded when the others are beyond "
            "half the mean load (200) of it");

    c[2].recent = 150;
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 64);
    test_ok(k == 2, "a miss: the highest rank among the peers within half "
            "the mean load (175) of the least loaded");

    /* recent work that built the match is not held against the holder */

    test_set(&c[0], 2048, 0, 2048 + 300, 0, 1);
    test_set(&c[1], 0, 0, 0, 0, 2);
    k = ngx_http_prefix_route_choose(c, 2, 2400, 100, 64);
    test_ok(k == 0 && c[0].cost == 300 + 352,
            "shared prefix: recent work up to the match is free");

    c[0].recent = 2048 + 2500;
    k = ngx_http_prefix_route_choose(c, 2, 2400, 100, 64);
    test_ok(k == 0 && c[0].cost == 2500 + 352,
            "shared prefix: the holder 452 bytes dearer than the idle peer, "
            "within half the mean load (625): it stays");

    c[0].recent = 2048 * 4;
    k = ngx_http_prefix_route_choose(c, 2, 2400, 100, 64);
    test_ok(k == 1, "shared prefix: much more recent work spills it");

    /* a conversation is not moved by recent work */

    c[0].sticky = 1;
    k = ngx_http_prefix_route_choose(c, 2, 2400, 100, 64);
    test_ok(k == 0 && c[0].cost == 352,
            "conversation: recent work is not charged to its holder");

    c[0].queued = 2100;
    k = ngx_http_prefix_route_choose(c, 2, 2400, 100, 64);
    test_ok(k == 1, "conversation: queued work beyond its match moves it");

    /* ties */

    test_set(&c[0], 0, 0, 0, 0, 7);
    test_set(&c[1], 0, 0, 50, 0, 9);
    test_set(&c[2], 0, 0, 0, 0, 8);
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 64);
    test_ok(k == 1, "costs within the slack tie: the highest rank wins");

    c[1].recent = 200;
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 10);
    test_ok(k == 2, "beyond a quarter of the prompt (more than the mean "
            "load) the cost decides");

    c[1].recent = 100;
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 10);
    test_ok(k == 1, "a prompt nobody holds as a conversation: costs within "
            "a quarter of the prompt tie, the highest rank wins");

    test_set(&c[0], 320, 0, 0, 1, 7);
    test_set(&c[1], 256, 0, 100, 0, 9);
    test_set(&c[2], 0, 0, 0, 0, 8);
    c[0].recent = 0;
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 10);
    test_ok(k == 0, "a conversation its holder has: only the block slack, "
            "cost decides");

    /* unusable peers */

    c[2].usable = 0;
    c[1].usable = 0;
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 64);
    test_ok(k == 0, "unusable peers are skipped");

    c[0].usable = 0;
    k = ngx_http_prefix_route_choose(c, 3, 500, 100, 64);
    test_ok(k == NGX_ERROR, "no usable peer: NGX_ERROR");

    /* decay */

    d = ngx_http_prefix_route_decay(1000, 5000, 5000);
    test_ok(d > 499.9 && d < 500.1, "one half-life halves recent work");

    d = ngx_http_prefix_route_decay(1000, 0, 5000);
    test_ok(d == 1000, "no time, no decay");

    d = ngx_http_prefix_route_decay(1000, 10, 0);
    test_ok(d == 0, "decay=0 forgets at once");

    /*
     * Work stamped by another worker whose cached clock is 1 ms ahead:
     * the elapsed time is negative, and the work is not lost (issue F4:
     * unsigned arithmetic wrapped and decayed it to 0).
     */

    then = 1000001;
    now = 1000000;
    d = ngx_http_prefix_route_decay(1000, (ngx_msec_int_t) (now - then), 5000);
    test_ok(d == 1000, "a time 1 ms ahead (another worker's) keeps the work");
}
