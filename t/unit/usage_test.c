
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Unit test of the usage reader (src/ngx_http_prefix_route_usage.c), TAP
 * output.  Responses are written with ' for " to keep them readable, and
 * each is fed in one piece, byte by byte and in 1000-byte pieces: the
 * result must not depend on how nginx's buffers cut the response.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <stdio.h>

#include "ngx_http_prefix_route_usage.h"
#include "tap.h"


#define TEST_NONE  ((uint64_t) -1)      /* no cached figure expected */

/* the objects that hold counts */
#define U  NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_USAGE
#define M  NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_META_INFO
#define T  NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_TIMINGS


static void test_usage(const char *name, const char *pre, size_t filler,
    const char *post, ngx_int_t rc, uint64_t prompt, uint64_t cached);
static void test_read(const char *name, const char *pre, size_t filler,
    const char *post, uint64_t cut, ngx_int_t rc, uint64_t prompt,
    uint64_t cached);
static void test_quote(u_char *p, size_t len);
static void test_scan(const char *name, ngx_uint_t object, const char *json,
    ngx_int_t fast, ngx_int_t rc, uint64_t prompt, uint64_t cached);
static void test_edits(const char *json, ngx_uint_t object);
static void test_ratio(void);
static ngx_uint_t test_same(u_char *p, size_t len, ngx_uint_t object);


/* edits made at every byte of an object by test_edits() */
static u_char  test_bytes[] = "-0123456789.eE\"\\{}[],: \tntfux\x80\xff";

static ngx_uint_t  test_answered, test_differ, test_tried;




