
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * How long the zone mutex is held to mend the index after a worker died
 * inside a change (ngx_http_prefix_route_index_repair(), which each
 * worker's mend timer runs, a slice at a time): the index on nginx's
 * own slab allocator in a zone mapped as nginx maps one
 * (t/unit/lib/test_zone.c), filled until it evicts with 16 KiB prompts
 * (256 blocks of 64 bytes, the default) that share a 2 KiB system
 * prompt; then, for several kill points, a forked process records a new
 * prompt and dies at that point, twice: after the first death the mend
 * is timed in one slice, after the second in slices of the module's
 * default steps (NGX_HTTP_PREFIX_ROUTE_MEND_STEPS), each slice timed;
 * the index is checked after each mend (index_check(), its errors
 * counted).  Then a restarted engine's drop (index_wipe()): the blocks of
 * server 0 in slices of the default's (index_clear()), the total and the
 * longest slice, against server 1's dropped at once (index_trim() with no
 * limit, as until 2026-12-05).  Prints a Markdown table, one line a zone
 * size, number of servers and fill: "spread", each prompt sent to one
 * server in turn; "everywhere", each to every server (an entry per block
 * with a holder per server: until the mend marked the holders it found,
 * it checked each holder against its parent's list, O(servers^2) an
 * entry).  Times are medians over the kill points but "slice ms, max",
 * the longest slice of all.  A second table: a record's ms in a full
 * 16 MiB zone of 5 and 4,004 servers (4 hold blocks), as is and with the
 * last server restarted with no blocks to drop (eviction once read every
 * server's marks for each holder it took until index_clear() ran,
 * 2026-12-05).
 *
 * Usage: mend_bench [zone MiB]...   (default: 1 16 64)
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <stdio.h>
#include <time.h>
#include <sys/wait.h>

#include "ngx_http_prefix_route_index.h"
#include "test_zone.h"


#define BENCH_BLOCKS    256     /* a prompt, 16 KiB of 64-byte blocks */
#define BENCH_SYSTEM    32      /* of which shared by all, 2 KiB */
#define BENCH_RECORDS   21      /* timed after no death: the median */
#define BENCH_KILLS     6       /* kill points, each twice */


static void bench_fill(ngx_uint_t everywhere);
static void bench_marked(ngx_uint_t extra);
static ngx_uint_t bench_record(ngx_uint_t tag, ngx_uint_t peer);
static double bench_ms(void);
static int bench_cmp(const void *a, const void *b);


static ngx_uint_t  bench_tag;
static uint32_t    bench_clock;


