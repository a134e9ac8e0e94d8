/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>

#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_prompt.h"


/* the control bytes of the canonical form, see docs/design.md */
#define NGX_HTTP_PREFIX_ROUTE_ESC   0x1b    /* escapes the next byte */
#define NGX_HTTP_PREFIX_ROUTE_FS    0x1c    /* a JSON value follows */
#define NGX_HTTP_PREFIX_ROUTE_GS    0x1d    /* a text part follows */
#define NGX_HTTP_PREFIX_ROUTE_RS    0x1e    /* a segment starts */
#define NGX_HTTP_PREFIX_ROUTE_US    0x1f    /* a field starts */

/*
 * Canonical JSON of a value; JSON_ENCODE_ANY lets scalars through and does
 * not change the text of arrays and objects.
 */
#define NGX_HTTP_PREFIX_ROUTE_JSON                                            \
    (JSON_COMPACT|JSON_SORT_KEYS|JSON_ENCODE_ANY)

#define ngx_http_prefix_route_prompt_special(c)                               \
    ((c) >= NGX_HTTP_PREFIX_ROUTE_ESC && (c) <= NGX_HTTP_PREFIX_ROUTE_US)


/* the state of one walk over a request body */
typedef struct {
    ngx_http_prefix_route_prompt_t  *pr;
    ngx_uint_t                       stop;     /* pr->buf is full */
    ngx_uint_t                       keyed;    /* pr->key is set */
} ngx_http_prefix_route_walk_t;


/* a value's canonical JSON as jansson hands it over */
typedef struct {
    char                            *data;   /* jansson's allocator's */
    size_t                           len;    /* bytes */
    size_t                           size;   /* bytes */
    ngx_http_prefix_route_prompt_t  *pr;
} ngx_http_prefix_route_dumped_t;


static void ngx_http_prefix_route_prompt_native(
    ngx_http_prefix_route_walk_t *w, json_t *root, json_t *prompt);
static void ngx_http_prefix_route_prompt_chat(ngx_http_prefix_route_walk_t *w,
    json_t *root, json_t *messages);
static void ngx_http_prefix_route_prompt_legacy(
    ngx_http_prefix_route_walk_t *w, json_t *prompt);
static ngx_uint_t ngx_http_prefix_route_prompt_is_ids(json_t *v);
static void ngx_http_prefix_route_prompt_ids(ngx_http_prefix_route_walk_t *w,
    json_t *ids);
static void ngx_http_prefix_route_prompt_responses(
    ngx_http_prefix_route_walk_t *w, json_t *root);
static void ngx_http_prefix_route_prompt_tools(ngx_http_prefix_route_walk_t *w,
    json_t *root, char *name);
static void ngx_http_prefix_route_prompt_message(
    ngx_http_prefix_route_walk_t *w, json_t *msg);
static void ngx_http_prefix_route_prompt_item(ngx_http_prefix_route_walk_t *w,
    json_t *item);
static void ngx_http_prefix_route_prompt_head(ngx_http_prefix_route_walk_t *w,
    char *name);
static void ngx_http_prefix_route_prompt_segment(
    ngx_http_prefix_route_walk_t *w, char *role, json_t *v, ngx_uint_t parts);
static void ngx_http_prefix_route_prompt_name(ngx_http_prefix_route_walk_t *w,
    json_t *v, char *dflt);
static void ngx_http_prefix_route_prompt_field(
    ngx_http_prefix_route_walk_t *w, u_char tag, json_t *v, ngx_uint_t parts);
static void ngx_http_prefix_route_prompt_part(ngx_http_prefix_route_walk_t *w,
    json_t *part);
static void ngx_http_prefix_route_prompt_value(
    ngx_http_prefix_route_walk_t *w, json_t *v);
static void ngx_http_prefix_route_prompt_json(ngx_http_prefix_route_walk_t *w,
    json_t *v);
static int ngx_http_prefix_route_prompt_digest(const char *buffer,
    size_t size, void *data);
static int ngx_http_prefix_route_prompt_dump(const char *buffer, size_t size,
    void *data);
static void ngx_http_prefix_route_prompt_string(
    ngx_http_prefix_route_walk_t *w, json_t *s);
