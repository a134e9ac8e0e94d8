/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


/*
 * Unit test of the canonical prompt (src/ngx_http_prefix_route_prompt.c),
 * TAP output.  Request bodies and expected JSON are written with ' for "
 * to keep them readable; test_quote() turns them back.  The expected bytes
 * are spelled out with the control bytes of docs/design.md.  Every body is
 * also given to the fast path (src/ngx_http_prefix_route_scan.c): where it
 * takes one, it must write the same bytes, key, seed and answers.
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>
#include <stdio.h>

#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_prompt.h"
#include "ngx_http_prefix_route_scan.h"
#include "tap.h"


#define ESC  "\x1b"
#define FS   "\x1c"
#define GS   "\x1d"
#define RS   "\x1e"
#define US   "\x1f"
#define DG   "\x01"     /* stands for the 16 hex digits of a part digest */

#define TEST_SIZE   32768
#define TEST_CANARY 0xa5

#define test_is(name, json, expect)                                           \
    test_bytes(name, json, expect, sizeof(expect) - 1)
#define test_key(name, json, key)                                             \
    test_key_at(name, json, sizeof(key) - 1)
#define test_seed(name, json, model)                                          \
    test_seed_is(name, json, (u_char *) model, sizeof(model) - 1, NULL, 0)
#define test_seed_salt(name, json, model, salt)                               \
    test_seed_is(name, json, (u_char *) model, sizeof(model) - 1,             \
                 (u_char *) salt, sizeof(salt) - 1)


typedef struct {
    ngx_int_t   rc;
    size_t      len;
    size_t      key;
    size_t      leaked;     /* jansson bytes still held after the call */
    size_t      biggest;    /* largest jansson allocation during the call */
    ngx_uint_t  allocs;     /* jansson allocations during the call */
    uint64_t    seed;
    uint64_t    model;
    ngx_uint_t  nanswers;
    ngx_uint_t  nontext;
    ngx_uint_t  batch;
    ngx_uint_t  skip_cache;
    size_t      ids;
    ngx_uint_t  late;       /* the walk stopped at pr.deadline */
    size_t      answers[2 * 4];  /* assistant messages: [start, end) */
    u_char      buf[TEST_SIZE + 16];
    ngx_int_t   fast;       /* the fast path's answer for the same body */
} test_out_t;


static void *test_malloc(size_t size);
static void test_free(void *p);
static void test_quote(u_char *dst, const char *src, size_t len);
static size_t test_expand(u_char *dst, const char *src, size_t len,
    test_out_t *out);
static void test_build(const char *json, size_t size, test_out_t *out);
static void test_build_json(json_t *root, size_t size, test_out_t *out);
static ngx_int_t test_fast_path(u_char *text, size_t len, size_t size,
    test_out_t *ref);
static void test_fast(const char *name, const char *json);
static void test_show(const char *label, u_char *p, size_t len);
static void test_bytes(const char *name, const char *json, const char *expect,
    size_t len);
static void test_key_at(const char *name, const char *json, size_t key);
static void test_same(const char *name, const char *json1,
    const char *json2);
static void test_differ(const char *name, const char *json1,
    const char *json2);
static void test_prefix(const char *name, const char *json1,
    const char *json2);
static void test_declined(const char *name, const char *json);
static void test_seed_is(const char *name, const char *json, u_char *model,
    size_t model_len, u_char *salt, size_t salt_len);
static void test_cap(const char *name, const char *json);
static ngx_uint_t test_count(test_out_t *out, u_char c);


static ngx_uint_t  test_allocs;
static size_t      test_live;
static size_t      test_biggest;
static int64_t     test_deadline;  /* pr.deadline of test_build() */
static ngx_uint_t  test_builds;       /* bodies built */
static ngx_uint_t  test_fast_taken;   /* of them, taken by the fast path */
static ngx_uint_t  test_forget;       /* the fast path forgets kept tools */
static ngx_uint_t  test_fast_differ;  /* of those, written otherwise */


static void *
test_malloc(size_t size)
{
    u_char  *p;

    p = malloc(size + sizeof(size_t));
    if (p == NULL) {
        return NULL;
    }

    *(size_t *) p = size;

    test_live += size;
    test_allocs++;

    if (size > test_biggest) {
        test_biggest = size;
    }

    return p + sizeof(size_t);
}


static void
test_free(void *p)
{
    u_char  *base;

    if (p == NULL) {
        return;
    }

    base = (u_char *) p - sizeof(size_t);
    test_live -= *(size_t *) base;

    free(base);
}


static void
test_quote(u_char *dst, const char *src, size_t len)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        dst[i] = (src[i] == '\'') ? '"' : (u_char) src[i];
    }
}


/*
 * test_quote(), and each DG becomes the 16 bytes found at that place in
 * the output if they are lowercase hex digits, "?" x 16 otherwise (so the
 * comparison fails).  Returns the expanded length.
 */

static size_t
test_expand(u_char *dst, const char *src, size_t len, test_out_t *out)
{
    size_t      i, j, k;
    u_char      c;
    ngx_uint_t  hex;

    for (i = 0, j = 0; i < len; i++) {

        if (src[i] != DG[0]) {
            dst[j++] = (src[i] == '\'') ? '"' : (u_char) src[i];
            continue;
        }

        hex = (j + 16 <= out->len);

        for (k = 0; hex && k < 16; k++) {
            c = out->buf[j + k];
            hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        }

        if (hex) {
            ngx_memcpy(dst + j, out->buf + j, 16);

        } else {
            ngx_memset(dst + j, '?', 16);
        }

        j += 16;
    }

    return j;
}


static void
test_build(const char *json, size_t size, test_out_t *out)
{
    json_t        *root;
    size_t         len;
    json_error_t   err;
    u_char         text[TEST_SIZE];

    len = ngx_strlen(json);

    if (len > sizeof(text)) {
        printf("Bail out! test body too long\n");
        exit(255);
    }

    test_quote(text, json, len);

    root = json_loadb((char *) text, len, JSON_ALLOW_NUL, &err);
    if (root == NULL) {
        printf("Bail out! bad test body: %s: %s\n", err.text, json);
        exit(255);
    }

    test_build_json(root, size, out);

    json_decref(root);

    /* a walk stopped at its deadline is not the prompt to compare with */

    test_builds++;
    out->fast = out->late ? NGX_DECLINED
                          : test_fast_path(text, len, size, out);
}


/* the fast path takes the body, and writes jansson's prompt at every cap */

static void
test_fast(const char *name, const char *json)
{
    size_t      size, differ, full;
    test_out_t  out;
    ngx_uint_t  taken;

    differ = test_fast_differ;

    test_build(json, TEST_SIZE, &out);

    /* every cap up to the whole prompt and one more (helper-46) */

    full = out.len;
    taken = (out.fast == NGX_OK);

    for (size = 0; size <= full + 1 && taken; size++) {
        test_build(json, size, &out);
        taken = (out.fast == NGX_OK);
    }

    test_ok(taken && test_fast_differ == differ, name);

    if (!taken) {
        printf("#   declined by the fast path (cap %d)\n", (int) size - 1);
    }
}


/*
 * The fast path over the same body with the same cap: NGX_OK when it took
 * the body and wrote what jansson's walk wrote (counted as a failure when
 * it wrote anything else), NGX_DECLINED when it left the body to jansson.
 */

static ngx_int_t
test_fast_path(u_char *text, size_t len, size_t size, test_out_t *ref)
{
    size_t                          answers[2 * 4];
    ngx_http_prefix_route_prompt_t  pr;
    u_char                          buf[TEST_SIZE + 16];

    ngx_memset(buf, TEST_CANARY, sizeof(buf));
    ngx_memzero(&pr, sizeof(pr));

    pr.buf = buf;
    pr.size = size;
    pr.answers = answers;
    pr.max_answers = 4;

    if (test_forget) {
        ngx_http_prefix_route_scan_forget();
    }

    if (ngx_http_prefix_route_scan(text, len, &pr) != NGX_OK) {
        return NGX_DECLINED;
    }

    test_fast_taken++;

    if (buf[size] != TEST_CANARY) {
        printf("Bail out! the fast path wrote past the cap of %d bytes\n",
               (int) size);
        exit(255);
    }

    if (ref->rc != NGX_OK || pr.len != ref->len
        || ngx_memcmp(buf, ref->buf, pr.len) != 0
        || pr.key != ref->key || pr.seed != ref->seed
        || pr.nanswers != ref->nanswers
        || (pr.nontext > 0) != (ref->nontext > 0)
        || pr.batch != ref->batch
        || pr.ids != ref->ids || pr.skip_cache != ref->skip_cache
        || ngx_memcmp(answers, ref->answers,
                      2 * pr.nanswers * sizeof(size_t)) != 0)
    {
        test_fast_differ++;
        printf("# the fast path differs from jansson (cap %d):\n",
               (int) size);
        test_show("fast path", buf, pr.len);
        test_show("jansson", ref->buf, ref->len);
    }

    return NGX_OK;
}


static void
test_build_json(json_t *root, size_t size, test_out_t *out)
{
    size_t                          live;
    ngx_http_prefix_route_prompt_t  pr;

    ngx_memset(out->buf, TEST_CANARY, sizeof(out->buf));

    pr.buf = out->buf;
    pr.size = size;
    pr.len = 12345;
    pr.key = 12345;
    pr.seed = 0;
    pr.deadline = test_deadline;
    pr.name = NULL;
    pr.answers = out->answers;
    pr.max_answers = 4;

    live = test_live;
    test_biggest = 0;
    test_allocs = 0;

    out->rc = ngx_http_prefix_route_prompt_build(root, &pr);

    out->leaked = test_live - live;
    out->biggest = test_biggest;
    out->allocs = test_allocs;
    out->len = pr.len;
    out->key = pr.key;
    out->seed = pr.seed;
    out->model = pr.model;
    out->nanswers = pr.nanswers;
    out->nontext = pr.nontext;
    out->batch = pr.batch;
    out->ids = pr.ids;
    out->skip_cache = pr.skip_cache;
    out->late = pr.late;

    if (out->buf[size] != TEST_CANARY) {
        printf("Bail out! wrote past the prefix cap of %d bytes\n", (int) size);
        exit(255);
    }
}



static void
test_show(const char *label, u_char *p, size_t len)
{
    size_t  i;

    printf("#   %s (%d bytes): ", label, (int) len);

    for (i = 0; i < len; i++) {
        switch (p[i]) {
        case 0x1b:
            printf("<ESC>");
            break;
        case 0x1c:
            printf("<FS>");
            break;
        case 0x1d:
            printf("<GS>");
            break;
        case 0x1e:
            printf("<RS>");
            break;
        case 0x1f:
            printf("<US>");
            break;
        default:
            if (p[i] < 0x20 || p[i] >= 0x7f) {
                printf("\\x%02x", p[i]);

            } else {
                putchar(p[i]);
            }
        }
    }

    putchar('\n');
}


