
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_PROMPT_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_PROMPT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>


/*
 * The canonical prompt: the request's prompt serialised in the order a chat
 * template renders it, with message boundaries and roles marked, so that it
 * can be cut into blocks and hashed.  See docs/design.md, "The canonical
 * prompt", for the byte format.
 */
typedef struct {
    u_char      *buf;     /* output, "size" bytes provided by the caller */
    size_t       size;    /* the prefix cap, bytes */
    size_t       len;     /* bytes written, <= size */
    size_t       key;     /* bytes up to the end of the first message that
                             is not a system/developer one, or pr->len when
                             there is none (tie-break key) */
    uint64_t     seed;    /* chain seed from model and cache_salt */
    uint64_t     model;   /* the model's seed alone: a model's name */
    u_char      *name;    /* output, the model's name cut to name_size - 1
                             bytes, or NULL: not wanted */
    size_t       name_size;
    size_t       name_len;
    size_t      *answers; /* output, [start, end) bytes of each assistant
                             message, at most max_answers pairs, or NULL:
                             not wanted */
    ngx_uint_t   max_answers;
    ngx_uint_t   nanswers;
    ngx_uint_t   nontext; /* parts written by identity (images, audio,
                             video, files, tool use) and token ids: the
                             engine's tokens for them do not follow
                             their bytes; the walk counts them, the fast
                             path sets 1 */
    ngx_uint_t   batch;   /* several prompts, or sequences, in one
                             request: an engine's native answer counts
                             each apart */
    ngx_uint_t   skip_cache; /* the request asks the engine to compute
                             the prompt, or part of it, anew (prompt
                             logprobs, its cache off): its answer's
                             cached tokens say nothing of the cache */
    size_t       ids;     /* where the digits of the token ids begin
                             when the prompt is one list of them and
                             nothing else, bytes; 0: it is not (its
                             engine tokens are then the ids: one a comma) */
    int64_t      deadline; /* set by the caller: the time of
                             ngx_http_prefix_route_prompt_clock() past
                             which the walk stops, ns; 0: none */
    ngx_uint_t   late;    /* the deadline passed, and the walk (or the
                             parse before it) stopped: what it wrote is
                             not the prompt */
    size_t       unclocked; /* bytes handed over since the clock was
                             last read */
} ngx_http_prefix_route_prompt_t;


/*
 * Builds the canonical prompt of a parsed request body (OpenAI Chat
 * Completions, legacy Completions, Anthropic Messages, OpenAI Responses,
 * or the native APIs of SGLang, "text" or "input_ids", and TGI, "inputs")
 * into pr->buf, stopping at pr->size bytes.  Returns NGX_OK when a
 * prompt was found (pr->len may still be 0 for an empty one) and
 * NGX_DECLINED when the body holds none of these shapes.  pr->buf then
 * holds the canonical prompt cut to its first pr->size bytes; the walk
 * stops once the buffer is full.  Never allocates outside jansson, and
 * frees what jansson allocates before returning; never fails otherwise.
 * Past pr->deadline, checked as jansson hands over each piece of a value
 * it serialises (the walk's only costs not bounded by pr->size: a part's
 * digest, the model's JSON), it stops with pr->late set.
 */
ngx_int_t ngx_http_prefix_route_prompt_build(json_t *root,
    ngx_http_prefix_route_prompt_t *pr);

/*
 * The monotonic clock (CLOCK_MONOTONIC, else the time of day), ns: a
 * body's reading is timed on it (max_parse).  Never fails.
 */
int64_t ngx_http_prefix_route_prompt_clock(void);

/*
 * Whether the clock is past pr->deadline (never with 0), read once "n"
 * bytes handed over since it was last read come to 1 KiB: then pr->late
 * is set, and stays so.  The walk asks at each piece jansson serialises,
 * the module's jansson reader at each 1 KiB it hands over, the fast path
 * once in 1024 steps (as 1 KiB).
 */
ngx_uint_t ngx_http_prefix_route_prompt_late(
    ngx_http_prefix_route_prompt_t *pr, size_t n);


#endif /* _NGX_HTTP_PREFIX_ROUTE_PROMPT_H_INCLUDED_ */