static void ngx_http_prefix_route_prompt_text(ngx_http_prefix_route_walk_t *w,
    u_char *p, size_t len);
static void ngx_http_prefix_route_prompt_byte(ngx_http_prefix_route_walk_t *w,
    u_char c);
static void ngx_http_prefix_route_prompt_key(ngx_http_prefix_route_walk_t *w);
static json_t *ngx_http_prefix_route_prompt_get(json_t *obj, const char *key);
static ngx_uint_t ngx_http_prefix_route_prompt_eq(json_t *v, char *s);
static ngx_uint_t ngx_http_prefix_route_prompt_skip_cache(json_t *root);
static void ngx_http_prefix_route_prompt_seed(json_t *root,
    ngx_http_prefix_route_prompt_t *pr);
static char *ngx_http_prefix_route_prompt_bytes(
    ngx_http_prefix_route_prompt_t *pr, json_t *v, u_char **p, size_t *len);
static int ngx_http_prefix_route_prompt_grow(const char *buffer, size_t size,
    void *data);


ngx_int_t
ngx_http_prefix_route_prompt_build(json_t *root,
    ngx_http_prefix_route_prompt_t *pr)
{
    json_t                        *input, *instructions, *messages, *prompt,
                                  *text, *inputs, *ids;
    ngx_http_prefix_route_walk_t   w;

    pr->len = 0;
    pr->nanswers = 0;
    pr->nontext = 0;
    pr->batch = 0;
    pr->skip_cache = 0;
    pr->ids = 0;
    pr->key = 0;
    pr->seed = 0;
    pr->late = 0;
    pr->unclocked = 0;

    if (!json_is_object(root)) {
        return NGX_DECLINED;
    }

    w.pr = pr;
    w.stop = (pr->size == 0);
    w.keyed = 0;

    messages = ngx_http_prefix_route_prompt_get(root, "messages");
    prompt = ngx_http_prefix_route_prompt_get(root, "prompt");
    input = ngx_http_prefix_route_prompt_get(root, "input");
    instructions = ngx_http_prefix_route_prompt_get(root, "instructions");
    text = ngx_http_prefix_route_prompt_get(root, "text");
    inputs = ngx_http_prefix_route_prompt_get(root, "inputs");
    ids = ngx_http_prefix_route_prompt_get(root, "input_ids");

    if (messages != NULL) {

        if (!json_is_array(messages)) {
            return NGX_DECLINED;
        }

        /* OpenAI Chat Completions and Anthropic Messages */
        ngx_http_prefix_route_prompt_chat(&w, root, messages);

    } else if (prompt != NULL) {
        ngx_http_prefix_route_prompt_legacy(&w, prompt);

    } else if (input != NULL || instructions != NULL) {
        ngx_http_prefix_route_prompt_responses(&w, root);

    } else if (json_is_string(text) || json_is_array(text)) {
        /* SGLang's native /generate: the prompt rendered, or a batch */
        ngx_http_prefix_route_prompt_native(&w, root, text);

    } else if (json_is_array(ids)) {
        /* SGLang's /generate given token ids, as RL rollouts send them */
        ngx_http_prefix_route_prompt_native(&w, root, ids);

    } else if (json_is_string(inputs)) {
        /* TGI's native /generate and /generate_stream */
        ngx_http_prefix_route_prompt_legacy(&w, inputs);

    } else {
        return NGX_DECLINED;
    }

    if (!w.keyed) {
        pr->key = pr->len;
    }

    /* ids are the engine's tokens only in one list of them alone */

    if (pr->batch || pr->nontext != 1) {
        pr->ids = 0;
    }

    pr->skip_cache = ngx_http_prefix_route_prompt_skip_cache(root);

    ngx_http_prefix_route_prompt_seed(root, pr);

    return NGX_OK;
}


/*
 * SGLang's /generate, its "text" or "input_ids" (a list of token ids, or a
 * batch of such lists): its images, audio and video first, by identity, as
 * content parts are (the engine puts them at the text's placeholders,
 * and its cache differs from there on: before the text, two prompts with
 * other media never share a block), then the text.  Its parallel sampling
 * (sampling_params.n) answers once a sequence, as a batch does.
 */