int
main(int argc, char **argv)
{
    int           status;
    double        t, sum, longest, rec[BENCH_RECORDS];
    double        whole[BENCH_KILLS], sliced[BENCH_KILLS], slices[BENCH_KILLS];
    double        once, drop, dropped, longest_drop;
    size_t        mib[8];
    ngx_int_t     bad;
    ngx_uint_t    i, j, n, s, f, nmib, nmend, done, entries, holders;
    ngx_pid_t     pid;
    ngx_pool_t   *pool;

    static const ngx_uint_t  servers[] = { 4, 64 };
    static const ngx_uint_t  kills[BENCH_KILLS] = { 1, 5, 40, 300, 1000,
                                                    3000 };
    static const char       *fill[] = { "spread", "everywhere" };

    test_zone_process(NGX_LOG_ERR);

    nmib = 0;

    for (i = 1; i < (ngx_uint_t) argc && nmib < 8; i++) {
        mib[nmib++] = (size_t) atoi(argv[i]);
    }

    if (nmib == 0) {
        mib[0] = 1;
        mib[1] = 16;
        mib[2] = 64;
        nmib = 3;
    }

    printf("| zone | servers | fill | entries | holders | record ms | "
           "deaths | mend ms, one slice | slices | slice ms, max | "
           "mend ms, slices | check errors | a server's blocks | "
           "drop ms, at once | drop ms, slices | slices | slice ms, max |\n");
    printf("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: "
           "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");

    for (i = 0; i < nmib; i++) {
        for (s = 0; s < sizeof(servers) / sizeof(servers[0]); s++) {
            for (f = 0; f < 2; f++) {
                test_zone(mib[i] << 20, servers[s]);
                bench_fill(f);

                for (j = 0; j < BENCH_RECORDS; j++) {
                    t = bench_ms();
                    (void) bench_record(++bench_tag, j % npeers);
                    rec[j] = bench_ms() - t;
                }

                qsort(rec, BENCH_RECORDS, sizeof(double), bench_cmp);

                nmend = 0;
                bad = 0;
                longest = 0;

                for (j = 0; j < 2 * BENCH_KILLS; j++) {
                    pid = fork();

                    if (pid == 0) {
                        test_kill = kills[j / 2];
                        (void) bench_record(++bench_tag, 0);
                        _exit(1);
                    }

                    bench_tag++;

                    if (waitpid(pid, &status, 0) != pid
                        || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                    {
                        continue;   /* the record had fewer writes */
                    }

                    /* the mend in one slice, then in the default's */

                    idx.mend_steps = (j % 2) ? 0 : NGX_MAX_INT_T_VALUE;
                    n = 0;
                    sum = 0;

                    do {
                        n++;
                        t = bench_ms();
                        done = ngx_http_prefix_route_index_ready(&idx);
                        t = bench_ms() - t;
                        sum += t;

                        if ((j % 2) && t > longest) {
                            longest = t;
                        }

                    } while (!done);

                    idx.mend_steps = NGX_MAX_INT_T_VALUE;

                    if (j % 2) {
                        sliced[nmend] = sum;
                        slices[nmend++] = (double) n;

                    } else {
                        whole[nmend] = sum;
                    }

                    (void) bench_record(++bench_tag, 1);

                    pool = ngx_create_pool(16384, &test_log);
                    if (pool == NULL) {
                        return 1;
                    }

                    bad += ngx_http_prefix_route_index_check(&idx, pool,
                                                             &test_log);
                    ngx_destroy_pool(pool);
                }

                if (nmend == 0) {
                    fprintf(stderr, "no record died\n");
                    return 1;
                }

                /* a restart's drop: server 0 in slices, 1 at once */

                entries = idx.sh->entries;
                holders = idx.sh->holders;
                dropped = (double) peers[0]->blocks;
                (void) ngx_http_prefix_route_index_wipe(&idx, peers[0]);
                idx.mend_steps = 0;
                n = 0;
                drop = 0;
                longest_drop = 0;

                do {
                    n++;
                    t = bench_ms();
                    done = ngx_http_prefix_route_index_clear(&idx);
                    t = bench_ms() - t;
                    drop += t;
                    longest_drop = ngx_max(longest_drop, t);
                } while (!done);

                idx.mend_steps = NGX_MAX_INT_T_VALUE;

                t = bench_ms();
                (void) ngx_http_prefix_route_index_trim(&idx, peers[1], 0,
                                                        NULL);
                once = bench_ms() - t;

                qsort(whole, nmend, sizeof(double), bench_cmp);
                qsort(sliced, nmend, sizeof(double), bench_cmp);
                qsort(slices, nmend, sizeof(double), bench_cmp);

                printf("| %u MiB | %u | %s | %u | %u | %.3f | %u | %.2f "
                       "| %.0f | %.2f | %.2f | %d | %.0f | %.2f | %.2f "
                       "| %u | %.2f |\n",
                       (unsigned) mib[i], (unsigned) npeers, fill[f],
                       (unsigned) entries, (unsigned) holders,
                       rec[BENCH_RECORDS / 2], (unsigned) (2 * nmend),
                       whole[nmend / 2], slices[nmend / 2], longest,
                       sliced[nmend / 2], (int) bad, dropped, once, drop,
                       (unsigned) n, longest_drop);
                fflush(stdout);
            }
        }
    }

    printf("\n| servers | record ms | with a server marked, none left "
           "| evictions a record |\n| ---: | ---: | ---: | ---: |\n");

    bench_marked(1);
    bench_marked(4000);

    return 0;
}


/* a line of the second table: 4 servers and "extra" that hold nothing */

static void
bench_marked(ngx_uint_t extra)
{
    u_char                         name[32];
    double                         t, rec[2][BENCH_RECORDS];
    ngx_str_t                      s;
    ngx_uint_t                     i, j, evictions;
    ngx_http_prefix_route_peer_t  *last;

    test_zone(16 << 20, 4);
    last = NULL;

    for (i = 0; i < extra; i++) {
        s.data = name;
        s.len = ngx_sprintf(name, "extra%ui", i) - name;
        last = test_peer(&s);
    }

    bench_fill(0);
    evictions = idx.sh->evictions;

    for (i = 0; i < 2; i++) {
        if (i) {
            (void) ngx_http_prefix_route_index_wipe(&idx, last);
        }

        for (j = 0; j < BENCH_RECORDS; j++) {
            t = bench_ms();
            (void) bench_record(++bench_tag, j % 4);
            rec[i][j] = bench_ms() - t;
        }

        qsort(rec[i], BENCH_RECORDS, sizeof(double), bench_cmp);
    }

    printf("| %u | %.3f | %.3f | %.0f |\n", (unsigned) idx.sh->npeers,
           rec[0][BENCH_RECORDS / 2], rec[1][BENCH_RECORDS / 2],
           (double) (idx.sh->evictions - evictions) / (2 * BENCH_RECORDS));
}


/*
 * Records prompts until the zone has evicted as many holders as it holds
 * a tenth of: a zone in use, its lists and hash table full.
 */

static void
bench_fill(ngx_uint_t everywhere)
{
    ngx_uint_t  p;

    while (idx.sh->evictions < idx.sh->holders / 10 + 1) {
        bench_tag++;

        if (everywhere) {
            for (p = 0; p < npeers; p++) {
                (void) bench_record(bench_tag, p);
            }

        } else {
            (void) bench_record(bench_tag, bench_tag % npeers);
        }
    }
}


/* prompt "tag": the shared system prompt, then blocks of its own */

static ngx_uint_t
bench_record(ngx_uint_t tag, ngx_uint_t peer)
{
    uint64_t    hash[BENCH_BLOCKS];
    ngx_uint_t  i, held, match[64];

    for (i = 0; i < BENCH_BLOCKS; i++) {
        hash[i] = (i < BENCH_SYSTEM) ? i + 1
                                     : (uint64_t) tag * 1000003 + i * 7919;
    }

    (void) ngx_http_prefix_route_index_match(&idx, hash, BENCH_BLOCKS, pos,
                                             npeers, npeers,
                                             4 * npeers + 64, match);
    held = match[peer];

    return ngx_http_prefix_route_index_record(&idx, hash, BENCH_BLOCKS,
                                              &held, peers[peer], 0,
                                              ++bench_clock);
}


static double
bench_ms(void)
{
    struct timespec  ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);

    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}


static int
bench_cmp(const void *a, const void *b)
{
    double  x, y;

    x = *(const double *) a;
    y = *(const double *) b;

    return (x > y) - (x < y);
}