int
main(void)
{
    size_t  i;

    static struct {
        char  *name;
        char  *tail;
    } cut[] = {
        { "more cached than the ids counted", "],'cached_tokens':2048}}" },
        { "cached_tokens first in an object",
          "]},'details':{'cached_tokens':5}}" },
        { "cached_tokens in a string",
          "]},'text':'x,\\'cached_tokens\\':5}'}" },
        { "cached_tokens null", "],'cached_tokens':null}}" },
        { "cached_tokens negative", "],'cached_tokens':-1}}" },
        { "cached_tokens in a truncated object", "],'cached_tokens':7,'e2e" }
    };

    test_usage("chat completion: prompt and cached tokens",
        "{'id':'c1','object':'chat.completion','choices':[{'index':0,"
        "'message':{'role':'assistant','content':'hi'}}],", 0,
        "'usage':{'prompt_tokens':1200,'completion_tokens':8,"
        "'total_tokens':1208,'prompt_tokens_details':{'cached_tokens':1024}}}",
        NGX_OK, 1200, 1024);

    test_usage("llama-server: usage before timings",
        "{'choices':[{'message':{'content':'x'}}],'object':'chat.completion',"
        "'usage':{'completion_tokens':8,'prompt_tokens':2473,"
        "'total_tokens':2481,'prompt_tokens_details':{'cached_tokens':1464}},"
        "'id':'chatcmpl-1','timings':{'cache_n':1464,'prompt_n':1009,"
        "'prompt_ms':1261.5,'predicted_n':8}", 0, "}",
        NGX_OK, 2473, 1464);

    test_usage("a long answer: usage in the tail",
        "{'choices':[{'message':{'content':'", 100000,
        "'}}],'usage':{'prompt_tokens':50,'prompt_tokens_details':"
        "{'cached_tokens':48}}}",
        NGX_OK, 50, 48);

    test_usage("vLLM without --enable-prompt-tokens-details: no cached figure",
        "{'choices':[],'usage':{'prompt_tokens':77,'total_tokens':80,"
        "'completion_tokens':3,'prompt_tokens_details':null}}", 0, "",
        NGX_OK, 77, TEST_NONE);

    test_usage("an OpenAI stream with include_usage: the last chunk",
        "data: {'choices':[{'delta':{'content':'a'}}],'usage':null}\n\n"
        "data: {'choices':[{'delta':{'content':'", 20000,
        "'}}],'usage':null}\n\n"
        "data: {'choices':[],'usage':{'prompt_tokens':900,"
        "'completion_tokens':8,'prompt_tokens_details':{'cached_tokens':"
        "896}}}\n\ndata: [DONE]\n\n",
        NGX_OK, 900, 896);

    test_usage("SGLang's native /generate: meta_info",
        "{'text':' Paris.','output_ids':[12366,13],'meta_info':{'id':'4f1c',"
        "'finish_reason':{'type':'stop','matched':128009},"
        "'prompt_tokens':2061,'weight_version':'default',"
        "'completion_tokens':2,'cached_tokens':2048,'e2e_latency':0.07}}",
        0, "", NGX_OK, 2061, 2048);

    test_usage("SGLang's native stream: the last event's meta_info",
        "data: {'text':' P','meta_info':{'prompt_tokens':2061,"
        "'completion_tokens':1,'cached_tokens':0}}\n\n"
        "data: {'text':' P", 20000,
        "','meta_info':{'prompt_tokens':2061,'completion_tokens':900,"
        "'cached_tokens':2048}}\n\ndata: [DONE]\n\n",
        NGX_OK, 2061, 2048);

    test_read("SGLang's /generate with return_logprob: meta_info's start "
        "is cut off the tail, its cached_tokens read for token ids",
        "{'text':' Paris.','output_ids':[12366,13],'meta_info':{'id':'4f1c',"
        "'finish_reason':{'type':'length'},'prompt_tokens':2061,"
        "'input_token_logprobs':[[-2.5,13,null]],"
        "'output_token_logprobs':[[-0.1,12366,null],[-0.2,", 20000,
        "]],'completion_tokens':2000,'cached_tokens':2048,"
        "'cached_tokens_details':{'device':2048},'e2e_latency':0.07}}",
        2061, NGX_OK, 2061, 2048);

    test_read("SGLang's stream with return_logprob: the last event's",
        "data: {'text':' P','meta_info':{'prompt_tokens':2061,"
        "'output_token_logprobs':[", 20000,
        "],'completion_tokens':1, 'cached_tokens' : 1024 }}\n\n"
        "data: [DONE]\n\n",
        2061, NGX_OK, 2061, 1024);

    /* the tails of such answers that are not read, for 2000 ids */

    for (i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        test_read(cut[i].name, "{'meta_info':{'output_token_logprobs':[",
                  20000, cut[i].tail, 2000, NGX_DECLINED, 0, 0);
    }

    test_read("the same, without token ids: not read",
        "{'meta_info':{'output_token_logprobs':[", 20000,
        "],'cached_tokens':20}}", 0, NGX_DECLINED, 0, 0);

    test_read("a whole meta_info is read as before, with token ids too",
        "{'text':' P','meta_info':{'prompt_tokens':30,'completion_tokens':1,"
        "'cached_tokens':16}}", 0, "", 30, NGX_OK, 30, 16);

    test_usage("llama-server's native /completion: timings",
        "{'index':0,'content':' Paris.','tokens':[],'id_slot':0,'stop':true,"
        "'tokens_predicted':3,'tokens_evaluated':2061,'prompt':'", 30000,
        "','tokens_cached':2063,'timings':{'cache_n':2048,'prompt_n':13,"
        "'prompt_ms':21.7,'predicted_n':3,'predicted_ms':40.2}}",
        NGX_OK, 2061, 2048);

    test_usage("llama-server's native stream: the last event's timings",
        "data: {'index':0,'content':' P','tokens':[47],'stop':false}\n\n"
        "data: {'index':0,'content':'", 20000,
        "','stop':true,'tokens_evaluated':500,'timings':{'cache_n':0,"
        "'prompt_n':500,'prompt_ms':80.1,'predicted_n':900}}\n\n",
        NGX_OK, 500, 0);

    test_usage("timings without cache_n: prompt_n alone is not the prompt",
        "{'content':'x','timings':{'prompt_n':13,'prompt_ms':21.7}}", 0, "",
        NGX_DECLINED, 0, 0);

    test_usage("TGI's native /generate: no counts of the prompt",
        "{'generated_text':' Paris.','details':{'finish_reason':'eos_token',"
        "'generated_tokens':3,'seed':null,'prefill':[],'tokens':[]}}", 0, "",
        NGX_DECLINED, 0, 0);

    test_usage("usage before meta_info: the usage",
        "{'usage':{'prompt_tokens':40,'prompt_tokens_details':"
        "{'cached_tokens':32}},'meta_info':{'prompt_tokens':40,"
        "'cached_tokens':0}}", 0, "",
        NGX_OK, 40, 32);

    test_usage("a stream without usage",
        "data: {'choices':[{'delta':{'content':'a'}}],'usage':null}\n\n"
        "data: [DONE]\n\n", 0, "",
        NGX_DECLINED, 0, 0);

    test_usage("Anthropic stream: message_start's usage, in the head",
        "event: message_start\ndata: {'type':'message_start','message':"
        "{'id':'m1','type':'message','role':'assistant','content':[],"
        "'usage':{'input_tokens':10,'cache_creation_input_tokens':0,"
        "'cache_read_input_tokens':90,'output_tokens':1}}}\n\n"
        "event: content_block_delta\ndata: {'type':'content_block_delta',"
        "'delta':{'type':'text_delta','text':'", 30000,
        "'}}\n\nevent: message_delta\ndata: {'type':'message_delta',"
        "'usage':{'output_tokens':15}}\n\n"
        "event: message_stop\ndata: {'type':'message_stop'}\n\n",
        NGX_OK, 100, 90);

    test_usage("Anthropic message: input + cache read + cache creation",
        "{'id':'m1','type':'message','content':[{'type':'text','text':'x'}],"
        "'usage':{'input_tokens':5,'cache_creation_input_tokens':20,"
        "'cache_read_input_tokens':null,'output_tokens':4}}", 0, "",
        NGX_OK, 25, 0);

    test_usage("Responses API: input_tokens_details",
        "{'id':'r1','object':'response','output':[],'usage':"
        "{'input_tokens':300,'input_tokens_details':{'cached_tokens':256},"
        "'output_tokens':4,'total_tokens':304},'user':null,"
        "'metadata':{}}", 0, "",
        NGX_OK, 300, 256);

    test_usage("usage quoted in the answer's text is not the usage",
        "{'choices':[{'message':{'content':'see \\'usage\\': "
        "{\\'prompt_tokens\\': 5}'}}]}", 0, "",
        NGX_DECLINED, 0, 0);

    test_usage("a truncated response",
        "{'choices':[],'usage':{'prompt_tokens':12,'prompt_tokens_detai", 0,
        "", NGX_DECLINED, 0, 0);

    test_usage("a negative count",
        "{'usage':{'prompt_tokens':-1}}", 0, "", NGX_DECLINED, 0, 0);

    test_usage("a count that is not an integer",
        "{'usage':{'prompt_tokens':12.5}}", 0, "", NGX_DECLINED, 0, 0);

    test_usage("a count out of range",
        "{'usage':{'prompt_tokens':1099511627776}}", 0, "",
        NGX_DECLINED, 0, 0);

    test_usage("more cached than prompted",
        "{'usage':{'prompt_tokens':10,'prompt_tokens_details':"
        "{'cached_tokens':11}}}", 0, "", NGX_DECLINED, 0, 0);

    test_usage("usage that is not an object",
        "{'usage':[1,2,3]}", 0, "", NGX_DECLINED, 0, 0);

    test_usage("not JSON at all",
        "\x1f\x8b\x08\x00 compressed bytes 'usage' :{ ", 0, "",
        NGX_DECLINED, 0, 0);

    test_usage("an empty response", "", 0, "", NGX_DECLINED, 0, 0);

    test_usage("a count given twice: the last, as jansson keeps it",
        "{'usage':{'prompt_tokens':5,'prompt_tokens':7}}", 0, "",
        NGX_OK, 7, TEST_NONE);

    /*
     * the fast path decides the engines' usage objects, jansson the odd
     * ones, and the native objects, which hold real numbers (latencies)
     */

    test_scan("vLLM's usage: the fast path reads it", U,
        "{'prompt_tokens':4100,'completion_tokens':24,'total_tokens':4124,"
        "'prompt_tokens_details':{'cached_tokens':512}}",
        NGX_OK, NGX_OK, 4100, 512);

    test_scan("llama-server's usage, spaced, with other members", U,
        "{ \"completion_tokens\" : 8 ,\n \"prompt_tokens\": 2473, "
        "\"total_tokens\":2481, \"prompt_tokens_details\": "
        "{\"cached_tokens\": 2400, \"audio_tokens\": null}, "
        "\"x\": [true, false, {}, [], \"s\", -3] }",
        NGX_OK, NGX_OK, 2473, 2400);

    test_scan("Anthropic's usage", U,
        "{'input_tokens':5,'cache_creation_input_tokens':20,"
        "'cache_read_input_tokens':100,'output_tokens':4,"
        "'service_tier':'standard'}",
        NGX_OK, NGX_OK, 125, 100);

    test_scan("the Responses API's usage", U,
        "{'input_tokens':300,'input_tokens_details':{'cached_tokens':256},"
        "'output_tokens':4}", NGX_OK, NGX_OK, 300, 256);

    test_scan("details that are not an object: no cached figure", U,
        "{'prompt_tokens':10,'prompt_tokens_details':null}",
        NGX_OK, NGX_OK, 10, TEST_NONE);

    test_scan("a count that is a string: declined by both", U,
        "{'prompt_tokens':'10'}", NGX_DECLINED, NGX_DECLINED, 0, 0);

    test_scan("a truncated object: left to jansson, which declines it", U,
        "{'prompt_tokens':10,'prompt_tokens_details':{'cached_tok",
        NGX_AGAIN, NGX_DECLINED, 0, 0);

    test_scan("an escaped key: left to jansson, which reads it", U,
        "{'prompt\\u005ftokens':9}", NGX_AGAIN, NGX_OK, 9, TEST_NONE);

    test_scan("a count given twice: the last, as jansson keeps it", U,
        "{'prompt_tokens':5,'prompt_tokens':7}", NGX_OK, NGX_OK, 7,
        TEST_NONE);

    test_scan("details given twice: the last, even when not an object", U,
        "{'prompt_tokens':9,'prompt_tokens_details':{'cached_tokens':4},"
        "'prompt_tokens_details':[]}", NGX_OK, NGX_OK, 9, TEST_NONE);

    test_scan("a real count: left to jansson, which declines it", U,
        "{'prompt_tokens':1.0}", NGX_AGAIN, NGX_DECLINED, 0, 0);

    test_scan("text past ASCII and escapes in a value: read as jansson", U,
        "{'prompt_tokens':3,'model':'caf\xc3\xa9 \\u00e9\\n'}", NGX_OK,
        NGX_OK, 3, TEST_NONE);

    test_scan("a NUL escaped in a value: read as jansson reads bodies", U,
        "{'prompt_tokens':3,'model':'a\\u0000b'}", NGX_OK, NGX_OK, 3,
        TEST_NONE);

    test_scan("invalid UTF-8 in a value: declined by jansson", U,
        "{'prompt_tokens':3,'model':'caf\xc3'}", NGX_AGAIN, NGX_DECLINED,
        0, 0);

    test_scan("an exponent: left to jansson, which declines it", U,
        "{'prompt_tokens':1e3}", NGX_AGAIN, NGX_DECLINED, 0, 0);

    test_scan("meta_info without cached_tokens: no cached figure", M,
        "{'prompt_tokens':10,'completion_tokens':3}",
        NGX_OK, NGX_OK, 10, TEST_NONE);

    test_scan("meta_info: the details of usage are not read there", M,
        "{'prompt_tokens':10,'prompt_tokens_details':{'cached_tokens':8}}",
        NGX_OK, NGX_OK, 10, TEST_NONE);

    test_scan("meta_info: more cached than prompted, declined", M,
        "{'prompt_tokens':10,'cached_tokens':11}",
        NGX_DECLINED, NGX_DECLINED, 0, 0);

    test_scan("meta_info: Anthropic's members are not read there", M,
        "{'input_tokens':10,'cache_read_input_tokens':5}",
        NGX_DECLINED, NGX_DECLINED, 0, 0);

    test_scan("timings: computed and cached", T,
        "{'cache_n':1464,'prompt_n':1009,'prompt_ms':1261}",
        NGX_OK, NGX_OK, 2473, 1464);

    test_scan("timings with their real numbers: left to jansson", T,
        "{'cache_n':1464,'prompt_n':1009,'prompt_ms':1261.5}",
        NGX_AGAIN, NGX_OK, 2473, 1464);

    test_scan("timings: cache_n null, declined", T,
        "{'cache_n':null,'prompt_n':1009}",
        NGX_DECLINED, NGX_DECLINED, 0, 0);

    test_scan("usage: llama.cpp's members are not read there", U,
        "{'cache_n':1464,'prompt_n':1009}",
        NGX_DECLINED, NGX_DECLINED, 0, 0);

    test_edits("{'prompt_tokens':4100,'completion_tokens':24,"
               "'prompt_tokens_details':{'cached_tokens':512},'x':[null]}", U);
    test_edits("{'input_tokens':5,'cache_creation_input_tokens':20,"
               "'cache_read_input_tokens':100,'output_tokens':4}", U);
    test_edits("{'input_tokens':300,'input_tokens_details':"
               "{'cached_tokens':256},'output_tokens':true}", U);
    test_edits("{'id':'a1','prompt_tokens':2061,'completion_tokens':2,"
               "'cached_tokens':2048,'e2e_latency':0}", M);
    test_edits("{'cache_n':2048,'prompt_n':13,'prompt_ms':21,"
               "'predicted_n':3}", T);

    printf("# edits: %u objects, the fast path answered %u\n",
           (unsigned) test_tried, (unsigned) test_answered);

    test_ok(test_differ == 0 && test_answered > test_tried / 2,
            "every object one edit away from an engine's usage (a byte "
            "replaced, inserted or removed, or the object cut short): "
            "where the fast path answers, jansson answers the same");

    test_ratio();

    return test_done();
}


