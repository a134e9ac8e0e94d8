
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_EXTRACT_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_EXTRACT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>


/*
 * The stage from a request body to its prompt's block hashes: the body
 * read from nginx's buffer chain (memory or the client body temporary
 * file), parsed by jansson within a memory budget, the canonical prompt
 * built (ngx_http_prefix_route_prompt.c) and hashed in chained blocks
 * (ngx_http_prefix_route_hash.c).  The module, the fuzzer and the unit
 * tests all go through ngx_http_prefix_route_extract().
 */


/*
 * What jansson may allocate to parse one body and build its prompt, each
 * allocation counted as the heap takes it (..._extract.c): a
 * body of long strings takes about twice its size, 100,000 short messages
 * ~10 times, empty objects ("{}," x 10^6) ~70 times theirs (measured with
 * t/070-hostile.t's bodies), so the budget is 16 bytes a body byte plus
 * 1 MiB; past it the parse stops at jansson's next read (at most 1 KiB of
 * body later, so at most the budget plus what that KiB and one string's
 * buffer take) and the request is balanced by round robin.  jansson's
 * allocations never fail for the budget: its lexer mishandles that.
 */
#define NGX_HTTP_PREFIX_ROUTE_JSON_BUDGET(size)  (16 * (size) + 1048576)

/*
 * The tie-break key is the prompt's first turn, at most this many bytes:
 * prompts sent as one long message (RAG, agents, the Mooncake trace)
 * continue one another without a turn boundary, and those that share
 * their first 2k tokens then rank the servers alike, so that nginx
 * instances place them alike (docs/design.md, "Choosing a server").
 */
#define NGX_HTTP_PREFIX_ROUTE_KEY_SIZE      8192


/* why a body gave no prompt */
typedef enum {
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_OK = 0,
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_EMPTY,     /* no body */
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_BUDGET,    /* parsing needs more */
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME,      /* reading took longer than
                                                max_parse */
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_JSON,      /* not JSON jansson reads */
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_NO_PROMPT, /* none of the shapes */
    NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY     /* no memory for buf, hash or
                                                jansson's parse */
} ngx_http_prefix_route_extract_e;


typedef struct {
    /* set by the caller */
    size_t                            max_prefix; /* bytes of prompt */
    size_t                            block;      /* bytes */
    u_char                           *buf;        /* max_prefix bytes */
    uint64_t                         *hash;       /* max_prefix / block */
                                                  /* either NULL: the
                                                     process's, set here,
                                                     good until the next
                                                     call */
    u_char                           *name;       /* the model's name, cut
                                                     to name_size - 1
                                                     bytes, or NULL */
    size_t                            name_size;
    size_t                           *answers;    /* 2 x max_answers, or
                                                     NULL */
    ngx_uint_t                        max_answers;
    ngx_str_t                         salt;       /* prefix_route_salt's
                                                     value; empty: none */
    ngx_uint_t                        cache_salt; /* with salt: the body's
                                                     cache_salt counts too */
    ngx_msec_t                        max_parse;  /* ms of the fast path
                                                     and jansson's parse
                                                     at most; 0: no limit */

    /* set by ngx_http_prefix_route_extract() */
    off_t                             size;       /* bytes of body */
    size_t                            budget;     /* bytes, for jansson */
    size_t                            len;        /* bytes of prompt */
    ngx_uint_t                        nblocks;
    uint64_t                          key;        /* tie-break hash */
    size_t                            key_len;    /* bytes the key hashes:
                                                     the first turn, at
                                                     most KEY_SIZE */
    uint64_t                          seed;       /* model, cache_salt,
                                                     nginx's salt */
    uint64_t                          model;      /* the model's seed */
    size_t                            name_len;
    ngx_uint_t                        nanswers;   /* [start, end) pairs of
                                                     the assistant
                                                     messages in answers */
    uint32_t                         *tokens;     /* a prompt of one list
                                                     of token ids alone:
                                                     the ids wholly within
                                                     blocks 0..i, for each
                                                     block i (the
                                                     process's, good until
                                                     the next call); NULL:
                                                     another prompt */
    size_t                            ntokens;    /* its ids in the prompt
                                                     (cut or not); 0 with
                                                     NULL */
    unsigned                          whole:1;    /* len < max_prefix */
    unsigned                          jansson:1;  /* the fast path left
                                                     the body to jansson
                                                     (read or refused) */
    unsigned                          nontext:1;  /* images, audio, files
                                                     or tool use parts */
    unsigned                          batch:1;    /* several prompts or
                                                     sequences */
    unsigned                          skip_cache:1; /* the engine is
                                                     asked not to read its
                                                     cache for it
                                                     (prompt.h) */
    unsigned                          foreign_salt:1; /* a cache_salt the
                                                     index does not key
                                                     by (cache_salt=off) */
    ngx_http_prefix_route_extract_e   error;
    int                               json_error; /* enum json_error_code */
    int                               position;   /* byte of the error */
} ngx_http_prefix_route_extract_t;


