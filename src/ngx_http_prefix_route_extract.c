
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <jansson.h>
#include <setjmp.h>

#if (NGX_LINUX) && defined(__GLIBC__)
#include <malloc.h>
#endif

#include "ngx_http_prefix_route_extract.h"
#include "ngx_http_prefix_route_prompt.h"
#include "ngx_http_prefix_route_hash.h"
#include "ngx_http_prefix_route_scan.h"


/* the body is read from a temporary file in pieces this large */
#define NGX_HTTP_PREFIX_ROUTE_READ_SIZE     65536

/*
 * After a parse whose tree took more than this, glibc's free memory goes
 * back to the system: a worker would keep the heap of the largest body it
 * parsed (710 MB of RSS after a 64 MB body of 5M keys, a hostile test)
 */
#define NGX_HTTP_PREFIX_ROUTE_JSON_TRIM     (32 * 1024 * 1024)

/*
 * What precedes each jansson allocation: while a parse is guarded, its
 * links among the parse's blocks (all dropped at once if an allocation
 * fails); without glibc's malloc_usable_size(), its size too.  The room
 * is rounded up to keep jansson's alignment: 16 bytes with glibc, as
 * before the links, when the size alone was kept there
 */
typedef struct ngx_http_prefix_route_json_block_s
    ngx_http_prefix_route_json_block_t;

struct ngx_http_prefix_route_json_block_s {
#if !((NGX_LINUX) && defined(__GLIBC__))
    size_t                               size;
#endif
    ngx_http_prefix_route_json_block_t  *prev;    /* NULL: not linked */
    ngx_http_prefix_route_json_block_t  *next;
};

#define NGX_HTTP_PREFIX_ROUTE_JSON_HEADER                                    \
    ngx_align(sizeof(ngx_http_prefix_route_json_block_t), 16)

/*
 * What an allocation of "size" bytes for jansson, block b, takes of the
 * heap, as the budget counts it: with the header, a glibc chunk (what
 * malloc_usable_size() gives and the chunk's 8-byte size field: the
 * request and that field rounded up to 16, 32 at least, malloc/malloc.c,
 * request2size(); page-rounded for an mmap()ed one); elsewhere the same
 * reckoned from the size.  Counting "size" alone, the budget let a body
 * of empty arrays grow a worker 1.5 times past it (helper-64)
 */
#if (NGX_LINUX) && defined(__GLIBC__)
#define ngx_http_prefix_route_json_charge(b, size)                           \
    (malloc_usable_size(b) + sizeof(size_t))
#define ngx_http_prefix_route_json_keep(b, size)
#else
#define ngx_http_prefix_route_json_charge(b, size)                           \
    ngx_max(ngx_align((size) + NGX_HTTP_PREFIX_ROUTE_JSON_HEADER             \
                      + sizeof(size_t), 16), 32)
#define ngx_http_prefix_route_json_keep(b, sz)  (b)->size = (sz)
#endif


/* where the reader is in the body's buffer chain */
typedef struct {
    ngx_chain_t                        *cl;
    off_t                               offset;      /* in cl->buf */
    u_char                             *pos;         /* bytes not yet */
    u_char                             *last;        /* handed over */
    ngx_http_prefix_route_prompt_t     *pr;          /* its deadline */
} ngx_http_prefix_route_body_t;


/* a buffer of the process, grown as needed */
typedef struct {
    void                               *data;
    size_t                              size;        /* bytes */
} ngx_http_prefix_route_scratch_t;


static void ngx_http_prefix_route_tokens(ngx_http_prefix_route_extract_t *x,
    size_t ids);
static u_char *ngx_http_prefix_route_gather(ngx_chain_t *in, off_t size,
    ngx_http_prefix_route_prompt_t *pr, u_char **mapped);
static void ngx_http_prefix_route_unmap(u_char *p, off_t size);
static ssize_t ngx_http_prefix_route_read_file(ngx_buf_t *b, u_char *buf,
    size_t size, off_t offset);
