
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_USAGE_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_USAGE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * The token counts an engine reports in a response's "usage" object, read
 * as the response passes (docs/design.md, "Feedback from the engines").
 * The response is never copied whole nor held back: its first HEAD bytes
 * and its last TAIL bytes are kept, and parsed once at its end.  Usage is
 * at the end of a JSON answer and in the last event of an OpenAI stream
 * (with stream_options.include_usage), and in the first event of an
 * Anthropic stream (message_start); SGLang's native meta_info is in every
 * event, llama.cpp's native timings in the last.
 */

#define NGX_HTTP_PREFIX_ROUTE_USAGE_HEAD  1024
#define NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL  4096

/* a token count above this is out of range: the answer is not believed */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_MAX   ((uint64_t) 1 << 32)

/*
 * samples of a model's bytes a token whose mean is taken whole: from then
 * on the model's figure is learned
 */
#define NGX_HTTP_PREFIX_ROUTE_USAGE_LEARN  16


/* the objects that hold an engine's counts, in the order they are tried */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_USAGE = 0,     /* "usage" */
    NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_META_INFO,     /* SGLang's native API */
    NGX_HTTP_PREFIX_ROUTE_COUNTS_IN_TIMINGS,       /* llama.cpp's native API */
    NGX_HTTP_PREFIX_ROUTE_COUNTS_KINDS
} ngx_http_prefix_route_counts_in_e;


typedef struct {
    off_t       total;                 /* bytes fed */
    size_t      head_len;
    u_char      head[NGX_HTTP_PREFIX_ROUTE_USAGE_HEAD];
    u_char      tail[NGX_HTTP_PREFIX_ROUTE_USAGE_TAIL];  /* a ring */
} ngx_http_prefix_route_usage_t;


typedef struct {
    uint64_t    prompt;                /* tokens of prompt */
    uint64_t    cached;                /* of which the engine had cached */
    unsigned    has_cached:1;          /* the engine said how many */
} ngx_http_prefix_route_tokens_t;


/*
 * Readies "u" for a response: the counts only, as the head and the tail
 * are written before they are read (5 KiB not cleared a response).
 */
void ngx_http_prefix_route_usage_init(ngx_http_prefix_route_usage_t *u);

/* Keeps what it needs of the next n bytes of the response. */
void ngx_http_prefix_route_usage_feed(ngx_http_prefix_route_usage_t *u,
    u_char *p, size_t n);

/*
 * Finds the usage the response reported: the last "usage" object of its
 * tail that counts prompt tokens, else the last "meta_info", else the
 * last "timings", else the same in that order from the first of its head.
 * Reads the shapes of OpenAI's Chat Completions and Completions
 * (prompt_tokens, prompt_tokens_details.cached_tokens), its Responses API
 * (input_tokens, input_tokens_details.cached_tokens), Anthropic's
 * Messages (input_tokens + cache_read_input_tokens +
 * cache_creation_input_tokens, cache_read_input_tokens cached), SGLang's
 * native /generate (meta_info: prompt_tokens, cached_tokens) and
 * llama.cpp server's native /completion (timings: prompt_n computed +
 * cache_n cached).  Returns NGX_OK with *t set, or
 * NGX_DECLINED when there is none, it is malformed, or a count is not an
 * integer from 0 to NGX_HTTP_PREFIX_ROUTE_USAGE_MAX or more tokens are
 * cached than prompted.  Each object is read by usage_scan(), and by
 * usage_json() where that cannot tell; jansson allocates only what parsing
 * one object of at most TAIL bytes takes, and frees it.
 */
ngx_int_t ngx_http_prefix_route_usage_parse(ngx_http_prefix_route_usage_t *u,
    ngx_http_prefix_route_tokens_t *t);

/*
 * For a prompt of "prompt" tokens the module counted itself (token ids):
 * SGLang's meta_info whose start the tail lost, as return_logprob puts a
 * list for each generated token before its counts.  Its last cached_tokens
 * member after another member, and the members after it, are read as an
 * object (jansson, at most TAIL bytes).  Returns NGX_OK with t->cached and
 * t->prompt = prompt, or NGX_DECLINED (none, malformed, or out of range:
 * not an integer from 0 to "prompt").
 */
ngx_int_t ngx_http_prefix_route_usage_cut(ngx_http_prefix_route_usage_t *u,
    uint64_t prompt, ngx_http_prefix_route_tokens_t *t);

/*
 * The reference reader of one object of counts of kind "object", from its
 * '{' at p to last at most (the bytes after it are not looked at):
 * jansson parses it, and the counts are read as usage_parse() describes.
 * Returns NGX_OK with *t set, or NGX_DECLINED (not JSON, not whole, no
 * usable count).
 */
ngx_int_t ngx_http_prefix_route_usage_json(u_char *p, u_char *last,
    ngx_uint_t object, ngx_http_prefix_route_tokens_t *t);

/*
 * The fast path of usage_json(), without a tree or an allocation: the
 * object is checked and put on the prompt fast path's tape
 * (ngx_http_prefix_route_scan_tape()), and its members read from there.
 * The same NGX_OK and *t, or NGX_DECLINED, for every object the tape
 * takes, and NGX_AGAIN for the rest, left to usage_json(): an escaped
 * key, a number with a fraction, an exponent or more than 18 digits,
 * nesting deeper than 32, bytes that are not one whole value.  The
 * fuzzer checks the claim (fuzz/prompt_fuzzer.c).
 */
ngx_int_t ngx_http_prefix_route_usage_scan(u_char *p, u_char *last,
    ngx_uint_t object, ngx_http_prefix_route_tokens_t *t);

/*
 * A model's bytes of canonical prompt per engine token, x 256, learned
 * from one more "sample" (x 256, of a prompt of text seen whole) after
 * "samples" of them: the mean of the first 16, then a moving average over
 * 16.  From the 17th on a sample counts as at most twice the figure and
 * at least half of it, so that one report moves the figure by 1/16 at
 * most: an engine that reports 1 prompt token for 4.8 KB of prompt moved
 * it from 6.16 to 302.65 bytes a token (helper-72, 2026-12-07).  Never
 * fails.
 */
uint32_t ngx_http_prefix_route_usage_ratio(uint32_t ratio, uint64_t samples,
    uint64_t sample);


#endif /* _NGX_HTTP_PREFIX_ROUTE_USAGE_H_INCLUDED_ */