static void
ngx_http_prefix_route_prompt_native(ngx_http_prefix_route_walk_t *w,
    json_t *root, json_t *prompt)
{
    json_t      *v;
    ngx_uint_t   i;

    static char  *media[] = { "image_data", "audio_data", "video_data" };

    for (i = 0; i < sizeof(media) / sizeof(media[0]) && !w->stop; i++) {
        v = ngx_http_prefix_route_prompt_get(root, media[i]);

        if (v != NULL) {
            ngx_http_prefix_route_prompt_head(w, media[i]);
            ngx_http_prefix_route_prompt_part(w, v);
        }
    }

    v = json_object_get(ngx_http_prefix_route_prompt_get(root,
                                                         "sampling_params"),
                        "n");

    if (json_is_integer(v) && json_integer_value(v) > 1) {
        w->pr->batch = 1;
    }

    ngx_http_prefix_route_prompt_legacy(w, prompt);
}


static void
ngx_http_prefix_route_prompt_chat(ngx_http_prefix_route_walk_t *w,
    json_t *root, json_t *messages)
{
    json_t  *system;
    size_t   i, n;

    ngx_http_prefix_route_prompt_tools(w, root, "tools");
    ngx_http_prefix_route_prompt_tools(w, root, "functions");

    /*
     * Anthropic keeps the system prompt out of the message list; an OpenAI
     * body has no top-level "system", so one walk serves both shapes
     */

    system = ngx_http_prefix_route_prompt_get(root, "system");

    if (system != NULL) {
        ngx_http_prefix_route_prompt_segment(w, "system", system, 1);
    }

    n = json_array_size(messages);

    for (i = 0; i < n && !w->stop; i++) {
        ngx_http_prefix_route_prompt_message(w, json_array_get(messages, i));
    }
}


/*
 * A prompt already rendered: legacy Completions' "prompt", and the
 * engines' native "text", "input_ids" and "inputs", the same canonical
 * prompt for the same text or ids.  A list of token ids is one prompt
 * (prompt_ids()); ids count as not text: their bytes per engine token are
 * not the text's.  The key ends after the first prompt, a string or a
 * list (all of one list of ids: its first id alone would be every
 * prompt's that starts with the template's first token).
 */

static void
ngx_http_prefix_route_prompt_legacy(ngx_http_prefix_route_walk_t *w,
    json_t *prompt)
{
    size_t   i, n, k;
    json_t  *v;

    if (ngx_http_prefix_route_prompt_is_ids(prompt)) {
        w->pr->nontext++;
        ngx_http_prefix_route_prompt_ids(w, prompt);
        ngx_http_prefix_route_prompt_key(w);
        return;
    }

    if (!json_is_array(prompt)) {
        w->pr->nontext += !json_is_string(prompt);
        ngx_http_prefix_route_prompt_segment(w, "prompt", prompt, 0);
        ngx_http_prefix_route_prompt_key(w);
        return;
    }

    n = json_array_size(prompt);
    k = 0;

    for (i = 0; i < n && !w->stop; i++) {
        v = json_array_get(prompt, i);
        w->pr->nontext += !json_is_string(v);

        /* prompts in a list, not token ids: the engine counts each apart */
        k += json_is_string(v) || json_is_array(v);
        w->pr->batch |= (k > 1);

        if (ngx_http_prefix_route_prompt_is_ids(v)) {
            ngx_http_prefix_route_prompt_ids(w, v);

        } else {
            ngx_http_prefix_route_prompt_segment(w, "prompt", v, 0);
        }

        if (json_is_string(v) || json_is_array(v)) {
            ngx_http_prefix_route_prompt_key(w);
        }
    }

    ngx_http_prefix_route_prompt_key(w);
}


/* a list of token ids: one prompt, not a list of prompts */

static ngx_uint_t
ngx_http_prefix_route_prompt_is_ids(json_t *v)
{
    size_t  i, n;

    n = json_array_size(v);

    for (i = 0; i < n; i++) {
        if (!json_is_integer(json_array_get(v, i))) {
            return 0;
        }
    }

    return n > 0;
}