static void *ngx_http_prefix_route_scratch(ngx_http_prefix_route_scratch_t *s,
    size_t size);
static void ngx_http_prefix_route_scratch_free(
    ngx_http_prefix_route_scratch_t *s);
static size_t ngx_http_prefix_route_read(void *buffer, size_t buflen,
    void *data);
static void *ngx_http_prefix_route_json_malloc(size_t size);
static void ngx_http_prefix_route_json_free(void *p);
static void ngx_http_prefix_route_json_end(size_t budget);


/*
 * jansson's allocations are counted against a budget while a body is
 * parsed (a process parses one at a time); not limited otherwise
 */
static size_t      ngx_http_prefix_route_json_left;
static size_t      ngx_http_prefix_route_json_low;     /* of left */
static ngx_uint_t  ngx_http_prefix_route_json_limited;
static ngx_uint_t  ngx_http_prefix_route_json_refused;
static ngx_uint_t  ngx_http_prefix_route_json_failed;  /* an allocation */

/* a guarded parse: where a failed allocation jumps, and the parse's blocks */
static ngx_uint_t                          ngx_http_prefix_route_json_guarded;
static jmp_buf                             ngx_http_prefix_route_json_jump;
static ngx_http_prefix_route_json_block_t  ngx_http_prefix_route_json_live;

static void     *(*ngx_http_prefix_route_json_alloc)(size_t size) = malloc;
static void      (*ngx_http_prefix_route_json_release)(void *p) = free;

/*
 * A body in several buffers (nginx's header buffer holds its first bytes)
 * or in the client body temporary file, as every body larger than
 * client_body_buffer_size is, is gathered for the fast path into one
 * buffer of the process, grown to the largest such body up to this size
 * and kept; a larger one into pages mapped for it alone
 */
#define NGX_HTTP_PREFIX_ROUTE_GATHER_MAX    (8 * 1024 * 1024)
#define NGX_HTTP_PREFIX_ROUTE_PIECE         (1024 * 1024)

static ngx_http_prefix_route_scratch_t  ngx_http_prefix_route_gather_buf;

/*
 * the prompt and its hashes, when the caller has no buffers of its own:
 * the module drops the text at once and copies the hashes it keeps, so a
 * request allocates for its own blocks, not for max_prefix
 */
static ngx_http_prefix_route_scratch_t  ngx_http_prefix_route_prompt_buf;
static ngx_http_prefix_route_scratch_t  ngx_http_prefix_route_hash_buf;

/* a prompt of token ids: the ids in each block, for the engine's counts */
static ngx_http_prefix_route_scratch_t  ngx_http_prefix_route_tokens_buf;

/* file reads: a fixed buffer of the process, not one per request */
static u_char  ngx_http_prefix_route_read_buf[NGX_HTTP_PREFIX_ROUTE_READ_SIZE];


void
ngx_http_prefix_route_extract_init(void *(*alloc)(size_t size),
    void (*release)(void *p))
{
    ngx_http_prefix_route_json_alloc = alloc;
    ngx_http_prefix_route_json_release = release;

    json_set_alloc_funcs(ngx_http_prefix_route_json_malloc,
                         ngx_http_prefix_route_json_free);
}


void
ngx_http_prefix_route_extract_exit(void)
{
    ngx_http_prefix_route_scratch_free(&ngx_http_prefix_route_gather_buf);
    ngx_http_prefix_route_scratch_free(&ngx_http_prefix_route_prompt_buf);
    ngx_http_prefix_route_scratch_free(&ngx_http_prefix_route_hash_buf);
    ngx_http_prefix_route_scratch_free(&ngx_http_prefix_route_tokens_buf);
    ngx_http_prefix_route_hash_exit();
}


