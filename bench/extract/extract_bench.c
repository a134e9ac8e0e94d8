
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * The speed of the stage from body to hashes, alone ("measure
 * first"): for each body file given, the whole stage,
 * ngx_http_prefix_route_extract(), over the body in one memory buffer,
 * then its three parts apart: jansson's parse (json_loadb()), the
 * canonical prompt from the tree (ngx_http_prefix_route_prompt_build())
 * and the block hashes (ngx_http_prefix_route_hash_blocks()).  Each is
 * repeated for at least 0.5 s of CPU time; prints one line a body: its
 * bytes, which path the stage took (the fast path of
 * ngx_http_prefix_route_scan.c, or jansson), then MB/s of body (10^6
 * bytes a second) and us a body for each.  The stage is timed twice: as
 * an agent's turns meet it (the fast path keeps the canonical JSON of the
 * tools it saw last), and with that forgotten before each body ("first").
 * With -s, only the stage runs, for a profile of it alone (perf record);
 * with -f, only the stage with the tools first seen.
 *
 * Usage: extract_bench [-s | -f] body.json...
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>
#include <stdio.h>
#include <time.h>

#include "ngx_http_prefix_route_extract.h"
#include "ngx_http_prefix_route_prompt.h"
#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_scan.h"


#define BENCH_CAP     65536           /* max_prefix=, default */
#define BENCH_BLOCK   64              /* block=, default */
#define BENCH_NS      100000000       /* CPU time of one trial at least */
#define BENCH_TRIALS  5               /* a figure: the fastest trial */


typedef struct {
    u_char        *body;
    size_t         len;
    json_t        *root;
    u_char        *buf;
    size_t         plen;
    uint64_t       seed;
    uint64_t      *hash;
} bench_t;


static double bench_run(void (*fn)(bench_t *b), bench_t *b);
static void bench_stage(bench_t *b);
static void bench_first(bench_t *b);
static void bench_parse(bench_t *b);
static void bench_build(bench_t *b);
static void bench_hash(bench_t *b);


int
main(int argc, char **argv)
{
    int                               i, only, fast;
    FILE                             *f;
    long                              n;
    double                            t[5];
    bench_t                           b;
    ngx_http_prefix_route_prompt_t    pr;

    ngx_http_prefix_route_extract_init(malloc, free);

    b.buf = malloc(BENCH_CAP);
    b.hash = malloc(BENCH_CAP / BENCH_BLOCK * sizeof(uint64_t));

    printf("# body bytes, path, then MB/s and us a body: stage, parse, "
           "prompt, hashes, stage with the tools first seen\n");

    only = (argc > 1 && (strcmp(argv[1], "-s") == 0
                         || strcmp(argv[1], "-f") == 0))
           ? argv[1][1] : 0;

    for (i = 1 + (only != 0); i < argc; i++) {
        f = fopen(argv[i], "rb");
        if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0)
        {
            fprintf(stderr, "extract_bench: cannot read %s\n", argv[i]);
            return 1;
        }

        rewind(f);
        b.len = n;
        b.body = malloc(b.len);

        if (b.body == NULL || fread(b.body, 1, b.len, f) != b.len) {
            fprintf(stderr, "extract_bench: cannot read %s\n", argv[i]);
            return 1;
        }

        fclose(f);

        b.root = json_loadb((char *) b.body, b.len, JSON_ALLOW_NUL, NULL);

        ngx_memzero(&pr, sizeof(pr));
        pr.buf = b.buf;
        pr.size = BENCH_CAP;

        if (b.root == NULL
            || ngx_http_prefix_route_prompt_build(b.root, &pr) != NGX_OK)
        {
            fprintf(stderr, "extract_bench: %s has no prompt\n", argv[i]);
            return 1;
        }

        b.plen = pr.len;
        b.seed = pr.seed;

        pr.len = 0;
        fast = (ngx_http_prefix_route_scan(b.body, b.len, &pr) == NGX_OK);

        t[0] = bench_run(only == 'f' ? bench_first : bench_stage, &b);

        if (only) {
            printf("%s %zu %s %.0f MB/s %.1f us\n", argv[i], b.len,
                   only == 'f' ? "first" : "stage",
                   b.len / t[0] / 1e6, t[0] * 1e6);
            json_decref(b.root);
            free(b.body);
            continue;
        }

        t[1] = bench_run(bench_parse, &b);
        t[2] = bench_run(bench_build, &b);
        t[3] = bench_run(bench_hash, &b);
        t[4] = bench_run(bench_first, &b);

        printf("%s %zu %s stage %.0f MB/s %.1f us, parse %.0f MB/s %.1f us, "
               "prompt %.0f MB/s %.1f us, hashes %.0f MB/s %.1f us, "
               "first %.0f MB/s %.1f us\n",
               argv[i], b.len, fast ? "fast" : "jansson",
               b.len / t[0] / 1e6, t[0] * 1e6, b.len / t[1] / 1e6,
               t[1] * 1e6, b.len / t[2] / 1e6, t[2] * 1e6,
               b.len / t[3] / 1e6, t[3] * 1e6,
               b.len / t[4] / 1e6, t[4] * 1e6);

        json_decref(b.root);
        free(b.body);
    }

    return 0;
}


