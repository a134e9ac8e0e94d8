
/*
 * Copyright (C) ngx_http_prefix_route_module authors
 */


#include <ngx_config.h>
#include <ngx_core.h>
#include <xxhash.h>

#include "ngx_http_prefix_route_hash.h"


static XXH3_state_t  *ngx_http_prefix_route_hash_state;


ngx_str_t  ngx_http_prefix_route_hash_keys[NGX_HTTP_PREFIX_ROUTE_KEYS] = {
    ngx_string("extra_key"),
    ngx_string("lora_path"),
    ngx_string("chat_template")
};


uint64_t
ngx_http_prefix_route_hash_seed(u_char *model, size_t model_len, u_char *salt,
    size_t salt_len)
{
    uint64_t  seed;

    seed = XXH3_64bits(model, model_len);

    if (salt != NULL) {
        /* a present but empty salt still differs from no salt */
        seed = XXH3_64bits_withSeed(salt, salt_len, seed ^ 0x5a17);
    }

    return seed;
}


uint64_t
ngx_http_prefix_route_hash_salt(uint64_t seed, u_char *salt, size_t salt_len)
{
    return XXH3_64bits_withSeed(salt, salt_len, seed ^ 0x6e67);
}


uint64_t
ngx_http_prefix_route_hash_key(uint64_t seed, ngx_uint_t key, u_char *value,
    size_t len)
{
    /* one tag a key, apart from the salts' */
    return XXH3_64bits_withSeed(value, len, seed ^ (0x6b00 + key));
}


ngx_uint_t
ngx_http_prefix_route_hash_blocks(u_char *p, size_t len, size_t block,
    uint64_t seed, uint64_t *hash, ngx_uint_t max)
{
    ngx_uint_t  n;

    for (n = 0; n < max && len >= block; n++) {
        seed = XXH3_64bits_withSeed(p, block, seed);
        hash[n] = seed;
        p += block;
        len -= block;
    }

    return n;
}


uint64_t
ngx_http_prefix_route_hash(u_char *p, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(p, len, seed);
}


ngx_int_t
ngx_http_prefix_route_hash_start(void)
{
    if (ngx_http_prefix_route_hash_state == NULL) {
        ngx_http_prefix_route_hash_state = XXH3_createState();

        if (ngx_http_prefix_route_hash_state == NULL) {
            return NGX_ERROR;
        }
    }

    (void) XXH3_64bits_reset(ngx_http_prefix_route_hash_state);

    return NGX_OK;
}


void
ngx_http_prefix_route_hash_add(u_char *p, size_t len)
{
    (void) XXH3_64bits_update(ngx_http_prefix_route_hash_state, p, len);
}


uint64_t
ngx_http_prefix_route_hash_end(void)
{
    return XXH3_64bits_digest(ngx_http_prefix_route_hash_state);
}


void
ngx_http_prefix_route_hash_exit(void)
{
    if (ngx_http_prefix_route_hash_state != NULL) {
        (void) XXH3_freeState(ngx_http_prefix_route_hash_state);
        ngx_http_prefix_route_hash_state = NULL;
    }
}