static void
test_bytes(const char *name, const char *json, const char *expect,
    size_t len)
{
    test_out_t  out;
    u_char      want[TEST_SIZE];

    test_build(json, TEST_SIZE, &out);
    len = test_expand(want, expect, len, &out);

    test_ok(out.rc == NGX_OK && out.len == len && out.leaked == 0
            && ngx_memcmp(out.buf, want, len) == 0, name);

    if (out.rc != NGX_OK || out.len != len
        || ngx_memcmp(out.buf, want, len) != 0)
    {
        printf("#   rc %d\n", (int) out.rc);
        test_show("got", out.buf, out.len);
        test_show("expected", want, len);
    }

    if (out.leaked) {
        printf("#   %d bytes of jansson memory leaked\n", (int) out.leaked);
    }
}


static void
test_key_at(const char *name, const char *json, size_t key)
{
    test_out_t  out;

    test_build(json, TEST_SIZE, &out);

    test_ok(out.rc == NGX_OK && out.key == key, name);

    if (out.key != key) {
        printf("#   key %d, expected %d\n", (int) out.key, (int) key);
    }
}


static void
test_same(const char *name, const char *json1, const char *json2)
{
    test_out_t  out1, out2;

    test_build(json1, TEST_SIZE, &out1);
    test_build(json2, TEST_SIZE, &out2);

    test_ok(out1.rc == NGX_OK && out2.rc == NGX_OK && out1.len > 0
            && out1.len == out2.len && out1.key == out2.key
            && out1.seed == out2.seed
            && ngx_memcmp(out1.buf, out2.buf, out1.len) == 0, name);
}


static void
test_differ(const char *name, const char *json1, const char *json2)
{
    test_out_t  out1, out2;

    test_build(json1, TEST_SIZE, &out1);
    test_build(json2, TEST_SIZE, &out2);

    test_ok(out1.rc == NGX_OK && out2.rc == NGX_OK
            && (out1.len != out2.len
                || ngx_memcmp(out1.buf, out2.buf, out1.len) != 0), name);
}


static void
test_prefix(const char *name, const char *json1, const char *json2)
{
    test_out_t  out1, out2;

    /* json1's form is a strict prefix of json2's, with the same key */

    test_build(json1, TEST_SIZE, &out1);
    test_build(json2, TEST_SIZE, &out2);

    test_ok(out1.rc == NGX_OK && out2.rc == NGX_OK
            && out1.len > 0 && out1.len < out2.len
            && ngx_memcmp(out1.buf, out2.buf, out1.len) == 0
            && out1.key == out2.key && out1.seed == out2.seed, name);

    if (out1.len >= out2.len
        || ngx_memcmp(out1.buf, out2.buf, out1.len) != 0)
    {
        test_show("shorter", out1.buf, out1.len);
        test_show("longer", out2.buf, out2.len);
    }
}


static void
test_declined(const char *name, const char *json)
{
    test_out_t  out;

    test_build(json, TEST_SIZE, &out);

    test_ok(out.rc == NGX_DECLINED && out.len == 0 && out.leaked == 0, name);
}


static void
test_seed_is(const char *name, const char *json, u_char *model,
    size_t model_len, u_char *salt, size_t salt_len)
{
    uint64_t    seed;
    test_out_t  out;
    u_char      m[256], s[256];

    test_quote(m, (char *) model, model_len);

    if (salt != NULL) {
        test_quote(s, (char *) salt, salt_len);
    }

    seed = ngx_http_prefix_route_hash_seed(m, model_len,
                                           salt == NULL ? NULL : s, salt_len);

    test_build(json, TEST_SIZE, &out);

    test_ok(out.rc == NGX_OK && out.seed == seed && out.leaked == 0, name);
}


static void
test_cap(const char *name, const char *json)
{
    size_t      size;
    ngx_uint_t  ok;
    test_out_t  full, out;

    /*
     * for every cap: exactly the first "cap" bytes of the uncapped form,
     * nothing written past them, the key cut the same way, no leak
     */

    test_build(json, TEST_SIZE, &full);

    ok = (full.rc == NGX_OK && full.len > 0 && full.len < TEST_SIZE);

    for (size = 0; ok && size <= full.len + 2; size++) {
        test_build(json, size, &out);

        ok = out.rc == NGX_OK
             && out.len == ngx_min(size, full.len)
             && ngx_memcmp(out.buf, full.buf, out.len) == 0
             && out.key == ngx_min(full.key, out.len)
             && out.seed == full.seed
             && out.leaked == 0;

        if (!ok) {
            printf("#   cap %d: len %d key %d\n",
                   (int) size, (int) out.len, (int) out.key);
        }
    }

    test_ok(ok, name);
}


static ngx_uint_t
test_count(test_out_t *out, u_char c)
{
    size_t      i;
    ngx_uint_t  n;

    n = 0;

    for (i = 0; i < out->len; i++) {
        if (out->buf[i] == c) {
            n++;
        }
    }

    return n;
}