ngx_int_t
ngx_http_prefix_route_extract(ngx_http_prefix_route_extract_t *x,
    ngx_chain_t *in)
{
    u_char                          *p, *mapped;
    json_t                          *root;
    ngx_int_t                        rc;
    ngx_chain_t                     *cl;
    json_error_t                     err;
    ngx_http_prefix_route_body_t     body;
    ngx_http_prefix_route_prompt_t   pr;

    x->size = 0;
    x->len = 0;
    x->nblocks = 0;
    x->name_len = 0;
    x->nanswers = 0;
    x->tokens = NULL;
    x->ntokens = 0;
    x->whole = 0;
    x->nontext = 0;
    x->batch = 0;
    x->skip_cache = 0;
    x->foreign_salt = 0;
    x->jansson = 0;
    x->json_error = 0;
    x->position = 0;

    for (cl = in; cl; cl = cl->next) {
        x->size += ngx_buf_size(cl->buf);
    }

    x->budget = NGX_HTTP_PREFIX_ROUTE_JSON_BUDGET((size_t) x->size);

    if (x->size == 0) {
        x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_EMPTY;
        return NGX_DECLINED;
    }

    if (x->buf == NULL) {
        x->buf = ngx_http_prefix_route_scratch(
                              &ngx_http_prefix_route_prompt_buf, x->max_prefix);
    }

    if (x->hash == NULL) {
        x->hash = ngx_http_prefix_route_scratch(&ngx_http_prefix_route_hash_buf,
                              x->max_prefix / x->block * sizeof(uint64_t));
    }

    if (x->buf == NULL || x->hash == NULL) {
        x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY;
        return NGX_DECLINED;
    }

    pr.buf = x->buf;
    pr.size = x->max_prefix;
    pr.len = 0;
    pr.key = 0;
    pr.seed = 0;
    pr.model = 0;
    pr.name = x->name;
    pr.name_size = x->name_size;
    pr.name_len = 0;
    pr.answers = x->answers;
    pr.max_answers = x->max_answers;
    pr.nanswers = 0;
    pr.nontext = 0;
    pr.batch = 0;
    pr.skip_cache = 0;
    pr.ids = 0;
    pr.late = 0;
    pr.unclocked = 0;

    /*
     * the body's time, fast path and jansson's parse and walk together:
     * the budget bounds jansson's memory, not its time, and a body of many
     * distinct keys parses at 5-12 MB/s (a 9 MB one took 0.7 s), one of
     * small values takes the fast path at 64-300 MB/s (design.md,
     * "Parsing is bounded")
     */

    pr.deadline = x->max_parse ? ngx_http_prefix_route_prompt_clock()
                                 + (int64_t) x->max_parse * 1000000
                               : 0;

    /*
     * the fast path, for the commonest bodies, in memory or in the
     * temporary file; what it declines in time jansson parses
     */

    mapped = NULL;

    p = ngx_http_prefix_route_gather(in, x->size, &pr, &mapped);

    rc = (p != NULL) ? ngx_http_prefix_route_scan(p, (size_t) x->size, &pr)
                     : NGX_DECLINED;

    if (mapped != NULL) {
        ngx_http_prefix_route_unmap(mapped, x->size);
    }

    if (rc == NGX_OK) {
        goto built;
    }

    if (pr.late) {
        x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME;
        return NGX_DECLINED;
    }

    x->jansson = 1;

    ngx_memzero(&body, sizeof(ngx_http_prefix_route_body_t));
    body.cl = in;
    body.pr = &pr;

    /* what jansson takes for this body is bounded, from parse to decref */

    ngx_http_prefix_route_json_left = x->budget;
    ngx_http_prefix_route_json_low = x->budget;
    ngx_http_prefix_route_json_limited = 1;
    ngx_http_prefix_route_json_refused = 0;

    root = ngx_http_prefix_route_json_load(NULL, 0, ngx_http_prefix_route_read,
                                           &body, JSON_ALLOW_NUL, &err);

    if (root == NULL) {
        ngx_http_prefix_route_json_end(x->budget);

        if (ngx_http_prefix_route_json_refused) {
            x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_BUDGET;
            return NGX_DECLINED;
        }

        if (pr.late) {
            x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME;
            return NGX_DECLINED;
        }

        /* the body may well be JSON: the worker, not the client, failed */

        if (ngx_http_prefix_route_json_failed) {
            x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_MEMORY;
            return NGX_DECLINED;
        }

        x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_JSON;
        x->json_error = (int) json_error_code(&err);
        x->position = err.position;
        return NGX_DECLINED;
    }

    rc = json_is_object(root) ? ngx_http_prefix_route_prompt_build(root, &pr)
                              : NGX_DECLINED;

    json_decref(root);

    ngx_http_prefix_route_json_end(x->budget);

    if (pr.late) {
        x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_TIME;
        return NGX_DECLINED;
    }

built:

    if (rc != NGX_OK || pr.len == 0) {
        x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_NO_PROMPT;
        return NGX_DECLINED;
    }

    /*
     * nginx's salt in place of the body's, or on top of it; in place of
     * it, the engine still keys its cache by the body's cache_salt
     */

    x->foreign_salt = (x->salt.len && !x->cache_salt && pr.seed != pr.model);

    if (x->salt.len) {
        pr.seed = ngx_http_prefix_route_hash_salt(x->cache_salt ? pr.seed
                                                                : pr.model,
                                                  x->salt.data, x->salt.len);
    }

    x->error = NGX_HTTP_PREFIX_ROUTE_EXTRACT_OK;
    x->len = pr.len;
    x->whole = (pr.len < pr.size);
    x->seed = pr.seed;
    x->model = pr.model;
    x->name_len = pr.name_len;
    x->nanswers = pr.nanswers;
    x->nontext = (pr.nontext > 0);
    x->batch = (pr.batch > 0);
    x->skip_cache = (pr.skip_cache > 0);
    x->nblocks = ngx_http_prefix_route_hash_blocks(pr.buf, pr.len, x->block,
                                                   pr.seed, x->hash,
                                                   x->max_prefix / x->block);
    x->key_len = ngx_min(pr.key, NGX_HTTP_PREFIX_ROUTE_KEY_SIZE);
    x->key = ngx_http_prefix_route_hash(pr.buf, x->key_len, pr.seed);

    if (pr.ids) {
        ngx_http_prefix_route_tokens(x, pr.ids);
    }

    return NGX_OK;
}


