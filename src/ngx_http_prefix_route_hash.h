
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#ifndef _NGX_HTTP_PREFIX_ROUTE_HASH_H_INCLUDED_
#define _NGX_HTTP_PREFIX_ROUTE_HASH_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/*
 * Seed of a block chain: XXH3 64-bit of the model name, then of cache_salt
 * seeded with that, so that two models or two tenants with different salts
 * never share a block hash (vLLM folds cache_salt into its first block hash
 * the same way).  A NULL salt means the request had none.
 */
uint64_t ngx_http_prefix_route_hash_seed(u_char *model, size_t model_len,
    u_char *salt, size_t salt_len);

/*
 * Seed of a block chain keyed by a salt nginx gives (prefix_route_salt,
 * e.g. an authenticated identity) on top of "seed", the one of
 * ngx_http_prefix_route_hash_seed(): XXH3 64-bit of the salt seeded with
 * it, apart from any body's cache_salt of the same bytes.
 */
uint64_t ngx_http_prefix_route_hash_salt(uint64_t seed, u_char *salt,
    size_t salt_len);

/*
 * The members of a body beside the model and cache_salt that key an
 * engine's cache, in the order they are folded into the seed: SGLang's
 * extra_key and lora_path, vLLM's chat_template (the request's own, which
 * renders all of it).  The names, for both readers of bodies.
 */
#define NGX_HTTP_PREFIX_ROUTE_KEYS  3

extern ngx_str_t  ngx_http_prefix_route_hash_keys[NGX_HTTP_PREFIX_ROUTE_KEYS];

/*
 * Seed of a block chain whose engine keys its cache by one more member of
 * the body, ngx_http_prefix_route_hash_keys[key], folded in after the
 * model and cache_salt, in that table's order: XXH3 64-bit of the
 * member's value seeded with "seed" and the key, so that the same bytes
 * under two keys, or as a salt, differ.
 */
uint64_t ngx_http_prefix_route_hash_key(uint64_t seed, ngx_uint_t key,
    u_char *value, size_t len);

/*
 * Cuts p[0 .. len) into full blocks of "block" bytes and hashes them as a
 * chain: hash[0] = XXH3_64(block 0, seed), hash[i] = XXH3_64(block i,
 * hash[i - 1]), so hash[i] names the whole prefix up to the end of block i
 * (the scheme of vLLM's prefix caching and NVIDIA Dynamo's KV router).
 * A trailing partial block is not hashed, as an engine caches full blocks
 * only.  Writes at most "max" hashes and returns how many it wrote.
 */
ngx_uint_t ngx_http_prefix_route_hash_blocks(u_char *p, size_t len,
    size_t block, uint64_t seed, uint64_t *hash, ngx_uint_t max);

/* XXH3 64-bit of p[0 .. len) with a seed; the one hash the module uses. */
uint64_t ngx_http_prefix_route_hash(u_char *p, size_t len, uint64_t seed);


/*
 * XXH3 64-bit of a text handed over in pieces, seed 0, the same whatever
 * the pieces (the digest of a content part, written by jansson or by the
 * fast path): start, add each piece in order, end.  One text at a time
 * in a process, whose state is allocated at the first start and kept.
 * start returns NGX_ERROR when memory is short; add and end then must
 * not be called.
 */
ngx_int_t ngx_http_prefix_route_hash_start(void);
void ngx_http_prefix_route_hash_add(u_char *p, size_t len);
uint64_t ngx_http_prefix_route_hash_end(void);

/* Frees the state of ngx_http_prefix_route_hash_start(), at exit. */
void ngx_http_prefix_route_hash_exit(void);


#endif /* _NGX_HTTP_PREFIX_ROUTE_HASH_H_INCLUDED_ */
