#!/usr/bin/python3
"""workload.py: benchmark workloads for prefix-aware routing, as JSONL.

    bench/workload/workload.py shared-prefix [knobs] [-o FILE]
    bench/workload/workload.py multi-turn    [knobs] [-o FILE]
    bench/workload/workload.py mooncake      [knobs] [-o FILE]

One request per line, in order of arrival:

    {"t": 12.5, "session": "c3", "user": "u1", "turn": 2, "think": 4.1,
     "output_tokens": 100, "path": "/v1/chat/completions", "body": {...}}

t is the arrival time in model seconds (replay against simulators run with
--time-scale S at t * S wall seconds); body is the OpenAI request body as
sent; session is the conversation (for `hash $session consistent`); user
the user, tenant or prefix group; turn counts from 0 within the session and
think is the pause after the previous turn's response.  A replay should
send turn k > 0 no earlier than `think` after turn k-1 completed (its t
assumes zero latency).  Everything is deterministic from --seed.  See
README.md beside this file for the knobs and their defaults' sources.

Standard library only; the text comes from bench/sim/llmsim.py, whose
reply_text() is also what the simulator answers, so a conversation replayed
from this file sends back exactly the replies the simulator produced.
"""

import argparse
import bisect
import collections
import hashlib
import json
import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "sim"))
sys.dont_write_bytecode = True          # no __pycache__ in the tree
import llmsim                                           # noqa: E402

TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
DEFAULT_TRACE = os.path.normpath(os.path.join(
    TOP, "..", "shared", "workloads", "mooncake", "synthetic_trace.jsonl"))
DEFAULT_OUT_DIR = os.path.join(TOP, "bench", "results", "workloads")

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


# ---------------------------------------------------------------------------
# Determinism: only Random.random() (whose sequence Python guarantees for a
# given seed) and BLAKE2b; no choice(), shuffle() or expovariate(), whose
# algorithms may change between Python versions.

class Rng:
    def __init__(self, seed, stream):
        self.r = random.Random("%s/%s" % (seed, stream))

    def random(self):
        return self.r.random()

    def below(self, n):
        return min(int(self.r.random() * n), n - 1)

    def exp(self, mean):
        return -mean * math.log(1.0 - self.r.random()) if mean > 0 else 0.0

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]

    def length(self, mean, jitter):
        """mean tokens, uniform within +-jitter (a fraction), at least 1."""
        if jitter <= 0:
            return max(1, mean)
        x = 1 + jitter * (2 * self.random() - 1)
        return max(1, int(round(mean * x)))


def text(seed, *key, tokens):
    """Deterministic words, tokens x 4 bytes (the simulator's token)."""
    return llmsim.words_text("%s/%s" % (seed, "/".join(map(str, key))),
                             tokens * llmsim.BYTES_PER_TOKEN)


def request_seed(seed, *key):
    """The 'seed' of one request body: selects the simulator's reply."""
    h = hashlib.blake2b(("%s/%s" % (seed, "/".join(map(str, key)))).encode(),
                        digest_size=4).digest()
    return int.from_bytes(h, "little") & 0x7FFFFFFF


def body_for(a, messages=None, prompt=None, output_tokens=16, seed=0):
    b = {"model": a.model}
    if messages is not None:
        b["messages"] = messages
    else:
        b["prompt"] = prompt
    b["max_tokens"] = output_tokens
    b["temperature"] = 0
    b["seed"] = seed
    b["ignore_eos"] = True              # vLLM: generate exactly max_tokens
    if a.stream:
        b["stream"] = True
        b["stream_options"] = {"include_usage": True}
    return b


# ---------------------------------------------------------------------------
# (a) shared-prefix groups