/*
 * seconds of CPU time one call of fn takes: the fastest of BENCH_TRIALS
 * trials of BENCH_NS or more each, as other tenants of a shared machine
 * only ever slow a trial down
 */

static double
bench_run(void (*fn)(bench_t *b), bench_t *b)
{
    long             n, i, trial;
    double           best, t;
    uint64_t         ns;
    struct timespec  t0, t1;

    best = 0;
    n = 1;

    for (trial = 0; trial < BENCH_TRIALS; /* void */) {
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);

        for (i = 0; i < n; i++) {
            fn(b);
        }

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);

        ns = (uint64_t) (t1.tv_sec - t0.tv_sec) * 1000000000
             + t1.tv_nsec - t0.tv_nsec;

        if (ns < BENCH_NS) {
            n *= 2;
            continue;
        }

        t = ns / 1e9 / n;

        if (trial++ == 0 || t < best) {
            best = t;
        }
    }

    return best;
}


/* the stage on a body whose tools the fast path has not seen */

static void
bench_first(bench_t *b)
{
    ngx_http_prefix_route_scan_forget();
    bench_stage(b);
}


/* the module's stage, the body in one memory buffer */

static void
bench_stage(bench_t *b)
{
    ngx_buf_t                         buf;
    ngx_chain_t                       cl;
    ngx_http_prefix_route_extract_t   x;

    ngx_memzero(&buf, sizeof(ngx_buf_t));
    buf.memory = 1;
    buf.pos = b->body;
    buf.last = b->body + b->len;
    cl.buf = &buf;
    cl.next = NULL;

    ngx_memzero(&x, sizeof(x));
    x.max_prefix = BENCH_CAP;
    x.block = BENCH_BLOCK;
    x.buf = b->buf;
    x.hash = b->hash;

    if (ngx_http_prefix_route_extract(&x, &cl) != NGX_OK) {
        fprintf(stderr, "extract_bench: the stage declined a body\n");
        exit(1);
    }
}


static void
bench_parse(bench_t *b)
{
    json_decref(json_loadb((char *) b->body, b->len, JSON_ALLOW_NUL, NULL));
}


static void
bench_build(bench_t *b)
{
    ngx_http_prefix_route_prompt_t  pr;

    ngx_memzero(&pr, sizeof(pr));
    pr.buf = b->buf;
    pr.size = BENCH_CAP;

    (void) ngx_http_prefix_route_prompt_build(b->root, &pr);
}


static void
bench_hash(bench_t *b)
{
    (void) ngx_http_prefix_route_hash_blocks(b->buf, b->plen, BENCH_BLOCK,
                                             b->seed, b->hash,
                                             BENCH_CAP / BENCH_BLOCK);
}
