
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Unit test of the prefix index (src/ngx_http_prefix_route_index.c) and
 * of load accounting (src/ngx_http_prefix_route_load.c) on nginx's own
 * slab allocator, red-black tree and shared mutex, in a zone mapped here
 * as nginx maps one; TAP output.  After each step the index's own
 * consistency check must find nothing.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <stdio.h>
#include <sys/wait.h>

#include "ngx_http_prefix_route_index.h"
#include "ngx_http_prefix_route_load.h"
#include "test_zone.h"
#include "tap.h"


static void test_chain(uint64_t *hash, ngx_uint_t tag, ngx_uint_t n);
static ngx_uint_t test_match(ngx_uint_t tag, ngx_uint_t n, ngx_uint_t peer);
static ngx_uint_t test_record(ngx_uint_t tag, ngx_uint_t n, ngx_uint_t peer,
    ngx_uint_t capacity);
static ngx_uint_t test_record_hash(uint64_t *hash, ngx_uint_t n,
    ngx_uint_t peer, ngx_uint_t capacity);
static ngx_uint_t test_record_forked(ngx_uint_t tag, ngx_uint_t n,
    ngx_uint_t fork_at, ngx_uint_t other, ngx_uint_t peer);
static ngx_int_t test_check(void);
static void test_pressure(void);
static void test_pinning(void);
static void test_lru(void);
static void test_slru(void);
static void test_tenant_share(void);
static void test_forget(void);
static void test_trim(void);
static void test_learn(void);
static void test_evicted(ngx_uint_t tag, ngx_uint_t peer);
static void test_drained(void);
static void test_dropping(void);
static ngx_uint_t test_full(void);
static int test_killed_drop(ngx_uint_t k, void (*change)(void));
static void test_drop_all(void);
static void test_record_next(void);
static void test_trim_stamp(void);
static ngx_uint_t test_oldest(ngx_uint_t t);
static void test_capacity_fill(void);
static void test_shared_prefix(void);
static void test_load(void);
static void test_killed(void);
static void test_killed_loop(void);
static void test_killed_stale(void);
static void test_killed_chain(void);
static ngx_http_prefix_route_link_t *test_link(uint32_t off);
static void test_rotate(ngx_http_prefix_route_link_t *head);
static void test_killed_fill(void);
static ngx_uint_t test_killed_before(ngx_uint_t c, ngx_uint_t k);
static void test_killed_change(ngx_uint_t change);
static ngx_int_t test_killed_at(ngx_uint_t c, ngx_uint_t k);
static ngx_uint_t test_killed_mended(void);
static ngx_uint_t test_mended_trim(ngx_http_prefix_route_peer_t *peer);
static void test_killed_pinned(void);
static void test_sliced(void);
static void test_reuse(void);
static void test_lingering(void);
static void test_spares(void);
static ngx_uint_t test_running(uint32_t from, uint32_t gen0, uint32_t gen1);
static ngx_int_t test_proc(ngx_pid_t pid);
static void test_loose(void);
static void test_named_killed(void);
static ngx_uint_t test_named_sound(void);
static ngx_http_prefix_route_peer_t *test_named(char *name, uint32_t gen,
    uint32_t oldest);
static ngx_uint_t test_sliced_mend(ngx_int_t steps);


static uint32_t                        test_clock;  /* ms, a record each */
static uint64_t                        test_tenant; /* of test_record() */
static ngx_uint_t                      test_killed_used; /* entries and
                                                   holders of the fill */
static ngx_str_t                       test_added = ngx_string("added");
static ngx_uint_t                      test_next;   /* test_record_next()'s
                                                       prompt */
static uint32_t                        test_stamp;  /* test_trim_stamp()'s,
                                                       ms */


int
main(void)
{
    test_zone_process(NGX_LOG_WARN);

    test_pressure();
    test_pinning();
    test_lru();
    test_slru();
    test_tenant_share();
    test_forget();
    test_trim();
    test_learn();
    test_drained();
    test_dropping();
    test_shared_prefix();
    test_load();
    test_killed();
    test_killed_pinned();
    test_sliced();
    test_reuse();
    test_lingering();
    test_spares();
    test_loose();
    test_named_killed();

    return test_done();
}


/* the block hashes of prompt "tag": distinct from the first block on */

static void
test_chain(uint64_t *hash, ngx_uint_t tag, ngx_uint_t n)
{
    ngx_uint_t  i;

    for (i = 0; i < n; i++) {
        hash[i] = (uint64_t) tag * 1000003 + i * 7919 + 1;
    }
}


/* blocks of prompt "tag" (n blocks) the peer at "peer" is found to hold */

static ngx_uint_t
test_match(ngx_uint_t tag, ngx_uint_t n, ngx_uint_t peer)
{
    uint64_t    hash[TEST_MAX_BLOCKS];
    ngx_uint_t  match[64];

    test_chain(hash, tag, n);

    (void) ngx_http_prefix_route_index_match(&idx, hash, n, pos, npeers,
                                             npeers, 4 * npeers + 64,
                                             match);
    return match[peer];
}


static ngx_uint_t
test_record(ngx_uint_t tag, ngx_uint_t n, ngx_uint_t peer,
    ngx_uint_t capacity)
{
    uint64_t  hash[TEST_MAX_BLOCKS];

    test_chain(hash, tag, n);

    return test_record_hash(hash, n, peer, capacity);
}


/* a record of the n block hashes "hash" for the peer at "peer" */

static ngx_uint_t
test_record_hash(uint64_t *hash, ngx_uint_t n, ngx_uint_t peer,
    ngx_uint_t capacity)
{
    ngx_uint_t  held, recorded, match[64];

    (void) ngx_http_prefix_route_index_match(&idx, hash, n, pos, npeers,
                                             npeers, 4 * npeers + 64, match);
    held = match[peer];

    /* the record, and the room the engine made when it took the prompt */

    recorded = ngx_http_prefix_route_index_record(&idx, hash, n, &held,
                                                  peers[peer], test_tenant,
                                                  ++test_clock);
    ngx_http_prefix_route_index_room(&idx, peers[peer], capacity, n,
                                     recorded);

    return recorded;
}


/*
 * test_record() of prompt "tag" of n blocks, from block "fork_at" on of
 * prompt "other" if not 0: prompts that share a beginning
 */

static ngx_uint_t
test_record_forked(ngx_uint_t tag, ngx_uint_t n, ngx_uint_t fork_at,
    ngx_uint_t other, ngx_uint_t peer)
{
    uint64_t    hash[TEST_MAX_BLOCKS], h2[TEST_MAX_BLOCKS];
    ngx_uint_t  i;

    test_chain(hash, tag, n);

    if (other) {
        test_chain(h2, other, n);

        for (i = fork_at; i < n; i++) {
            hash[i] = h2[i];
        }
    }

    return test_record_hash(hash, n, peer, 0);
}


static ngx_int_t
test_check(void)
{
    ngx_int_t    rc;
    ngx_pool_t  *pool;

    /* a pool of its own: thousands of checks would grow the process */

    pool = ngx_create_pool(16384, &test_log);
    if (pool == NULL) {
        exit(1);
    }

    rc = ngx_http_prefix_route_index_check(&idx, pool, &test_log);
    ngx_destroy_pool(pool);

    return rc;
}


/* a small zone flooded with distinct prompts keeps the newest, whole */

static void
test_pressure(void)
{
    ngx_uint_t  i, bad, held;

    test_zone(64 * 1024, 3);

    bad = 0;

    for (i = 1; i <= 2000; i++) {
        (void) test_record(i, 20, i % 3, 0);

        if (i % 100 == 0 && test_check() != 0) {
            bad++;
        }
    }

    test_ok(bad == 0, "pressure: the index is consistent throughout");
    test_ok(idx.sh->evictions > 0, "pressure: the zone evicted");

    held = test_match(2000, 20, 2000 % 3);
    test_ok(held == 20, "pressure: the newest prompt is held whole");

    held = test_match(1, 20, 1);
    test_ok(held == 0, "pressure: the first prompt is forgotten");

    /* every entry has a holder: a (block, peer) pair costs 64 bytes at most */

    test_ok(ngx_http_prefix_route_index_bytes(&idx) <= 64 * idx.sh->holders,
            "pressure: the index takes at most 64 bytes a pair");
}


/*
 * A prompt longer than the zone can hold, recorded again and again among
 * others: the record never frees the chain it works on (issue F1), so it
 * is recorded in part and the index stays sound.
 */

static void
test_pinning(void)
{
    ngx_uint_t  i, n, again;

    test_zone(64 * 1024, 2);

    n = test_record(7, 1000, 0, 0);
    test_ok(n > 0 && n < 1000, "pinning: a prompt larger than the zone is "
            "recorded in part");
    test_ok(test_check() == 0, "pinning: consistent after it");

    for (i = 0; i < 50; i++) {
        (void) test_record(100 + i, 30, 1, 0);
    }

    again = test_record(7, 1000, 0, 0);
    test_ok(again > 0, "pinning: recorded again after the zone filled");
    test_ok(test_check() == 0, "pinning: consistent after it");

    again = test_record(7, 1000, 1, 0);
    test_ok(test_check() == 0, "pinning: consistent after another peer");
    test_ok(test_match(7, 1000, 1) == again,
            "pinning: the match is what was recorded");
}


/* the least recently used prompt goes first; a peer's capacity holds */

static void
test_lru(void)
{
    uint32_t    prev;
    ngx_uint_t  i;

    test_zone(1024 * 1024, 2);

    (void) test_record(1, 10, 0, 0);
    (void) test_record(2, 10, 0, 0);
    (void) test_record(1, 10, 0, 0);

    /* capacity 25 blocks: a third prompt pushes out the older, prompt 2 */
    (void) test_record(3, 10, 0, 25);

    test_ok(test_match(1, 10, 0) == 10, "lru: the prompt used again stays");
    test_ok(test_match(3, 10, 0) == 10, "lru: the newest prompt stays");
    test_ok(test_match(2, 10, 0) == 5,
            "lru: the older prompt loses its deepest blocks first");
    test_ok(peers[0]->blocks == 25, "lru: the peer keeps its capacity");
    test_ok(test_check() == 0, "lru: consistent");

    for (i = 0; i < 10; i++) {
        (void) test_record(1, 10, 1, 0);
    }

    test_ok(test_match(1, 10, 1) == 10 && peers[1]->blocks == 10,
            "lru: recording a held prompt again adds nothing");

    /* the check sees a miscount */

    peers[1]->blocks++;
    test_ok(test_check() > 0, "check: a peer's miscounted blocks are found");
    peers[1]->blocks--;

    /* and a link back that is not the link forward's */

    prev = peers[1]->lru.prev;
    peers[1]->lru.prev = peers[1]->lru.next;
    test_ok(test_check() > 0, "check: a torn link is found");
    peers[1]->lru.prev = prev;
    test_ok(test_check() == 0, "check: consistent again");

    /* a parent less recently used than its child in its server's list */

    test_rotate(&peers[1]->lru);
    test_ok(test_check() > 0,
            "check: a server's list with a parent behind its child is found");

    for (i = 1; i < peers[1]->blocks; i++) {
        test_rotate(&peers[1]->lru);
    }

    test_ok(test_check() == 0, "check: consistent once more");
}


/* moves the first of a list of the zone to its end */

static void
test_rotate(ngx_http_prefix_route_link_t *head)
{
    uint32_t                       off, last;
    ngx_http_prefix_route_link_t  *first;

    off = head->next;
    first = test_link(off);

    head->next = first->next;
    test_link(first->next)->prev = first->prev;

    last = head->prev;
    first->next = test_link(last)->next;
    first->prev = last;
    test_link(last)->next = off;
    head->prev = off;
}


/*
 * Segmented LRU in the zone: a prompt sent twice to a peer is protected,
 * and survives a flood of one-off prompts that fills the zone's memory;
 * protected holders age out beyond 4/5 of the zone's.  A peer's capacity
 * stays one LRU, the engine's own order.
 */