/*
 * Sets jansson's allocator for the process: "alloc" and "release" (malloc
 * and free, or a test's own that calls them: with glibc the budget reads
 * malloc_usable_size() of each block) under the budget's accounting.
 * Call once, before any jansson object exists: every one must be freed by
 * the pair that allocated it.
 */
void ngx_http_prefix_route_extract_init(void *(*alloc)(size_t size),
    void (*release)(void *p));

/*
 * Frees what the stage keeps for the process (the buffer that gathers a
 * body of several buffers or in a file for the fast path, those of the
 * prompt and its hashes, the parts' digest state), when it exits.
 */
void ngx_http_prefix_route_extract_exit(void);

/*
 * Reads the body in the buffer chain "in" (bytes in memory and/or in a
 * file, read with ngx_read_file() without moving the file's offset: for
 * the fast path whole, into a buffer of the process or, over 8 MiB, pages
 * mapped for the body alone; for jansson 64 KiB at a time) and fills x
 * with its prompt's hashes.  Returns NGX_OK when the body holds a prompt
 * of at least one byte, else NGX_DECLINED with x->error saying why (and for
 * NGX_HTTP_PREFIX_ROUTE_EXTRACT_JSON, jansson's error code and byte; the
 * error's text is not kept, it quotes the body).  jansson allocates at
 * most x->budget bytes for it, all freed before the return.  The fast
 * path, jansson's parse and the walk after it are stopped
 * (NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME) once x->max_parse ms of the
 * monotonic clock have passed since the call, at the fast path's next
 * 1024 steps, jansson's next 1 KiB read or the walk's next piece of a
 * value it serialises (ngx_http_prefix_route_prompt_late()).  Not
 * reentrant: a process parses one body at a time.
 */
ngx_int_t ngx_http_prefix_route_extract(ngx_http_prefix_route_extract_t *x,
    ngx_chain_t *in);

/*
 * jansson's parse of buf (len bytes), or of what read() gives from data
 * when read is not NULL, with jansson's flags: the tree, or NULL with err
 * set.  jansson 2.14 cannot recover from an allocation that fails while
 * it reads a string (it then reads and writes past the string's buffer),
 * so such a failure jumps back out of jansson and every block the parse
 * took is freed: NULL, with err zeroed.
 */
json_t *ngx_http_prefix_route_json_load(const char *buf, size_t len,
    json_load_callback_t read, void *data, size_t flags, json_error_t *err);

/*
 * What jansson's error "code" (enum json_error_code, x->json_error) says,
 * in a few words for the log ("invalid UTF-8"), never the body's bytes;
 * "another error" for a code it does not name.
 */
char *ngx_http_prefix_route_extract_reason(int code);


#endif /* _NGX_HTTP_PREFIX_ROUTE_EXTRACT_H_INCLUDED_ */