/*
 * The engine's tokens of a prompt of token ids in each block: an id is
 * its digits and a comma (prompt_ids()), and only whole ones count, as
 * the engine caches whole tokens.  Without memory x->tokens stays NULL:
 * the prompt is then taken for text of unknown tokens.
 */

static void
ngx_http_prefix_route_tokens(ngx_http_prefix_route_extract_t *x, size_t ids)
{
    u_char      *p, *end, *last;
    uint32_t     n;
    ngx_uint_t   i;

    x->tokens = ngx_http_prefix_route_scratch(
                               &ngx_http_prefix_route_tokens_buf,
                               x->max_prefix / x->block * sizeof(uint32_t));
    if (x->tokens == NULL) {
        return;
    }

    p = x->buf + ngx_min(ids, x->len);
    last = x->buf + x->len;
    n = 0;

    for (i = 0; i <= x->nblocks; i++) {
        end = (i < x->nblocks) ? x->buf + (i + 1) * x->block : last;

        for ( /* void */ ; p < end; p++) {
            n += (*p == ',');
        }

        if (i < x->nblocks) {
            x->tokens[i] = n;
        }
    }

    x->ntokens = n;
}


/*
 * The body's bytes in one piece for the fast path: the buffer itself when
 * there is one in memory, else its buffers copied into the gather buffer,
 * or for a body larger than NGX_HTTP_PREFIX_ROUTE_GATHER_MAX into pages
 * mapped for it, set in *mapped for the caller to unmap (also on
 * failure), 1 MiB at a time within pr->deadline; those in the temporary
 * file read from it.  Returns NULL when memory is short or the file
 * cannot be read (jansson then reads the body from the chain), or past
 * the deadline, with pr->late set.
 */