static void
test_slru(void)
{
    uint32_t    now;
    ngx_uint_t  i, bad;

    test_zone(1024 * 1024, 2);

    (void) test_record(1, 20, 0, 0);
    test_ok(idx.sh->hot_holders == 0,
            "slru: a prompt sent once is on probation");

    (void) test_record(1, 20, 0, 0);
    test_ok(idx.sh->hot_holders == 20, "slru: sent again, it is protected");

    /* a longer prompt on top: the part held before is protected */
    (void) test_record(1, 30, 0, 0);
    test_ok(idx.sh->hot_holders == 20 && peers[0]->blocks == 30,
            "slru: only the blocks held before are protected");
    test_ok(test_check() == 0, "slru: consistent");

    /* a peer's capacity forgets in the engine's order, protected or not */

    for (i = 0; i < 20; i++) {
        (void) test_record(1000 + i, 20, 0, 200);
    }

    test_ok(test_match(1, 30, 0) == 0 && test_match(1019, 20, 0) == 20
            && peers[0]->blocks == 200 && idx.sh->hot_holders == 0,
            "slru: a peer's capacity forgets its least recently used, "
            "protected ones too");
    test_ok(test_check() == 0, "slru: consistent after the capacity");

    /* a restart forgets everything */

    (void) test_record(2, 10, 1, 0);
    (void) test_record(2, 10, 1, 0);
    now = test_clock + 1;
    (void) ngx_http_prefix_route_index_trim(&idx, peers[1], 0, &now);
    test_ok(peers[1]->blocks == 0 && idx.sh->hot_holders == 0,
            "slru: trimming by time drops the protected blocks too");
    test_ok(test_check() == 0, "slru: consistent after the trim");

    /* the zone's memory: a small zone flooded keeps the protected prefix */

    test_zone(64 * 1024, 3);

    (void) test_record(1, 20, 0, 0);
    (void) test_record(1, 20, 0, 0);

    bad = 0;

    for (i = 1; i <= 2000; i++) {
        (void) test_record(10 + i, 20, i % 3, 0);

        if (i % 100 == 0 && test_check() != 0) {
            bad++;
        }
    }

    test_ok(idx.sh->evictions > 1000 && bad == 0,
            "slru: the zone evicted, consistent throughout");
    test_ok(test_match(1, 20, 0) == 20,
            "slru: the protected prefix survives the zone's evictions");
    test_ok(test_match(11, 20, 1) == 0 && test_match(2010, 20, 2) == 20,
            "slru: the flood keeps its newest, forgets its oldest");

    /* protected beyond 4/5 of the zone's holders age out */

    for (i = 1; i <= 300; i++) {
        (void) test_record(5000 + i, 20, i % 3, 0);
        (void) test_record(5000 + i, 20, i % 3, 0);
    }

    test_ok(idx.sh->hot_holders <= idx.sh->holders / 5 * 4 + 20
            && test_match(1, 20, 0) == 0 && test_match(5300, 20, 0) == 20,
            "slru: protected holders stay within 4/5 of the zone's, the "
            "least recently used going first");
    test_ok(test_check() == 0, "slru: consistent after the protected share");

    /* the check sees miscounted protected holders */

    idx.sh->hot_holders++;
    test_ok(test_check() > 0, "check: miscounted protected holders are found");
    idx.sh->hot_holders--;
}


/*
 * tenant_share: a tenant that repeats its flood of prompts cannot take the
 * protected holders of another; without a share it does
 */

static void
test_tenant_share(void)
{
    ngx_uint_t  i, k, bad, kept[2], hot[2], limit[2];

    /*
     * some 500 holders: in a zone of a few prompts (64k held 190 once
     * the zone's header grew), one record's own holders fill probation
     * and it evicts protected ones whatever the share
     */

    for (k = 0; k < 2; k++) {
        test_zone(80 * 1024, 3);
        idx.share = k ? 50 : 0;

        test_tenant = 0x7000000000000007ULL;
        (void) test_record(1, 20, 0, 0);
        (void) test_record(1, 20, 0, 0);

        test_tenant = 0x9000000000000009ULL;
        bad = 0;

        for (i = 1; i <= 300; i++) {
            (void) test_record(5000 + i, 20, i % 3, 0);
            (void) test_record(5000 + i, 20, i % 3, 0);

            if (i % 50 == 0 && test_check() != 0) {
                bad++;
            }
        }

        kept[k] = test_match(1, 20, 0);
        hot[k] = idx.sh->hot_holders - (kept[k] ? 20 : 0);
        limit[k] = ngx_max(idx.sh->holders, idx.sh->room) / 5 * 4 * 50 / 100
                   + 20;

        test_ok(idx.sh->evictions > 0 && bad == 0,
                k ? "tenant_share: the zone evicted, consistent throughout"
                  : "tenant_share off: the zone evicted, consistent "
                    "throughout");
    }

    test_ok(kept[0] == 0,
            "tenant_share off: a tenant repeating its flood takes the "
            "protected holders of another");
    test_ok(kept[1] == 20,
            "tenant_share=50%: the other tenant's protected prefix survives "
            "the same flood");
    test_ok(hot[1] <= limit[1] && hot[0] > limit[0] && idx.sh->held_back > 0,
            "tenant_share=50%: the flood's protected holders stay within its "
            "share of the zone's, plus one prompt");
    test_ok(test_match(5300, 20, 0) == 20,
            "tenant_share=50%: the flood's newest prompt is still indexed");
    test_ok(ngx_http_prefix_route_index_tenants(&idx) == 2,
            "tenant_share: two tenants counted");

    /* a tenant whose entries are all gone frees its slot */

    test_zone(64 * 1024, 3);
    idx.share = 50;

    for (i = 1; i <= 400; i++) {
        test_tenant = 0x1000000000000000ULL + i;
        (void) test_record(100 + i, 20, i % 3, 0);
    }

    test_ok(idx.sh->tenants[NGX_HTTP_PREFIX_ROUTE_TENANTS - 1].entries == 0
            && idx.sh->evictions > 0 && test_check() == 0,
            "tenants: 400 one after the other, those evicted give their "
            "slots back, consistent");

    /* more tenants than slots: the rest count together, consistently */

    test_zone(4 * 1024 * 1024, 3);
    idx.share = 50;

    for (i = 1; i <= 400; i++) {
        test_tenant = 0x2000000000000000ULL + i;
        (void) test_record(100 + i, 4, i % 3, 0);
        (void) test_record(100 + i, 4, i % 3, 0);
    }

    test_ok(ngx_http_prefix_route_index_tenants(&idx) > 200
            && idx.sh->tenants[NGX_HTTP_PREFIX_ROUTE_TENANTS - 1].entries > 0
            && test_check() == 0,
            "tenants: beyond the slots they share the overflow slot, "
            "consistent");

    /* the check sees a miscounted tenant */

    idx.sh->tenants[0].entries++;
    test_ok(test_check() > 0, "check: a miscounted tenant is found");
    idx.sh->tenants[0].entries--;

    test_tenant = 0;
}


/*
 * A failed attempt takes back what it added, not what came later; one not
 * connected takes back all that the server was believed to hold of it.
 */

static void
test_forget(void)
{
    uint64_t    hash[TEST_MAX_BLOCKS], other[TEST_MAX_BLOCKS];
    ngx_uint_t  n, m, i;

    test_zone(1024 * 1024, 2);

    /* prompt 5's first 10 blocks held, then its 20 sent and failed */

    (void) test_record(5, 10, 0, 0);
    n = test_record(5, 20, 0, 0);
    test_chain(hash, 5, 20);
    ngx_http_prefix_route_index_forget(&idx, hash, 10, n, peers[0],
                                       test_clock, 1);

    test_ok(test_match(5, 20, 0) == 10, "forget: back to the 10 blocks held "
            "before");
    test_ok(test_check() == 0, "forget: consistent");

    /* blocks 10-19 sent, then 10-29 by a later request, then the first fails */

    n = test_record(5, 20, 0, 0);
    m = test_record(5, 30, 0, 0);
    ngx_http_prefix_route_index_forget(&idx, hash, 10, n, peers[0],
                                       test_clock - 1, 1);

    test_ok(m == 30 && test_match(5, 30, 0) == 30,
            "forget: a longer prefix recorded since is kept whole");
    test_ok(test_check() == 0, "forget: consistent");

    /* the later request could not connect: all of the prompt goes */

    test_chain(hash, 5, 30);
    ngx_http_prefix_route_index_forget(&idx, hash, 30, 30, peers[0],
                                       test_clock, 0);

    test_ok(test_match(5, 30, 0) == 0 && idx.sh->holders == 0
            && idx.sh->entries == 0, "forget: not connected, all of it, and "
            "nothing is left");
    test_ok(test_check() == 0, "forget: consistent");

    /*
     * the same 10 blocks sent, then sent again by a later request (which
     * found them held and may have been answered), then the first fails
     */

    n = test_record(6, 10, 0, 0);
    m = test_record(6, 10, 0, 0);
    test_chain(hash, 6, 10);
    ngx_http_prefix_route_index_forget(&idx, hash, 0, n, peers[0],
                                       test_clock - 1, 1);

    test_ok(n == 10 && m == 10 && test_match(6, 10, 0) == 10,
            "forget: blocks sent again since are kept");

    ngx_http_prefix_route_index_forget(&idx, hash, 10, m, peers[0],
                                       test_clock, 0);

    test_ok(test_match(6, 10, 0) == 0 && idx.sh->holders == 0,
            "forget: the later request not connected takes them back");
    test_ok(test_check() == 0, "forget: consistent");

    /*
     * sent again in the same ms, not after: concurrent requests that all
     * fail with a 5xx take it all back (helper-66), as before 2026-12-07
     */

    n = test_record(10, 10, 0, 0);
    test_clock--;
    m = test_record(10, 10, 0, 0);
    test_chain(hash, 10, 10);
    ngx_http_prefix_route_index_forget(&idx, hash, 0, n, peers[0],
                                       test_clock, 1);

    test_ok(m == 10 && test_match(10, 10, 0) == 0 && idx.sh->holders == 0,
            "forget: blocks sent again in the same ms are taken back");
    test_ok(test_check() == 0, "forget: consistent");

    /*
     * the same prompt sent to server 1 since: the blocks' stamps moved on,
     * but server 0 was sent nothing more (helper-65: they stayed there)
     */

    n = test_record(7, 10, 0, 0);
    m = test_record(7, 10, 1, 0);
    test_chain(hash, 7, 10);
    ngx_http_prefix_route_index_forget(&idx, hash, 0, n, peers[0],
                                       test_clock - 1, 1);

    test_ok(m == 10 && test_match(7, 10, 0) == 0 && test_match(7, 10, 1) == 10
            && peers[0]->blocks == 0,
            "forget: what another server was sent since keeps nothing here");
    test_ok(test_check() == 0, "forget: consistent");

    /*
     * two prompts that share 10 blocks sent to server 0, which could not
     * be connected to: the first's failure leaves the shared blocks to the
     * second's, which takes them back although it found them held
     */

    test_chain(hash, 8, 12);
    test_chain(other, 9, 13);

    for (i = 0; i < 10; i++) {
        other[i] = hash[i];
    }

    n = test_record_hash(hash, 12, 0, 0);
    m = test_record_hash(other, 13, 0, 0);
    ngx_http_prefix_route_index_forget(&idx, hash, 0, n, peers[0],
                                       test_clock - 1, 0);

    test_ok(peers[0]->blocks == 13, "forget: not connected, the shared "
            "blocks stay while the other prompt holds them");

    ngx_http_prefix_route_index_forget(&idx, other, 10, m, peers[0],
                                       test_clock, 0);

    test_ok(peers[0]->blocks == 0, "forget: not connected, the other "
            "prompt's failure takes back the shared blocks too");
    test_ok(test_check() == 0, "forget: consistent");
}


/*
 * The engine's feedback: a prefix it evicted was recorded at some time;
 * what the peer holds that was recorded before goes, and nothing newer.
 */

static void
test_trim(void)
{
    uint32_t    stamp, older;
    uint64_t    hash[TEST_MAX_BLOCKS];
    ngx_uint_t  n;

    test_zone(1024 * 1024, 2);

    (void) test_record(1, 10, 0, 0);
    (void) test_record(2, 10, 0, 0);
    (void) test_record(2, 10, 1, 0);
    (void) test_record(3, 10, 0, 0);

    test_chain(hash, 2, 10);
    test_ok(ngx_http_prefix_route_index_stamp(&idx, hash[9], &stamp) == 1
            && ngx_http_prefix_route_index_stamp(&idx, hash[0], &older) == 1
            && stamp == older,
            "stamp: a prompt's blocks are stamped with its last record");

    test_chain(hash, 1, 10);
    test_ok(ngx_http_prefix_route_index_stamp(&idx, hash[9], &older) == 1
            && (int32_t) (older - stamp) < 0,
            "stamp: an earlier prompt has an earlier stamp");

    test_chain(hash, 9, 10);
    test_ok(ngx_http_prefix_route_index_stamp(&idx, hash[0], &older) == 0,
            "stamp: none for a block the index does not hold");

    /* peer 0 evicted prompt 2: prompt 1, recorded before it, goes too */

    n = ngx_http_prefix_route_index_trim(&idx, peers[0], 0, &stamp);

    test_ok(n == 10 && test_match(1, 10, 0) == 0
            && test_match(2, 10, 0) == 10 && test_match(3, 10, 0) == 10,
            "trim: the prefixes recorded before the evicted one go, it and "
            "the newer ones stay");
    test_ok(test_match(2, 10, 1) == 10 && peers[1]->blocks == 10,
            "trim: another peer's holders stay");
    test_ok(test_check() == 0, "trim: consistent");

    n = ngx_http_prefix_route_index_trim(&idx, peers[0], 15, NULL);

    test_ok(n == 5 && peers[0]->blocks == 15 && test_match(3, 10, 0) == 10
            && test_match(2, 10, 0) == 5,
            "trim: down to a capacity, the least recently used first");
    test_ok(test_check() == 0, "trim: consistent");

    /* a restart: all of them, stamps or not (one 25 days old looks new) */

    test_chain(hash, 3, 10);
    (void) ngx_http_prefix_route_index_stamp(&idx, hash[0], &older);
    stamp = older - 2000000000;
    test_ok(ngx_http_prefix_route_index_trim(&idx, peers[0], 0, &stamp) == 0,
            "trim: a stamp 23 days back drops nothing newer");

    n = ngx_http_prefix_route_index_trim(&idx, peers[0], 0, NULL);

    test_ok(n == 15 && peers[0]->blocks == 0 && peers[1]->blocks == 10,
            "trim: with neither limit, all of the peer's holders go");
    test_ok(test_check() == 0, "trim: consistent");
}


