#!/usr/bin/python3
"""llmsim: a simulated vLLM inference server, one process per backend.

It answers the OpenAI HTTP API as vLLM does (POST /v1/chat/completions and
/v1/completions, streamed or not, GET /v1/models, /health, /metrics) and
keeps a prefix cache modelled on vLLM's Automatic Prefix Caching, so that a
benchmark can measure what a router does to cache hits and time to first
token without GPUs.  It shares no code with ngx_http_prefix_route_module:
its chat template, tokenizer and block hashes are its own.

    bench/sim/llmsim.py --port 8001 --name b1 --time-scale 0.1
    bench/sim/llmsim.py bound --backends 4 workload.jsonl  # pooled bound

Standard library only (Debian's python3).  bench/sim/README.md documents the
model, the flags and the sources of every default; `--help` lists the flags.
"""

import argparse
import json
import sys

sys.dont_write_bytecode = True          # no __pycache__ in the tree

# The simulator's parts, by concern: sim_text (deterministic words),
# sim_template (chat template, tokens, block hashes, requests), sim_cache
# (the KV cache and how a request uses it), sim_engine (the scheduler on a
# model clock, metrics), sim_server (HTTP, the command line).  This file is
# their entry point and what the rest of bench/ imports.
from sim_text import reply_text, words_text
from sim_template import (BLOCK_TOKENS, BYTES_PER_TOKEN, DEFAULT_MODEL,
                          block_hashes, parse_request, render_chat)
from sim_cache import PrefixCache, replay
from sim_server import positive, serve

__all__ = ["reply_text", "words_text", "BLOCK_TOKENS", "BYTES_PER_TOKEN",
           "DEFAULT_MODEL", "block_hashes", "parse_request", "render_chat",
           "PrefixCache", "replay", "bound", "serve", "main"]


# ---------------------------------------------------------------------------
# The pooled-cache bound: one cache with the capacity of all backends,
# fed the whole request stream in arrival order, each request done before
# the next (so it never misses for want of time): no router can do better.

def bound(argv):
    p = argparse.ArgumentParser(
        prog="llmsim.py bound",
        description="Token-weighted prefix-cache hit rate of one cache of "
                    "BACKENDS x KV_BLOCKS blocks fed a workload (JSONL from "
                    "bench/workload) in order of 't'.  Prints JSON.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("workload", nargs="+")
    p.add_argument("--backends", type=positive(int), default=1)
    p.add_argument("--kv-blocks", type=positive(int), default=28672,
                   help="blocks per backend (0 < n); see the server's flag")
    p.add_argument("--infinite", action="store_true",
                   help="no eviction at all")
    p.add_argument("--served-model-name", nargs="+", default=None,
                   help="accept these model names (default: any)")
    a = p.parse_args(argv)
    cap = 1 << 62 if a.infinite else a.backends * a.kv_blocks
    cache = PrefixCache(cap)
    items = []
    for path in a.workload:
        with open(path) as f:
            items += [json.loads(line) for line in f if line.strip()]
    queries = hits = skipped = 0
    for r, fit in replay(items, [cache], a.served_model_name):
        queries += r.L
        hits += r.hit if fit else 0
        skipped += not fit
    print(json.dumps({
        "requests": len(items), "prompt_tokens": queries,
        "cached_tokens": hits, "hit_rate": hits / queries if queries else 0,
        "capacity_blocks": None if a.infinite else cap,
        "too_large_for_cache": skipped, "evicted_blocks": cache.evicted}))


def main():
    argv = sys.argv[1:]
    if argv and argv[0] == "bound":
        bound(argv[1:])
    else:
        serve(argv)


if __name__ == "__main__":
    main()