/*
 * A prompt segment of token ids: FS, then each id and a comma, about 6
 * bytes a token (a segment of JSON for each id took 15), and the bytes of
 * a list begin those of any list that continues it, as its tokens do
 */

static void
ngx_http_prefix_route_prompt_ids(ngx_http_prefix_route_walk_t *w,
    json_t *ids)
{
    u_char      *p, num[NGX_INT64_LEN + 1];
    size_t       i, n, start;
    uint64_t     u;
    json_int_t   id;

    start = w->pr->len;

    ngx_http_prefix_route_prompt_head(w, "prompt");
    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_FS);

    /* the first list, with nothing before it (SGLang's media) */

    if (start == 0) {
        w->pr->ids = w->pr->len;
    }

    n = json_array_size(ids);

    for (i = 0; i < n && !w->stop; i++) {
        id = json_integer_value(json_array_get(ids, i));
        u = (id < 0) ? 0 - (uint64_t) id : (uint64_t) id;

        /* its decimal digits, as jansson prints an integer, and a comma */

        p = num + sizeof(num);
        *--p = ',';

        do {
            *--p = (u_char) ('0' + u % 10);
            u /= 10;
        } while (u);

        if (id < 0) {
            *--p = '-';
        }

        ngx_http_prefix_route_prompt_text(w, p, num + sizeof(num) - p);
    }
}


static void
ngx_http_prefix_route_prompt_responses(ngx_http_prefix_route_walk_t *w,
    json_t *root)
{
    json_t  *input, *instructions;
    size_t   i, n;

    ngx_http_prefix_route_prompt_tools(w, root, "tools");

    /* the instructions play the part of the system message */

    instructions = ngx_http_prefix_route_prompt_get(root, "instructions");

    if (instructions != NULL) {
        ngx_http_prefix_route_prompt_segment(w, "system", instructions, 1);
    }

    input = ngx_http_prefix_route_prompt_get(root, "input");

    if (input == NULL) {
        return;
    }

    if (!json_is_array(input)) {
        ngx_http_prefix_route_prompt_segment(w, "user", input, 0);
        ngx_http_prefix_route_prompt_key(w);
        return;
    }

    n = json_array_size(input);

    for (i = 0; i < n && !w->stop; i++) {
        ngx_http_prefix_route_prompt_item(w, json_array_get(input, i));
    }
}


static void
ngx_http_prefix_route_prompt_tools(ngx_http_prefix_route_walk_t *w,
    json_t *root, char *name)
{
    json_t  *v;

    v = ngx_http_prefix_route_prompt_get(root, name);

    if (v == NULL) {
        return;
    }

    ngx_http_prefix_route_prompt_head(w, name);
    ngx_http_prefix_route_prompt_value(w, v);
}


static void
ngx_http_prefix_route_prompt_message(ngx_http_prefix_route_walk_t *w,
    json_t *msg)
{
    size_t                           start;
    json_t                          *role, *v;
    ngx_http_prefix_route_prompt_t  *pr;

    pr = w->pr;
    start = pr->len;

    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_RS);

    if (!json_is_object(msg)) {
        ngx_http_prefix_route_prompt_value(w, msg);
        ngx_http_prefix_route_prompt_key(w);
        return;
    }

    role = ngx_http_prefix_route_prompt_get(msg, "role");

    ngx_http_prefix_route_prompt_name(w, role, NULL);

    v = ngx_http_prefix_route_prompt_get(msg, "name");
    if (v != NULL) {
        ngx_http_prefix_route_prompt_field(w, 'n', v, 0);
    }

    v = ngx_http_prefix_route_prompt_get(msg, "content");
    if (v != NULL) {
        ngx_http_prefix_route_prompt_field(w, 'c', v, 1);
    }

    v = ngx_http_prefix_route_prompt_get(msg, "tool_calls");
    if (v != NULL) {
        ngx_http_prefix_route_prompt_field(w, 't', v, 0);
    }

    v = ngx_http_prefix_route_prompt_get(msg, "tool_call_id");
    if (v != NULL) {
        ngx_http_prefix_route_prompt_field(w, 'i', v, 0);
    }

    if (!ngx_http_prefix_route_prompt_eq(role, "system")
        && !ngx_http_prefix_route_prompt_eq(role, "developer"))
    {
        ngx_http_prefix_route_prompt_key(w);
    }

    /* an engine caches the answers it generated: the feedback counts them */

    if (pr->answers != NULL && pr->nanswers < pr->max_answers
        && ngx_http_prefix_route_prompt_eq(role, "assistant"))
    {
        pr->answers[2 * pr->nanswers] = start;
        pr->answers[2 * pr->nanswers + 1] = pr->len;
        pr->nanswers++;
    }
}