/* a model's bytes a token (x 256), learned from the engines' reports */

static void
test_ratio(void)
{
    uint32_t  r;
    uint64_t  n;

    r = 0;

    for (n = 0; n < 16; n++) {
        r = ngx_http_prefix_route_usage_ratio(r, n, n % 2 ? 3 * 256 : 5 * 256);
    }

    test_ok(r >= 4 * 256 - 16 && r <= 4 * 256 + 16,
            "the first 16 samples: their mean (within 1/16 of a byte)");

    r = ngx_http_prefix_route_usage_ratio(4 * 256, 16, 4800 * 256);

    test_ok(r == (4 * 256 * 15 + 8 * 256) / 16,
            "then a report of 1 token for 4.8 KB counts as twice the "
            "figure: it moves by 1/16 (4 -> 4.25 bytes a token)");

    r = ngx_http_prefix_route_usage_ratio(4 * 256, 16, 1);

    test_ok(r == (4 * 256 * 15 + 2 * 256) / 16,
            "and one of 4 billion tokens as half of it");

    r = 4 * 256;

    for (n = 16; n < 100; n++) {
        r = ngx_http_prefix_route_usage_ratio(r, n, 6 * 256);
    }

    test_ok(r > 5 * 256 && r <= 6 * 256,
            "a model whose prompts change: the figure follows them");

    r = ngx_http_prefix_route_usage_ratio(0, 0, 4800 * 256);

    test_ok(r == 4800 * 256, "the first sample is taken as it is");
}