int
main(void)
{
    json_t      *root, *v, *part;
    size_t       i;
    u_char      *big;
    test_out_t   out, out2, out3;
    u_char       want[TEST_SIZE];

    json_set_alloc_funcs(test_malloc, test_free);

    /* the four API shapes */

    test_is("chat: system, user, assistant messages",
            "{'model':'m','messages':[{'role':'system','content':'S'},"
            "{'role':'user','content':'hi'},"
            "{'role':'assistant','content':'yo'}]}",
            RS "system" US "c" "S" RS "user" US "c" "hi"
            RS "assistant" US "c" "yo");

    test_is("chat: tools, then functions, then the messages",
            "{'messages':[{'role':'user','content':'q'}],"
            "'functions':[{'name':'g'}],'tool_choice':'auto',"
            "'tools':[{'type':'function','function':{'name':'f',"
            "'parameters':{'b':1,'a':2}}}]}",
            RS "tools" US "c" FS "[{'function':{'name':'f','parameters':"
            "{'a':2,'b':1}},'type':'function'}]"
            RS "functions" US "c" FS "[{'name':'g'}]"
            RS "user" US "c" "q");

    /*
     * key orders: the SDKs send the same request with its keys in other
     * orders (openai-python and anthropic-python in the order of their
     * parameters, "messages" before "model", "system" and "tools";
     * openai-node as the caller wrote it, usually "model" first): the
     * same prompt, key and seed
     */

    test_same("order: openai-python (messages, model, stream, tools) and "
              "openai-node (model, tools, messages)",
              "{'messages':[{'role':'system','content':'s'},"
              "{'role':'user','content':'q'}],'model':'m','stream':true,"
              "'stream_options':{'include_usage':true},'tool_choice':'auto',"
              "'tools':[{'type':'function','function':{'name':'f',"
              "'parameters':{'type':'object'}}}]}",
              "{'model':'m','tools':[{'function':{'parameters':"
              "{'type':'object'},'name':'f'},'type':'function'}],"
              "'messages':[{'content':'s','role':'system'},"
              "{'content':'q','role':'user'}],'stream':true}");

    test_same("order: anthropic-python (max_tokens, messages, model, "
              "system, tools) and the model, system and tools first",
              "{'max_tokens':1024,'messages':[{'role':'user','content':"
              "[{'type':'text','text':'q'}]}],'model':'m','system':'s',"
              "'tools':[{'name':'f','input_schema':{'type':'object'}}]}",
              "{'model':'m','system':'s','tools':[{'input_schema':"
              "{'type':'object'},'name':'f'}],'messages':[{'content':"
              "[{'text':'q','type':'text'}],'role':'user'}],"
              "'max_tokens':1024}");

    test_same("order: responses, input before instructions and model",
              "{'input':[{'role':'user','content':'q'}],'instructions':'s',"
              "'model':'m'}",
              "{'model':'m','instructions':'s',"
              "'input':[{'role':'user','content':'q'}]}");

    /*
     * the fast path takes the bodies of agents as the SDKs send them, and
     * writes what jansson's walk writes, at every cap
     */

    /*
     * parts by identity: FS, the digest of their canonical JSON, the JSON;
     * nontext only when one is within the cap, the segments that go first
     * included
     */

    test_fast("fast path: openai-python body with an image and audio "
              "(parts by identity, keys out of order, escapes)",
              "{'model':'m','messages':[{'role':'user','content':["
              "{'type':'text','text':'what is this?'},"
              "{'image_url':{'url':'data:image/png;base64,iVBORw0KG"
              "goAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk\\/"
              "+\\/HgAFhAJ/wlseKgAAAABJRU5ErkJggg==','detail':'high'},"
              "'type':'image_url'},{'type':'input_audio','input_audio':"
              "{'data':'UklGRg\\u0041','format':'wav'}},"
              "{'type':'text','text':'and this?'}]},"
              "{'role':'assistant','content':'a cat'},"
              "{'role':'user','content':[{'type':'text'},'bare',7,"
              "{'type':'text','text':null},{},[1,[true,false,null]]]}]}");

    test_fast("fast path: anthropic-python agent body (system blocks, "
              "tools after the messages, tool use and tool results, an "
              "image block)",
              "{'max_tokens':1024,'messages':[{'role':'user','content':["
              "{'type':'image','source':{'type':'base64','media_type':"
              "'image/jpeg','data':'/9j/4AAQSkZJRg=='}},"
              "{'type':'text','text':'describe'}]},"
              "{'role':'assistant','content':[{'type':'text','text':'ok'},"
              "{'type':'tool_use','id':'toolu_1','name':'get','input':"
              "{'city':'Paris','n':-0,'deep':{'b':[1,2],'a':{}}}}]},"
              "{'role':'user','content':[{'type':'tool_result',"
              "'tool_use_id':'toolu_1','content':[{'type':'text',"
              "'text':'12 C'}],'is_error':false}]}],"
              "'model':'claude','system':[{'type':'text','text':'be brief',"
              "'cache_control':{'type':'ephemeral'}},{'type':'document',"
              "'source':{'type':'text','data':'d'}}],"
              "'tools':[{'name':'get','input_schema':{'type':'object'}}]}");

    test_fast("fast path: openai-python agent body (messages, model, "
              "stream, tools after them; tool calls, tool results)",
              "{'messages':[{'role':'system','content':'s'},"
              "{'role':'user','content':'q','name':'ann'},"
              "{'role':'assistant','content':null,'refusal':null,"
              "'tool_calls':[{'id':'c1','type':'function','function':"
              "{'name':'f','arguments':"
              "'{\\\"q\\\": \\\"x\\\", \\\"n\\\": -0}'}}]},"
              "{'role':'tool','tool_call_id':'c1','content':'r'},"
              "{'role':'user','content':'again'}],"
              "'model':'m','stream':true,"
              "'stream_options':{'include_usage':true},'tool_choice':'auto',"
              "'tools':[{'type':'function','function':{'name':'f',"
              "'description':'caf\\u00e9 \\/ a\\nb \\\"q\\\" \\u001f "
              "\\ud83d\\ude00 \xc3\xa9',"
              "'parameters':{'type':'object','properties':{'q':{'type':"
              "'string','enum':['a','b']},'n':{'type':'integer',"
              "'minimum':-0,'maximum':100}},'required':['q'],"
              "'additionalProperties':false}}}]}");

    /*
     * the tools' JSON the fast path keeps: above, the same body at every
     * cap wrote the kept JSON after the first; here it is written anew
     * each time, and found again only for the same bytes
     */

    test_forget = 1;
    test_fast("fast path: an agent body at every cap, its tools' JSON "
              "written anew each time",
              "{'messages':[{'role':'user','content':'q'}],'model':'m',"
              "'tools':[{'type':'function','function':{'name':'f',"
              "'parameters':{'type':'object','properties':{'q':{'type':"
              "'string'}},'required':['q']}}}]}");
    test_forget = 0;

    test_fast("fast path: kept tools' JSON, then tools that differ in "
              "their last value (f)",
              "{'messages':[{'role':'user','content':'q'}],"
              "'tools':[{'name':'f','input_schema':{'b':1,'a':[2]}}]}");
    test_fast("fast path: kept tools' JSON, then tools that differ in "
              "their last value (g)",
              "{'messages':[{'role':'user','content':'q'}],"
              "'tools':[{'name':'f','input_schema':{'b':1,'a':[3]}}]}");
    test_fast("fast path: kept tools' JSON, then functions with the same "
              "bytes as tools",
              "{'messages':[{'role':'user','content':'q'}],"
              "'functions':[{'name':'f','input_schema':{'b':1,'a':[3]}}]}");

    /*
     * known tools written again (the cap makes the fast path measure and
     * rewrite its segments) while new functions are kept beside them: the
     * new ones must not take the known ones' place
     */

    {
        char        body[256];
        size_t      cap, differ;
        test_out_t  out;
        ngx_uint_t  i, ok;

        ok = 1;
        differ = test_fast_differ;

        for (i = 0; i < 6; i++) {
            sprintf(body, "{'messages':[{'role':'user','content':'q'}],"
                    "'tools':[{'name':'t','input_schema':{'b':1,'a':2}}],"
                    "'functions':[{'name':'f%d','parameters':{}}]}",
                    (int) i);

            test_build(body, TEST_SIZE, &out);
            cap = out.len + 1;

            sprintf(body, "{'messages':[{'role':'user','content':'q'}],"
                    "'tools':[{'name':'t','input_schema':{'b':1,'a':2}}],"
                    "'functions':[{'name':'g%d','parameters':{}}]}",
                    (int) i);

            test_build(body, cap, &out);
            ok = ok && out.fast == NGX_OK;
        }

        test_ok(ok && test_fast_differ == differ,
                "fast path: known tools rewritten while new functions "
                "are kept");
    }

    /* a scalar is never known: its bytes could begin a longer one */

    test_fast("fast path: tools 12", "{'messages':[],'tools':12}");
    test_fast("fast path: tools 123 after tools 12",
              "{'messages':[],'tools':123}");

    /*
     * tools and a message's tool calls checked onto one tape: written
     * from it when both fit, else declined, never written otherwise
     */

    {
        char        body[TEST_SIZE], name[128], *p;
        size_t      differ;
        ngx_uint_t  i, n, m;
        test_out_t  out;

        for (n = 3000; n <= 7000; n += 4000) {
            for (m = 500; m <= 2000; m += 1500) {
                p = body + sprintf(body, "{'tools':[");

                for (i = 0; i < n; i++) {
                    p += sprintf(p, i ? ",0" : "0");
                }

                p += sprintf(p, "],'messages':[{'role':'assistant',"
                             "'tool_calls':[");

                for (i = 0; i < m; i++) {
                    p += sprintf(p, i ? ",1" : "1");
                }

                sprintf(p, "]}]}");

                ngx_http_prefix_route_scan_forget();
                differ = test_fast_differ;
                test_build(body, TEST_SIZE, &out);

                sprintf(name, "fast path: tools of %d nodes and tool calls "
                        "of %d on one tape of 8192: %s", (int) n + 1,
                        (int) m + 1, (n + m + 2 <= 8192) ? "written"
                                                          : "declined");

                test_ok(out.rc == NGX_OK
                        && (out.fast == NGX_OK) == (n + m + 2 <= 8192)
                        && test_fast_differ == differ, name);
            }
        }
    }

    test_fast("fast path: anthropic-python body (max_tokens, messages, "
              "model, system blocks, tools; content blocks)",
              "{'max_tokens':1024,'messages':[{'role':'user','content':"
              "[{'type':'text','text':'q','cache_control':{'type':"
              "'ephemeral'}}]},{'role':'assistant','content':[{'type':"
              "'text','text':'a'}]},{'role':'user','content':'q2'}],"
              "'model':'claude','system':[{'type':'text','text':'be brief',"
              "'cache_control':{'type':'ephemeral'}},{'type':'text',"
              "'text':'more'}],'tools':[{'name':'f','description':'d',"
              "'input_schema':{'type':'object','properties':{}}}]}");

    test_fast("fast path: openai-node body (model, tools, functions, "
              "messages), a message without a role, empty parts",
              "{'model':'m','tools':[],'functions':[{'name':'g'}],"
              "'messages':[{},{'content':[]},{'role':'user','content':"
              "[{'type':'input_text','text':'x'},{'type':'output_text',"
              "'text':'y'}]}],'user':'u'}");

    {
        test_out_t  out;

        test_build("{'messages':[{'role':'user','content':[{'type':"
                   "'te\\u0078t','text':'hi'}]}]}", TEST_SIZE, &out);
        test_ok(out.rc == NGX_OK && out.fast == NGX_DECLINED,
                "fast path: a part whose type is escaped is left to jansson, "
                "which compares it decoded (text here; helper-46)");

        /* an object of 300 members in tools: past the sort's array */
        {
            char        body[4096], *p;
            ngx_uint_t  i;

            p = body + sprintf(body, "{'messages':[{'role':'user',"
                               "'content':'q'}],'tools':{");

            for (i = 0; i < 300; i++) {
                p += sprintf(p, "%s'k%03d':%d", i ? "," : "", (int) i,
                             (int) i);
            }

            sprintf(p, "}}");

            test_build(body, TEST_SIZE, &out);
            test_ok(out.rc == NGX_OK && out.fast == NGX_DECLINED,
                    "fast path: an object of more than 256 members to "
                    "sort is left to jansson");
        }

        test_build("{'messages':[{'role':'user','content':'q',"
                   "'content':'r'}]}", TEST_SIZE, &out);
        test_ok(out.rc == NGX_OK && out.fast == NGX_DECLINED,
                "fast path: a member given twice is left to jansson");
    }

    /*
     * tools kept whole at any cap: first seen at cap 0 (the buffer full
     * before them), then written from the kept JSON at every other
     */

    {
        test_out_t   out;

        static char  *tools = "{'messages':[{'role':'user','content':'q'}],"
                              "'tools':[{'name':'f','description':"
                              "'a\\nb \\u00e9 \\\"q\\\"'}],'functions':"
                              "[{'name':'g','description':'c\\td\\/'}]}";

        ngx_http_prefix_route_scan_forget();
        test_build(tools, 0, &out);

        test_fast("fast path: tools and functions with escapes, kept at "
                  "cap 0, written at every cap from what was kept", tools);
    }

    /*
     * tools whose JSON outgrows the kept slot (128 KiB; a real number
     * prints longer than the body has it): written from the body, the
     * same on the first sight and the next
     */

    {
        u_char                          *body, *buf[2], *p;
        size_t                           len[2];
        ngx_uint_t                       i, n, ok;
        ngx_http_prefix_route_prompt_t   pr;

        static char  tail[] = "],\"messages\":[{\"role\":\"user\","
                              "\"content\":\"q\"}]}";

        body = malloc(65536);
        buf[0] = malloc(262144);
        buf[1] = malloc(262144);

        if (body == NULL || buf[0] == NULL || buf[1] == NULL) {
            printf("Bail out! out of memory\n");
            exit(255);
        }

        p = ngx_cpymem(body, "{\"tools\":[", 10);

        for (i = 0; i < 6000; i++) {
            p = ngx_cpymem(p, i ? ",1e300" : "1e300", i ? 6 : 5);
        }

        p = ngx_cpymem(p, tail, sizeof(tail) - 1);

        ok = 1;
        ngx_http_prefix_route_scan_forget();

        for (i = 0; i < 2; i++) {
            ngx_memzero(&pr, sizeof(pr));
            pr.buf = buf[i];
            pr.size = 262144;

            ok = ok && ngx_http_prefix_route_scan(body, p - body, &pr)
                       == NGX_OK;
            len[i] = pr.len;
        }

        for (n = 0, p = buf[0]; ok && p < buf[0] + len[0]; p++) {
            n += (ngx_strncmp(p, "1.0000000000000001e300", 22) == 0);
        }

        test_ok(ok && n == 6000 && len[0] == len[1] && len[0] > 131072
                && ngx_memcmp(buf[0], buf[1], len[0]) == 0,
                "fast path: tools whose JSON outgrows the kept slot are "
                "written whole from the body, on the next sight too");

        free(body);
        free(buf[0]);
        free(buf[1]);
    }

    /* real numbers, printed as jansson prints a double */

    test_fast("fast path: real numbers in tools as jansson prints them "
              "(%.17g, .0 added, the exponent's + and zeros dropped)",
              "{'messages':[{'role':'user','content':'q'}],'tools':[{"
              "'name':'f','x':[0.5,0.1,-0.0,100.0,1e5,1E+20,1e-5,-2.5E-07,"
              "1e17,1e16,5e-324,1e-400,0.1e1,123.456e2,1e0,1e-0,1e+000,"
              "123456789012345678e-3,-123456789012345678.5e290,1e307,"
              "0.000000000000000000000000000000000000000000000000000001,"
              "2.2250738585072014e-308,9007199254740993.0,-0,7]}]}");

    test_fast("fast path: a real number in an image part, a Responses "
              "item and a request member not written",
              "{'model':'m','temperature':0.7,'top_p':1e-1,"
              "'messages':[{'role':'user','content':[{'type':'image_url',"
              "'image_url':{'url':'u','detail':0.5}}]}],"
              "'seed':-1.5e3}");

    test_fast("fast path: a Responses item with a real number",
              "{'input':[{'type':'x','n':0.5,'m':[2e-3,{'k':3.25}]}]}");

    {
        ngx_uint_t                       i;
        json_error_t                     err;
        ngx_http_prefix_route_prompt_t   pr;
        u_char                           buf[64], text[128];

        /* what jansson refuses ("real number overflow") is declined */

        static char  *refused[] = {
            "{'prompt':'p','temperature':1e309}",
            "{'prompt':'p','tools':[-1e309]}",
            "{'prompt':'p','x':123456789012345678e292}",
            "{'prompt':'p','x':1e}",
            "{'prompt':'p','x':1e+}",
            "{'prompt':'p','x':1.e5}",
            "{'prompt':'p','x':1.5E}",
            "{'prompt':'p','x':1e5.0}",
            "{'prompt':'p','x':01e5}"
        };

        for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
            test_quote(text, refused[i], ngx_strlen(refused[i]));

            ngx_memzero(&pr, sizeof(pr));
            pr.buf = buf;
            pr.size = sizeof(buf);

            test_ok(json_loadb((char *) text, ngx_strlen(refused[i]), 0,
                               &err) == NULL
                    && ngx_http_prefix_route_scan(text,
                                                  ngx_strlen(refused[i]),
                                                  &pr)
                       == NGX_DECLINED,
                    "fast path: a number jansson refuses (out of a "
                    "double's range, no digits) is declined");
        }
    }

    test_fast("fast path: legacy Completions' prompt, escapes, UTF-8 and "
              "control bytes of the canonical form",
              "{'model':'m','prompt':'<s>sys\\n\\u00e9t\\u00e9 \\u001e "
              "\\\"q\\\"\\ud83d\\ude00 caf\xc3\xa9','max_tokens':8,"
              "'stop':['\\n'],'logit_bias':{'50256':-100}}");

    test_fast("fast path: an empty prompt is a segment as jansson's",
              "{'prompt':''}");

    test_fast("fast path: a prompt beside tools, system, input and text "
              "(the prompt wins, the others unread)",
              "{'tools':[{'name':'f'}],'system':'S','prompt':'p',"
              "'input':'i','text':'t','cache_salt':'c'}");

    test_fast("fast path: legacy Completions' token ids, -0 as 0, spaces",
              "{'model':'m','prompt':[ 1, 22 ,-0,-5,\n123456789012345678 ],"
              "'max_tokens':8}");
    test_fast("fast path: SGLang's input_ids",
              "{'input_ids':[128000,9906,1917],'sampling_params':"
              "{'max_new_tokens':8},'image_data':null}");
    test_fast("fast path: SGLang's text as token ids",
              "{'text':[1,2,3],'input_ids':[4]}");
    test_fast("fast path: input_ids before a text that is a number and "
              "inputs", "{'text':5,'inputs':'q','input_ids':[1,2]}");
    test_fast("fast path: input_ids after a text that is null",
              "{'text':null,'input_ids':[7,8,9,10,11,12,13,14,15,16,17]}");

    test_fast("fast path: SGLang's text with sampling_params, null media",
              "{'text':'<|im_start|>user\\nq<|im_end|>\\n',"
              "'sampling_params':{'max_new_tokens':8,'temperature':0,"
              "'stop':['<|im_end|>'],'no_stop_trim':true},"
              "'image_data':null,'stream':true,'extra_key':'k'}");

    test_fast("fast path: TGI's inputs, after a text that is a number",
              "{'inputs':'q','text':5,'input_ids':null,"
              "'parameters':{'max_new_tokens':8}}");

    {
        ngx_uint_t   i;
        test_out_t   out;

        static char  *jansson[] = {
            "{'text':'t','image_data':'http://x/a.png'}",
            "{'text':'t','video_data':['v']}",
            "{'text':'t','sampling_params':{'n':2}}",
            "{'text':'t','sampling_params':{'\\u006e':2}}",
            "{'text':'t','sampling_params':{'x':{'n':1}}}",
            "{'text':['a','b']}",
            "{'text':['a']}",
            "{'prompt':[1,2.5]}",
            "{'prompt':[]}",
            "{'prompt':[[1,2]]}",
            "{'prompt':[1,'a']}",
            "{'input_ids':[1,2],'image_data':'x'}",
            "{'input_ids':[1,2],'sampling_params':{'n':2}}",
            "{'prompt':'a','prompt':'b'}",
            "{'input':{'role':'user','content':'q'}}",
            "{'input':['q']}",
            "{'input':[{'role':'user','content':'q'},7]}",
            "{'input':[{'role':'user','role':null,'content':'y'}]}"
        };

        for (i = 0; i < sizeof(jansson) / sizeof(jansson[0]); i++) {
            test_build(jansson[i], TEST_SIZE, &out);
            test_ok(out.fast == NGX_DECLINED,
                    "fast path: token ids, batches, SGLang's media and "
                    "parallel sampling, a Responses input of another "
                    "type, an item not an object, "
                    "and members given twice are left to jansson");
        }
    }

    test_fast("fast path: the Responses API, tools, instructions, "
              "messages and other items",
              "{'model':'m','instructions':'I',"
              "'tools':[{'type':'web_search'}],"
              "'input':[{'role':'user','content':[{'type':'input_text',"
              "'text':'q'},{'type':'input_image','image_url':'http://x'}]},"
              "{'type':'function_call','call_id':'c1','name':'f',"
              "'arguments':'{\\\"cmd\\\":\\\"ls\\\"}'},"
              "{'type':'function_call_output','call_id':'c1',"
              "'output':'a\\nb \\u001e'},"
              "{'type':'message','role':'assistant','id':'m1',"
              "'content':[{'type':'output_text','text':'a',"
              "'annotations':[]}]},"
              "{'call_id':'c2'},{'type':null,'z':[1,{'b':true,'a':null}]},"
              "{'type':7},{'type':'r\\u00e9\\u001f'},"
              "{'role':null,'type':'message','content':'x'},{}],"
              "'stream':true}");

    test_fast("fast path: the Responses API, input before instructions, "
              "instructions as parts, tools kept",
              "{'input':[{'role':'developer','content':'d'},"
              "{'role':'user','content':'q'}],'tools':[{'type':'function',"
              "'name':'f','parameters':{'type':'object'}}],"
              "'instructions':[{'type':'input_text','text':'s'}],"
              "'model':'m'}");

    test_fast("fast path: the Responses API, a string input",
              "{'input':'hello','instructions':'be nice'}");

    {
        char        deep[256];
        u_char     *p;
        size_t      n;
        test_out_t  out;

        /* an item's value nested as deep as the body's check lets it */

        for (n = 29; n <= 30; n++) {
            p = ngx_cpymem(deep, "{'input':[{'type':'x','a':", 26);
            ngx_memset(p, '[', n);
            p = ngx_cpymem(p + n, "1", 1);
            ngx_memset(p, ']', n);
            ngx_memcpy(p + n, "}]}", 4);

            if (n == 29) {
                test_fast("fast path: a Responses item 29 arrays deep, the "
                          "most the body's check takes", deep);
                continue;
            }

            test_build(deep, TEST_SIZE, &out);
            test_ok(out.rc == NGX_OK && out.fast == NGX_DECLINED,
                    "fast path: a Responses item 30 arrays deep is "
                    "jansson's");
        }
    }

    test_fast("fast path: instructions alone", "{'instructions':'x'}");
    test_fast("fast path: an empty input list",
              "{'input':[],'instructions':'x'}");
    test_fast("fast path: input null", "{'input':null,'instructions':'x'}");

    test_same("order: tool calls with their keys in another order",
              "{'model':'m','messages':[{'role':'assistant','content':null,"
              "'tool_calls':[{'id':'c1','type':'function','function':"
              "{'name':'f','arguments':'{}'}}]},{'role':'tool',"
              "'tool_call_id':'c1','content':'r'}]}",
              "{'messages':[{'tool_calls':[{'function':{'arguments':'{}',"
              "'name':'f'},'type':'function','id':'c1'}],'content':null,"
              "'role':'assistant'},{'content':'r','tool_call_id':'c1',"
              "'role':'tool'}],'model':'m'}");

    test_differ("chat: other tools, other prompt",
                "{'tools':[{'type':'function','function':{'name':'f'}}],"
                "'messages':[{'role':'user','content':'q'}]}",
                "{'tools':[{'type':'function','function':{'name':'g'}}],"
                "'messages':[{'role':'user','content':'q'}]}");

    test_is("anthropic: tools, system blocks, content blocks",
            "{'model':'claude','max_tokens':10,"
            "'system':[{'type':'text','text':'Be brief',"
            "'cache_control':{'type':'ephemeral'}}],"
            "'tools':[{'name':'f','input_schema':{}}],"
            "'messages':[{'role':'user','content':[{'type':'text',"
            "'text':'hi'},{'type':'image','source':{'type':'url',"
            "'url':'http://i/1.png'}}]},"
            "{'role':'assistant','content':[{'type':'tool_use','id':'t1',"
            "'name':'f','input':{'x':1}}]},"
            "{'role':'user','content':[{'type':'tool_result',"
            "'tool_use_id':'t1','content':'42'}]}]}",
            RS "tools" US "c" FS "[{'input_schema':{},'name':'f'}]"
            RS "system" US "c" GS "Be brief"
            RS "user" US "c" GS "hi"
            FS DG "{'source':{'type':'url','url':'http://i/1.png'},"
            "'type':'image'}"
            RS "assistant" US "c"
            FS DG "{'id':'t1','input':{'x':1},'name':'f','type':'tool_use'}"
            RS "user" US "c"
            FS DG "{'content':'42','tool_use_id':'t1','type':'tool_result'}");

    test_is("anthropic: system string",
            "{'anthropic_version':'x','system':'S',"
            "'messages':[{'role':'user','content':'u'}]}",
            RS "system" US "c" "S" RS "user" US "c" "u");

    test_is("legacy: prompt string",
            "{'model':'m','prompt':'abc','max_tokens':5}",
            RS "prompt" US "c" "abc");

    test_is("legacy: prompt array, a list of token ids as ids and commas, "
            "another value as JSON",
            "{'prompt':['a',[1,2],3]}",
            RS "prompt" US "c" "a" RS "prompt" US "c" FS "1,2,"
            RS "prompt" US "c" FS "3");

    test_is("legacy: a prompt of token ids is one segment of ids and commas",
            "{'prompt':[1,-2,30,9007199254740993]}",
            RS "prompt" US "c" FS "1,-2,30,9007199254740993,");

    test_same("sglang: input_ids, a batch of one list, as the list",
              "{'input_ids':[[1,2,3]]}", "{'input_ids':[1,2,3]}");

    {
        test_out_t  out, out2;

        test_build("{'input_ids':[1,2,3]}", TEST_SIZE, &out);
        test_build("{'input_ids':[1,2,3,4]}", TEST_SIZE, &out2);
        test_ok(out.rc == NGX_OK && out2.rc == NGX_OK && out.len < out2.len
                && ngx_memcmp(out.buf, out2.buf, out.len) == 0,
                "token ids: a list's bytes begin those of a list that "
                "continues it");
    }

    test_same("sglang: native text as legacy Completions' prompt",
              "{'text':'<s>[INST] q [/INST]','sampling_params':"
              "{'max_new_tokens':8},'stream':true}",
              "{'prompt':'<s>[INST] q [/INST]','max_tokens':8}");

    test_same("sglang: native text, a batch, as a prompt array",
              "{'text':['a','b']}", "{'prompt':['a','b']}");

    test_same("sglang: native input_ids as legacy Completions' token ids",
              "{'input_ids':[1,2,3],'sampling_params':{'max_new_tokens':8}}",
              "{'prompt':[1,2,3],'max_tokens':8}");

    test_same("sglang: input_ids, a batch, as a prompt array of token lists",
              "{'input_ids':[[1,2],[3]]}", "{'prompt':[[1,2],[3]]}");

    test_same("sglang: text before input_ids when both are there",
              "{'text':'a','input_ids':[1]}", "{'text':'a'}");

    test_same("tgi: native inputs as legacy Completions' prompt",
              "{'inputs':'You are terse.\\n\\nq','parameters':"
              "{'max_new_tokens':8}}",
              "{'prompt':'You are terse.\\n\\nq'}");

    test_same("responses: input first, its text member is not a prompt",
              "{'input':'q','text':{'format':{'type':'text'}}}",
              "{'input':'q'}");

    test_declined("sglang: text an object is declined",
                  "{'text':{'format':{'type':'text'}}}");

    test_declined("sglang: input_ids not a list is declined",
                  "{'input_ids':7}");

    test_declined("tgi: inputs not a string is declined",
                  "{'inputs':['a','b']}");

    test_build("{'prompt':'ab'}", TEST_SIZE, &out);
    test_build("{'prompt':[[1,2],3]}", TEST_SIZE, &out2);
    test_ok(out.rc == NGX_OK && out.nontext == 0
            && out2.rc == NGX_OK && out2.nontext == 2,
            "legacy: token ids are not text (their bytes per token differ)");

    test_build("{'text':'ab','image_data':null}", TEST_SIZE, &out);
    test_build("{'text':'ab','image_data':['http://x/a.png']}", TEST_SIZE,
               &out2);
    test_ok(out.rc == NGX_OK && out.nontext == 0
            && out2.rc == NGX_OK && out2.nontext == 1
            && out2.buf[0] == (u_char) RS[0]
            && ngx_memcmp(out2.buf + 1, "image_data", 10) == 0
            && out2.len > out.len
            && ngx_memcmp(out2.buf + out2.len - out.len, out.buf, out.len)
               == 0,
            "sglang: image_data is a segment by identity before the text, "
            "and not text");

    test_build("{'text':'ab','image_data':'http://x/a.png'}", TEST_SIZE,
               &out);
    test_build("{'text':'ab','image_data':'http://x/b.png'}", TEST_SIZE,
               &out2);
    test_ok(out.len == out2.len && out.buf[11] == out2.buf[11]
            && ngx_memcmp(out.buf, out2.buf, 15) != 0,
            "sglang: another image differs within its digest, before the "
            "text");

    test_is("sglang: audio and video after the image, each by identity",
            "{'video_data':'v','text':'t','audio_data':'a'}",
            RS "audio_data" US "c" FS DG "'a'"
            RS "video_data" US "c" FS DG "'v'"
            RS "prompt" US "c" "t");

    test_build("{'input_ids':[1,2],'image_data':'http://x/a.png'}",
               TEST_SIZE, &out);
    test_build("{'input_ids':[[1,2],[3]]}", TEST_SIZE, &out2);
    test_ok(out.rc == NGX_OK && out.nontext > 0 && !out.batch
            && out.buf[0] == (u_char) RS[0]
            && ngx_memcmp(out.buf + 1, "image_data", 10) == 0
            && out2.rc == NGX_OK && out2.batch,
            "sglang: input_ids are not text, after the image; two lists "
            "are a batch");

    test_build("{'text':['a','b']}", TEST_SIZE, &out);
    test_build("{'text':'a','sampling_params':{'n':2}}", TEST_SIZE, &out2);
    test_ok(out.batch && out2.batch,
            "sglang: a batch of texts, and parallel sampling, are batches");

    test_build("{'prompt':[1,2,3]}", TEST_SIZE, &out);
    test_build("{'prompt':['a']}", TEST_SIZE, &out2);
    test_build("{'prompt':[[1,2],[3]]}", TEST_SIZE, &out3);
    test_ok(!out.batch && !out2.batch && out3.batch,
            "legacy: token ids and one prompt in a list are no batch, two "
            "token lists are");

    test_build("{'input_ids':[12,3]}", TEST_SIZE, &out);
    test_build("{'prompt':[[12,3]]}", TEST_SIZE, &out2);
    test_ok(out.ids > 0 && out.ids == out2.ids && out.ids < out.len
            && out.buf[out.ids - 1] == (u_char) FS[0]
            && ngx_memcmp(out.buf + out.ids, "12,3,", 5) == 0
            && out.len == out.ids + 5,
            "token ids alone: where their digits begin, the same for a "
            "batch of one list");

    test_build("{'input_ids':[1,2],'image_data':'http://x/a.png'}",
               TEST_SIZE, &out);
    test_build("{'input_ids':[[1,2],[3]]}", TEST_SIZE, &out2);
    test_build("{'prompt':'a'}", TEST_SIZE, &out3);
    test_ok(out.ids == 0 && out2.ids == 0 && out3.ids == 0,
            "token ids after an image, a batch of lists, and text: not "
            "token ids alone");

    test_build("{'input_ids':[1,2],'sampling_params':{'n':2}}", TEST_SIZE,
               &out);
    test_build("{'prompt':[1,2]}", 12, &out2);
    test_ok(out.ids == 0 && out2.rc == NGX_OK && out2.ids > 0
            && out2.ids < out2.len && out2.len == 12,
            "token ids sampled twice are a batch; ids cut by the cap are "
            "still ids");

    /* requests that ask the engine not to read its cache for the prompt */
    {
        ngx_uint_t  ok, differ;

        static char  *skip[] = {
            "{'prompt':'a','prompt_logprobs':0}",
            "{'messages':[{'role':'user','content':'a'}],"
            "'skip_reading_prefix_cache':true}",
            "{'prompt':'a','echo':true,'logprobs':1}",
            "{'input_ids':[1,2],'return_logprob':true,'logprob_start_len':0}",
            "{'prompt':'a','cache_prompt':false}",
            "{'prompt':'a','prompt_logprobs':'x'}",
            "{'logprob_start_len':-0,'text':'a','return_logprob':true}",
            "{'logprobs':{},'prompt':'a','echo':true}"
        };

        static char  *read[] = {
            "{'prompt':'a','prompt_logprobs':null}",
            "{'prompt':'a','echo':true}",
            "{'prompt':'a','echo':true,'logprobs':null}",
            "{'messages':[{'role':'user','content':'a'}],'logprobs':true}",
            "{'input_ids':[1,2],'return_logprob':true}",
            "{'input_ids':[1,2],'return_logprob':true,"
            "'logprob_start_len':-1}",
            "{'text':'a','logprob_start_len':0}",
            "{'prompt':'a','cache_prompt':true}",
            "{'prompt':'a','prompt_logprobs':false}",
            "{'prompt':'a','echo':true,'logprobs':false}",
            "{'prompt':'a','echo':false,'logprobs':1}",
            "{'text':'a','return_logprob':true,'logprob_start_len':1.5}",
            "{'text':'a','return_logprob':1,'logprob_start_len':0}",
            "{'prompt':'a','skip_reading_prefix_cache':false,"
            "'cache_prompt':null}"
        };

        differ = test_fast_differ;
        ok = 1;

        for (i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
            test_build(skip[i], TEST_SIZE, &out);
            ok = ok && out.rc == NGX_OK && out.skip_cache
                 && out.fast == NGX_OK;
        }

        test_ok(ok && test_fast_differ == differ,
                "prompt logprobs, a cache off, SGLang's logprobs from a "
                "start: the engine skips its cache; the fast path agrees");

        ok = 1;

        for (i = 0; i < sizeof(read) / sizeof(read[0]); i++) {
            test_build(read[i], TEST_SIZE, &out);
            ok = ok && out.rc == NGX_OK && !out.skip_cache
                 && out.fast == NGX_OK;
        }

        test_ok(ok && test_fast_differ == differ,
                "output logprobs, echo alone, nulls, a start of -1 or not "
                "an integer, a cache on: the engine reads its cache; the "
                "fast path agrees");
    }

    test_build("{'text':'a','sampling_params':{'n':1}}", TEST_SIZE, &out);
    test_build("{'messages':[{'role':'user','content':'a'}],'n':4}",
               TEST_SIZE, &out2);
    test_ok(!out.batch && !out2.batch,
            "one sequence, and OpenAI's n (one usage for the request), are "
            "no batch");

    test_is("responses: tools, instructions, message and other items",
            "{'model':'m','instructions':'I',"
            "'tools':[{'type':'web_search'}],"
            "'input':[{'role':'user','content':[{'type':'input_text',"
            "'text':'q'},{'type':'input_image','image_url':'http://x'}]},"
            "{'type':'function_call','call_id':'c1','name':'f',"
            "'arguments':'{}'},"
            "{'type':'message','role':'assistant','id':'m1',"
            "'content':[{'type':'output_text','text':'a',"
            "'annotations':[]}]},"
            "{'call_id':'c2'}]}",
            RS "tools" US "c" FS "[{'type':'web_search'}]"
            RS "system" US "c" "I"
            RS "user" US "c" GS "q"
            FS DG "{'image_url':'http://x','type':'input_image'}"
            RS "function_call" US "c"
            FS "{'arguments':'{}','call_id':'c1','name':'f',"
            "'type':'function_call'}"
            RS "assistant" US "c" GS "a"
            RS "item" US "c" FS "{'call_id':'c2'}");

    test_is("responses: string input is one user message",
            "{'input':'hello','instructions':'be nice'}",
            RS "system" US "c" "be nice" RS "user" US "c" "hello");

    test_is("responses: instructions alone",
            "{'instructions':'x'}",
            RS "system" US "c" "x");

    /* roles and boundaries */

    test_is("boundaries: two user messages 'ab', 'c'",
            "{'messages':[{'role':'user','content':'ab'},"
            "{'role':'user','content':'c'}]}",
            RS "user" US "c" "ab" RS "user" US "c" "c");

    test_is("boundaries: one user message 'abc'",
            "{'messages':[{'role':'user','content':'abc'}]}",
            RS "user" US "c" "abc");

    test_differ("boundaries: ['ab','c'] and ['abc'] differ",
                "{'messages':[{'role':'user','content':'ab'},"
                "{'role':'user','content':'c'}]}",
                "{'messages':[{'role':'user','content':'abc'}]}");

    test_differ("boundaries: text parts ['ab','c'] and ['abc'] differ",
                "{'messages':[{'role':'user','content':[{'type':'text',"
                "'text':'ab'},{'type':'text','text':'c'}]}]}",
                "{'messages':[{'role':'user','content':[{'type':'text',"
                "'text':'abc'}]}]}");

    test_is("boundaries: role 'us' with 'erabc' keeps the split",
            "{'messages':[{'role':'us','content':'erabc'}]}",
            RS "us" US "c" "erabc");

    test_differ("boundaries: role/content split differently differ",
                "{'messages':[{'role':'us','content':'erabc'}]}",
                "{'messages':[{'role':'user','content':'abc'}]}");

    test_differ("boundaries: name/content split differently differ",
                "{'messages':[{'role':'user','name':'a','content':'bc'}]}",
                "{'messages':[{'role':'user','content':'abc'}]}");

    test_differ("boundaries: legacy ['ab','c'] and ['abc'] differ",
                "{'prompt':['ab','c']}", "{'prompt':['abc']}");

    test_differ("boundaries: same text, other role",
                "{'messages':[{'role':'user','content':'x'}]}",
                "{'messages':[{'role':'assistant','content':'x'}]}");

    /* a conversation grows by appending */

    test_prefix("prefix: chat turn 1 is a prefix of turn 2",
                "{'model':'m','tools':[{'type':'function'}],'messages':["
                "{'role':'system','content':'S'},"
                "{'role':'user','content':'u1'}]}",
                "{'model':'m','tools':[{'type':'function'}],'messages':["
                "{'role':'system','content':'S'},"
                "{'role':'user','content':'u1'},"
                "{'role':'assistant','content':null,'tool_calls':[{"
                "'id':'c1','type':'function','function':{'name':'f',"
                "'arguments':'{}'}}]},"
                "{'role':'tool','tool_call_id':'c1','content':'42'},"
                "{'role':'assistant','content':'a2'},"
                "{'role':'user','content':'u2'}]}");

    test_prefix("prefix: chat turn 2 is a prefix of turn 3",
                "{'model':'m','tools':[{'type':'function'}],'messages':["
                "{'role':'system','content':'S'},"
                "{'role':'user','content':'u1'},"
                "{'role':'assistant','content':null,'tool_calls':[{"
                "'id':'c1','type':'function','function':{'name':'f',"
                "'arguments':'{}'}}]},"
                "{'role':'tool','tool_call_id':'c1','content':'42'},"
                "{'role':'assistant','content':'a2'},"
                "{'role':'user','content':'u2'}]}",
                "{'model':'m','tools':[{'type':'function'}],'messages':["
                "{'role':'system','content':'S'},"
                "{'role':'user','content':'u1'},"
                "{'role':'assistant','content':null,'tool_calls':[{"
                "'id':'c1','type':'function','function':{'name':'f',"
                "'arguments':'{}'}}]},"
                "{'role':'tool','tool_call_id':'c1','content':'42'},"
                "{'role':'assistant','content':'a2'},"
                "{'role':'user','content':'u2'},"
                "{'role':'assistant','content':'a3'},"
                "{'role':'user','content':[{'type':'text','text':'u3'},"
                "{'type':'image_url','image_url':{'url':'http://i'}}]}]}");

    test_prefix("prefix: anthropic turn 1 is a prefix of turn 2",
                "{'model':'c','system':'S','messages':["
                "{'role':'user','content':'u1'}]}",
                "{'model':'c','system':'S','messages':["
                "{'role':'user','content':'u1'},"
                "{'role':'assistant','content':[{'type':'text',"
                "'text':'a1'}]},{'role':'user','content':'u2'}]}");

    test_prefix("prefix: responses turn 1 is a prefix of turn 2",
                "{'model':'m','instructions':'I','input':["
                "{'role':'user','content':'u1'}]}",
                "{'model':'m','instructions':'I','input':["
                "{'role':'user','content':'u1'},"
                "{'type':'function_call','call_id':'c','name':'f',"
                "'arguments':'{}'},"
                "{'type':'function_call_output','call_id':'c',"
                "'output':'1'},{'role':'user','content':'u2'}]}");

    test_prefix("prefix: legacy prompt ['ab'] is a prefix of ['ab','c']",
                "{'prompt':['ab']}", "{'prompt':['ab','c']}");

    /* content forms */

    test_is("content: a string is its text",
            "{'messages':[{'role':'user','content':'hi'}]}",
            RS "user" US "c" "hi");

    test_is("content: one text part is the same text after GS",
            "{'messages':[{'role':'user','content':[{'type':'text',"
            "'text':'hi'}]}]}",
            RS "user" US "c" GS "hi");

    test_is("content: input_text and output_text parts are text",
            "{'messages':[{'role':'user','content':[{'type':'input_text',"
            "'text':'a'},{'type':'output_text','text':'b'}]}]}",
            RS "user" US "c" GS "a" GS "b");

    test_is("content: other parts and odd text parts count as JSON",
            "{'messages':[{'role':'user','content':[{'type':'refusal',"
            "'text':'no'},{'type':'text','text':1},'s',{'text':'t'}]}]}",
            RS "user" US "c" FS DG "{'text':'no','type':'refusal'}"
            FS DG "{'text':1,'type':'text'}" FS DG "'s'"
            FS DG "{'text':'t'}");

    test_is("content: an image part contributes its JSON",
            "{'messages':[{'role':'user','content':[{'type':'text',"
            "'text':'see'},{'type':'image_url','image_url':{"
            "'url':'http://a/1.png','detail':'low'}}]}]}",
            RS "user" US "c" GS "see"
            FS DG "{'image_url':{'detail':'low','url':'http://a/1.png'},"
            "'type':'image_url'}");

    test_differ("content: requests differing only in the image URL differ",
                "{'messages':[{'role':'user','content':[{'type':'text',"
                "'text':'see'},{'type':'image_url','image_url':{"
                "'url':'http://a/1.png'}}]}]}",
                "{'messages':[{'role':'user','content':[{'type':'text',"
                "'text':'see'},{'type':'image_url','image_url':{"
                "'url':'http://a/2.png'}}]}]}");

    test_build("{'messages':[{'role':'user','content':[{'type':'image_url',"
               "'image_url':{'url':'http://a/1.png'}}]}]}", TEST_SIZE, &out);
    test_build("{'messages':[{'role':'user','content':[{'type':'image_url',"
               "'image_url':{'url':'http://a/2.png'}}]}]}", TEST_SIZE, &out2);
    for (i = 0; i < out.len && out.buf[i] == out2.buf[i]; i++) {
        /* void */
    }
    test_ok(out.len == out2.len && out.buf[7] == 0x1c && i >= 8 && i < 24,
            "content: two images differ from their digest on, not from "
            "their first different JSON byte");

    test_is("fields: name, content, tool_calls, tool_call_id in order",
            "{'messages':[{'role':'assistant','content':null,"
            "'tool_calls':[{'id':'c1','type':'function','function':{"
            "'name':'f','arguments':'{}'}}]},"
            "{'tool_call_id':'c1','content':'42','name':'f',"
            "'role':'tool'}]}",
            RS "assistant" US "t"
            FS "[{'function':{'arguments':'{}','name':'f'},'id':'c1',"
            "'type':'function'}]"
            RS "tool" US "n" "f" US "c" "42" US "i" "c1");

    test_is("fields: a non-string name or tool_call_id is JSON",
            "{'messages':[{'role':'tool','name':7,'tool_call_id':[1]}]}",
            RS "tool" US "n" FS "7" US "i" FS "[1]");

    /* escaping */

    test_is("escape: 0x1b..0x1f become ESC + byte|0x40, 0x1a and 0x20 not",
            "{'messages':[{'role':'user','content':"
            "'a\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f b'}]}",
            RS "user" US "c" "a" "\x1a" ESC "[" ESC "\\" ESC "]" ESC "^"
            ESC "_" " b");

    test_is("escape: a role is escaped too",
            "{'messages':[{'role':'us\\u001eer','content':'x'}]}",
            RS "us" ESC "^" "er" US "c" "x");

    test_differ("escape: a text holding RS cannot forge a message boundary",
                "{'messages':[{'role':'user','content':"
                "'x\\u001euser\\u001fcy'}]}",
                "{'messages':[{'role':'user','content':'x'},"
                "{'role':'user','content':'y'}]}");

    test_build("{'messages':[{'role':'user','content':"
               "'x\\u001euser\\u001fc\\u001d\\u001cy'}]}", TEST_SIZE, &out);
    test_ok(out.rc == NGX_OK && test_count(&out, 0x1e) == 1
            && test_count(&out, 0x1f) == 1 && test_count(&out, 0x1d) == 0
            && test_count(&out, 0x1c) == 0,
            "escape: only the real segment and field bytes are raw");

    /* the assistant messages' places, for the feedback */

    test_build("{'messages':[{'role':'system','content':'S'},"
               "{'role':'user','content':'hi'},"
               "{'role':'assistant','content':'hello'},"
               "{'role':'user','content':'more'}]}", TEST_SIZE, &out);
    test_ok(out.rc == NGX_OK && out.nanswers == 1
            && out.answers[0] == sizeof(RS "system" US "c" "S"
                                        RS "user" US "c" "hi") - 1
            && out.answers[1] == out.answers[0]
                                 + sizeof(RS "assistant" US "c" "hello") - 1,
            "answers: the assistant message's bytes are reported");

    /* the prefix cap */

    test_build("{'messages':[{'role':'system','content':'You are kind'},"
               "{'role':'user','content':'hello'}]}", 10, &out);
    test_quote(want, RS "system" US "c" "You", 10);
    test_ok(out.rc == NGX_OK && out.len == 10 && out.key == 10
            && ngx_memcmp(out.buf, want, 10) == 0,
            "cap: size 10 gives exactly the first 10 bytes");

    test_cap("cap: every cap cuts the uncapped form, even inside escapes "
             "and JSON",
             "{'model':'m','tools':[{'type':'function','function':"
             "{'name':'f'}}],'messages':[{'role':'system','content':'S'},"
             "{'role':'user','name':'n','content':[{'type':'text',"
             "'text':'a\\u001eb'},{'type':'image_url','image_url':{"
             "'url':'http://a/\\u001f'}}]},{'role':'assistant',"
             "'content':'x\\u001b\\u001by','tool_calls':[{'id':'1'}]}]}");

    test_cap("cap: every cap of a responses body",
             "{'instructions':'I','input':[{'role':'user','content':'u'},"
             "{'type':'reasoning','summary':[]},{'x':1}]}");

    test_build("{'messages':[{'role':'user','content':'abc'}]}", 0, &out);
    test_ok(out.rc == NGX_OK && out.len == 0 && out.key == 0,
            "cap: size 0 writes nothing");

    /* a huge part past the cap is neither serialised nor allocated */

    big = malloc(1024 * 1024);
    if (big == NULL) {
        printf("Bail out! no memory\n");
        return 255;
    }

    ngx_memset(big, 'z', 1024 * 1024);

    v = json_pack("[{s:s,s:s%}]", "type", "file", "data", big,
                  (size_t) 1024 * 1024);
    part = json_array_get(v, 0);
    root = json_pack("{s:[{s:s,s:o}]}", "messages", "role", "user",
                     "content", v);

    test_build_json(root, 64, &out);
    i = test_expand(want, RS "user" US "c" FS DG "{'data':'zzzz", 22, &out);
    test_ok(out.rc == NGX_OK && out.len == 64 && i == 37
            && ngx_memcmp(out.buf, want, 37) == 0
            && out.buf[63] == 'z' && out.leaked == 0
            && out.biggest < 4096,
            "cap: a 1 MiB part under a 64-byte cap, no big allocation");

    /* content an object: FS comes right when the buffer is full */

    json_object_set(json_array_get(json_object_get(root, "messages"), 0),
                    "content", part);

    test_build_json(root, 7, &out);
    test_quote(want, RS "user" US "c", 7);
    test_ok(out.rc == NGX_OK && out.len == 7
            && ngx_memcmp(out.buf, want, 7) == 0
            && out.leaked == 0 && out.allocs == 0,
            "cap: a value after a full buffer is not serialised at all");

    json_decref(root);
    free(big);

    /*
     * one part of 10000 small objects: its digest needs all of it, but
     * only what fits under the cap is written
     */

    root = json_loads("{\"messages\":[{\"role\":\"user\"}]}", 0, NULL);
    v = json_array();

    for (i = 0; i < 10000; i++) {
        json_array_append_new(v, json_pack("{s:i,s:i}", "b", 1, "a", 2));
    }

    json_object_set_new(json_array_get(json_object_get(root, "messages"), 0),
                        "content", json_pack("[o]", v));

    test_build_json(root, 64, &out);
    i = test_expand(want, RS "user" US "c" FS DG
                    "[{'a':2,'b':1},{'a':2,'b':1},", 38, &out);
    test_ok(out.rc == NGX_OK && out.len == 64 && i == 53
            && ngx_memcmp(out.buf, want, 53) == 0 && out.leaked == 0,
            "cap: a long part is written only up to the cap");

    json_decref(root);

    /* the tie-break key */

    test_key("key: all of one list of token ids, not its first id",
             "{'input_ids':[1,2,3]}", RS "prompt" US "c" FS "1,2,3,");

    test_key("key: the first prompt of a batch of token lists",
             "{'prompt':[[1,2],[3]]}", RS "prompt" US "c" FS "1,2,");

    test_key("key: end of the first message after system and developer",
             "{'messages':[{'role':'system','content':'S'},"
             "{'role':'developer','content':'D'},"
             "{'role':'user','content':'hi'},"
             "{'role':'assistant','content':'yo'},"
             "{'role':'user','content':'more'}]}",
             RS "system" US "c" "S" RS "developer" US "c" "D"
             RS "user" US "c" "hi");

    test_key("key: anthropic, after the system prompt",
             "{'system':'S','messages':[{'role':'user','content':'u'},"
             "{'role':'assistant','content':'a'}]}",
             RS "system" US "c" "S" RS "user" US "c" "u");

    test_key("key: responses, after the instructions",
             "{'instructions':'I','input':[{'role':'user','content':'u'},"
             "{'role':'user','content':'v'}]}",
             RS "system" US "c" "I" RS "user" US "c" "u");

    test_key("key: legacy, end of the first prompt",
             "{'prompt':['ab','cd']}",
             RS "prompt" US "c" "ab");

    test_key("key: only system messages, the whole prompt",
             "{'messages':[{'role':'system','content':'S'},"
             "{'role':'developer','content':'D'}]}",
             RS "system" US "c" "S" RS "developer" US "c" "D");

    test_key("key: a role 'system' with a NUL is not a system role",
             "{'messages':[{'role':'system\\u0000','content':'S'},"
             "{'role':'user','content':'u'}]}",
             RS "system" "\0" US "c" "S");

    test_key("key: a message that is not an object ends the key",
             "{'messages':['hi',{'role':'user','content':'u'}]}",
             RS FS "'hi'");

    test_build("{'messages':[]}", TEST_SIZE, &out);
    test_ok(out.rc == NGX_OK && out.len == 0 && out.key == 0,
            "key: an empty message list is OK, length and key 0");

    /* the seed */

    test_seed("seed: model, no cache_salt",
              "{'model':'m','messages':[]}", "m");

    test_seed_salt("seed: model and cache_salt",
              "{'model':'m','cache_salt':'s1','messages':[]}", "m", "s1");

    test_seed("seed: no model is an empty one",
              "{'messages':[]}", "");

    test_seed("seed: cache_salt null is no salt",
              "{'model':'m','cache_salt':null,'prompt':'x'}", "m");

    test_seed_salt("seed: empty cache_salt is a salt",
              "{'model':'m','cache_salt':'','prompt':'x'}", "m", "");

    test_seed("seed: a model array counts by its JSON",
              "{'model':['a',1],'prompt':'x'}", "['a',1]");

    test_seed_salt("seed: a cache_salt number counts by its JSON",
              "{'model':'m','cache_salt':5,'input':'x'}", "m", "5");

    test_build("{'model':'a','prompt':'x'}", TEST_SIZE, &out);
    test_build("{'model':'b','prompt':'x'}", TEST_SIZE, &out2);
    test_ok(out.seed != out2.seed
            && out.len == out2.len
            && ngx_memcmp(out.buf, out2.buf, out.len) == 0,
            "seed: differs by model, the prompt bytes do not");

    test_build("{'model':'a','cache_salt':'x','prompt':'x'}",
               TEST_SIZE, &out);
    test_build("{'model':'a','cache_salt':'y','prompt':'x'}",
               TEST_SIZE, &out2);
    test_ok(out.seed != out2.seed, "seed: differs by cache_salt");

    test_build("{'text':'x','extra_key':'t1'}", TEST_SIZE, &out);
    test_build("{'text':'x','extra_key':'t2'}", TEST_SIZE, &out2);
    test_build("{'text':'x'}", TEST_SIZE, &out3);
    test_ok(out.seed != out2.seed && out.seed != out3.seed
            && out2.seed != out3.seed && out.model == out3.model,
            "seed: differs by SGLang's extra_key, the model's does not");

    test_build("{'text':'x','lora_path':'a'}", TEST_SIZE, &out);
    test_build("{'text':'x','lora_path':'b'}", TEST_SIZE, &out2);
    test_ok(out.seed != out2.seed && out.seed != out3.seed,
            "seed: differs by SGLang's lora_path");

    test_build("{'text':'x','extra_key':'k'}", TEST_SIZE, &out);
    test_build("{'text':'x','lora_path':'k'}", TEST_SIZE, &out2);
    test_build("{'text':'x','cache_salt':'k'}", TEST_SIZE, &out3);
    test_ok(out.seed != out2.seed && out.seed != out3.seed
            && out2.seed != out3.seed,
            "seed: the same bytes as extra_key, lora_path and cache_salt "
            "differ");

    test_fast("seed: the fast path reads extra_key and lora_path as jansson",
              "{'lora_path':'ad1','model':'m','messages':[{'role':'user',"
              "'content':'q'}],'extra_key':'t1'}");

    test_build("{'model':'m','messages':[{'role':'user','content':'q'}],"
               "'chat_template':'{{ messages }}'}", TEST_SIZE, &out);
    test_build("{'model':'m','messages':[{'role':'user','content':'q'}]}",
               TEST_SIZE, &out2);
    test_ok(out.seed != out2.seed && out.model == out2.model
            && out.len == out2.len
            && ngx_memcmp(out.buf, out2.buf, out.len) == 0,
            "seed: a chat_template of the request's own keys the chain, "
            "the prompt's bytes are the same");

    test_fast("seed: the fast path reads a chat_template without escapes",
              "{'chat_template':'{{ messages }}','model':'m','messages':"
              "[{'role':'user','content':'q'}]}");

    test_build("{'model':'a','prompt':'x'}", TEST_SIZE, &out);
    test_build("{'model':'a','cache_salt':'','prompt':'x'}",
               TEST_SIZE, &out2);
    test_ok(out.seed != out2.seed, "seed: an empty salt is not no salt");

    test_build("{'model':'a','prompt':'x'}", TEST_SIZE, &out);
    test_build("{'model':'a','messages':[{'role':'user','content':'y'}]}",
               TEST_SIZE, &out2);
    test_ok(out.seed == out2.seed
            && out.seed == ngx_http_prefix_route_hash_seed((u_char *) "a", 1,
                                                           NULL, 0),
            "seed: equal without salt, whatever the prompt");

    /* NUL inside strings */

    test_is("nul: a NUL inside a text is kept",
            "{'messages':[{'role':'user','content':'a\\u0000b'}]}",
            RS "user" US "c" "a" "\0" "b");

    test_differ("nul: 'a\\0b' and 'ab' differ",
                "{'messages':[{'role':'user','content':'a\\u0000b'}]}",
                "{'messages':[{'role':'user','content':'ab'}]}");

    test_is("nul: a NUL inside a JSON part is its JSON escape",
            "{'messages':[{'role':'user','content':[{'type':'x',"
            "'v':'a\\u0000'}]}]}",
            RS "user" US "c" FS DG "{'type':'x','v':'a\\u0000'}");

    /* wrong types never fail, a missing prompt declines */

    test_declined("wrong type: messages an object is declined",
                  "{'messages':{'role':'user','content':'x'}}");

    test_declined("wrong type: messages a string is declined",
                  "{'messages':'x','prompt':'y'}");

    test_declined("no prompt field is declined",
                  "{'model':'m','max_tokens':5}");

    test_declined("messages null and nothing else is declined",
                  "{'model':'m','messages':null}");

    test_build("[{'role':'user','content':'x'}]", TEST_SIZE, &out);
    test_ok(out.rc == NGX_DECLINED && out.len == 0,
            "a body that is not an object is declined");

    test_is("wrong type: content a number is FS JSON",
            "{'messages':[{'role':'user','content':42}]}",
            RS "user" US "c" FS "42");

    test_is("wrong type: content an object, a bool",
            "{'messages':[{'role':'user','content':{'b':1,'a':[]}},"
            "{'role':'user','content':true}]}",
            RS "user" US "c" FS "{'a':[],'b':1}"
            RS "user" US "c" FS "true");

    test_is("wrong type: messages that are not objects are FS JSON",
            "{'messages':['hi',5,null,[1]]}",
            RS FS "'hi'" RS FS "5" RS FS "null" RS FS "[1]");

    test_is("wrong type: a missing role is JSON null, a number its JSON",
            "{'messages':[{'content':'x'},{'role':7,'content':'y'},"
            "{'role':null}]}",
            RS FS "null" US "c" "x" RS FS "7" US "c" "y" RS FS "null");

    test_is("wrong type: model an array is OK",
            "{'model':['m'],'messages':[{'role':'user','content':'x'}]}",
            RS "user" US "c" "x");

    test_is("wrong type: prompt a number, input an object",
            "{'prompt':5}",
            RS "prompt" US "c" FS "5");

    test_is("wrong type: input an object is a user message of JSON",
            "{'input':{'a':1}}",
            RS "user" US "c" FS "{'a':1}");

    test_is("wrong type: input items that are not objects",
            "{'input':['x',{'type':'reasoning'},{'type':3,'q':1}]}",
            RS FS "'x'" RS "reasoning" US "c" FS "{'type':'reasoning'}"
            RS FS "3" US "c" FS "{'q':1,'type':3}");

    /* deep nesting inside a part stays within jansson's bounds */

    root = json_loads("{\"messages\":[{\"role\":\"user\",\"content\":[1]}]}",
                      0, NULL);
    v = json_array();
    part = v;

    for (i = 1; i < 1500; i++) {
        json_array_append_new(part, json_array());
        part = json_array_get(part, 0);
    }

    json_object_set_new(json_array_get(json_object_get(root, "messages"), 0),
                        "content", json_pack("[o]", v));

    test_build_json(root, TEST_SIZE, &out);

    i = test_expand(want, RS "user" US "c" FS DG, 9, &out);
    ngx_memset(want + i, '[', 1500);
    ngx_memset(want + i + 1500, ']', 1500);

    test_ok(out.rc == NGX_OK && i == 24 && out.len == 24 + 3000
            && ngx_memcmp(out.buf, want, 24 + 3000) == 0 && out.leaked == 0,
            "deep: a part nested 1500 deep is its digest and JSON");

    test_build_json(root, 100, &out);
    test_ok(out.rc == NGX_OK && out.len == 100
            && ngx_memcmp(out.buf, want, 100) == 0 && out.leaked == 0,
            "deep: and is cut at the cap");

    json_decref(root);

    if (test_live != 0) {
        test_ok(0, "all jansson memory is freed");
        printf("# %d bytes of jansson memory never freed\n", (int) test_live);
    }

    /* the fast path on every body above */

    test_ok(test_fast_differ == 0 && test_fast_taken > 0,
            "the fast path wrote what jansson's walk wrote for each body it "
            "took");
    printf("#   it took %d of %d bodies built, %d differ\n",
           (int) test_fast_taken, (int) test_builds, (int) test_fast_differ);

    /*
     * a system of parts that does not fit beside the messages is measured
     * only up to the cap: the part of 9,000 values after one that reaches
     * it, more than the tape holds, is passed over, and the fast path
     * writes what jansson does (helper-69: measured whole, 8 MB of such
     * parts took 1.3 s)
     */

    big = malloc(TEST_SIZE);
    if (big == NULL) {
        printf("Bail out! no memory\n");
        return 255;
    }

    {
        u_char      *p;
        size_t       differ, size;
        ngx_uint_t   taken;

        p = ngx_cpymem(big, "{'model':'m','system':[{'type':'image','source':"
                       "{'data':'abc'}},{'type':'image','v':[",
                       sizeof("{'model':'m','system':[{'type':'image','source':"
                              "{'data':'abc'}},{'type':'image','v':[") - 1);

        for (i = 0; i < 9000; i++) {
            p = ngx_cpymem(p, i ? ",1" : "1", i ? 2 : 1);
        }

        p = ngx_cpymem(p, "]}],'messages':[{'role':'user','content':'hi'}]}",
                       sizeof("]}],'messages':[{'role':'user','content':"
                              "'hi'}]}"));

        differ = test_fast_differ;
        taken = 1;

        for (size = 1; size <= 40 && taken; size++) {
            test_build((char *) big, size, &out);
            taken = (out.fast == NGX_OK && out.rc == NGX_OK);
        }

        test_ok(taken && test_fast_differ == differ,
                "a system of parts measured up to the cap: a part the tape "
                "cannot hold after it is passed over, as jansson's walk "
                "leaves it");
    }

    free(big);

    /*
     * max_parse: past pr.deadline (here 1 ns after the clock's epoch) the
     * walk stops once a value jansson serialises comes to 1 KiB, a model
     * that is not a string or a part by identity, leaking nothing; a walk
     * that serialises nothing (text alone) is not late; a deadline an
     * hour ahead changes nothing
     */

    {
        u_char  model[8192], image[8192], *p;

        p = ngx_cpymem(model, "{'model':[", 10);

        for (i = 0; i < 400; i++) {
            p = ngx_cpymem(p, i ? ",1.5" : "1.5", i ? 4 : 3);
        }

        p = ngx_cpymem(p, "],'messages':[{'role':'user','content':'hi'}]}",
                       sizeof("],'messages':[{'role':'user','content':"
                              "'hi'}]}"));

        p = ngx_cpymem(image, "{'model':'m','messages':[{'role':'user',"
                       "'content':[{'type':'image_url','image_url':{'url':'",
                       sizeof("{'model':'m','messages':[{'role':'user',"
                              "'content':[{'type':'image_url','image_url':"
                              "{'url':'") - 1);
        ngx_memset(p, 'A', 2048);
        p = ngx_cpymem(p + 2048, "'}}]}]}", sizeof("'}}]}]}"));

        test_deadline = 1;
        test_build((char *) model, TEST_SIZE, &out);
        test_build((char *) image, TEST_SIZE, &out2);
        test_build("{'model':'m','messages':[{'role':'user','content':'hi'}]}",
                   TEST_SIZE, &out3);
        test_ok(out.late && out.leaked == 0 && out2.late && out2.leaked == 0
                && !out3.late && out3.rc == NGX_OK && out3.len > 0,
                "past the deadline the walk stops, late, at a model or a "
                "part jansson serialises; text alone is not late");

        test_deadline = ngx_http_prefix_route_prompt_clock()
                        + (int64_t) 3600 * 1000000000;
        test_build((char *) model, TEST_SIZE, &out);
        test_build((char *) image, TEST_SIZE, &out3);
        test_deadline = 0;
        test_build((char *) model, TEST_SIZE, &out2);
        test_ok(!out.late && !out3.late && out.rc == NGX_OK
                && out.len == out2.len
                && ngx_memcmp(out.buf, out2.buf, out.len) == 0
                && out.seed == out2.seed && out.model == out2.model,
                "a deadline ahead changes neither the prompt nor the seed");
    }

    /*
     * runs inside one value or between two the fast path leaves to jansson,
     * whose reading is timed: more than 1,024 blanks, fraction digits or
     * zeros before an exponent's digits (it reads 1,024)
     */

    {
        size_t       n, k;
        ngx_uint_t   ok;
        char        *q, run[4096];
        const char  *shape[][3] = {
            { "{'model':'m',", " ", "'messages':[{'role':'user',"
                                    "'content':'hi'}]}" },
            { "{'model':'m','x':1.", "5", ",'messages':[{'role':'user',"
                                          "'content':'hi'}]}" },
            { "{'model':'m','x':1e", "0", "7,'messages':[{'role':'user',"
                                          "'content':'hi'}]}" }
        };

        ok = 1;

        for (k = 0; k < 3; k++) {
            for (n = 1024; n <= 1025; n++) {
                q = run + sprintf(run, "%s", shape[k][0]);
                ngx_memset(q, shape[k][1][0], n);
                sprintf(q + n, "%s", shape[k][2]);

                test_build(run, TEST_SIZE, &out);

                ok = ok && out.rc == NGX_OK
                     && out.fast == (n == 1024 ? NGX_OK : NGX_DECLINED);
            }
        }

        test_ok(ok, "1,024 blanks, fraction digits or exponent zeros in a "
                "row take the fast path; 1,025 are left to jansson");
    }

    /*
     * the fast path past pr.deadline: the clock is read once in 1024
     * steps, in whichever of its passes they fall (a system that does not
     * fit is read, measured, then written); once late it declines, never
     * giving a prompt cut short by the stop
     */

    {
        size_t                           j, k, m, c,
                                         caps[] = { 64, 512, 8192 };
        u_char                           body[65536], *p, buf[8192],
                                         ref[8192];
        ngx_uint_t                       late, fine, wrong;
        ngx_http_prefix_route_prompt_t   pr, pr0;

        late = 0;
        fine = 0;
        wrong = 0;

        for (k = 1; k <= 48; k++) {
            for (m = 4; m <= 36; m += 16) {

                p = ngx_cpymem(body, "{\"model\":\"m\",\"system\":[",
                               sizeof("{\"model\":\"m\",\"system\":[") - 1);

                for (i = 0; i < k; i++) {
                    p += sprintf((char *) p, "%s{\"type\":\"x\",\"o\":{",
                                 i ? "," : "");

                    for (j = 0; j < m; j++) {
                        p += sprintf((char *) p, "%s\"k%zu\":%zu",
                                     j ? "," : "", m - j, j);
                    }

                    p = ngx_cpymem(p, "}}", 2);
                }

                p = ngx_cpymem(p, "],\"messages\":[{\"role\":\"user\","
                               "\"content\":\"hi\"}]}",
                               sizeof("],\"messages\":[{\"role\":\"user\","
                                      "\"content\":\"hi\"}]}") - 1);

                for (c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
                    ngx_memzero(&pr0, sizeof(pr0));
                    pr0.buf = ref;
                    pr0.size = caps[c];

                    ngx_memzero(&pr, sizeof(pr));
                    pr.buf = buf;
                    pr.size = caps[c];
                    pr.deadline = 1;

                    if (ngx_http_prefix_route_scan(body, p - body, &pr0)
                        != NGX_OK)
                    {
                        wrong++;
                        continue;
                    }

                    if (ngx_http_prefix_route_scan(body, p - body, &pr)
                        != NGX_OK)
                    {
                        late += (pr.late != 0);
                        wrong += (pr.late == 0);
                        continue;
                    }

                    if (pr.late || pr.len != pr0.len
                        || ngx_memcmp(pr.buf, pr0.buf, pr.len) != 0)
                    {
                        wrong++;
                        continue;
                    }

                    fine++;
                }
            }
        }

        test_ok(wrong == 0 && late > 0 && fine > 0,
                "past the deadline the fast path declines, late, in any of "
                "its passes over a system; before 1024 steps it is not "
                "late and writes the prompt");

        if (wrong) {
            printf("#   %d wrong, %d late, %d read\n", (int) wrong,
                   (int) late, (int) fine);
        }
    }

    return test_done();
}