static u_char *
ngx_http_prefix_route_gather(ngx_chain_t *in, off_t size,
    ngx_http_prefix_route_prompt_t *pr, u_char **mapped)
{
    u_char       *p, *buf;
    off_t         off, total;
    size_t        len;
    ngx_buf_t    *b;
    ngx_uint_t    n;
    ngx_chain_t  *cl, *one;

    /* empty buffers, as the one that ends a chunked body, hold nothing */

    n = 0;
    one = NULL;

    for (cl = in; cl; cl = cl->next) {

        if (ngx_buf_size(cl->buf) == 0) {
            continue;
        }

        if (!ngx_buf_in_memory(cl->buf) && !cl->buf->in_file) {
            return NULL;
        }

        one = cl;
        n++;
    }

    if (n == 1 && ngx_buf_in_memory(one->buf)) {
        return one->buf->pos;
    }

    if (n == 0) {
        return NULL;
    }

    if (size <= NGX_HTTP_PREFIX_ROUTE_GATHER_MAX) {
        buf = ngx_http_prefix_route_scratch(&ngx_http_prefix_route_gather_buf,
                                            (size_t) size);

    } else {

        /*
         * not kept, nor in glibc's heap, which keeps what a large free()
         * gives back once it has raised its mmap threshold to that size
         */

#if (NGX_HAVE_MAP_ANON)
        buf = mmap(NULL, (size_t) size, PROT_READ|PROT_WRITE,
                   MAP_ANON|MAP_PRIVATE, -1, 0);

        if (buf == MAP_FAILED) {
            buf = NULL;
        }
#else
        buf = malloc((size_t) size);
#endif

        *mapped = buf;
    }

    if (buf == NULL) {
        return NULL;
    }

    p = buf;

    for (cl = in; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_size(b) == 0) {
            continue;
        }

        total = ngx_buf_in_memory(b) ? b->last - b->pos
                                     : b->file_last - b->file_pos;

        /*
         * 1 MiB at a time, a body over 8 MiB within max_parse: 150 MiB,
         * mapped and copied, took 90 ms (helper-70)
         */

        for (off = 0; off < total; off += len) {
            len = (size_t) ngx_min(total - off, NGX_HTTP_PREFIX_ROUTE_PIECE);

            if (ngx_buf_in_memory(b)) {
                ngx_memcpy(p, b->pos + off, len);

            } else if (ngx_http_prefix_route_read_file(b, p, len,
                                                       b->file_pos + off)
                       != (ssize_t) len)
            {
                return NULL;
            }

            p += len;

            if (*mapped != NULL && ngx_http_prefix_route_prompt_late(pr, len))
            {
                return NULL;
            }
        }
    }

    return buf;
}


static void
ngx_http_prefix_route_unmap(u_char *p, off_t size)
{
#if (NGX_HAVE_MAP_ANON)
    (void) munmap(p, (size_t) size);
#else
    free(p);
#endif
}


/*
 * Reads "size" bytes of a file buffer's file at "offset" into "buf",
 * leaving the file's offset, which the proxy relies on, as it was.
 * Returns the bytes read (fewer at the file's end), NGX_ERROR when the
 * read fails (nginx logs it).
 */

static ssize_t
ngx_http_prefix_route_read_file(ngx_buf_t *b, u_char *buf, size_t size,
    off_t offset)
{
    off_t    saved;
    ssize_t  n;

    saved = b->file->offset;
    n = ngx_read_file(b->file, buf, size, offset);
    b->file->offset = saved;

    return n;
}


/*
 * A buffer of the process of at least "size" bytes, grown to a power of
 * two and kept until ngx_http_prefix_route_scratch_free(); NULL when
 * memory is short.
 */