/*
 * Every object one edit away from "json" (quotes for '), each read by
 * both readers
 */

static void
test_edits(const char *json, ngx_uint_t object)
{
    u_char      buf[512];
    size_t      len, i, k, n;

    len = strlen(json);
    ngx_memcpy(buf, json, len);
    test_quote(buf, len);

    for (i = 0; i <= len; i++) {

        /* cut short */
        test_same(buf, i, object);

        if (i == len) {
            break;
        }

        for (k = 0; k < sizeof(test_bytes) - 1; k++) {
            /* replaced */
            n = buf[i];
            buf[i] = test_bytes[k];
            test_same(buf, len, object);
            buf[i] = (u_char) n;

            /* inserted */
            ngx_memmove(buf + i + 1, buf + i, len - i);
            buf[i] = test_bytes[k];
            test_same(buf, len + 1, object);
            ngx_memmove(buf + i, buf + i + 1, len - i);
        }

        /* removed */
        n = buf[i];
        ngx_memmove(buf + i, buf + i + 1, len - i - 1);
        test_same(buf, len - 1, object);
        ngx_memmove(buf + i + 1, buf + i, len - i - 1);
        buf[i] = (u_char) n;
    }
}


static ngx_uint_t
test_same(u_char *p, size_t len, ngx_uint_t object)
{
    ngx_int_t                        rc[2];
    ngx_http_prefix_route_tokens_t   t[2];

    test_tried++;

    ngx_memzero(&t, sizeof(t));
    rc[0] = ngx_http_prefix_route_usage_scan(p, p + len, object, &t[0]);

    if (rc[0] == NGX_AGAIN) {
        return 1;
    }

    test_answered++;

    rc[1] = ngx_http_prefix_route_usage_json(p, p + len, object, &t[1]);

    if (rc[0] == rc[1]
        && (rc[0] != NGX_OK
            || (t[0].prompt == t[1].prompt && t[0].cached == t[1].cached
                && t[0].has_cached == t[1].has_cached)))
    {
        return 1;
    }

    if (test_differ++ < 5) {
        printf("# differs: %.*s: fast %d (%llu, %llu), jansson %d\n",
               (int) len, p, (int) rc[0], (unsigned long long) t[0].prompt,
               (unsigned long long) t[0].cached, (int) rc[1]);
    }

    return 0;
}