/*
 * An eviction's trim learns the capacity of the server's engine: at most
 * what the index has left of it, each eviction at most halving the
 * figure (the first, what the index held); a trim in slices learns when
 * its last slice is done.
 */

static void
test_learn(void)
{
    ngx_uint_t  t;

    test_zone(1024 * 1024, 2);

    for (t = 1; t <= 8; t++) {
        (void) test_record(t, 10, 0, 0);
    }

    test_evicted(8, 0);

    test_ok(peers[0]->blocks == 10 && peers[0]->fb.capacity == 40,
            "learn: one eviction at most halves what the index held");

    (void) test_record(9, 10, 0, 0);
    test_evicted(9, 0);

    test_ok(peers[0]->blocks == 10 && peers[0]->fb.capacity == 20,
            "learn: the next at most halves the figure");

    (void) test_record(10, 10, 0, 0);
    (void) test_record(11, 10, 0, 0);
    (void) test_record(12, 10, 0, 0);
    test_evicted(10, 0);

    test_ok(peers[0]->blocks == 30 && peers[0]->fb.capacity == 20,
            "learn: a later eviction that leaves more does not raise it");

    test_evicted(10, 0);

    test_ok(peers[0]->fb.capacity == 20 && peers[1]->fb.capacity == 0,
            "learn: a trim that drops nothing learns nothing");

    (void) test_record(6, 10, 1, 0);
    (void) test_record(7, 10, 1, 0);
    (void) test_record(8, 10, 1, 0);

    idx.mend_steps = 16;
    test_evicted(8, 1);

    test_ok(peers[1]->stale && peers[1]->fb.capacity == 0
            && peers[1]->fb.learning == 30,
            "learn: a trim in slices waits for its last slice");

    test_drop_all();

    test_ok(peers[1]->blocks == 10 && peers[1]->fb.capacity == 15
            && peers[1]->fb.learning == 0,
            "learn: then learns as at once");
    test_ok(test_check() == 0, "learn: consistent");

    (void) ngx_http_prefix_route_index_wipe(&idx, peers[1]);
    test_drop_all();

    test_ok(peers[1]->fb.capacity == 0 && peers[0]->fb.capacity == 20,
            "learn: a restarted engine's is learned anew");

    /* an engine restarted unseen reports each older prefix gone in turn */

    idx.mend_steps = 0;

    for (t = 20; t <= 27; t++) {
        (void) test_record(t, 10, 1, 0);
    }

    test_evicted(23, 1);

    test_ok(peers[1]->blocks == 50 && peers[1]->fb.capacity == 50,
            "learn: an eviction leaves 50 of 80 blocks");

    test_evicted(24, 1);
    test_evicted(25, 1);

    test_ok(peers[1]->blocks == 30 && peers[1]->fb.capacity == 50,
            "learn: blocks recorded before the figure fell are dropped, "
            "and do not lower it again");

    (void) test_record(28, 10, 1, 0);
    test_evicted(28, 1);

    test_ok(peers[1]->blocks == 10 && peers[1]->fb.capacity == 25,
            "learn: a block recorded since lowers it, at most by half");
    test_ok(test_check() == 0, "learn: consistent");

    /*
     * 35 days on (past the 24.8 a signed difference of stamps tells
     * apart), the server's blocks all new: an eviction still lowers it
     */

    test_clock += 3000000000U;

    for (t = 40; t <= 45; t++) {
        (void) test_record(t, 10, 1, 0);
    }

    (void) ngx_http_prefix_route_index_trim(&idx, peers[1], 50, NULL);
    test_evicted(44, 1);

    test_ok(peers[1]->blocks == 20 && peers[1]->fb.capacity == 20,
            "learn: weeks on, an eviction lowers it again");
    test_ok(test_check() == 0, "learn: consistent");

    idx.mend_steps = 0;
}


/* the engine of "peer" evicted prompt "tag" (10 blocks): a trim */

static void
test_evicted(ngx_uint_t tag, ngx_uint_t peer)
{
    uint32_t  stamp;
    uint64_t  hash[TEST_MAX_BLOCKS];

    test_chain(hash, tag, 10);
    (void) ngx_http_prefix_route_index_stamp(&idx, hash[9], &stamp);
    (void) ngx_http_prefix_route_index_trim(&idx, peers[peer], 0, &stamp);
}


/*
 * A server sent one prompt and then nothing, while every prompt shares an
 * 8-block system prompt: its holders of that prompt reach the tails of
 * the zone's lists, of blocks each record pins.  Until 2026-12-05
 * eviction stopped there and every record was cut short (2,975 of 3,000).
 */

static void
test_drained(void)
{
    ngx_uint_t  t, cut, bad;

    test_zone(64 * 1024, 4);

    cut = 0;
    bad = 0;

    for (t = 1; t <= 3000; t++) {
        cut += (test_record_forked(7, 20, 8, 1000 + t, t == 1 ? 3 : t % 3)
                < 20);

        if (t % 100 == 0 && test_check() != 0) {
            bad++;
        }
    }

    test_ok(cut == 0 && idx.sh->evictions > 0,
            "drained server: the zone evicts its holders of a shared "
            "prefix, every prompt is recorded whole");
    test_ok(peers[3]->blocks == 0, "drained server: its blocks are the "
            "least recently used, forgotten");
    test_ok(bad == 0, "drained server: consistent throughout");
}


/*
 * What is to go goes a slice at a time, and first: a server far above a
 * capacity a reload lowered comes down to it over the next records; a
 * full zone evicts a restarted server's blocks before the others'.
 */

static void
test_dropping(void)
{
    int         status;
    char        name[200];
    ngx_str_t   name_s;
    ngx_uint_t  t, n, k, bad, records, evictions, oldest, forgotten;

    test_capacity_fill();

    /* 4 blocks recorded, 5 forgotten, the rest marked to go in slices */

    (void) test_record(100, 4, 0, 100);

    test_ok(peers[0]->blocks == 299 && peers[0]->over == 100
            && idx.sh->dropping && test_match(1, 10, 0) == 5
            && test_match(2, 10, 0) == 10 && test_match(100, 4, 0) == 4,
            "capacity lowered: a record forgets its own blocks and one "
            "more, the least recently used, and marks the rest");

    /* a slice (1, with 8 steps) each */

    bad = 0;
    records = 0;

    for (n = peers[0]->blocks;
         !ngx_http_prefix_route_index_clear(&idx);
         n = peers[0]->blocks)
    {
        records++;
        bad += (peers[0]->blocks + 1 != n);
    }

    (void) test_record(101, 4, 0, 100);

    (void) snprintf(name, sizeof(name), "capacity lowered from 300 "
                    "blocks to 100: the rest go one a slice (%u slices, "
                    "%u not one), then 100 stay", (unsigned) records,
                    (unsigned) bad);
    test_ok(bad == 0 && records == 199 && peers[0]->blocks == 100
            && peers[0]->over == 0 && !idx.sh->dropping
            && test_match(101, 4, 0) == 4 && test_match(30, 10, 0) == 10
            && test_match(21, 10, 0) == 2 && test_match(20, 10, 0) == 0
            && test_check() == 0, name);

    /* killed at each write of those slices: mended, then they go on */

    bad = 0;

    for (k = 1; /* void */ ; k++) {
        test_capacity_fill();
        (void) test_record(100, 4, 0, 100);

        status = test_killed_drop(k, test_drop_all);

        if (status != 1) {
            break;
        }

        bad += (peers[0]->blocks != 100 || peers[0]->over
                || idx.sh->dropping || test_check() != 0);
    }

    (void) snprintf(name, sizeof(name), "capacity lowered: killed at each "
                    "of the %u writes of its slices, mended, then down to "
                    "it (%u not)", (unsigned) (k - 1), (unsigned) bad);
    test_ok(status == 0 && k > 100 && bad == 0, name);

    /* a prompt longer than capacity is recorded whole, and not marked */

    (void) test_record(102, 150, 0, 100);

    test_ok(peers[0]->blocks == 150 && peers[0]->over == 0
            && !idx.sh->dropping && test_match(102, 150, 0) == 150,
            "capacity: a prompt longer than it is kept whole, not marked");

    /* lowered, then raised by another reload before the slices end */

    test_capacity_fill();
    (void) test_record(100, 4, 0, 100);
    ngx_http_prefix_route_index_capacity(&idx, peers[0], 400);

    test_ok(peers[0]->over == 0,
            "capacity lowered, then raised above what the server holds by "
            "a reload: its mark goes");

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    test_ok(peers[0]->blocks == 299 && peers[0]->over == 0
            && !idx.sh->dropping && test_check() == 0,
            "capacity lowered, then raised above what the server holds: "
            "nothing more goes");

    (void) test_record(101, 4, 0, 100);
    ngx_http_prefix_route_index_capacity(&idx, peers[0], 0);

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    test_ok(peers[0]->blocks == 298 && peers[0]->over == 0
            && !idx.sh->dropping,
            "capacity lowered, then a reload to no limit: nothing more goes");

    /* a reload that lowers the capacity: the excess goes with no record */

    test_capacity_fill();
    ngx_http_prefix_route_index_capacity(&idx, peers[0], 100);

    test_ok(peers[0]->over == 100 && idx.sh->dropping,
            "a reload lowering the capacity marks a server above it");

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    ngx_http_prefix_route_index_capacity(&idx, peers[0], 100);

    test_ok(peers[0]->blocks == 100 && test_match(30, 10, 0) == 10
            && test_match(20, 10, 0) == 0 && test_check() == 0
            && peers[0]->over == 0 && !idx.sh->dropping,
            "a reload lowering the capacity: the excess goes in slices "
            "before any record, least recently used first; a reload to the "
            "same capacity then marks nothing");

    /* a prompt longer than the capacity, above it after a reload: whole */

    test_capacity_fill();
    (void) test_record(102, 150, 0, 100);

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    test_ok(peers[0]->blocks == 150 && test_match(102, 150, 0) == 150
            && test_check() == 0,
            "capacity lowered, a prompt longer than it recorded: the "
            "excess goes, the prompt stays whole");

    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    /* a full zone, server 0 restarted: server 1 records in its place */

    t = test_full();
    (void) ngx_http_prefix_route_index_wipe(&idx, peers[0]);
    oldest = test_oldest(t);
    evictions = idx.sh->evictions;
    n = peers[0]->blocks;

    for (k = 0; k < 5; k++) {
        (void) test_record(t + k, 10, 1, 0);
    }

    (void) snprintf(name, sizeof(name), "a restarted server's %u blocks "
                    "go first when the zone is full: %u of them went, %u "
                    "evictions", (unsigned) n,
                    (unsigned) (n - peers[0]->blocks),
                    (unsigned) (idx.sh->evictions - evictions));
    test_ok(idx.sh->evictions == evictions && peers[0]->blocks < n
            && test_match(oldest, 10, 1) == 10
            && test_match(t + 4, 10, 1) == 10 && test_check() == 0, name);

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    test_ok(peers[0]->blocks == 0 && !idx.sh->dropping
            && test_match(oldest, 10, 1) == 10 && test_check() == 0,
            "a restarted server's blocks go first: then the rest of "
            "them, the other server's stay");

    /*
     * eviction looks from the first peer that may have some to go: a
     * peer with none left moves that on, a restart before it moves it back
     */

    t = test_full();
    name_s.data = (u_char *) "peer2";
    name_s.len = 5;
    (void) ngx_http_prefix_route_index_wipe(&idx, test_peer(&name_s));
    evictions = idx.sh->evictions;

    while (idx.sh->evictions == evictions) {
        (void) test_record(t++, 10, 1, 0);
    }

    test_ok(idx.sh->drop_from == 3,
            "a restarted server with no blocks: eviction looks past it");

    evictions = idx.sh->evictions;
    (void) ngx_http_prefix_route_index_wipe(&idx, peers[0]);
    oldest = test_oldest(t);
    n = peers[0]->blocks;

    for (k = 0;
         k < 100 && peers[0]->blocks == n
         && idx.sh->evictions == evictions;
         k++)
    {
        (void) test_record(t + k, 10, 1, 0);
    }

    test_ok(idx.sh->drop_from == 0 && idx.sh->evictions == evictions
            && peers[0]->blocks < n && test_match(oldest, 10, 1) == 10
            && test_check() == 0,
            "a server restarted after a later one's blocks all went: its "
            "blocks go first when the zone is full");

    /* the same, server 0 above a capacity lowered to 10 blocks */

    t = test_full();
    (void) test_record(t++, 10, 0, 10);
    oldest = test_oldest(t);
    evictions = idx.sh->evictions;
    forgotten = idx.sh->forgotten;
    n = peers[0]->blocks;

    for (k = 0; k < 5; k++) {
        (void) test_record(t + k, 10, 1, 0);
    }

    test_ok(peers[0]->over == 10 && idx.sh->evictions == evictions
            && peers[0]->blocks < n
            && idx.sh->forgotten - forgotten == n - peers[0]->blocks
            && test_match(oldest, 10, 1) == 10 && test_check() == 0,
            "the excess over a lowered capacity goes first when the zone "
            "is full, counted as forgotten");

    /* killed at each write of a record that evicts them: mended */

    bad = 0;

    for (k = 1; /* void */ ; k++) {
        test_next = test_full();
        (void) ngx_http_prefix_route_index_wipe(&idx, peers[0]);

        status = test_killed_drop(k, test_record_next);

        if (status != 1) {
            break;
        }

        bad += (peers[0]->blocks != 0 || idx.sh->dropping
                || !test_killed_mended());
    }

    (void) snprintf(name, sizeof(name), "a record evicting a restarted "
                    "server's blocks killed at each of its %u writes: "
                    "mended, they go (%u not)", (unsigned) (k - 1),
                    (unsigned) bad);
    test_ok(status == 0 && k > 100 && bad == 0, name);
}