static void *
ngx_http_prefix_route_scratch(ngx_http_prefix_route_scratch_t *s,
    size_t size)
{
    void    *p;
    size_t   n;

    if (size > s->size || s->data == NULL) {

        for (n = 4096; n < size; n *= 2) {
            /* void */
        }

        p = malloc(n);
        if (p == NULL) {
            return NULL;
        }

        free(s->data);
        s->data = p;
        s->size = n;
    }

    return s->data;
}


static void
ngx_http_prefix_route_scratch_free(ngx_http_prefix_route_scratch_t *s)
{
    free(s->data);

    s->data = NULL;
    s->size = 0;
}


/*
 * jansson's input callback: the body's buffers in order, from memory or
 * from the client body temporary file, whichever holds each of them.
 * Returns the bytes put in "buffer", 0 at the end, (size_t) -1 when the
 * file cannot be read or the parse is to stop (the budget or the
 * deadline passed).
 */

static size_t
ngx_http_prefix_route_read(void *buffer, size_t buflen, void *data)
{
    ngx_http_prefix_route_body_t  *body = data;

    size_t      size;
    ssize_t     n;
    ngx_buf_t  *b;

    if (ngx_http_prefix_route_json_refused) {
        /* past the budget: jansson stops with a read error */
        return (size_t) -1;
    }

    if (ngx_http_prefix_route_prompt_late(body->pr, buflen)) {
        return (size_t) -1;
    }

    for ( ;; ) {

        if (body->pos < body->last) {
            size = ngx_min(buflen, (size_t) (body->last - body->pos));
            ngx_memcpy(buffer, body->pos, size);
            body->pos += size;
            return size;
        }

        if (body->cl == NULL) {
            return 0;
        }

        b = body->cl->buf;

        if (ngx_buf_in_memory(b) && body->offset < b->last - b->pos) {
            body->pos = b->pos + body->offset;
            body->last = b->last;
            body->offset = b->last - b->pos;
            continue;
        }

        if (!ngx_buf_in_memory(b)
            && b->in_file
            && body->offset < b->file_last - b->file_pos)
        {
            size = (size_t) ngx_min(b->file_last - b->file_pos - body->offset,
                                    NGX_HTTP_PREFIX_ROUTE_READ_SIZE);

            n = ngx_http_prefix_route_read_file(b,
                                            ngx_http_prefix_route_read_buf,
                                            size, b->file_pos + body->offset);

            if (n <= 0) {
                return (size_t) -1;
            }

            body->pos = ngx_http_prefix_route_read_buf;
            body->last = ngx_http_prefix_route_read_buf + n;
            body->offset += n;
            continue;
        }

        body->cl = body->cl->next;
        body->offset = 0;
    }
}


/* the allocator that keeps the size and, while limited, charges the budget */

static void *
ngx_http_prefix_route_json_malloc(size_t size)
{
    size_t                               charge;
    ngx_http_prefix_route_json_block_t  *b, *live;

    b = ngx_http_prefix_route_json_alloc(size
                                         + NGX_HTTP_PREFIX_ROUTE_JSON_HEADER);
    if (b == NULL) {
        ngx_http_prefix_route_json_failed = 1;

        if (ngx_http_prefix_route_json_guarded) {
            longjmp(ngx_http_prefix_route_json_jump, 1);
        }

        return NULL;
    }

    ngx_http_prefix_route_json_keep(b, size);

    if (ngx_http_prefix_route_json_limited) {

        /*
         * Past the budget the parse is stopped by the read callback, at
         * most one 1 KiB read later, not by a failed allocation: the
         * parse would end at once, as a failed one, without the module's
         * log line naming the budget
         */

        charge = ngx_http_prefix_route_json_charge(b, size);

        if (charge > ngx_http_prefix_route_json_left) {
            ngx_http_prefix_route_json_refused = 1;
            ngx_http_prefix_route_json_left = 0;

        } else {
            ngx_http_prefix_route_json_left -= charge;
        }

        ngx_http_prefix_route_json_low = ngx_min(ngx_http_prefix_route_json_low,
                                               ngx_http_prefix_route_json_left);
    }

    if (ngx_http_prefix_route_json_guarded) {
        live = &ngx_http_prefix_route_json_live;
        b->prev = live->prev;
        b->next = live;
        live->prev->next = b;
        live->prev = b;

    } else {
        b->prev = NULL;
        b->next = NULL;
    }

    return (u_char *) b + NGX_HTTP_PREFIX_ROUTE_JSON_HEADER;
}