static void
ngx_http_prefix_route_prompt_item(ngx_http_prefix_route_walk_t *w,
    json_t *item)
{
    json_t  *type;

    if (!json_is_object(item)
        || ngx_http_prefix_route_prompt_get(item, "role") != NULL)
    {
        ngx_http_prefix_route_prompt_message(w, item);
        return;
    }

    /* function_call, function_call_output, reasoning... */

    type = ngx_http_prefix_route_prompt_get(item, "type");

    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_RS);
    ngx_http_prefix_route_prompt_name(w, type, "item");
    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_prompt_byte(w, 'c');
    ngx_http_prefix_route_prompt_value(w, item);
    ngx_http_prefix_route_prompt_key(w);
}


/* a segment's start: RS, its name, US and the content tag */

static void
ngx_http_prefix_route_prompt_head(ngx_http_prefix_route_walk_t *w, char *name)
{
    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_RS);
    ngx_http_prefix_route_prompt_text(w, (u_char *) name, ngx_strlen(name));
    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_prompt_byte(w, 'c');
}


static void
ngx_http_prefix_route_prompt_segment(ngx_http_prefix_route_walk_t *w,
    char *role, json_t *v, ngx_uint_t parts)
{
    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_RS);
    ngx_http_prefix_route_prompt_text(w, (u_char *) role, ngx_strlen(role));
    ngx_http_prefix_route_prompt_field(w, 'c', v, parts);
}


static void
ngx_http_prefix_route_prompt_name(ngx_http_prefix_route_walk_t *w, json_t *v,
    char *dflt)
{
    if (json_is_string(v)) {
        ngx_http_prefix_route_prompt_string(w, v);
        return;
    }

    if (v == NULL && dflt != NULL) {
        ngx_http_prefix_route_prompt_text(w, (u_char *) dflt,
                                          ngx_strlen(dflt));
        return;
    }

    /* a missing role is written as the JSON null it amounts to */

    ngx_http_prefix_route_prompt_value(w, v != NULL ? v : json_null());
}


static void
ngx_http_prefix_route_prompt_field(ngx_http_prefix_route_walk_t *w,
    u_char tag, json_t *v, ngx_uint_t parts)
{
    size_t  i, n;

    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_US);
    ngx_http_prefix_route_prompt_byte(w, tag);

    if (json_is_string(v)) {
        ngx_http_prefix_route_prompt_string(w, v);
        return;
    }

    if (!parts || !json_is_array(v)) {
        ngx_http_prefix_route_prompt_value(w, v);
        return;
    }

    n = json_array_size(v);

    for (i = 0; i < n && !w->stop; i++) {
        ngx_http_prefix_route_prompt_part(w, json_array_get(v, i));
    }
}


static void
ngx_http_prefix_route_prompt_part(ngx_http_prefix_route_walk_t *w,
    json_t *part)
{
    json_t            *text, *type;
    uint64_t           digest;
    ngx_uint_t         i;
    u_char             hex[16];
    static u_char      hexdigits[] = "0123456789abcdef";

    if (json_is_object(part)) {
        type = json_object_get(part, "type");
        text = json_object_get(part, "text");

        if (json_is_string(text)
            && (ngx_http_prefix_route_prompt_eq(type, "text")
                || ngx_http_prefix_route_prompt_eq(type, "input_text")
                || ngx_http_prefix_route_prompt_eq(type, "output_text")))
        {
            ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_GS);
            ngx_http_prefix_route_prompt_string(w, text);
            return;
        }
    }

    /*
     * images, audio, files, tool use and results count by identity: a
     * digest of the part first, so that two different images differ from
     * their first byte on, as an engine's multimodal hash makes them do,
     * then the part itself, so that its size still counts as work
     */

    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_FS);

    if (w->stop) {
        return;
    }

    w->pr->nontext++;

    if (ngx_http_prefix_route_hash_start() != NGX_OK) {
        w->stop = 1;
        return;
    }

    if (json_dump_callback(part, ngx_http_prefix_route_prompt_digest, w,
                           NGX_HTTP_PREFIX_ROUTE_JSON)
        != 0)
    {
        w->stop = 1;
        return;
    }

    digest = ngx_http_prefix_route_hash_end();

    for (i = 16; i > 0; i--) {
        hex[i - 1] = hexdigits[digest & 0xf];
        digest >>= 4;
    }

    ngx_http_prefix_route_prompt_text(w, hex, 16);

    ngx_http_prefix_route_prompt_json(w, part);
}