/*
 * One usage object read by the fast path, which must answer "fast", and
 * by jansson, which must answer "rc" with the counts; where the fast path
 * answers, the same as jansson.
 */

static void
test_scan(const char *name, ngx_uint_t object, const char *json,
    ngx_int_t fast, ngx_int_t rc, uint64_t prompt, uint64_t cached)
{
    u_char                          *p;
    size_t                           len;
    ngx_int_t                        got[2];
    ngx_http_prefix_route_tokens_t   t[2];

    len = strlen(json);

    p = malloc(len + 1);
    if (p == NULL) {
        test_ok(0, name);
        return;
    }

    ngx_memcpy(p, json, len);
    test_quote(p, len);

    ngx_memzero(&t, sizeof(t));
    got[0] = ngx_http_prefix_route_usage_scan(p, p + len, object, &t[0]);
    got[1] = ngx_http_prefix_route_usage_json(p, p + len, object, &t[1]);

    free(p);

    test_ok(got[0] == fast && got[1] == rc
            && (rc != NGX_OK
                || (t[1].prompt == prompt
                    && (cached == TEST_NONE ? !t[1].has_cached
                        : (t[1].has_cached && t[1].cached == cached))))
            && (fast != NGX_OK
                || (t[0].prompt == t[1].prompt && t[0].cached == t[1].cached
                    && t[0].has_cached == t[1].has_cached)),
            name);
}



