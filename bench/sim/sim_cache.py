"""llmsim's KV cache (blocks, an LRU free queue, a hash -> block map)
and the one model of how a request uses it."""


import argparse
import collections
import itertools
from sim_template import (BLOCK_BYTES, BLOCK_TOKENS, BYTES_PER_TOKEN,
                          ROOT_HASH, block_hashes, parse_request)
from sim_text import reply_text


# ---------------------------------------------------------------------------
# The KV cache: blocks, an LRU free queue, a hash -> block map.

class PrefixCache:
    """vLLM-style block pool with prefix caching.

    capacity blocks in all.  A block is free (in the free queue), or held by
    running requests (reference count > 0).  A block whose prompt content
    is known carries its chained hash and can be found by later requests,
    even once free, until it is evicted: allocation takes blocks from the
    head of the free queue (never-used blocks first, then the least
    recently freed), and a request frees its blocks tail first, as vLLM's
    KVCacheManager does, so prefixes outlive their tails.
    """

    def __init__(self, capacity):
        self.capacity = capacity
        self.fresh = capacity           # never used blocks (queue head)
        self.ref = {}                   # hash -> reference count
        self.free = collections.OrderedDict()   # key -> None, LRU first
        self.anon = itertools.count(1)  # keys of blocks without a hash
        self.evicted = 0
        self.dead = {}                  # held blocks forgotten by wipe():
                                        # key -> reference count

    def lookup(self, hashes, limit):
        """Number of leading hashes (at most limit) that are cached."""
        ref = self.ref
        k = 0
        for h in hashes:
            if k >= limit or h not in ref:
                break
            k += 1
        return k

    def available(self, hit):
        """Blocks that could be allocated once the hit blocks are held."""
        ref = self.ref
        held_free = sum(1 for h in hit if ref[h] == 0)
        return self.fresh + len(self.free) - held_free

    def acquire(self, hit):
        ref = self.ref
        free = self.free
        for h in hit:
            r = ref[h]
            if r == 0:
                del free[h]
            ref[h] = r + 1

    def allocate(self, n):
        keys = []
        anon = self.anon
        for _ in range(n):
            if self.fresh:
                self.fresh -= 1
            else:
                key, _ = self.free.popitem(last=False)
                if isinstance(key, bytes):
                    del self.ref[key]
                    self.evicted += 1
            keys.append(next(anon))
        return keys

    def register(self, h):
        """A held anonymous block now holds content h: cache it unless the
        same content is already cached in another block (then the block
        stays anonymous, a duplicate)."""
        if h in self.ref or h in self.dead:
            return False
        self.ref[h] = 1
        return True

    def release(self, blocks):
        ref = self.ref
        free = self.free
        for key in reversed(blocks):
            if key in self.dead:
                r = self.dead[key] - 1
                if r:
                    self.dead[key] = r
                else:
                    del self.dead[key]
                    free[next(self.anon)] = None
            elif isinstance(key, bytes):
                r = ref[key] - 1
                ref[key] = r
                if r == 0:
                    free[key] = None
            else:
                free[key] = None

    def wipe(self):
        """What a restart does to the cache: every block's content is
        forgotten; those held by running requests become anonymous when
        released (their keys are remembered in dead until then).  Returns
        the number of cached blocks forgotten."""
        n = len(self.ref)
        free = collections.OrderedDict()
        for key in self.free:
            free[next(self.anon) if isinstance(key, bytes) else key] = None
        self.dead.update((h, r) for h, r in self.ref.items() if r > 0)
        self.free = free
        self.ref = {}
        return n

    def used(self):
        return self.capacity - self.fresh - len(self.free)

    def reset(self):
        if self.used():
            return False
        self.__init__(self.capacity)
        return True


# ---------------------------------------------------------------------------
# One cache model: how a request uses a prefix cache.  The engine admits a
# request, computes its prompt in chunks and finishes it, in model time;
# replay() does the same for each request alone, at once (the pooled-cache
# bound, llmsim.py bound; bench.py's TTFT floor).

def cache_admit(cache, r):
    """Looks r's prompt up and reserves its blocks, as vLLM's scheduler
    does (get_computed_blocks, then allocate_slots for prompt and output):
    True with r.blocks and r.hit set, False when they do not fit now.  The
    last prompt token is always computed, so a whole-prompt hit stops a
    block short."""
    limit = min(len(r.hashes), (r.L - 1) // BLOCK_TOKENS)
    k = cache.lookup(r.hashes, limit)
    hit = r.hashes[:k]
    need = -(-(r.L + r.n_out) // BLOCK_TOKENS) - k
    if cache.available(hit) < need:
        return False
    cache.acquire(hit)
    r.blocks = hit + cache.allocate(need)
    r.hit = r.computed = k * BLOCK_TOKENS
    r.registered = k
    return True


def cache_compute(cache, r, c):
    """c more prompt tokens of r computed: its full blocks are cached as
    they are scheduled, as vLLM V1's allocate_slots() does, so a later
    request in the same step already hits them."""
    r.computed += c
    nfull = min(len(r.hashes), r.computed // BLOCK_TOKENS)
    for j in range(r.registered, nfull):
        if cache.register(r.hashes[j]):
            r.blocks[j] = r.hashes[j]
    r.registered = nfull


def cache_finish(cache, r, reply):
    """r is done: the blocks filled during decode hold prompt + reply (the
    last output token is never computed) and are cached like prompt
    blocks; then all of r's blocks are released."""
    nfull = (r.P + BYTES_PER_TOKEN * (r.n_out - 1)) // BLOCK_BYTES
    F = len(r.hashes)
    if nfull > F:
        more = block_hashes(r.data + reply.encode(), nfull, r.salt,
                            r.hashes[-1] if F else ROOT_HASH, F)
        for j, h in enumerate(more, F):
            if cache.register(h):
                r.blocks[j] = h
    cache.release(r.blocks)


def workload_request(item, served_model_name=None, default_max_tokens=128):
    """The request of one line of a workload file (bench/workload), as the
    server parses its path and body."""
    args = argparse.Namespace(
        served_model_name=served_model_name or [item["body"].get("model")],
        default_max_tokens=default_max_tokens, max_model_len=0)
    path = item.get("path", "/v1/chat/completions")
    kind = "chat" if path == "/v1/chat/completions" else "completion"
    return parse_request(kind, item["body"], args)


def replay(items, caches, served_model_name=None):
    """Each request of a workload alone, in order of t, through
    caches[i % len(caches)]: admitted, computed and finished at once, so it
    never misses for want of time.  Yields (request, whether it fit the
    cache); r.hit is its cached tokens."""
    for i, o in enumerate(sorted(items, key=lambda o: o["t"])):
        r = workload_request(o, served_model_name)
        c = caches[i % len(caches)]
        if not cache_admit(c, r):
            yield r, False
            continue
        cache_compute(c, r, r.L - r.computed)
        cache_finish(c, r, reply_text(r.seed, r.n_out))
        yield r, True