def shared_prefix(a, emit):
    rng = Rng(a.seed, "shared-prefix")
    n = a.groups * a.prompts_per_group
    if a.zipf > 0:
        # group of rank r (1-based) with probability proportional to r^-s
        cdf = []
        acc = 0.0
        for r in range(1, a.groups + 1):
            acc += r ** -a.zipf
            cdf.append(acc)
        order = []
        count = [0] * a.groups
        for _ in range(n):
            g = min(bisect.bisect_left(cdf, rng.random() * acc), a.groups - 1)
            order.append((g, count[g]))
            count[g] += 1
    else:
        order = [(g, q) for g in range(a.groups)
                 for q in range(a.prompts_per_group)]
        rng.shuffle(order)
    systems = {}
    t = 0.0
    # a stream of its own, so that the other draws stay as without it
    mix = Rng(a.seed, "shared-prefix-long")
    for g, q in order:
        if a.rate > 0:
            t += rng.exp(1.0 / a.rate)
        if g not in systems:
            systems[g] = text(a.seed, "gsp-system", g,
                              tokens=a.system_prompt_len)
        question = text(a.seed, "gsp-question", g, q,
                        tokens=rng.length(a.question_len, a.length_jitter))
        out = rng.length(a.output_len, a.length_jitter)
        if a.long_share > 0 and mix.random() < a.long_share:
            out = a.long_output_len
        seed = request_seed(a.seed, "gsp", g, q)
        if a.api == "chat":
            body = body_for(a, messages=[
                {"role": "system", "content": systems[g]},
                {"role": "user", "content": question}],
                output_tokens=out, seed=seed)
        else:
            body = body_for(a, prompt=systems[g] + "\n\n" + question,
                            output_tokens=out, seed=seed)
        emit({"t": round(t, 6), "session": "g%d-q%d" % (g, q),
              "user": "g%d" % g, "turn": 0, "think": 0.0,
              "output_tokens": out,
              "path": CHAT if a.api == "chat" else COMPLETIONS,
              "body": body})


# ---------------------------------------------------------------------------
# (b) multi-turn chat

def multi_turn(a, emit):
    if a.api != "chat":
        raise SystemExit("multi-turn: only --api chat")
    rng = Rng(a.seed, "multi-turn")
    preamble = text(a.seed, "preamble", tokens=a.preamble_tokens) \
        if a.preamble_tokens > 0 else ""
    convs = a.users * a.conversations
    starts = []
    t = 0.0
    for _ in range(convs):
        if a.rate > 0:
            t += rng.exp(1.0 / a.rate)
        starts.append(t)
    lines = []
    for c in range(convs):
        u = c % a.users
        system = []
        if preamble:
            system.append(preamble)
        if a.user_context_tokens > 0:
            system.append(text(a.seed, "user-context", u,
                               tokens=a.user_context_tokens))
        messages = []
        if system:
            messages.append({"role": "system", "content": "\n\n".join(system)})
        t = starts[c]
        think = 0.0
        for k in range(a.turns):
            if k:
                think = round(rng.exp(a.think_time), 6)
                t += think
            q = text(a.seed, "question", c, k,
                     tokens=rng.length(a.question_tokens, a.length_jitter))
            out = rng.length(a.output_tokens, a.length_jitter)
            seed = request_seed(a.seed, "mt", c, k)
            messages = messages + [{"role": "user", "content": q}]
            lines.append({
                "t": round(t, 6), "session": "c%d" % c, "user": "u%d" % u,
                "turn": k, "think": think, "output_tokens": out,
                "path": CHAT,
                "body": body_for(a, messages=messages, output_tokens=out,
                                 seed=seed)})
            # what the simulator will answer, sent back by the next turn
            messages = messages + [{"role": "assistant",
                                    "content": llmsim.reply_text(seed, out)}]
    lines.sort(key=lambda o: (o["t"], o["session"], o["turn"]))
    for o in lines:
        emit(o)


# ---------------------------------------------------------------------------
# (c) Mooncake trace replay