/*
 * The response is pre, "filler" bytes of 'x', then post; fed whole, byte
 * by byte and in 1000-byte pieces, each way must give rc and the counts.
 */

static void
test_usage(const char *name, const char *pre, size_t filler, const char *post,
    ngx_int_t rc, uint64_t prompt, uint64_t cached)
{
    test_read(name, pre, filler, post, 0, rc, prompt, cached);
}


/*
 * As test_usage(), for a prompt of "cut" tokens the caller counted (token
 * ids): where usage_parse() declines, usage_cut() reads the tail.
 */

static void
test_read(const char *name, const char *pre, size_t filler, const char *post,
    uint64_t cut, ngx_int_t rc, uint64_t prompt, uint64_t cached)
{
    u_char                          *body;
    size_t                           len, a, b, i, piece, step[3];
    ngx_int_t                        got;
    ngx_uint_t                       k, ok;
    ngx_http_prefix_route_usage_t    u;
    ngx_http_prefix_route_tokens_t   t;

    a = strlen(pre);
    b = strlen(post);
    len = a + filler + b;

    body = malloc(len + 1);
    if (body == NULL) {
        test_ok(0, name);
        return;
    }

    ngx_memcpy(body, pre, a);
    ngx_memset(body + a, 'x', filler);
    ngx_memcpy(body + a + filler, post, b);
    test_quote(body, len);

    step[0] = len ? len : 1;
    step[1] = 1;
    step[2] = 1000;

    ok = 1;

    for (k = 0; k < 3; k++) {
        ngx_memzero(&u, sizeof(u));

        for (i = 0; i < len; i += piece) {
            piece = ngx_min(step[k], len - i);
            ngx_http_prefix_route_usage_feed(&u, body + i, piece);
        }

        ngx_memzero(&t, sizeof(t));
        got = ngx_http_prefix_route_usage_parse(&u, &t);

        if (got != NGX_OK && cut) {
            got = ngx_http_prefix_route_usage_cut(&u, cut, &t);
        }

        if (got != rc
            || (rc == NGX_OK
                && (t.prompt != prompt
                    || (cached == TEST_NONE ? t.has_cached
                        : (!t.has_cached || t.cached != cached)))))
        {
            printf("# pieces of %u: rc %d prompt %llu cached %llu (%s)\n",
                   (unsigned) step[k], (int) got,
                   (unsigned long long) t.prompt,
                   (unsigned long long) t.cached,
                   t.has_cached ? "reported" : "not reported");
            ok = 0;
        }
    }

    free(body);

    test_ok(ok, name);
}


static void
test_quote(u_char *p, size_t len)
{
    for ( /* void */ ; len; p++, len--) {
        if (*p == '\'') {
            *p = '"';
        }
    }
}