json_t *
ngx_http_prefix_route_json_load(const char *buf, size_t len,
    json_load_callback_t read, void *data, size_t flags, json_error_t *err)
{
    json_t                              *root;
    ngx_http_prefix_route_json_block_t  *live, *b, *next;

    live = &ngx_http_prefix_route_json_live;
    live->prev = live;
    live->next = live;

    ngx_http_prefix_route_json_failed = 0;

    /* jansson leaves the error unset when an allocation fails */
    ngx_memzero(err, sizeof(json_error_t));

    if (setjmp(ngx_http_prefix_route_json_jump)) {

        /* out of jansson, whose state is dropped whole: nothing of it runs */

        ngx_http_prefix_route_json_guarded = 0;

        for (b = live->next; b != live; b = next) {
            next = b->next;
            ngx_http_prefix_route_json_free((u_char *) b
                                          + NGX_HTTP_PREFIX_ROUTE_JSON_HEADER);
        }

        return NULL;
    }

    ngx_http_prefix_route_json_guarded = 1;

    root = read ? json_load_callback(read, data, flags, err)
                : json_loadb(buf, len, flags, err);

    ngx_http_prefix_route_json_guarded = 0;

    /*
     * the tree's blocks stay linked among themselves, without the list's
     * head, until jansson frees them
     */

    if (live->next != live) {
        live->next->prev = live->prev;
        live->prev->next = live->next;
    }

    live->prev = live;
    live->next = live;

    return root;
}


/*
 * the parse is over: its budget no longer counts, and a large tree's heap
 * goes back
 */

static void
ngx_http_prefix_route_json_end(size_t budget)
{
    ngx_http_prefix_route_json_limited = 0;

#if (NGX_LINUX) && defined(__GLIBC__)
    if (budget - ngx_http_prefix_route_json_low
        > NGX_HTTP_PREFIX_ROUTE_JSON_TRIM)
    {
        (void) malloc_trim(0);
    }
#endif
}


static void
ngx_http_prefix_route_json_free(void *p)
{
    ngx_http_prefix_route_json_block_t  *b;

    if (p == NULL) {
        return;
    }

    b = (ngx_http_prefix_route_json_block_t *)
            ((u_char *) p - NGX_HTTP_PREFIX_ROUTE_JSON_HEADER);

    if (b->prev) {
        b->prev->next = b->next;
        b->next->prev = b->prev;
    }

    if (ngx_http_prefix_route_json_limited) {
        ngx_http_prefix_route_json_left +=
                              ngx_http_prefix_route_json_charge(b, b->size);
    }

    ngx_http_prefix_route_json_release(b);
}


char *
ngx_http_prefix_route_extract_reason(int code)
{
    switch (code) {

    case json_error_stack_overflow:
        return "nested too deep";

    case json_error_invalid_utf8:
        return "invalid UTF-8";

    case json_error_premature_end_of_input:
        return "premature end of input";

    case json_error_end_of_input_expected:
        return "more after the end";

    case json_error_invalid_syntax:
        return "invalid syntax";

    case json_error_null_byte_in_key:
        return "a NUL byte in a key";

    case json_error_duplicate_key:
        return "a duplicate key";

    case json_error_numeric_overflow:
        return "a number too large";

    default:
        return "another error";
    }
}