/* one server holding 300 blocks, capacity 0; slices of one holder */

static void
test_capacity_fill(void)
{
    ngx_uint_t  t;

    test_zone(1024 * 1024, 1);

    for (t = 1; t <= 30; t++) {
        (void) test_record(t, 10, 0, 0);
    }

    idx.mend_steps = 8;
}


/*
 * "change" in a child process killed at its k-th kill point, then the
 * index mended and its drops ended in slices, as the mend timers would.
 * Returns 1; 0 when the child ended first (no k-th point); -1 when it
 * died otherwise.
 */

static int
test_killed_drop(ngx_uint_t k, void (*change)(void))
{
    int        status;
    ngx_pid_t  pid;

    pid = fork();

    if (pid == 0) {
        test_kill = k;
        change();
        _exit(1);
    }

    (void) waitpid(pid, &status, 0);

    if (!WIFEXITED(status)) {
        return -1;
    }

    if (WEXITSTATUS(status) != 0) {
        return WEXITSTATUS(status) == 1 ? 0 : -1;
    }

    while (!ngx_http_prefix_route_index_ready(&idx)) {
        /* void */
    }

    test_drop_all();

    return 1;
}


/* every drop under way, a slice at a time */

static void
test_drop_all(void)
{
    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }
}


/* server 1 records prompt test_next */

static void
test_record_next(void)
{
    (void) test_record(test_next, 10, 1, 0);
}


/* server 0's prefixes recorded before test_stamp go, in slices of 1 */

static void
test_trim_stamp(void)
{
    idx.mend_steps = 8;
    (void) ngx_http_prefix_route_index_trim(&idx, peers[0], 0, &test_stamp);
    test_drop_all();
}


/*
 * A 64 KiB zone just full of two servers' prompts, server t % 2's; returns
 * the next t
 */

static ngx_uint_t
test_full(void)
{
    ngx_uint_t  t;

    test_zone(64 * 1024, 2);

    for (t = 1; idx.sh->evictions == 0; t++) {
        (void) test_record(t, 10, t % 2, 0);
    }

    return t;
}


/* the oldest of server 1's prompts (the odd ones) it holds whole */

static ngx_uint_t
test_oldest(ngx_uint_t t)
{
    ngx_uint_t  oldest;

    for (oldest = t - 1 - t % 2;
         oldest > 2 && test_match(oldest - 2, 10, 1) == 10;
         oldest -= 2)
    {
        /* void */
    }

    return oldest;
}


/*
 * A prefix held by 50 peers: the lookup visits its holders once, not
 * once a block (issue F2), and finds every peer's match.
 */

static void
test_shared_prefix(void)
{
    uint64_t    hash[TEST_MAX_BLOCKS];
    ngx_uint_t  i, match[64], all, capped;

    test_zone(4 * 1024 * 1024, 50);

    for (i = 0; i < 50; i++) {
        (void) test_record(9, 512, i, 0);
    }

    /* a longer prompt on peer 7 only: its suffix holds one peer */

    test_chain(hash, 9, 600);
    i = test_match(9, 512, 7);
    (void) ngx_http_prefix_route_index_record(&idx, hash, 600, &i, peers[7],
                                              0, ++test_clock);
    test_ok(test_check() == 0, "shared prefix: consistent");

    (void) ngx_http_prefix_route_index_match(&idx, hash, 600, pos, npeers,
                                             npeers, 4 * npeers + 64,
                                             match);
    all = 1;

    for (i = 0; i < 50; i++) {
        if (match[i] != (i == 7 ? 600 : 512)) {
            all = 0;
        }
    }

    test_ok(all, "shared prefix: every peer's match, within a budget of "
            "4 visits a peer");

    /* a budget below the holders of one block: cut short and counted */

    capped = idx.sh->capped;

    (void) ngx_http_prefix_route_index_match(&idx, hash, 600, pos, npeers,
                                             npeers, 20, match);

    test_ok(idx.sh->capped == capped + 1 && match[7] == 600 && match[0] == 0,
            "shared prefix: a lookup over budget stops and is counted");
}


/* in-flight work: per worker cells, given back when a worker dies */

static void
test_load(void)
{
    ngx_pid_t                      pid, self;
    ngx_uint_t                     cell, dead;
    ngx_http_prefix_route_cell_t  *l0, *l1;

    test_zone(256 * 1024, 2);

    l0 = &peers[0]->load;
    l1 = &peers[1]->load;

    cell = ngx_http_prefix_route_load_charge(&idx, peers[0], 5000, 6000);
    (void) ngx_http_prefix_route_load_charge(&idx, peers[0], 3000, 4000);
    (void) ngx_http_prefix_route_load_charge(&idx, peers[1], 1000, 1000);

    test_ok(l0->inflight == 2 && l0->waiting == 2 && l0->queued == 8000
            && l0->bytes == 10000 && l1->inflight == 1,
            "load: charges are counted");

    ngx_http_prefix_route_load_start(peers[0], cell, 5000);
    test_ok(l0->inflight == 2 && l0->waiting == 1 && l0->queued == 3000
            && l0->bytes == 10000,
            "load: a request that answers leaves the prefill queue, not "
            "the requests in flight");

    ngx_http_prefix_route_load_discharge(peers[0], cell, 5000, 6000, 1);
    test_ok(l0->inflight == 1 && l0->waiting == 1 && l0->queued == 3000
            && l0->bytes == 4000,
            "load: a discharge after the start gives the rest back");

    /* a worker that dies with requests in flight: a child that exits */

    self = ngx_pid;
    pid = fork();

    if (pid == 0) {
        ngx_pid = getpid();
        idx.slot = -1;
        (void) ngx_http_prefix_route_load_charge(&idx, peers[1], 7000, 7000);
        _exit(0);
    }

    (void) waitpid(pid, NULL, 0);

    test_ok(l1->inflight == 2 && l1->queued == 8000 && l1->bytes == 8000,
            "load: another worker's charge is seen");

    ngx_pid = self;
    ngx_http_prefix_route_load_sweep(&idx);

    dead = (l1->inflight == 1 && l1->waiting == 1 && l1->queued == 1000
            && l1->bytes == 1000 && l0->inflight == 1
            && l0->queued == 3000);
    test_ok(dead, "load: a dead worker's charges are given back, no more");

    /*
     * a worker killed inside a start and inside a discharge, between the
     * server's total and its cell: the sweep leaves nothing in flight
     */

    for (dead = 0; dead < 2; dead++) {
        pid = fork();

        if (pid == 0) {
            ngx_pid = getpid();
            idx.slot = -1;
            cell = ngx_http_prefix_route_load_charge(&idx, peers[1], 7000,
                                                     7000);
            test_kill = 1;

            if (dead) {
                ngx_http_prefix_route_load_start(peers[1], cell, 7000);
            }

            ngx_http_prefix_route_load_discharge(peers[1], cell, 7000, 7000,
                                                 dead);
            _exit(1);
        }

        (void) waitpid(pid, NULL, 0);
        ngx_http_prefix_route_load_sweep(&idx);

        test_ok(l1->inflight == 1 && l1->waiting == 1 && l1->queued == 1000
                && l1->bytes == 1000,
                dead ? "load: a worker killed inside a start leaves nothing "
                       "in flight"
                     : "load: a worker killed inside a discharge leaves "
                       "nothing in flight");
    }

    /* its cell is empty: a late discharge of it changes nothing */

    cell = ngx_http_prefix_route_load_charge(&idx, peers[1], 500, 500);
    ngx_http_prefix_route_load_discharge(peers[1], cell, 500, 500, 0);
    test_ok(l1->inflight == 1 && l1->queued == 1000 && l1->bytes == 1000,
            "load: a discharge before the start gives the prefill back");
}


/*
 * A worker dies between two writes of a change to the index, at each in
 * turn, in a forked process as nginx's workers are: a timer's slice (one
 * here) mends the index, and the zone goes on evicting and recording.  A
 * death inside a record froze the index before 2026-12-05 (found by a
 * hostile test under SIGKILL), and one inside a move, a trim or a forget
 * could leave a holder freed and still linked.
 */

static void
test_killed(void)
{
    char         name[200];
    ngx_int_t    rc;
    ngx_uint_t   c, k, points, bad, leak, deaths, used;

    static const char  *what[] = {
        "a record of a new prompt, evicting",
        "a record of a held prompt, moved, protected and trimmed",
        "a trim",
        "a forget",
        "a record of a prompt the other server holds",
        "a record of a longer prompt the other server holds",
        "the mend of a death inside a record",
        "the mend of a server's list in a loop",
        "the mend of the zone's list in a loop",
        "a record of a long new prompt, evicting its server's whole prompt"
    };

    for (c = 0; c < 10; c++) {
        bad = 0;
        leak = 0;

        for (k = 1; /* void */ ; k++) {
            test_killed_fill();

            /* 32-byte chunks, entries and holders, as the slab counts them */

            used = zone->stats[2].used;
            deaths = 1 + test_killed_before(c, k);

            rc = test_killed_at(c, k);

            if (rc != 1) {
                break;
            }

            (void) test_mended_trim(peers[0]);

            if (zone->stats[2].used - idx.sh->entries - idx.sh->holders
                > used - test_killed_used + 2 * deaths)
            {
                leak++;
            }

            bad += !test_killed_mended();
        }

        points = k - 1;

        (void) snprintf(name, sizeof(name), "killed at each of the %u "
                        "writes of %s: mended (%u not), at most 2 chunks "
                        "lost a death (%u more)", (unsigned) points, what[c],
                        (unsigned) bad, (unsigned) leak);

        test_ok(rc == 0 && points > 8 && bad == 0 && leak == 0, name);
    }

    test_killed_loop();
    test_killed_stale();
    test_killed_chain();
}


/*
 * A holder whose chunk is that of a protected holder trimmed before, of
 * the same block, server and parent holder (now on probation): a record
 * killed right after the new holder joins its entry's list, its fields
 * not yet written.
 */

static void
test_killed_stale(void)
{
    int        status;
    ngx_pid_t  pid;

    test_zone(256 * 1024, 2);

    (void) test_record(7, 3, 0, 0);
    (void) test_record(7, 3, 0, 0);
    (void) test_record(7, 3, 1, 0);

    /* peer 0's blocks 3 and 2 go, both protected; block 2 comes back */

    (void) ngx_http_prefix_route_index_trim(&idx, peers[0], 1, NULL);
    (void) test_record(7, 2, 0, 0);

    test_ok(test_check() == 0 && test_match(7, 3, 0) == 2,
            "killed, stale chunk: set up");

    pid = fork();

    if (pid == 0) {
        test_kill = 2;
        (void) test_record(7, 3, 0, 0);
        _exit(1);
    }

    (void) waitpid(pid, &status, 0);

    test_ok(WIFEXITED(status) && WEXITSTATUS(status) == 0
            && test_mended_trim(peers[0]) == 0
            && test_check() == 0,
            "killed after a holder joined its entry's list, its chunk a "
            "freed holder's of that block: mended");
}


/*
 * A record of a prompt its server was sent before, killed at each point:
 * its last loop moves the chain to the lists' heads from the deepest
 * block, protecting the blocks held before.  Held once (on probation),
 * the blocks after the first moved are protected while their parents are
 * not yet; one block longer, the new deepest block leaves the head of
 * its server's list when it is moved.  The mend must leave each parent
 * more recent than its child, and the protected blocks a prefix.
 */

static void
test_killed_chain(void)
{
    int         status;
    char        name[200];
    ngx_uint_t  c, k, bad;
    ngx_pid_t   pid;

    static const char  *what[] = {
        "a record of a prompt held once",
        "a record of a prompt one block longer than one held"
    };

    for (c = 0; c < 2; c++) {
        bad = 0;

        for (k = 1; /* void */ ; k++) {
            test_zone(64 * 1024, 2);

            (void) test_record(7, 4 - c, 0, 0);

            pid = fork();

            if (pid == 0) {
                test_kill = k;
                (void) test_record(7, 4, 0, 0);
                _exit(1);
            }

            (void) waitpid(pid, &status, 0);

            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                break;
            }

            bad += (test_check() != 0);
        }

        (void) snprintf(name, sizeof(name), "killed at each of the %u "
                        "writes of %s: mended (%u not)", (unsigned) (k - 1),
                        what[c], (unsigned) bad);

        test_ok(WIFEXITED(status) && WEXITSTATUS(status) == 1 && k > 8
                && bad == 0, name);
    }
}


/*
 * Before change "c" dies at its point "k": for a mend, what it mends (a
 * record that died at one of its first 40 points, or a list in a loop);
 * returns the deaths.
 */

