
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
#include "tap.h"


static void test_hash(void);
static void test_choice(void);
static void test_set(ngx_http_prefix_route_candidate_t *c, size_t match,
    double queued, ngx_uint_t inflight, uint64_t rank);
static void test_instances(ngx_http_prefix_route_candidate_t *c,
    ngx_uint_t others);




int
main(void)
{
    test_hash();
    test_choice();

    return test_done();
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
    ngx_uint_t inflight, uint64_t rank)
{
    ngx_memzero(c, sizeof(ngx_http_prefix_route_candidate_t));

    c->match = match;
    c->cached = 64 + match / 64;    /* a fleet in use: others' prompts too */
    c->queued = queued;
    c->inflight = inflight;
    c->rank = rank;
    c->weight = 1;
    c->usable = 1;
}


/*
 * Two servers with 3 requests of this nginx each, 1 of them answering;
 * the engine of the first (of the higher rank) reports "others" other
 * requests queued and 2 running.
 */

static void
test_instances(ngx_http_prefix_route_candidate_t *c, ngx_uint_t others)
{
    test_set(&c[0], 0, 0, 3, 2);
    test_set(&c[1], 0, 0, 3, 1);
    c[0].decoding = 1;
    c[1].decoding = 1;
    c[0].others = others;
    c[0].others_running = 2;
}


