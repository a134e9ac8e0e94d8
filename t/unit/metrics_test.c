
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Unit test of the metrics page reader (src/ngx_http_prefix_route_metrics.c),
 * TAP output.  Each page is fed in one piece, byte by byte and in 7-byte
 * pieces: the result must not depend on how the page arrives.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <stdio.h>
#include <stdlib.h>

#include "ngx_http_prefix_route_metrics.h"
#include "tap.h"


#define TEST_NONE  -1.0                 /* the field is not expected */


static void test_page(const char *name, const char *page, ngx_int_t rc,
    double waiting, double running, double kv, double served);
static ngx_uint_t test_field(unsigned has, double v, double want);
static void test_sum(void);


int
main(void)
{
    static char  line[2000];

    test_page("vLLM: two gauges, KV usage and the prompt counter, with HELP",
        "# HELP vllm:num_requests_running Number of requests in model "
        "execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n"
        "# TYPE vllm:num_requests_waiting gauge\n"
        "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 7.0\n"
        "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
        "vllm:prompt_tokens_total{engine=\"0\",model_name=\"m\"} 1.5e+06\n"
        "vllm:prompt_tokens_created{engine=\"0\",model_name=\"m\"} "
        "1.7e+09\n",
        NGX_OK, 7, 3, 0.25, 1.5e6);

    test_page("vLLM with two engines (data parallel): series summed, KV max",
        "vllm:num_requests_running{engine=\"0\"} 2\n"
        "vllm:num_requests_running{engine=\"1\"} 5\n"
        "vllm:num_requests_waiting{engine=\"0\"} 1\n"
        "vllm:num_requests_waiting{engine=\"1\"} 0\n"
        "vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n"
        "vllm:kv_cache_usage_perc{engine=\"1\"} 0.75\n",
        NGX_OK, 1, 7, 0.75, TEST_NONE);

    test_page("older vLLM: gpu_cache_usage_perc",
        "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n"
        "vllm:gpu_cache_usage_perc 0.125\n",
        NGX_OK, 0, 1, 0.125, TEST_NONE);

    test_page("SGLang's names, CRLF line ends",
        "sglang:num_running_reqs{model_name=\"q\"} 4.0\r\n"
        "sglang:num_queue_reqs{model_name=\"q\"} 2.0\r\n"
        "sglang:token_usage{model_name=\"q\"} 0.5\r\n"
        "sglang:prompt_tokens_total{model_name=\"q\"} 900.0\r\n",
        NGX_OK, 2, 4, 0.5, 900);

    test_page("TGI's names: no KV gauge",
        "tgi_batch_current_size 6\ntgi_queue_size 1\n"
        "tgi_request_count 42\n",
        NGX_OK, 1, 6, TEST_NONE, 42);

    test_page("llama.cpp's names, the last line without a newline",
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens "
        "processed.\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        "llamacpp:prompt_tokens_total 1234\n"
        "llamacpp:requests_processing 1\n"
        "llamacpp:requests_deferred 3",
        NGX_OK, 3, 1, TEST_NONE, 1234);

    test_page("labels holding } and escaped quotes; a timestamp after",
        "vllm:num_requests_running{a=\"x}\\\"y\",b=\"\"} 2 1700000000000\n"
        "vllm:num_requests_waiting{a=\"{\"}\t4\n",
        NGX_OK, 4, 2, TEST_NONE, TEST_NONE);

    test_page("names that only begin like ours are other metrics",
        "vllm:num_requests_running_x 9\nvllm:num_requests_waitingx 9\n"
        "xvllm:num_requests_running 9\n"
        "vllm:num_requests_running 1\nvllm:num_requests_waiting 2\n",
        NGX_OK, 2, 1, TEST_NONE, TEST_NONE);

    test_page("only one of the two gauges: declined",
        "vllm:num_requests_running 1\n",
        NGX_DECLINED, TEST_NONE, 1, TEST_NONE, TEST_NONE);

    test_page("values out of range, NaN, Inf, negative, not numbers: ignored",
        "vllm:num_requests_running NaN\nvllm:num_requests_running +Inf\n"
        "vllm:num_requests_running -1\nvllm:num_requests_running 1e400\n"
        "vllm:num_requests_running 2x\nvllm:num_requests_running\n"
        "vllm:num_requests_running{a=\"b\" 3\n"
        "vllm:kv_cache_usage_perc 1.5\n"
        "vllm:num_requests_waiting 5\n",
        NGX_DECLINED, 5, TEST_NONE, TEST_NONE, TEST_NONE);

    test_page("an HTML error page",
        "<html><body><h1>502 Bad Gateway</h1></body></html>\n",
        NGX_DECLINED, TEST_NONE, TEST_NONE, TEST_NONE, TEST_NONE);

    test_page("binary garbage with NUL bytes", "\x01\x02\x00\xff\n\n\x7f",
        NGX_DECLINED, TEST_NONE, TEST_NONE, TEST_NONE, TEST_NONE);

    /* a line longer than the reader keeps, then the gauges */

    ngx_memset(line, 'x', sizeof(line) - 1);
    ngx_memcpy(line, "vllm:num_requests_running ", 26);
    ngx_memcpy(line + sizeof(line) - 60,
               "\nvllm:num_requests_running 1\nvllm:num_requests_waiting 2\n",
               58);

    test_page("a line too long is passed over, the next ones are read",
        line, NGX_OK, 2, 1, TEST_NONE, TEST_NONE);

    test_sum();

    return test_done();
}