static void
ngx_http_prefix_route_prompt_value(ngx_http_prefix_route_walk_t *w, json_t *v)
{
    ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_FS);
    ngx_http_prefix_route_prompt_json(w, v);
}


static void
ngx_http_prefix_route_prompt_json(ngx_http_prefix_route_walk_t *w, json_t *v)
{
    if (w->stop) {
        /* do not serialise a value that would be cut anyway */
        return;
    }

    /*
     * jansson hands the text over in pieces and gives up as soon as the
     * callback refuses one, so a huge part is neither serialised in full
     * nor allocated; whatever jansson allocates for the walk (the parents
     * set, sorted key arrays) it releases on every path
     */

    if (json_dump_callback(v, ngx_http_prefix_route_prompt_dump, w,
                           NGX_HTTP_PREFIX_ROUTE_JSON)
        != 0)
    {
        /*
         * the buffer is full, or jansson failed (out of memory): either
         * way what was written is a prefix of the canonical form
         */
        w->stop = 1;
    }
}


/*
 * jansson's dump callback that hashes the canonical JSON of a value as
 * one text over the pieces jansson hands over, without keeping them: the
 * fast path hands the same text over in its own pieces.
 */

static int
ngx_http_prefix_route_prompt_digest(const char *buffer, size_t size,
    void *data)
{
    ngx_http_prefix_route_walk_t  *w = data;

    if (ngx_http_prefix_route_prompt_late(w->pr, size)) {
        return -1;
    }

    ngx_http_prefix_route_hash_add((u_char *) buffer, size);

    return 0;
}


static int
ngx_http_prefix_route_prompt_dump(const char *buffer, size_t size, void *data)
{
    ngx_http_prefix_route_walk_t  *w;

    w = data;

    if (ngx_http_prefix_route_prompt_late(w->pr, size)) {
        w->stop = 1;
        return -1;
    }

    ngx_http_prefix_route_prompt_text(w, (u_char *) buffer, size);

    return w->stop ? -1 : 0;
}


static void
ngx_http_prefix_route_prompt_string(ngx_http_prefix_route_walk_t *w,
    json_t *s)
{
    /* the body is parsed with JSON_ALLOW_NUL: a string may hold NUL */

    ngx_http_prefix_route_prompt_text(w, (u_char *) json_string_value(s),
                                      json_string_length(s));
}


static void
ngx_http_prefix_route_prompt_text(ngx_http_prefix_route_walk_t *w, u_char *p,
    size_t len)
{
    size_t                           n;
    u_char                          *last, *q;
    ngx_http_prefix_route_prompt_t  *pr;

    pr = w->pr;
    last = p + len;

    while (p < last && !w->stop) {

        /* copy the run of plain bytes that still fits */

        n = ngx_min((size_t) (last - p), pr->size - pr->len);

        for (q = p; q < p + n; q++) {
            if (ngx_http_prefix_route_prompt_special(*q)) {
                break;
            }
        }

        ngx_memcpy(pr->buf + pr->len, p, q - p);
        pr->len += q - p;
        p = q;

        if (pr->len == pr->size) {
            w->stop = 1;
            return;
        }

        if (p < last) {
            /* a byte the format reserves */
            ngx_http_prefix_route_prompt_byte(w, NGX_HTTP_PREFIX_ROUTE_ESC);
            ngx_http_prefix_route_prompt_byte(w, *p | 0x40);
            p++;
        }
    }
}