static ngx_uint_t
test_killed_before(ngx_uint_t c, ngx_uint_t k)
{
    int                            status;
    ngx_pid_t                      pid;
    ngx_http_prefix_route_link_t  *a;

    switch (c) {

    case 6:
        pid = fork();

        if (pid == 0) {
            test_kill = 1 + (k * 7) % 40;
            test_killed_change(0);
            _exit(1);
        }

        (void) waitpid(pid, &status, 0);

        return 1;

    case 7:
        a = test_link(peers[1]->lru.next);
        test_link(a->next)->next = peers[1]->lru.next;
        break;

    case 8:
        test_link(idx.sh->lru.next)->next = idx.sh->lru.next;
        break;

    default:
        return 0;
    }

    idx.sh->changing = (ngx_uint_t) -1;

    return 0;
}


/*
 * A list that does not come back to its head (two deaths, a torn write)
 * loses its holders in the mend; the other lists keep theirs.
 */

static void
test_killed_loop(void)
{
    ngx_http_prefix_route_link_t  *a, *b;

    test_killed_fill();

    a = test_link(peers[1]->lru.next);
    b = test_link(a->next);
    b->next = peers[1]->lru.next;
    idx.sh->changing = (ngx_uint_t) -1;

    test_ok(peers[1]->blocks >= 12 && peers[0]->blocks >= 12,
            "killed: a peer's list cut into a loop, its prompts held");
    test_ok(test_mended_trim(peers[0]) == 0
            && peers[1]->blocks == 0 && test_match(39, 12, 1) == 0
            && test_match(40, 12, 0) == 12 && test_check() == 0,
            "killed: mended, the peer's holders go, the other's stay");
    test_ok(test_killed_mended(), "killed: then the zone records and evicts");

    /*
     * a holder torn in the middle of a chain (the entry it names zeroed,
     * 20 bytes into it): it goes, and the blocks after it
     */

    test_killed_fill();

    a = test_link(peers[1]->lru.next);
    a = test_link(a->next);
    *(uint32_t *) ((u_char *) a + 20) = 0;
    idx.sh->changing = (ngx_uint_t) -1;

    test_ok(test_mended_trim(peers[0]) == 0
            && test_match(39, 12, 1) == 1 && test_match(37, 12, 1) == 12
            && test_check() == 0,
            "killed: a holder torn, mended, the blocks after it go");
    test_ok(test_killed_mended(), "killed: then the zone records and evicts");

    /* the zone's own list: every holder goes */

    test_killed_fill();

    a = test_link(idx.sh->lru.next);
    a->next = idx.sh->lru.next;
    idx.sh->changing = (ngx_uint_t) -1;

    test_ok(test_mended_trim(peers[0]) == 0
            && idx.sh->holders == 0 && idx.sh->entries == 0
            && test_check() == 0,
            "killed: the zone's list in a loop, mended empty");
    test_ok(test_killed_mended(), "killed: then the zone records and evicts");
}


/* the link at a zone offset, as the index's lists give them */

static ngx_http_prefix_route_link_t *
test_link(uint32_t off)
{
    return (ngx_http_prefix_route_link_t *) ((u_char *) zone
                                             + ((size_t) off << 3));
}


/*
 * a full zone: 2 peers, prompts held once (on probation) and twice;
 * test_sliced() copies and rewinds all of it
 */

#define TEST_KILLED_ZONE  (64 * 1024)

static void
test_killed_fill(void)
{
    ngx_uint_t  t;

    test_zone(TEST_KILLED_ZONE, 2);

    for (t = 1; t <= 40; t++) {
        (void) test_record(t, 12, t % 2, 0);
    }

    for (t = 30; t <= 40; t++) {
        (void) test_record(t, 12, t % 2, 0);
    }

    test_killed_used = idx.sh->entries + idx.sh->holders;
}


static void
test_killed_change(ngx_uint_t change)
{
    uint64_t  hash[TEST_MAX_BLOCKS];

    switch (change) {

    case 0:
        (void) test_record(5000, 6, 1, 0);
        break;

    case 1:
        (void) test_record(39, 14, 1, 60);
        break;

    case 2:
        (void) ngx_http_prefix_route_index_trim(&idx, peers[0], 40, NULL);
        break;

    case 3:
        test_chain(hash, 40, 12);
        ngx_http_prefix_route_index_forget(&idx, hash, 0, 12, peers[0],
                                           test_clock, 0);
        break;

    case 4:
        (void) test_record(39, 12, 0, 0);
        break;

    case 5:
        (void) test_record(37, 16, 0, 0);
        break;

    case 9:
        (void) test_record(5000, 24, 1, 0);
        break;

    case 6:
    case 7:
    case 8:
        /* the mend (a timer's slice), then the next change */
        (void) ngx_http_prefix_route_index_ready(&idx);
        (void) test_record(7000, 6, 0, 0);
    }
}


/*
 * test_killed_change(c) in a process that dies at its k-th write to the
 * zone: 1 if it died there, 0 if the change had fewer writes, -1 if the
 * process failed otherwise
 */

static ngx_int_t
test_killed_at(ngx_uint_t c, ngx_uint_t k)
{
    int        status;
    ngx_pid_t  pid;

    pid = fork();

    if (pid == 0) {
        test_kill = k;
        test_killed_change(c);
        _exit(1);
    }

    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return -1;
    }

    return (WEXITSTATUS(status) == 0) ? 1
           : (WEXITSTATUS(status) == 1) ? 0 : -1;
}


/*
 * Mended (then a trim that drops nothing): consistent at once, then a
 * record is whole, and 60 prompts after it, evicting
 */

static ngx_uint_t
test_killed_mended(void)
{
    ngx_uint_t  t, whole;

    if (test_mended_trim(peers[0]) != 0 || idx.sh->changing != 0
        || test_check() != 0)
    {
        return 0;
    }

    if (test_record(6000, 8, 0, 0) != 8 || test_match(6000, 8, 0) != 8
        || test_check() != 0)
    {
        return 0;
    }

    whole = 0;

    for (t = 6001; t <= 6060; t++) {
        whole += (test_record(t, 8, t % 2, 0) == 8
                  && test_match(t, 8, t % 2) == 8);
    }

    return whole == 60 && idx.sh->changing == 0 && test_check() == 0;
}


/*
 * The mend a worker's timer takes (one slice: idx.mend_steps is not
 * limited here), then a trim that drops nothing; returns its count, or
 * -1 if the mend was not done in that slice
 */

static ngx_uint_t
test_mended_trim(ngx_http_prefix_route_peer_t *peer)
{
    if (!ngx_http_prefix_route_index_ready(&idx)) {
        return (ngx_uint_t) -1;
    }

    return ngx_http_prefix_route_index_trim(&idx, peer, 1 << 20, NULL);
}


/*
 * Eviction takes another server's holder of a block the record pins, down
 * to the last one of an entry, and a record then cut short releases from
 * its deepest entry (2026-12-05, found by review: release(chain[i]) left
 * an entry nobody held).  A worker is killed at each point of such a
 * record, and of the mend of one.
 */

static ngx_uint_t  test_pinned_used;


/* free 32-byte chunks: in 32-byte slab pages, and in whole free pages */

static ngx_uint_t
test_pinned_free(void)
{
    return zone->pfree * (ngx_pagesize / 32)
           + zone->stats[2].total - zone->stats[2].used;
}


/* fills the zone to its last 32-byte chunk with server 1's holders */

static void
test_pinned_top(ngx_uint_t twice, ngx_uint_t c)
{
    ngx_uint_t  t;

    for (t = 100; test_pinned_free() >= 2 + 24; t++) {
        /* the shared 8 blocks of prompt 7, then 12 of its own */
        (void) test_record_forked(7, 20, 8, t, 1);

        if (twice) {
            (void) test_record_forked(7, 20, 8, t, 1);
        }
    }

    for ( /* void */ ; test_pinned_free() >= 2; t++) {
        (void) test_record_forked(7000 + t, 1, 0, 0, 1);
    }

    if (test_pinned_free() == 1) {
        /*
         * one holder, of a block that is there (server 1 holds 0 .. 7):
         * server 0's block 8, or prompt 7's (server 0's, on probation)
         */
        (void) test_record_forked(7, 9, 8, c == 0 ? 50 : 0, 1);
    }
}


/*
 * c 0: server 2 sent prompt 7 (12 blocks) once, servers 0 and 1 its 8
 * first blocks and their own after them, twice; the zone full.  Server 0
 * records prompt 7 of 20 blocks: eviction takes server 2's holders of
 * blocks 11 .. 0, pinned, those of 11 and 10 the last of their entries.
 *
 * c 1: server 0 holds prompt 7's 9 blocks on probation (the tail);
 * server 2 holds its 12 protected, its block 10 a parent of another
 * 11th block on probation; the zone full.  Server 0 records prompt 7 of
 * 16 blocks: eviction takes server 2's block 11 (the entry's last
 * holder), then finds nothing: the record is cut short at block 10 and
 * block 11, the chain's deepest entry, held by nobody now, must go
 * (release(chain[i]) left it: check() finds it).
 */

static void
test_pinned_fill(ngx_uint_t c)
{
    ngx_uint_t  t;

    test_zone(64 * 1024, 3);

    if (c == 0) {
        (void) test_record_forked(7, 12, 0, 0, 2);

        for (t = 0; t < 2; t++) {
            (void) test_record_forked(7, 20, 8, 50 + t, t);
            (void) test_record_forked(7, 20, 8, 50 + t, t);
        }

        test_pinned_top(1, 0);

    } else {
        (void) test_record_forked(7, 9, 0, 0, 0);
        (void) test_record_forked(7, 12, 0, 0, 2);
        (void) test_record_forked(7, 12, 0, 0, 2);
        (void) test_record_forked(7, 12, 11, 77, 2);
        test_pinned_top(0, 1);
    }

    test_pinned_used = idx.sh->entries + idx.sh->holders;
}


static ngx_uint_t
test_pinned_change(ngx_uint_t c)
{
    return test_record_forked(7, c == 0 ? 20 : 16, 0, 0, 0);
}


static void
test_killed_pinned(void)
{
    int          status;
    char         name[300];
    uint32_t     stamp;
    ngx_uint_t   c, k, n, points, bad, leak, used, ev, deaths, mend,
                 changes[2];
    ngx_pid_t    pid;

    static const char  *what[] = {
        "a record evicting another server's holders of its pinned blocks, "
        "two the last of their entries",
        "a record evicting another server's last holder of its deepest "
        "pinned block, then cut short",
    };

    /* the set-up does what it says, unkilled */

    for (c = 0; c < 2; c++) {
        test_pinned_fill(c);

        ev = idx.sh->evictions;
        used = test_pinned_free();
        n = test_pinned_change(c);

        (void) snprintf(name, sizeof(name), "pinned %u: free %u before, "
                        "recorded %u, evictions %u, server 2 holds %u "
                        "blocks, block 11 of prompt 7 %s, check %d",
                        (unsigned) c, (unsigned) used, (unsigned) n,
                        (unsigned) (idx.sh->evictions - ev),
                        (unsigned) peers[2]->blocks,
                        ngx_http_prefix_route_index_stamp(&idx,
                            7 * 1000003 + 11 * 7919 + 1, &stamp)
                        ? "kept" : "gone",
                        (int) test_check());

        test_ok(used == 0 && test_check() == 0
                && (c == 0 ? n == 20 && peers[2]->blocks == 0
                           : n == 10 && peers[2]->blocks == 12
                             && test_match(7, 12, 2) == 11),
                name);
    }

    for (mend = 0; mend < 2; mend++) {
        for (c = 0; c < 2; c++) {
            bad = 0;
            leak = 0;

            for (k = 1; /* void */ ; k++) {
                test_pinned_fill(c);

                used = zone->stats[2].used;
                deaths = 1;

                if (mend) {
                    /* a death inside the record, at one of its points */

                    pid = fork();

                    if (pid == 0) {
                        test_kill = 1 + (k * 7) % changes[c];
                        (void) test_pinned_change(c);
                        _exit(1);
                    }

                    (void) waitpid(pid, &status, 0);
                    deaths += (WIFEXITED(status) && WEXITSTATUS(status) == 0);
                }

                pid = fork();

                if (pid == 0) {
                    test_kill = k;

                    if (mend) {
                        /* the mend, then the next change */
                        (void) test_mended_trim(peers[1]);
                    } else {
                        (void) test_pinned_change(c);
                    }

                    _exit(1);
                }

                (void) waitpid(pid, &status, 0);

                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    break;
                }

                (void) test_mended_trim(peers[0]);

                if (zone->stats[2].used - idx.sh->entries - idx.sh->holders
                    > used - test_pinned_used + 2 * deaths)
                {
                    leak++;
                }

                bad += !test_killed_mended();
            }

            points = k - 1;

            if (!mend) {
                changes[c] = points;
            }

            (void) snprintf(name, sizeof(name), "killed at each of the %u "
                            "writes of %s%s: mended (%u not), at most 2 "
                            "chunks lost a death (%u more)",
                            (unsigned) points,
                            mend ? "the mend of " : "", what[c],
                            (unsigned) bad, (unsigned) leak);

            test_ok(WIFEXITED(status) && WEXITSTATUS(status) == 1
                    && points > 8 && bad == 0 && leak == 0, name);
        }
    }
}