/*
 * 20,000 series of 1e15 requests: their sum stops at 1e15, a whole number
 * of requests the probe can count, where 2e19 would not fit in 64 bits
 */

static void
test_sum(void)
{
    size_t      n;
    ngx_uint_t  i;
    char       *page, *p;

    static char  one[] = "vllm:num_requests_waiting 1e15\n";
    static char  last[] = "vllm:num_requests_running 1\n";

    n = 20000 * (sizeof(one) - 1);
    page = malloc(n + sizeof(last));

    if (page == NULL) {
        test_ok(0, "a page of 20,000 series: memory");
        return;
    }

    for (p = page, i = 0; i < 20000; i++) {
        p = (char *) ngx_cpymem(p, one, sizeof(one) - 1);
    }

    ngx_memcpy(p, last, sizeof(last));

    test_page("series whose sum is beyond 1e15: 1e15", page, NGX_OK, 1e15, 1,
              TEST_NONE, TEST_NONE);

    free(page);
}



/*
 * Feeds "page" (its strlen() bytes, or up to the NUL byte) whole, byte by
 * byte and in 7-byte pieces, and checks the result of each.
 */

static void
test_page(const char *name, const char *page, ngx_int_t rc, double waiting,
    double running, double kv, double served)
{
    char                              buf[300];
    size_t                            len, i, step, n;
    ngx_int_t                         got;
    ngx_uint_t                        ok, s;
    ngx_http_prefix_route_metrics_t   m;

    static size_t                     steps[] = { 0, 1, 7 };

    len = strlen(page);

    /* the binary case: its bytes up to the last one given */
    if (page[0] == '\x01') {
        len = 7;
    }

    for (s = 0; s < 3; s++) {
        step = steps[s] ? steps[s] : len;

        ngx_http_prefix_route_metrics_init(&m);

        for (i = 0; i < len; i += n) {
            n = ngx_min(step, len - i);
            ngx_http_prefix_route_metrics_feed(&m, (u_char *) page + i, n);
        }

        got = ngx_http_prefix_route_metrics_done(&m);

        ok = got == rc
             && test_field(m.has_waiting, m.waiting, waiting)
             && test_field(m.has_running, m.running, running)
             && test_field(m.has_kv, m.kv, kv)
             && test_field(m.has_served, m.served, served);

        snprintf(buf, sizeof(buf), "%s (pieces of %u)", name,
                 (unsigned) step);
        test_ok(ok, buf);

        if (!ok) {
            printf("# rc %d, waiting %g (%u), running %g (%u), kv %g (%u), "
                   "served %g (%u)\n", (int) got,
                   m.waiting, m.has_waiting, m.running, m.has_running,
                   m.kv, m.has_kv, m.served, m.has_served);
        }
    }
}


static ngx_uint_t
test_field(unsigned has, double v, double want)
{
    if (want == TEST_NONE) {
        return !has;
    }

    return has && v == want;
}