static void
ngx_http_prefix_route_prompt_byte(ngx_http_prefix_route_walk_t *w, u_char c)
{
    ngx_http_prefix_route_prompt_t  *pr;

    if (w->stop) {
        return;
    }

    pr = w->pr;

    pr->buf[pr->len++] = c;

    if (pr->len == pr->size) {
        w->stop = 1;
    }
}


static void
ngx_http_prefix_route_prompt_key(ngx_http_prefix_route_walk_t *w)
{
    /* the end of the first segment that is not a system one */

    if (!w->keyed) {
        w->pr->key = w->pr->len;
        w->keyed = 1;
    }
}


static json_t *
ngx_http_prefix_route_prompt_get(json_t *obj, const char *key)
{
    json_t  *v;

    /* a member set to null counts as absent */

    v = json_object_get(obj, key);

    if (v == NULL || json_is_null(v)) {
        return NULL;
    }

    return v;
}


static ngx_uint_t
ngx_http_prefix_route_prompt_eq(json_t *v, char *s)
{
    size_t  len;

    if (!json_is_string(v)) {
        return 0;
    }

    len = ngx_strlen(s);

    return json_string_length(v) == len
           && ngx_memcmp(json_string_value(v), s, len) == 0;
}


/*
 * Whether the request asks the engine not to read its cache for the
 * prompt, or for part of it: vLLM's prompt_logprobs and
 * skip_reading_prefix_cache, legacy Completions' echo with logprobs
 * (the prompt's logprobs, in vLLM and SGLang), SGLang's return_logprob
 * with a logprob_start_len (its prefix match stops there), llama.cpp
 * server's cache_prompt false.  The fast path reads the same members
 * (ngx_http_prefix_route_scan_cache_off()).
 */

static ngx_uint_t
ngx_http_prefix_route_prompt_skip_cache(json_t *root)
{
    json_t  *v;

    v = ngx_http_prefix_route_prompt_get(root, "prompt_logprobs");

    if ((v != NULL && !json_is_false(v))
        || json_is_true(json_object_get(root, "skip_reading_prefix_cache"))
        || json_is_false(json_object_get(root, "cache_prompt")))
    {
        return 1;
    }

    v = ngx_http_prefix_route_prompt_get(root, "logprobs");

    if (json_is_true(json_object_get(root, "echo"))
        && v != NULL && !json_is_false(v))
    {
        return 1;
    }

    v = json_object_get(root, "logprob_start_len");

    return json_is_true(json_object_get(root, "return_logprob"))
           && json_is_integer(v) && json_integer_value(v) >= 0;
}


static void
ngx_http_prefix_route_prompt_seed(json_t *root,
    ngx_http_prefix_route_prompt_t *pr)
{
    char         *model_json, *salt_json, *key_json;
    size_t        model_len, salt_len, key_len;
    u_char       *model, *salt, *key;
    ngx_uint_t    i;
    json_free_t   free_fn;

    model_json = ngx_http_prefix_route_prompt_bytes(pr,
                     ngx_http_prefix_route_prompt_get(root, "model"),
                     &model, &model_len);

    if (model == NULL) {
        model = (u_char *) "";
        model_len = 0;
    }

    salt_json = ngx_http_prefix_route_prompt_bytes(pr,
                    ngx_http_prefix_route_prompt_get(root, "cache_salt"),
                    &salt, &salt_len);

    pr->seed = ngx_http_prefix_route_hash_seed(model, model_len, salt,
                                               salt_len);
    pr->model = ngx_http_prefix_route_hash_seed(model, model_len, NULL, 0);

    json_get_alloc_funcs(NULL, &free_fn);

    /* the engines key their cache by these too */

    for (i = 0; i < NGX_HTTP_PREFIX_ROUTE_KEYS; i++) {
        key_json = ngx_http_prefix_route_prompt_bytes(pr,
                       ngx_http_prefix_route_prompt_get(root,
                           (char *) ngx_http_prefix_route_hash_keys[i].data),
                       &key, &key_len);

        if (key != NULL) {
            pr->seed = ngx_http_prefix_route_hash_key(pr->seed, i, key,
                                                      key_len);
        }

        if (key_json != NULL) {
            free_fn(key_json);
        }
    }

    if (pr->name != NULL && pr->name_size > 0) {
        pr->name_len = ngx_min(model_len, pr->name_size - 1);
        ngx_memcpy(pr->name, model, pr->name_len);
        pr->name[pr->name_len] = '\0';
    }

    if (model_json != NULL) {
        free_fn(model_json);
    }

    if (salt_json != NULL) {
        free_fn(salt_json);
    }
}