/*
 * The mend in slices (ngx_http_prefix_route_index_ready()): from each
 * state a kill of test_killed() leaves, a mend in slices of a few steps
 * leaves the zone byte for byte as one in a single slice; until its last
 * slice the index is bypassed; a death inside a slice starts it again.
 */

static void
test_sliced(void)
{
    int                            status;
    char                           name[200];
    u_char                        *before, *whole;
    size_t                         size;
    ngx_int_t                      steps;
    uint64_t                       hash[TEST_MAX_BLOCKS];
    ngx_uint_t                     c, k, n, states, differ, few, bad, slices;
    ngx_uint_t                     held, t, sum;
    uint32_t                       stamp;
    ngx_pid_t                      pid;
    ngx_http_prefix_route_mend_t   mend;

    size = TEST_KILLED_ZONE;
    before = malloc(size);
    whole = malloc(size);

    if (before == NULL || whole == NULL) {
        exit(1);
    }

    states = 0;
    differ = 0;
    few = 0;

    /*
     * changes 0-5 and 9 killed at each point; 6: records killed at 40
     * points; 7, 8: lists in a loop
     */

    for (c = 0; c < 10; c++) {

        for (k = 1; /* void */ ; k++) {
            test_killed_fill();
            (void) test_killed_before(c, k);

            if (c == 6 || c == 7 || c == 8) {
                if (k > (c == 6 ? 40 : 1)) {
                    break;
                }

            } else if (test_killed_at(c, k) != 1) {
                break;
            }

            states++;
            ngx_memcpy(before, zone, size);

            (void) test_sliced_mend(NGX_MAX_INT_T_VALUE);
            ngx_memcpy(whole, zone, size);

            ngx_memcpy(zone, before, size);
            steps = 1 + (k % 5) * 7;
            slices = test_sliced_mend(steps);

            differ += (ngx_memcmp(whole, zone, size) != 0);
            few += (slices < 20);
        }
    }

    (void) snprintf(name, sizeof(name), "sliced: from %u states a kill "
                    "left, a mend in slices of 1-29 steps leaves the zone "
                    "as one slice does (%u differ, %u in under 20 slices)",
                    (unsigned) states, (unsigned) differ, (unsigned) few);
    test_ok(states > 1000 && differ == 0 && few == 0, name);

    /*
     * until the last slice nothing is found, recorded, trimmed or
     * forgotten, and none of those takes a slice: ready() takes them
     */

    test_killed_fill();
    test_ok(test_match(39, 12, 1) == 12 && test_match(40, 12, 0) == 12,
            "sliced: set up, the prompts are held");

    idx.sh->changing = (ngx_uint_t) -1;
    n = idx.sh->holders;

    ngx_memcpy(before, zone, size);
    slices = test_sliced_mend(8);
    ngx_memcpy(zone, before, size);

    idx.mend_steps = 8;
    bad = 0;

    /* each turn a timer's slice, then a request's lookup or change */

    for (k = 0; k + 1 < slices; k++) {
        held = 5;
        bad += ngx_http_prefix_route_index_ready(&idx);
        ngx_memcpy(&mend, &idx.sh->mend, sizeof(mend));

        switch (k % 5) {

        case 0:
            bad += (test_match(39, 12, 1) != 0);
            break;

        case 1:
            test_chain(hash, 39, 12);
            bad += (ngx_http_prefix_route_index_record(&idx, hash, 12, &held,
                                                       peers[0], 0, 1)
                    != 0 || held != 0);
            break;

        case 2:
            bad += (ngx_http_prefix_route_index_trim(&idx, peers[1], 1, NULL)
                    != 0);
            break;

        case 3:
            test_chain(hash, 39, 12);
            bad += ngx_http_prefix_route_index_stamp(&idx, hash[0], &stamp);
            break;

        default:
            test_chain(hash, 39, 12);
            ngx_http_prefix_route_index_forget(&idx, hash, 0, 12, peers[1],
                                               1 << 30, 0);
        }

        /* a request takes no slice: it would wait for it */

        bad += (ngx_memcmp(&mend, &idx.sh->mend, sizeof(mend)) != 0);
    }

    bad += (idx.sh->changing == 0 || !ngx_http_prefix_route_index_ready(&idx)
            || idx.sh->changing != 0);

    (void) snprintf(name, sizeof(name), "sliced: for %u slices of 8 steps "
                    "nothing is found, stamped, recorded, trimmed or "
                    "forgotten, and no slice is taken by those (%u were)",
                    (unsigned) slices, (unsigned) bad);
    test_ok(slices > 100 && bad == 0, name);

    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    test_ok(idx.sh->holders == n && test_match(39, 12, 1) == 12
            && test_match(40, 12, 0) == 12 && test_check() == 0,
            "sliced: then the index is whole, the prompts held");

    /*
     * a server added on reload while a mend is under way: the mend is
     * done first, as the new server's record may evict
     */

    test_killed_fill();
    idx.sh->changing = (ngx_uint_t) -1;
    idx.mend_steps = 8;

    test_ok(!ngx_http_prefix_route_index_ready(&idx),
            "sliced: a mend under way");

    peers[2] = test_peer(&test_added);

    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    test_ok(peers[2] != NULL && idx.sh->npeers == 3
            && idx.sh->changing == 0 && test_check() == 0,
            "sliced: a server added then, the mend done first");

    pos[peers[2]->slot] = 2;
    npeers = 3;

    test_ok(test_record(8000, 12, 2, 0) == 12
            && test_match(8000, 12, 2) == 12 && test_killed_mended(),
            "sliced: then it records, the zone evicts");

    /*
     * a restarted engine's blocks: not trusted from the probe on, dropped
     * in slices (until 2026-12-06 at once: a full 256m zone held every
     * worker 0.43 s, and during a mend at its end, the review's fixes)
     */

    test_killed_fill();
    n = peers[1]->blocks;
    idx.mend_steps = 8;

    k = ngx_http_prefix_route_index_wipe(&idx, peers[1]);
    held = 5;
    test_chain(hash, 39, 12);

    test_ok(n >= 12 && k == n && peers[1]->blocks == n
            && test_match(39, 12, 1) == 0 && test_match(40, 12, 0) == 12
            && ngx_http_prefix_route_index_record(&idx, hash, 12, &held,
                                                  peers[1], 0, 1) == 0
            && held == 0 && peers[1]->blocks == n,
            "wipe: at once the server holds nothing and records nothing, "
            "its blocks are still to go");

    bad = 0;

    for (slices = 1; !ngx_http_prefix_route_index_clear(&idx); slices++) {
        bad += (peers[1]->blocks + 1 < n || test_check() != 0);
        n = peers[1]->blocks;
    }

    bad += (peers[1]->blocks + 1 < n);

    (void) snprintf(name, sizeof(name), "wipe: its blocks go in %u slices "
                    "of one (%u were more or left the index in "
                    "error)", (unsigned) slices, (unsigned) bad);
    test_ok(slices > 12 && bad == 0, name);

    test_ok(peers[1]->blocks == 0 && !peers[1]->wiped && !idx.sh->dropping
            && test_record(39, 12, 1, 0) == 12 && test_match(39, 12, 1) == 12
            && test_match(40, 12, 0) == 12 && test_check() == 0,
            "wipe: then it records again, the other server's blocks stay");

    /* two servers' drops share a slice's steps */

    test_killed_fill();
    n = idx.sh->holders;
    (void) ngx_http_prefix_route_index_wipe(&idx, peers[0]);
    (void) ngx_http_prefix_route_index_wipe(&idx, peers[1]);
    idx.mend_steps = 8;
    bad = 0;

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        bad += (idx.sh->holders + 1 < n);
        n = idx.sh->holders;
    }

    bad += (idx.sh->holders + 1 < n);
    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    (void) snprintf(name, sizeof(name), "wipe: two servers' blocks go one "
                    "a slice in all (%u slices took more), then the index "
                    "is empty", (unsigned) bad);
    test_ok(bad == 0 && idx.sh->holders == 0 && idx.sh->entries == 0
            && !peers[0]->wiped && !peers[1]->wiped && !idx.sh->dropping
            && test_check() == 0, name);

    /* a restart seen during a mend: the drop waits for the mend's end */

    test_killed_fill();
    idx.sh->changing = (ngx_uint_t) -1;

    (void) ngx_http_prefix_route_index_wipe(&idx, peers[1]);

    test_ok(!ngx_http_prefix_route_index_clear(&idx)
            && idx.sh->mend.slices == 0 && peers[1]->wiped,
            "wipe: during a mend the drop takes no slice");

    slices = test_sliced_mend(8);
    n = peers[1]->blocks;

    test_ok(slices > 100 && idx.sh->changing == 0 && n >= 12
            && peers[1]->wiped && test_match(39, 12, 1) == 0
            && test_match(40, 12, 0) == 12,
            "wipe: after the mend the server holds nothing, its blocks "
            "still to go");

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    test_ok(peers[1]->blocks == 0 && !peers[1]->wiped
            && test_match(40, 12, 0) == 12 && test_check() == 0,
            "wipe: then they go, the other server's stay");

    /* killed at each point of the drop: mended, then dropped after */

    bad = 0;

    for (k = 1; /* void */ ; k++) {
        test_killed_fill();
        (void) ngx_http_prefix_route_index_wipe(&idx, peers[1]);

        pid = fork();

        if (pid == 0) {
            test_kill = k;
            idx.mend_steps = 8;

            while (!ngx_http_prefix_route_index_clear(&idx)) {
                /* void */
            }

            _exit(1);
        }

        (void) waitpid(pid, &status, 0);

        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            break;
        }

        /* wiped until the last holder is gone */

        bad += (idx.sh->changing == 0
                || (!peers[1]->wiped && peers[1]->blocks != 0));

        while (!ngx_http_prefix_route_index_ready(&idx)) {
            /* void */
        }

        bad += (peers[1]->wiped && test_match(39, 12, 1) != 0);

        while (!ngx_http_prefix_route_index_clear(&idx)) {
            /* void */
        }

        bad += (peers[1]->wiped || peers[1]->blocks != 0
                || idx.sh->dropping || !test_killed_mended());
    }

    (void) snprintf(name, sizeof(name), "wipe: killed at each of the %u "
                    "writes of a restarted engine's drop: its blocks not "
                    "trusted, then mended and dropped (%u not)",
                    (unsigned) (k - 1), (unsigned) bad);
    test_ok(WIFEXITED(status) && WEXITSTATUS(status) == 1 && k > 100
            && bad == 0, name);

    /*
     * a trim by a stamp (feedback=correct) of more than a slice: a slice
     * at once, the rest in slices, the blocks found meanwhile; the same
     * blocks go as in one trim
     */

    test_killed_fill();
    test_chain(hash, 30, 12);
    (void) ngx_http_prefix_route_index_stamp(&idx, hash[0], &stamp);
    ngx_memcpy(before, zone, size);

    n = ngx_http_prefix_route_index_trim(&idx, peers[0], 0, &stamp);
    k = peers[0]->blocks;
    sum = 0;

    for (t = 1; t <= 40; t++) {
        sum = sum * 13 + test_match(t, 12, 0);
    }

    ngx_memcpy(zone, before, size);
    idx.mend_steps = 8;

    test_ok(n > 12
            && ngx_http_prefix_route_index_trim(&idx, peers[0], 0, &stamp)
               == 1
            && peers[0]->stale && idx.sh->dropping
            && test_match(28, 12, 0) == 12,
            "stale: a trim of more than a slice drops one slice, the rest "
            "are still found");

    bad = 0;

    for (slices = 1; !ngx_http_prefix_route_index_clear(&idx); slices++) {
        bad += (test_check() != 0);
    }

    idx.mend_steps = NGX_MAX_INT_T_VALUE;
    held = 0;

    for (t = 1; t <= 40; t++) {
        held = held * 13 + test_match(t, 12, 0);
    }

    (void) snprintf(name, sizeof(name), "stale: the rest go in %u slices, "
                    "the same %u blocks as one trim (%u left the index in "
                    "error)", (unsigned) slices, (unsigned) n,
                    (unsigned) bad);
    test_ok(slices >= n && bad == 0 && peers[0]->blocks == k && held == sum
            && !peers[0]->stale && !idx.sh->dropping
            && peers[0]->fb.dropped == n - 1, name);

    /* killed at each point of such a trim and its slices: mended */

    bad = 0;

    for (k = 1; /* void */ ; k++) {
        test_killed_fill();
        test_chain(hash, 30, 12);
        (void) ngx_http_prefix_route_index_stamp(&idx, hash[0],
                                                 &test_stamp);

        status = test_killed_drop(k, test_trim_stamp);

        if (status != 1) {
            break;
        }

        bad += (peers[0]->stale || idx.sh->dropping
                || !test_killed_mended());
    }

    (void) snprintf(name, sizeof(name), "stale: killed at each of the %u "
                    "writes of a trim in slices: mended, the flags cleared "
                    "(%u not)", (unsigned) (k - 1), (unsigned) bad);
    test_ok(status == 0 && k > 100 && bad == 0, name);

    /* killed at each point of a mend in slices of 5 steps: mended anew */

    bad = 0;

    for (k = 1; /* void */ ; k++) {
        test_killed_fill();
        (void) test_killed_before(6, k);

        pid = fork();

        if (pid == 0) {
            test_kill = k;
            idx.mend_steps = 5;

            while (!ngx_http_prefix_route_index_ready(&idx)) {
                /* void */
            }

            _exit(1);
        }

        (void) waitpid(pid, &status, 0);

        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            break;
        }

        bad += (idx.sh->mend.slicing == 0 || !test_killed_mended());
    }

    (void) snprintf(name, sizeof(name), "sliced: killed at each of the %u "
                    "writes of a mend in slices of 5 steps: mended anew "
                    "(%u not)", (unsigned) (k - 1), (unsigned) bad);
    test_ok(WIFEXITED(status) && WEXITSTATUS(status) == 1 && k > 100
            && bad == 0, name);

    free(before);
    free(whole);
}