def mooncake(a, emit):
    path = a.trace
    blocks = {}
    block_bytes = a.block_tokens * llmsim.BYTES_PER_TOKEN

    def block(h):
        b = blocks.get(h)
        if b is None:
            b = blocks[h] = text(a.seed, "mooncake-block", h,
                                 tokens=a.block_tokens)
        return b

    # The session (hash $http_x_session) is the request's first block
    # that at most half of the trace's requests hold: a block every
    # request shares (a global preamble) would put them all in one.
    holders = collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            if line.strip():
                ids = json.loads(line)["hash_ids"]
                holders.update(set(ids))
                total += 1
                if a.limit and total >= a.limit:
                    break

    def session(ids):
        for h in ids:
            if holders[h] * 2 <= total:
                return h
        return ids[-1]

    scale = a.block_tokens / 512.0
    n = 0
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            if a.limit and n >= a.limit:
                break
            o = json.loads(line)
            ids = o["hash_ids"]
            if not ids:
                continue
            want = max(1, int(round(o["input_length"] * scale)))
            nbytes = want * llmsim.BYTES_PER_TOKEN
            parts = [block(h) for h in ids[:-1]]
            last = nbytes - block_bytes * (len(ids) - 1)
            last = min(max(last, llmsim.BYTES_PER_TOKEN), block_bytes)
            parts.append(block(ids[-1])[:last])
            prompt = "".join(parts)
            out = max(1, int(o["output_length"]))
            seed = request_seed(a.seed, "mooncake", n)
            if a.api == "chat":
                body = body_for(a, messages=[{"role": "user",
                                              "content": prompt}],
                                output_tokens=out, seed=seed)
            else:
                body = body_for(a, prompt=prompt, output_tokens=out,
                                seed=seed)
            emit({"t": round(o["timestamp"] / 1000.0 / a.speedup, 6),
                  "session": "m%d" % session(ids), "user": "m%d" % ids[0],
                  "turn": 0, "think": 0.0, "output_tokens": out,
                  "path": CHAT if a.api == "chat" else COMPLETIONS,
                  "body": body})
            n += 1