static void
test_choice(void)
{
    ngx_int_t                          k;
    ngx_uint_t                         i, per[4], most;
    ngx_http_prefix_route_choice_t     ttft, simple;
    ngx_http_prefix_route_candidate_t  c[4];

    ttft.policy = NGX_HTTP_PREFIX_ROUTE_POLICY_TTFT;
    ttft.affinity = 100;
    ttft.max_load = 150;
    ttft.slack = 64;
    ttft.instances = 1;

    simple = ttft;
    simple.policy = NGX_HTTP_PREFIX_ROUTE_POLICY_CACHE_AWARE;

    /* the estimate */

    test_set(&c[0], 0, 0, 0, 4);
    test_set(&c[1], 1024, 0, 0, 1);
    test_set(&c[2], 512, 0, 0, 3);
    test_set(&c[3], 0, 0, 0, 2);

    k = ngx_http_prefix_route_choose(c, 4, 2000, 0, &ttft);
    test_ok(k == 1 && c[1].cost == 976 && c[2].cost == 1488 + 512
            && c[0].cost == 2000 + 1024,
            "idle fleet: the longest match; cost = prefill left + the "
            "prefill redone");

    c[1].queued = 1500;
    k = ngx_http_prefix_route_choose(c, 4, 2000, 0, &ttft);
    test_ok(k == 2, "queued work beyond what the match saves (the wait "
            "and the work redone): the next best match");

    ttft.affinity = 0;
    c[1].queued = 900;
    k = ngx_http_prefix_route_choose(c, 4, 2000, 0, &ttft);
    test_ok(k == 2 && c[1].cost == 1876 && c[2].cost == 1488,
            "affinity=0: the lowest time to first token alone");
    ttft.affinity = 100;

    /* a cold prompt starts where it starts soonest */

    test_set(&c[0], 0, 6000, 1, 9);
    test_set(&c[1], 0, 500, 1, 1);
    test_set(&c[2], 0, 8000, 2, 5);
    k = ngx_http_prefix_route_choose(c, 3, 20000, 0, &ttft);
    test_ok(k == 1, "a cold prompt: the shortest queue, although it ranks "
            "lowest");

    c[0].queued = 2000;
    k = ngx_http_prefix_route_choose(c, 3, 20000, 0, &ttft);
    test_ok(k == 0, "estimates within 1/8 of the lowest are equal: the "
            "highest rank among them");

    c[2].queued = 3000;
    c[2].match = 64;
    k = ngx_http_prefix_route_choose(c, 3, 20000, 0, &ttft);
    test_ok(k == 0, "a short shared beginning (one block) does not pull: "
            "among equal estimates the highest rank");

    test_set(&c[0], 0, 0, 1, 9);
    test_set(&c[1], 8000, 13000, 1, 1);
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 1 && c[0].cost == 28000 && c[1].cost == 25000,
            "among equal estimates (28000 within 1/8 of 25000), the "
            "higher rank would redo 8000 bytes, more than that 1/8: the "
            "holder");

    c[1].queued = 18000;
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 1 && c[1].cost > c[0].cost,
            "the holder too when its estimate is the higher of the two");

    c[1].queued = 30000;
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 0, "an estimate beyond 1/8 of the lowest is no tie");

    /*
     * a later turn of a conversation this instance has not seen, behind a
     * preamble every server holds: the guess that another instance put it
     * where its first turn ranked highest
     */

    test_set(&c[0], 1000, 3000, 1, 9);
    test_set(&c[1], 1000, 0, 0, 1);
    test_set(&c[2], 1000, 0, 0, 5);
    k = ngx_http_prefix_route_choose(c, 3, 12000, 0, &ttft);
    test_ok(k == 2, "an unseen conversation without a guess: where it "
            "starts soonest, the top rank having a queue");

    k = ngx_http_prefix_route_choose(c, 3, 12000, 10000, &ttft);
    test_ok(k == 0 && c[0].cost == 3000 + 2000
            && c[2].cost == 11000 + 2 * 9000,
            "with the guess that the top rank holds it up to its last "
            "answer (its share of the index no more than the others', "
            "so the prefill redone counts twice): there, its queue "
            "shorter than the prefill saved");

    c[0].queued = 40000;
    k = ngx_http_prefix_route_choose(c, 3, 12000, 10000, &ttft);
    test_ok(k == 2, "the guess is an estimate: a queue longer than the "
            "prefill it saves still loses");

    c[0].queued = 3000;
    c[1].match = 11000;
    k = ngx_http_prefix_route_choose(c, 3, 12000, 10000, &ttft);
    test_ok(k == 1, "a server known to hold more than the guess: no guess");

    /*
     * a copy elsewhere also evicts as much there: the prefill redone
     * counts twice while a holder of the longest match has at most its
     * share of the index
     */

    test_set(&c[0], 8000, 20000, 1, 1);
    test_set(&c[1], 0, 0, 1, 2);
    c[0].cached = 100;
    c[1].cached = 100;
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 0 && c[0].cost == 32000 && c[1].cost == 20000 + 2 * 8000,
            "the holder with half the index: the prefill redone counts "
            "twice, and it keeps the prompt behind its queue");

    c[0].cached = 150;
    c[1].cached = 50;
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 1 && c[1].cost == 20000 + 8000,
            "the holder with 3/4 of the index: once, and the prompt goes "
            "where it starts sooner");

    c[0].weight = 3;
    c[0].queued = 87000;
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 0 && c[0].cost == 33000 && c[1].cost == 20000 + 2 * 8000,
            "shares follow the weights: 3/4 of the index is the share of "
            "a holder of weight 3 beside one of weight 1, so twice");

    c[0].cached = 190;
    c[1].cached = 10;
    k = ngx_http_prefix_route_choose(c, 2, 20000, 0, &ttft);
    test_ok(k == 1 && c[1].cost == 20000 + 8000,
            "and beyond 3/4, once");

    /*
     * a server far under its share of the index (restarted, new) is
     * counted to hold what two servers or more hold: it would otherwise
     * look slower for every prompt behind a shared system prompt
     */

    test_set(&c[0], 1024, 0, 1, 1);
    test_set(&c[1], 1024, 0, 1, 2);
    test_set(&c[2], 1024, 0, 1, 3);
    test_set(&c[3], 0, 0, 0, 4);
    c[3].cached = 0;
    k = ngx_http_prefix_route_choose(c, 4, 1600, 0, &ttft);
    test_ok(k == 3 && c[3].cost == c[2].cost && c[3].held == 1024,
            "a restarted server, with nothing in the index, and a prompt "
            "behind a system prompt the others hold: as if it held it, "
            "equal estimates, the highest rank");
    test_ok(c[3].match == 0, "its match is left as the index has it");

    c[3].cached = 54;
    k = ngx_http_prefix_route_choose(c, 4, 1600, 0, &ttft);
    test_ok(k == 2 && c[3].held == 0,
            "54 blocks, more than 2/3 of the mean (73.5, max_load=150): "
            "it holds its own");

    c[3].cached = 0;
    ttft.max_load = 0;
    k = ngx_http_prefix_route_choose(c, 4, 1600, 0, &ttft);
    test_ok(k == 2, "max_load=off: not");
    ttft.max_load = 150;

    c[0].match = 6000;
    k = ngx_http_prefix_route_choose(c, 4, 6500, 0, &ttft);
    test_ok(k == 0 && c[3].held == 1024,
            "a conversation one server holds: counted only up to what two "
            "hold, and it stays where it is");

    /* decoding requests slow the prefill */

    test_set(&c[0], 0, 8192, 0, 1);
    test_set(&c[1], 0, 8192, 4096, 2);
    c[1].decoding = 4096;
    k = ngx_http_prefix_route_choose(c, 2, 8192, 0, &ttft);
    test_ok(k == 0 && c[1].cost == 2 * c[0].cost,
            "4096 requests decoding halve the step budget left to "
            "prefill: twice the estimate");

    /* weight divides the time, not the work redone */

    test_set(&c[0], 0, 1000, 0, 1);
    test_set(&c[1], 0, 1500, 0, 2);
    c[1].weight = 2;
    k = ngx_http_prefix_route_choose(c, 2, 1000, 0, &ttft);
    test_ok(k == 1 && c[1].cost == 1250 && c[0].cost == 2000,
            "weight=2 halves the estimate");

    /* the load bound */

    test_set(&c[0], 4096, 0, 10, 1);
    test_set(&c[1], 0, 0, 2, 2);
    test_set(&c[2], 0, 0, 2, 3);
    test_set(&c[3], 0, 0, 2, 4);
    k = ngx_http_prefix_route_choose(c, 4, 4200, 0, &ttft);
    test_ok(k == 1 || k == 2 || k == 3,
            "a holder with 10 in flight of 16 (room: 1.5 x 17 / 4 "
            "rounded up, + 2 = 9) takes no more");

    c[0].inflight = 7;
    k = ngx_http_prefix_route_choose(c, 4, 4200, 0, &ttft);
    test_ok(k == 0, "with 7 of 13 it has room (1.5 x 14 / 4 -> 6, + 2)");

    ttft.max_load = 0;
    c[0].inflight = 100;
    k = ngx_http_prefix_route_choose(c, 4, 4200, 0, &ttft);
    test_ok(k == 0, "max_load=off: no bound");
    ttft.max_load = 150;

    /* other clients' requests, by the engines' gauges */

    test_set(&c[0], 4096, 0, 1, 2);
    test_set(&c[1], 0, 0, 0, 1);
    c[0].others = 10;
    k = ngx_http_prefix_route_choose(c, 2, 4200, 0, &ttft);
    test_ok(k == 1 && c[0].queued == 10 * (104 + 2048) / 2
            && c[0].inflight == 11,
            "10 of others' requests queued on the holder, none on the "
            "other: each as much work as its own queued one and this one "
            "(its uncached part there) on average; the other server");

    for (i = 0; i < 4; i++) {
        test_set(&c[i], i ? 0 : 4096, 0, i ? 2 : 10, i + 1);
    }

    for (i = 0; i < 4; i++) {
        c[i].others = 20;
        c[i].others_running = 5;
    }

    k = ngx_http_prefix_route_choose(c, 4, 4200, 0, &ttft);
    test_ok(k != 0 && c[0].inflight == 10 && c[3].inflight == 2
            && c[3].decoding == 0 && c[0].queued == 0,
            "others' requests alike on every server count only beyond the "
            "fewest: the holder with 10 of this nginx's 16 in flight still "
            "takes no more");

    test_set(&c[0], 0, 0, 0, 1);
    test_set(&c[1], 0, 0, 0, 2);
    test_set(&c[2], 0, 0, 0, 3);
    c[0].others = 4;
    c[1].others = 4;
    c[2].usable = 0;
    k = ngx_http_prefix_route_choose(c, 3, 4200, 0, &ttft);
    test_ok(k == 1 && c[0].others == 0 && c[0].cost == c[1].cost,
            "an unusable server's count is not the fewest");

    /*
     * instances=3: the two other nginx instances are expected to send
     * each server what this one does, 2 queued and 1 answering here
     */

    ttft.instances = 3;
    test_instances(c, 4);
    k = ngx_http_prefix_route_choose(c, 2, 4200, 0, &ttft);
    test_ok(k == 0 && c[0].others == 0 && c[0].others_running == 0
            && c[0].inflight == 3 && c[0].cost == c[1].cost,
            "instances=3: others' requests no more than twice this "
            "nginx's on a server are the other instances': they "
            "change no choice");

    ttft.instances = 1;
    test_instances(c, 4);
    k = ngx_http_prefix_route_choose(c, 2, 4200, 0, &ttft);
    test_ok(k == 1 && c[0].others == 4 && c[0].cost > c[1].cost,
            "the same gauges with instances=1 are other clients': "
            "the other server");

    ttft.instances = 3;
    test_instances(c, 6);
    k = ngx_http_prefix_route_choose(c, 2, 4200, 0, &ttft);
    test_ok(k == 1 && c[0].others == 2 && c[0].inflight == 5,
            "instances=3: 6 queued there, 2 beyond the other "
            "instances' 4, count: the other server");

    ttft.instances = 1;

    /*
     * 64 identical prompts at once, none finished: whatever the queue
     * does, no server ends with more than 1.5 x the mean + 2
     */

    for (i = 0; i < 4; i++) {
        test_set(&c[i], 0, 0, 0, i + 1);
        per[i] = 0;
    }

    for (i = 0; i < 64; i++) {
        k = ngx_http_prefix_route_choose(c, 4, 61440, 0, &ttft);

        if (k == NGX_ERROR) {
            break;
        }

        per[k]++;
        c[k].inflight++;
        c[k].queued += c[k].match ? 2048 : 61440 + 2048;
        c[k].match = 61440;
    }

    most = ngx_max(ngx_max(per[0], per[1]), ngx_max(per[2], per[3]));
    test_ok(i == 64 && most <= 26,
            "64 identical prompts: the busiest server takes at most "
            "1.5 x 16 + 2");

    /* policy=cache_aware */

    test_set(&c[0], 2048, 0, 20, 1);
    test_set(&c[1], 0, 0, 6, 2);
    test_set(&c[2], 1024, 0, 5, 3);
    c[0].outstanding = 90000;
    c[1].outstanding = 30000;
    c[2].outstanding = 40000;
    k = ngx_http_prefix_route_choose(c, 3, 4096, 0, &simple);
    test_ok(k == 0, "cache_aware: in-flight counts within 15: the "
            "longest match");

    c[0].inflight = 21;
    k = ngx_http_prefix_route_choose(c, 3, 4096, 0, &simple);
    test_ok(k == 1, "cache_aware: counts 16 apart: the least outstanding "
            "bytes");

    c[0].match = 0;
    c[0].inflight = 5;
    c[2].match = 0;
    k = ngx_http_prefix_route_choose(c, 3, 4096, 0, &simple);
    test_ok(k == 1, "cache_aware: no match anywhere: the least "
            "outstanding bytes");

    /* unusable servers */

    test_set(&c[0], 0, 0, 0, 1);
    test_set(&c[1], 4096, 0, 0, 9);
    test_set(&c[2], 0, 0, 0, 8);
    c[1].usable = 0;
    c[2].usable = 0;
    k = ngx_http_prefix_route_choose(c, 3, 500, 0, &ttft);
    test_ok(k == 0 && c[0].cost == 500,
            "unusable servers are skipped, their match too");

    c[0].usable = 0;
    k = ngx_http_prefix_route_choose(c, 3, 500, 0, &ttft);
    test_ok(k == NGX_ERROR, "no usable server: NGX_ERROR");

    k = ngx_http_prefix_route_choose(c, 3, 500, 0, &simple);
    test_ok(k == NGX_ERROR, "cache_aware: no usable server: NGX_ERROR");
}