/* mends in slices of "steps" steps until none is left; returns slices */

static ngx_uint_t
test_sliced_mend(ngx_int_t steps)
{
    ngx_uint_t  n;

    idx.mend_steps = steps;

    for (n = 1; !ngx_http_prefix_route_index_ready(&idx); n++) {
        /* void */
    }

    idx.mend_steps = NGX_MAX_INT_T_VALUE;

    return n;
}


/*
 * Records across reloads: one that only configurations older than every
 * running one named is given to a new server, its blocks dropped; one a
 * running configuration names, or a server that comes back, keeps its own.
 */

static void
test_reuse(void)
{
    int                            go[2];
    u_char                         byte;
    ngx_pid_t                      pid;
    ngx_uint_t                     k, n, slots;
    ngx_http_prefix_route_peer_t  *a, *b, *c, *d, *e;

    test_zone(1 << 20, 0);

    /* configuration 1 names a and b; 2 names b and c, while 1 runs */

    a = test_named("10.0.0.1:8000", 1, 0);
    b = test_named("10.0.0.2:8000", 1, 0);
    peers[0] = a;
    pos[a->slot] = 0;
    npeers = 1;
    (void) test_record(1, 20, 0, 0);
    a->requests = 7;
    a->cells[0].inflight = 1;
    a->fb.prompt = 100;
    a->fb.cached = 90;

    test_reused = 0;
    e = test_named("10.0.0.2:8000", 2, 1);
    c = test_named("10.0.0.3:8000", 2, 1);

    test_ok(e == b && c != a && c != b && test_reused == 0
            && idx.sh->npeers == 3,
            "a reload while the configuration before runs: no record "
            "reused");

    /* configuration 3, once 1 has exited: d takes a's record */

    slots = idx.sh->npeers;
    d = test_named("[2001:db8::4]:8000", 3, 2);

    test_ok(d == a && test_reused == 1 && idx.sh->npeers == slots
            && d->sn.str.len == sizeof("[2001:db8::4]:8000") - 1
            && ngx_memcmp(d->name, "[2001:db8::4]:8000", d->sn.str.len) == 0
            && d->requests == 0 && d->cells[0].inflight == 0
            && d->fb.prompt == 0 && idx.sh->gone_prompt == 100
            && idx.sh->gone_cached == 90 && d->wiped == 2 && d->named == 3,
            "a record only an exited configuration named is reused: new "
            "name, counters at 0 (the zone's sums of usage kept), its "
            "blocks to go");

    test_ok(test_match(1, 20, 0) == 0 && test_record(2, 4, 0, 0) == 0,
            "the reused record's old blocks are not found, and nothing is "
            "recorded for it, until they are gone");

    while (!ngx_http_prefix_route_index_clear(&idx)) {
        /* void */
    }

    test_ok(d->blocks == 0 && d->wiped == 0 && test_record(2, 4, 0, 0) == 4
            && test_match(2, 4, 0) == 4 && test_match(1, 20, 0) == 0
            && test_check() == 0,
            "then the new server's blocks are its own");

    /* b is named by 2, c by 2: running, neither is reused */

    e = test_named("10.0.0.5:8000", 3, 2);

    test_ok(e != b && e != c && test_reused == 1,
            "records of the running configuration are kept");

    /* b comes back by name in 4, after 2 exited: its own record */

    test_ok(test_named("10.0.0.2:8000", 4, 3) == b && b->named == 4
            && test_reused == 1,
            "a server that comes back finds its own record");

    /* the oldest running configuration */

    ngx_process = NGX_PROCESS_MASTER;
    pid = ngx_pid;
    idx.gen = 5;

    ngx_http_prefix_route_index_enter(&idx);

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        if (idx.sh->procs[k].pid == pid) {
            break;
        }
    }

    test_ok(k < NGX_HTTP_PREFIX_ROUTE_PROCS && idx.sh->procs[k].gen == 5,
            "a worker enters with its configuration");

    ngx_memzero(ngx_processes, 2 * sizeof(ngx_process_t));
    ngx_processes[0].pid = pid;
    ngx_processes[1].pid = -1;
    ngx_last_process = 2;
    idx.sh->procs[k].gen = 4;
    idx.gen = 7;

    test_ok(ngx_http_prefix_route_index_running(&idx, 6) == NGX_OK
            && test_running(7, 4, 6),
            "a child of the master keeps its configuration running, as "
            "the master its own and the new one does every newer");

    ngx_processes[1].pid = pid + 1;

    test_ok(ngx_http_prefix_route_index_running(&idx, 5) == NGX_DECLINED
            && test_running(7, 4, 6),
            "a child that has not entered yet, perhaps of an older "
            "configuration: the set found before is kept");

    ngx_processes[1].detached = 1;

    test_ok(ngx_http_prefix_route_index_running(&idx, 4) == NGX_OK
            && test_running(7, 4, 0),
            "a new binary's master, with zones of its own, does not count");

    ngx_processes[0].exited = 1;

    test_ok(ngx_http_prefix_route_index_running(&idx, 6) == NGX_OK
            && test_running(7, 6, 0),
            "nor a child that exited");

    ngx_processes[0].exited = 0;
    ngx_processes[0].pid = -1;

    test_ok(ngx_http_prefix_route_index_running(&idx, 6) == NGX_OK
            && test_running(7, 6, 0),
            "nor one reaped, even if its pid is taken again");

    /* a zone new at a reload: the children running are of older ones */

    ngx_processes[1].detached = 0;
    idx.gen = 1;

    test_ok(test_proc(pid + 1) == -1
            && ngx_http_prefix_route_index_running(&idx, 0) == NGX_OK
            && test_running(1, 0, 0) && test_proc(pid + 1) == 0,
            "the zone's first configuration: a child that never enters, "
            "of a configuration without the zone, names no record (0)");

    idx.gen = 2;

    test_ok(ngx_http_prefix_route_index_running(&idx, 1) == NGX_OK
            && test_running(2, 1, 0),
            "nor does it keep the next reload from reusing records");

    ngx_processes[1].pid = -1;
    (void) ngx_http_prefix_route_index_running(&idx, 1);

    /* entered again: the sweep above freed the entry of a child reaped */

    ngx_http_prefix_route_index_enter(&idx);
    n = (test_proc(pid) == (ngx_int_t) idx.gen);
    ngx_http_prefix_route_index_leave(&idx);

    test_ok(n && test_proc(pid) == -1, "a worker that exits leaves");

    /* workers that start together each get an entry */

    idx.gen = 7;

    for (k = 0; k < 8; k++) {
        if (fork() == 0) {
            ngx_pid = getpid();
            ngx_http_prefix_route_index_enter(&idx);
            _exit(0);
        }
    }

    while (wait(NULL) > 0) {
        /* void */
    }

    for (k = 0, n = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        n += (idx.sh->procs[k].pid != 0 && idx.sh->procs[k].gen == 7);
    }

    test_ok(n == 8 && idx.sh->floor == 0,
            "8 workers that enter at once take 8 entries");

    /* the table full: those 8 of processes gone, the rest of init's */

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        if (idx.sh->procs[k].gen != 7) {
            idx.sh->procs[k].pid = 1;
        }
    }

    idx.gen = 8;

    if (pipe(go) != 0) {
        exit(1);
    }

    for (k = 0; k < 8; k++) {
        if (fork() == 0) {
            ngx_pid = getpid();

            /* all at once: when the parent closes the pipe */
            (void) close(go[1]);
            (void) read(go[0], &byte, 1);

            ngx_http_prefix_route_index_enter(&idx);

            /* alive while the others enter: its entry is not free */
            ngx_msleep(300);
            _exit(0);
        }
    }

    (void) close(go[0]);
    (void) close(go[1]);

    while (wait(NULL) > 0) {
        /* void */
    }

    for (k = 0, n = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        n += (idx.sh->procs[k].gen == 8);
    }

    test_ok(n == 8 && idx.sh->floor == 0,
            "8 workers that enter at once a full table take the 8 entries "
            "of processes gone");

    ngx_processes[0].pid = ngx_pid;
    ngx_processes[0].exited = 0;
    ngx_last_process = 1;
    (void) ngx_http_prefix_route_index_running(&idx, 9);

    for (k = 0, n = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        n += (idx.sh->procs[k].pid != 0);
    }

    test_ok(n == 0, "the master frees the entries of processes that are not "
            "its children");

    /* init, alive to kill(2), in every entry */

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        idx.sh->procs[k].pid = 1;
        idx.sh->procs[k].gen = 6;
    }

    idx.gen = 5;
    ngx_last_process = 0;
    ngx_http_prefix_route_index_enter(&idx);
    idx.gen = 9;

    test_ok(idx.sh->floor == 5
            && ngx_http_prefix_route_index_running(&idx, 8) == NGX_OK
            && test_running(5, 0, 0),
            "with no entry free, the configuration of the worker left out "
            "and every newer one stay running for the zone's life");

    ngx_process = NGX_PROCESS_SINGLE;
    idx.sh->running.from = 0;

    test_ok(ngx_http_prefix_route_index_running(&idx, 8) == NGX_DECLINED
            && idx.sh->running.from == 0,
            "no record is reused outside a master");
}


/*
 * One old worker lingers (a long answer) while reloads name new servers:
 * the records only the configurations between it and the running one
 * named are reused, in one walk of the records under one hold of the
 * mutex; its own are not, nor one it found by name since.  Until
 * 2026-12-07 the oldest running configuration kept every newer one's
 * records: helper-60 saw a small zone full by the 5th reload.
 */

static void
test_lingering(void)
{
    ngx_str_t                      s[4];
    ngx_uint_t                     slots;
    ngx_http_prefix_route_peer_t  *a, *b, *c, *d, *got[4];
    ngx_http_prefix_route_reuse_t  reuse;

    test_zone(1 << 20, 0);

    /* configurations 1 (lingers), 2, 3 (the master's); 4 loads */

    a = test_named("10.0.1.1:8000", 1, 0);
    b = test_named("10.0.2.1:8000", 2, 0);
    d = test_named("10.0.2.2:8000", 2, 0);
    c = test_named("10.0.3.1:8000", 3, 0);

    idx.gen = 4;
    idx.sh->running.from = 4;
    idx.sh->running.n = 2;
    idx.sh->running.gens[0] = 1;
    idx.sh->running.gens[1] = 3;

    ngx_str_set(&s[0], "10.0.4.1:8000");
    ngx_str_set(&s[1], "10.0.1.1:8000");
    ngx_str_set(&s[2], "10.0.4.2:8000");
    ngx_str_set(&s[3], "10.0.4.3:8000");

    slots = idx.sh->npeers;
    ngx_memzero(&reuse, sizeof(ngx_http_prefix_route_reuse_t));

    /* in one hold: a new name, the lingering one's own, two new */

    got[0] = ngx_http_prefix_route_index_peer(&idx, &s[0], &reuse);
    got[1] = ngx_http_prefix_route_index_peer(&idx, &s[1], &reuse);
    got[2] = ngx_http_prefix_route_index_peer(&idx, &s[2], &reuse);
    got[3] = ngx_http_prefix_route_index_peer(&idx, &s[3], &reuse);

    test_ok(got[0] == b && got[2] == d && reuse.reused == 2
            && b->first == 4 && b->named == 4,
            "a lingering configuration's records stay, those of the "
            "configurations after it that no process runs are reused");

    test_ok(got[1] == a && a->first == 1 && a->named == 4
            && got[3] != c && got[3] != NULL
            && idx.sh->npeers == slots + 1 && test_check() == 0,
            "a record found by name in the hold is its server's, and "
            "with none left to reuse, a new record");

    /* 1 names c too (an address of "resolve" in its old worker) */

    idx.gen = 1;
    ngx_str_set(&s[0], "10.0.3.1:8000");

    test_ok(test_peer(&s[0]) == c && c->first == 1 && c->named == 3,
            "an older configuration naming a record lowers its first");

    /* 5 loads while 1 lingers and 4 runs: c is kept for 1 */

    idx.gen = 5;
    idx.sh->running.from = 5;
    idx.sh->running.gens[1] = 4;
    ngx_str_set(&s[0], "10.0.5.1:8000");
    slots = idx.sh->npeers;

    test_ok(test_peer(&s[0]) != c && idx.sh->npeers == slots + 1,
            "nor is a record an older running configuration named since");
}


/*
 * The records free to reuse, listed once in a hold of the mutex: a name
 * takes the oldest that has room for it, a record found by name in the
 * hold since is no longer free, and a name none has room for makes a new
 * record (helper-62: a walk for each name passed every record a
 * lingering configuration keeps, and those too short, again).
 */