static char *
ngx_http_prefix_route_prompt_bytes(ngx_http_prefix_route_prompt_t *pr,
    json_t *v, u_char **p, size_t *len)
{
    json_free_t                     free_fn;
    ngx_http_prefix_route_dumped_t  d;

    /*
     * The bytes of a string, or the canonical JSON of another value, which
     * is returned to be freed; *p is NULL for an absent value.
     */

    if (v == NULL) {
        *p = NULL;
        *len = 0;
        return NULL;
    }

    if (json_is_string(v)) {
        *p = (u_char *) json_string_value(v);
        *len = json_string_length(v);
        return NULL;
    }

    /*
     * json_dumps()'s text, through a callback that stops at the deadline:
     * a model of 150,000 real numbers took 0.1-0.24 s to serialise after
     * its parse (helper-69)
     */

    d.data = NULL;
    d.len = 0;
    d.size = 0;
    d.pr = pr;

    if (json_dump_callback(v, ngx_http_prefix_route_prompt_grow, &d,
                           NGX_HTTP_PREFIX_ROUTE_JSON)
        != 0
        || ngx_http_prefix_route_prompt_grow("", 1, &d) != 0)
    {
        json_get_alloc_funcs(NULL, &free_fn);
        free_fn(d.data);

        /* out of memory, or late: present, but without a text */
        *p = (u_char *) "";
        *len = 0;
        return NULL;
    }

    *p = (u_char *) d.data;
    *len = d.len - 1;

    return d.data;
}


/*
 * jansson's dump callback that appends to a buffer of its allocator,
 * doubled as needed; -1 when out of memory or past the deadline.
 */

static int
ngx_http_prefix_route_prompt_grow(const char *buffer, size_t size,
    void *data)
{
    ngx_http_prefix_route_dumped_t  *d = data;

    char           *p;
    size_t          n;
    json_free_t     free_fn;
    json_malloc_t   malloc_fn;

    if (ngx_http_prefix_route_prompt_late(d->pr, size)) {
        return -1;
    }

    if (size > d->size - d->len) {
        n = ngx_max(ngx_max(2 * d->size, d->len + size), 64);

        json_get_alloc_funcs(&malloc_fn, &free_fn);

        p = malloc_fn(n);
        if (p == NULL) {
            return -1;
        }

        if (d->len) {
            ngx_memcpy(p, d->data, d->len);
        }

        free_fn(d->data);

        d->data = p;
        d->size = n;
    }

    ngx_memcpy(d->data + d->len, buffer, size);
    d->len += size;

    return 0;
}


ngx_uint_t
ngx_http_prefix_route_prompt_late(ngx_http_prefix_route_prompt_t *pr,
    size_t n)
{
    if (pr->deadline == 0 || pr->late) {
        return pr->late;
    }

    /*
     * the clock once a KiB: read at each piece of a serialisation, it
     * slowed the walk of an agent's tools by a quarter
     */

    pr->unclocked += n;

    if (pr->unclocked < 1024) {
        return 0;
    }

    pr->unclocked = 0;

    /* a signed difference: the deadline is ahead of the clock or behind */

    if (ngx_http_prefix_route_prompt_clock() - pr->deadline > 0) {
        pr->late = 1;
    }

    return pr->late;
}


int64_t
ngx_http_prefix_route_prompt_clock(void)
{
#if (NGX_HAVE_CLOCK_MONOTONIC)
    struct timespec  ts;

    (void) clock_gettime(CLOCK_MONOTONIC, &ts);

    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
#else
    struct timeval  tv;

    ngx_gettimeofday(&tv);

    return (int64_t) tv.tv_sec * 1000000000 + (int64_t) tv.tv_usec * 1000;
#endif
}
