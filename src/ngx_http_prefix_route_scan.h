
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_SCAN_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_SCAN_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include "ngx_http_prefix_route_prompt.h"


/*
 * A value of a checked JSON value, found once: a node of a tape in
 * document order, its own nodes after it
 */
typedef struct {
    u_char                          *key;      /* an object member's key */
    u_char                          *value;    /* its first byte */
    uint32_t                         klen;
    uint32_t                         len;      /* a string's bytes between
                                                  its quotes, a scalar's */
    uint32_t                         end;      /* the node after its own */
    uint32_t                         escaped;  /* a string with a \ */
} ngx_http_prefix_route_node_t;


/*
 * The fast path from body to canonical prompt: one pass over
 * the body's bytes, no tree, for a chat body (OpenAI Chat Completions or
 * Anthropic Messages): messages with any members, content as a string or
 * parts (text, or images, audio, files, tool use written by identity),
 * tools, functions and system; for an OpenAI Responses body: tools,
 * instructions, and input as a string or a list of items (the list read
 * twice); or for a prompt rendered, one string (legacy Completions'
 * prompt, SGLang's text, TGI's inputs), or one list of token ids (legacy
 * Completions' prompt, SGLang's input_ids or text).
 * It writes what
 * ngx_http_prefix_route_prompt_build() writes for the same body, values
 * the walk serialises as jansson's JSON_COMPACT|JSON_SORT_KEYS output,
 * and validates the whole body as jansson would parse it (grammar, UTF-8,
 * escapes) without building it.
 *
 * Returns NGX_OK with pr set as ngx_http_prefix_route_prompt_build() sets
 * it (but pr->nontext: 1, not a count, when a part by identity is in the
 * prompt), or NGX_DECLINED for anything else, invalid JSON included: the
 * caller then parses the body with jansson, the reference; or NGX_DECLINED
 * with pr->late set, past pr->deadline (0: none), read once in 1024
 * elements, members, nodes written or keys compared.  Some bodies
 * jansson reads are declined on purpose (escaped keys, numbers of more
 * than 18 integer digits or near a double's range, real numbers of more
 * than 63 bytes in a serialised value, nesting deeper than 32, a member
 * the walk reads given twice, a part by identity the tape cannot hold, a
 * Responses input of another type or an item that is not an object,
 * token ids but in one list of integers, batches, SGLang's media and
 * parallel sampling; docs/design.md lists them): the
 * fast path never accepts a body jansson refuses.  The fuzzer checks both
 * claims (fuzz/prompt_fuzzer.c).  Never allocates: the values written as
 * canonical JSON are put on a static tape of 8192 nodes as they are
 * checked (the tools, functions and system values, and one message's or
 * part's at a time), their objects' members sorted through an array of
 * 256 on the stack; more are declined.  Not reentrant (the tape): one
 * body at a time, as a worker reads them.
 */
ngx_int_t ngx_http_prefix_route_scan(u_char *p, size_t len,
    ngx_http_prefix_route_prompt_t *pr);

/*
 * The fast path keeps the canonical JSON of the last 4 tools or functions
 * values it wrote (up to 128 KiB each, 1 MiB in all, static), found again
 * by comparing the body's bytes whole, and then not checked again: an
 * agent sends the same tools on every turn.  This forgets them, for a
 * test or a benchmark of the first sight of a value.  Never fails.
 */
void ngx_http_prefix_route_scan_forget(void);

/*
 * The JSON value from p (at most to last; the bytes after it are not
 * looked at), checked as the fast path checks a body and put on its tape:
 * returns the tape, node 0 the value, its nodes up to node 0's "end" (an
 * object member's key is never escaped).  Returns NULL for bytes that are
 * not one whole value and for a value the tape declines: an escaped key,
 * a number with a fraction, an exponent or more than 18 digits, nesting
 * deeper than 32, more than 8192 nodes; jansson is then the one to ask.
 * The tape holds until the worker's next scan.  Never allocates.
 */
ngx_http_prefix_route_node_t *ngx_http_prefix_route_scan_tape(u_char *p,
    u_char *last);


#endif /* _NGX_HTTP_PREFIX_ROUTE_SCAN_H_INCLUDED_ */