static void
test_spares(void)
{
    u_char                         name[3][3000];
    ngx_str_t                      s[3];
    ngx_uint_t                     k, slots;
    ngx_http_prefix_route_peer_t  *a, *x, *b, *got[4];
    ngx_http_prefix_route_reuse_t  reuse;

    test_zone(1 << 20, 0);

    for (k = 0; k < 3; k++) {
        ngx_memset(name[k], 'a' + k, 3000);
        s[k].data = name[k];
        s[k].len = 2500 + k;
    }

    /* 1 names a short, a long and a short name (a page, two), exits */

    a = test_named("10.0.0.1:80", 1, 0);
    idx.gen = 1;
    x = test_peer(&s[0]);
    b = test_named("10.0.0.2:80", 1, 0);

    idx.gen = 3;
    idx.sh->running.from = 3;
    idx.sh->running.n = 0;
    slots = idx.sh->npeers;
    ngx_memzero(&reuse, sizeof(ngx_http_prefix_route_reuse_t));

    got[0] = ngx_http_prefix_route_index_peer(&idx, &s[1], &reuse);

    ngx_str_set(&s[2], "10.0.0.2:80");
    got[1] = ngx_http_prefix_route_index_find(&idx, &s[2]);

    ngx_str_set(&s[2], "10.0.0.3:80");
    got[2] = ngx_http_prefix_route_index_peer(&idx, &s[2], &reuse);

    ngx_str_set(&s[2], "10.0.0.4:80");
    got[3] = ngx_http_prefix_route_index_peer(&idx, &s[2], &reuse);

    test_ok(a->room < 2500 && x->room >= 2502 && got[0] == x
            && got[2] == a && reuse.reused == 2,
            "a long name takes the one record with room for it, a short "
            "one the oldest");

    test_ok(got[1] == b && b->named == 3 && got[3] != b && got[3] != NULL
            && idx.sh->npeers == slots + 1 && test_check() == 0,
            "a record found by name since it was listed is not reused; "
            "with none left, a new record");

    /* 4 names the long record again: the short ones are older */

    idx.gen = 4;
    idx.sh->running.from = 4;
    test_ok(ngx_http_prefix_route_index_find(&idx, &s[1]) == x,
            "the long record is found by its name");

    idx.gen = 5;
    idx.sh->running.from = 5;
    slots = idx.sh->npeers;
    ngx_memzero(&reuse, sizeof(ngx_http_prefix_route_reuse_t));
    s[0].len = 2510;

    got[0] = ngx_http_prefix_route_index_peer(&idx, &s[0], &reuse);

    test_ok(got[0] == x && reuse.reused == 1 && idx.sh->npeers == slots,
            "a long name passes the older short records for the long one");
}


/* the configuration the zone has for process "pid", -1: no entry */

static ngx_int_t
test_proc(ngx_pid_t pid)
{
    ngx_uint_t  k;

    for (k = 0; k < NGX_HTTP_PREFIX_ROUTE_PROCS; k++) {
        if (idx.sh->procs[k].pid == pid) {
            return idx.sh->procs[k].gen;
        }
    }

    return -1;
}


/* 1 if sh->running is "from" on and gen0, gen1 before (0: none) */

static ngx_uint_t
test_running(uint32_t from, uint32_t gen0, uint32_t gen1)
{
    ngx_http_prefix_route_running_t  *run;

    run = &idx.sh->running;

    return run->from == from
           && run->n == (uint32_t) ((gen0 != 0) + (gen1 != 0))
           && (gen0 == 0 || run->gens[0] == gen0)
           && (gen1 == 0 || run->gens[1] == gen1);
}


/*
 * A process killed at each write to the records' tree by name and their
 * order, as it finds a record for a newer configuration, makes one and
 * reuses one: the next lookup makes both again from the records, and each
 * name has one record, found by name.  The reuse gives 10.0.0.9:80's
 * record to 10.0.0.1:8000, whose name cut short is 10.0.0.1:80's.
 */

static void
test_named_killed(void)
{
    int          status;
    char         name[160];
    ngx_pid_t    pid;
    ngx_uint_t   c, k, bad;

    static char  *what[3] = { "finds a record for a newer configuration",
                              "makes a record", "reuses a record" };

    for (c = 0; c < 3; c++) {
        bad = 0;

        for (k = 1; /* void */ ; k++) {
            test_zone(1 << 20, 0);

            (void) test_named("10.0.0.9:80", 1, 0);
            (void) test_named("10.0.0.1:80", 2, 0);
            (void) test_named("10.0.0.3:8000", 2, 0);

            pid = fork();

            if (pid == 0) {
                test_kill = k;
                (void) test_named(c == 0 ? "10.0.0.9:80"
                                  : c == 1 ? "10.0.0.4:8000"
                                  : "10.0.0.1:8000", 3, c == 2 ? 2 : 0);
                _exit(1);
            }

            (void) waitpid(pid, &status, 0);

            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                break;
            }

            bad += !test_named_sound();
        }

        (void) snprintf(name, sizeof(name), "killed at each of the %u "
                        "writes as it %s: the records are made sound again "
                        "(%u not)", (unsigned) (k - 1), what[c],
                        (unsigned) bad);
        test_ok(WIFEXITED(status) && WEXITSTATUS(status) == 1 && k > 2
                && bad == 0, name);
    }
}


/*
 * After a kill: a lookup in a configuration that reuses nothing finds
 * each server's one record, the index and the records' order check clean.
 * Returns 1 when so.
 */

static ngx_uint_t
test_named_sound(void)
{
    char                          *names[5] = { "10.0.0.9:80",
                                                "10.0.0.1:80",
                                                "10.0.0.3:8000",
                                                "10.0.0.4:8000",
                                                "10.0.0.1:8000" };
    ngx_uint_t                     i, j, n;
    ngx_http_prefix_route_peer_t  *peer;

    for (i = 0; i < 5; i++) {
        peer = test_named(names[i], 4, 0);

        if (peer == NULL
            || peer->sn.str.len != ngx_strlen(names[i])
            || ngx_memcmp(peer->name, names[i], peer->sn.str.len) != 0)
        {
            return 0;
        }

        for (j = 0, n = 0; j < idx.sh->npeers; j++) {
            n += (ngx_memn2cmp(idx.sh->slots[j]->name, peer->name,
                               idx.sh->slots[j]->sn.str.len,
                               peer->sn.str.len)
                  == 0);
        }

        if (n != 1) {
            return 0;
        }
    }

    return test_check() == 0 && idx.sh->naming == 0;
}


/*
 * "resolve" while nginx runs: a record every worker's view let go, with no
 * request in flight there and no running configuration naming it in a
 * "server" line, goes to the next new address, its epoch moved on.
 */

static void
test_loose(void)
{
    uint64_t                       holding[NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS];
    uint64_t                       keep[NGX_HTTP_PREFIX_ROUTE_SLOT_WORDS];
    u_char                         name[32];
    uint32_t                       epoch;
    ngx_uint_t                     k, slots, reused;
    ngx_http_prefix_route_peer_t  *a, *b, *c, *d, *f;

    test_zone(8 << 20, 0);

    ngx_memzero(holding, sizeof(holding));
    idx.holding = holding;
    test_reused = 0;

    /* a worker of configuration 1 holds a and b in its view */

    a = test_named("10.0.0.1:8000", 1, 0);
    b = test_named("10.0.0.2:8000", 1, 0);
    ngx_http_prefix_route_index_hold(&idx, a);
    ngx_http_prefix_route_index_hold(&idx, a);
    ngx_http_prefix_route_index_hold(&idx, b);

    test_ok(a->views == 1 && b->views == 1,
            "a view holds a record once");

    /* the name now gives only b: the view lets a go, a request there */

    ngx_memzero(keep, sizeof(keep));
    keep[b->slot / 64] |= (uint64_t) 1 << (b->slot % 64);
    ngx_http_prefix_route_index_let_go(&idx, keep);

    a->cells[0].inflight = 1;
    a->load.inflight = 1;
    slots = idx.sh->npeers;
    c = test_named("10.0.0.3:8000", 1, 0);

    test_ok(a->views == 0 && b->views == 1 && c != a && c != b
            && idx.sh->npeers == slots + 1 && test_reused == 0,
            "a record let go with a request in flight there is kept");

    /* that request ends: the next new address takes a's record */

    a->cells[0].inflight = 0;
    a->load.inflight = 0;
    ngx_http_prefix_route_index_loosen(&idx, a);
    peers[0] = a;
    pos[a->slot] = 0;
    npeers = 1;
    (void) test_record(1, 8, 0, 0);
    epoch = a->epoch;
    slots = idx.sh->npeers;
    c = test_named("10.0.0.4:8000", 1, 0);

    test_ok(c == a && test_reused == 1 && idx.sh->npeers == slots
            && a->epoch != epoch && a->views == 0 && a->wiped == 2
            && ngx_memcmp(a->name, "10.0.0.4:8000", a->sn.str.len) == 0,
            "then the next new address takes it: new name, epoch moved "
            "on, its blocks to go");

    test_ok(test_named("10.0.0.1:8000", 1, 0) != a && test_reused == 1,
            "the address gone comes back to a record of its own");

    /* a record the view holds, or holds again by name, is not given */

    ngx_http_prefix_route_index_hold(&idx, a);
    ngx_http_prefix_route_index_let_go(&idx, keep);
    ngx_http_prefix_route_index_hold(&idx, a);
    slots = idx.sh->npeers;
    c = test_named("10.0.0.5:8000", 1, 0);

    test_ok(c != a && c != b && idx.sh->npeers == slots + 1
            && test_reused == 1,
            "a record taken again since it was let go is kept");

    /* a "server" line of a running configuration names f */

    f = test_named("10.0.0.6:8000", 2, 0);
    f->fixed = 2;
    ngx_memcpy(keep, holding, sizeof(keep));
    ngx_http_prefix_route_index_hold(&idx, f);
    ngx_http_prefix_route_index_let_go(&idx, keep);

    test_ok(test_named("10.0.0.7:8000", 2, 0) != f && test_reused == 1,
            "a record a running configuration's server line names is kept");

    /* of two let go, the first goes first: the other may come back */

    c = test_named("10.0.0.9:8000", 2, 0);
    d = test_named("10.0.0.10:8000", 2, 0);
    ngx_http_prefix_route_index_hold(&idx, c);
    ngx_http_prefix_route_index_hold(&idx, d);
    ngx_memcpy(keep, holding, sizeof(keep));
    keep[c->slot / 64] &= ~((uint64_t) 1 << (c->slot % 64));
    ngx_http_prefix_route_index_let_go(&idx, keep);
    keep[d->slot / 64] &= ~((uint64_t) 1 << (d->slot % 64));
    ngx_http_prefix_route_index_let_go(&idx, keep);

    test_ok(test_named("10.0.0.11:8000", 2, 0) == c && test_reused == 2
            && test_named("10.0.0.10:8000", 2, 0) == d,
            "the record let go first is given first");

    /* a change of 600 addresses: every record let go is given again */

    ngx_memzero(keep, sizeof(keep));
    ngx_http_prefix_route_index_let_go(&idx, keep);

    for (k = 0; k < 600; k++) {
        (void) ngx_sprintf(name, "10.1.%ui.%ui:8000%Z", k / 256, k % 256);
        ngx_http_prefix_route_index_hold(&idx, test_named((char *) name, 2,
                                                          0));
    }

    ngx_http_prefix_route_index_let_go(&idx, NULL);
    slots = idx.sh->npeers;
    reused = test_reused;

    test_ok(idx.sh->nloose == NGX_HTTP_PREFIX_ROUTE_LOOSE
            && idx.sh->unlisted && test_check() == 0,
            "600 let go at once: the ring full, the rest waiting for room, "
            "consistent");

    for (k = 0; k < 600; k++) {
        (void) ngx_sprintf(name, "10.2.%ui.%ui:8000%Z", k / 256, k % 256);
        (void) test_named((char *) name, 2, 0);
    }

    test_ok(idx.sh->npeers == slots && test_reused == reused + 600,
            "600 records let go at once all go to the next 600 addresses");

    /* a worker's exit lets go all it holds */

    f = test_named("10.0.0.12:8000", 2, 0);
    ngx_http_prefix_route_index_hold(&idx, f);
    ngx_http_prefix_route_index_let_go(&idx, NULL);

    test_ok(f->views == 0 && f->loose >= 2 && test_check() == 0,
            "a view let go whole; the index is consistent");

    /* the check finds a record said to be on the ring and off it */

    d = test_named("10.0.0.13:8000", 2, 0);
    d->loose = 2;
    k = (ngx_uint_t) test_check();
    d->loose = 0;
    holding[d->slot / 64] |= (uint64_t) 1 << (d->slot % 64);
    reused = (ngx_uint_t) test_check();
    holding[d->slot / 64] &= ~((uint64_t) 1 << (d->slot % 64));

    test_ok(k == 1 && reused == 1 && test_check() == 0,
            "the check finds a record said to be on the ring and off it, "
            "and one held with no view counted");

    idx.holding = NULL;
}


/* the record of "name" for configuration "gen", oldest running "oldest" */

static ngx_http_prefix_route_peer_t *
test_named(char *name, uint32_t gen, uint32_t oldest)
{
    ngx_str_t  s;

    s.data = (u_char *) name;
    s.len = ngx_strlen(name);
    idx.gen = gen;
    idx.sh->running.from = oldest;
    idx.sh->running.n = 0;

    return test_peer(&s);
}