# ---------------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(
        description="Write a benchmark workload as JSONL (see the module "
                    "docstring and README.md).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    sub = p.add_subparsers(dest="kind", required=True)

    def common(sp, default_api="chat"):
        sp.add_argument("-o", "--output", default=None,
                        help="output file, '-' for stdout (default "
                             "bench/results/workloads/KIND.jsonl)")
        sp.add_argument("--seed", type=int, default=1,
                        help="the same seed always gives the same file")
        sp.add_argument("--model", default=llmsim.DEFAULT_MODEL)
        sp.add_argument("--api", choices=("chat", "completions"),
                        default=default_api)
        sp.add_argument("--stream", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="streaming bodies, with "
                             "stream_options.include_usage")
        sp.add_argument("--length-jitter", type=float, default=0.0,
                        help="draw question and output lengths uniformly "
                             "within +- this fraction of their mean")

    sp = sub.add_parser(
        "shared-prefix",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="G system prompts x P questions (SGLang's generated-shared-"
             "prefix, 64 x 16 there; 32 x 16 here)")
    common(sp)
    sp.add_argument("--groups", type=int, default=32,
                    help="G: system prompts (SGLang: 64)")
    sp.add_argument("--prompts-per-group", type=int, default=16,
                    help="P: questions per system prompt (SGLang: 16)")
    sp.add_argument("--system-prompt-len", type=int, default=2048,
                    help="tokens of each system prompt (SGLang: 2048)")
    sp.add_argument("--question-len", type=int, default=128,
                    help="tokens of each question (SGLang: 128)")
    sp.add_argument("--output-len", type=int, default=256,
                    help="output tokens of each request (SGLang: 256)")
    sp.add_argument("--long-output-len", type=int, default=0,
                    help="output tokens of the long requests (with "
                         "--long-share)")
    sp.add_argument("--long-share", type=float, default=0.0,
                    help="share of the requests, drawn at random, that "
                         "generate --long-output-len tokens instead (short "
                         "classification answers mixed with long "
                         "generations)")
    sp.add_argument("--zipf", type=float, default=0.0,
                    help="exponent s of a Zipf popularity of the groups "
                         "(group of rank r drawn with weight r^-s, G x P "
                         "requests in all); 0: every group has exactly P")
    sp.add_argument("--rate", type=float, default=16.0,
                    help="Poisson arrivals per model second; 0: all at t=0")

    sp = sub.add_parser(
        "multi-turn", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="users x conversations x turns, each turn sending the whole "
             "history (vLLM production-stack's multi-round QA)")
    common(sp)
    sp.add_argument("--users", type=int, default=16,
                    help="users; each has its own context (production-stack "
                         "README example: 10)")
    sp.add_argument("--conversations", type=int, default=2,
                    help="conversations per user")
    sp.add_argument("--turns", type=int, default=6,
                    help="turns per conversation (production-stack README "
                         "example: 5 rounds)")
    sp.add_argument("--preamble-tokens", type=int, default=0,
                    help="global preamble opening every system prompt, "
                         "shared by all requests (production-stack's shared "
                         "system prompt: 1000)")
    sp.add_argument("--user-context-tokens", type=int, default=2000,
                    help="per-user context in the system prompt, shared by "
                         "that user's conversations (production-stack "
                         "README example: 2000)")
    sp.add_argument("--question-tokens", type=int, default=64,
                    help="tokens of each user turn")
    sp.add_argument("--output-tokens", type=int, default=100,
                    help="tokens of each reply (production-stack: 100)")
    sp.add_argument("--think-time", type=float, default=10.0,
                    help="mean of the exponential pause (model seconds) "
                         "between a reply and the next turn")
    sp.add_argument("--rate", type=float, default=1.0,
                    help="Poisson starts of conversations per model "
                         "second; 0: all start at t=0")

    sp = sub.add_parser(
        "mooncake", formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        help="replay a Mooncake JSONL trace (timestamp ms, input_length, "
             "output_length, hash_ids of 512-token blocks)")
    common(sp)
    sp.add_argument("--trace", default=DEFAULT_TRACE,
                    help="trace file; absent: print a skip message, exit 0")
    sp.add_argument("--speedup", type=float, default=1.0,
                    help="divide the trace's timestamps by this")
    sp.add_argument("--limit", type=int, default=0,
                    help="first N requests only (0: all)")
    sp.add_argument("--block-tokens", type=int, default=512,
                    help="tokens of text per hash id (the trace's 512); a "
                         "smaller value shrinks every prompt in proportion, "
                         "keeping which requests share which prefix")

    a = p.parse_args()
    for name in ("rate", "think_time", "length_jitter"):
        if getattr(a, name, 0) < 0:
            p.error("--%s must not be negative" % name.replace("_", "-"))
    if getattr(a, "speedup", 1) <= 0:
        p.error("--speedup must be positive")
    out = a.output or os.path.join(DEFAULT_OUT_DIR, a.kind + ".jsonl")

    if a.kind == "mooncake" and not os.path.exists(a.trace):
        print("skip: no Mooncake trace at %s (nothing written)" % a.trace)
        return 0

    stats = {"requests": 0, "prompt_bytes": 0, "output_tokens": 0, "t": 0.0}
    if out == "-":
        f = sys.stdout
    else:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        f = open(out + ".tmp", "w")
    enc = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def emit(o):
        f.write(enc(o))
        f.write("\n")
        stats["requests"] += 1
        b = o["body"]
        if "messages" in b:
            stats["prompt_bytes"] += sum(len(m["content"])
                                         for m in b["messages"])
        else:
            stats["prompt_bytes"] += len(b["prompt"])
        stats["output_tokens"] += o["output_tokens"]
        stats["t"] = max(stats["t"], o["t"])

    {"shared-prefix": shared_prefix, "multi-turn": multi_turn,
     "mooncake": mooncake}[a.kind](a, emit)
    if f is not sys.stdout:
        f.close()
        os.replace(out + ".tmp", out)
    n = stats["requests"]
    print("%s: %d requests over %.1f model s, mean prompt ~%d tokens, "
          "mean output %d tokens -> %s" % (
              a.kind, n, stats["t"],
              stats["prompt_bytes"] / llmsim.BYTES_PER_TOKEN / max(n, 1),
              stats["output_tokens"] / max(n, 1), out), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
