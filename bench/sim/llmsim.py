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
import asyncio
import bisect
import collections
import gc
import hashlib
import heapq
import itertools
import json
import math
import signal
import struct
import sys
import time
from json.encoder import encode_basestring_ascii as _jstr

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

VERSION = "1"

BYTES_PER_TOKEN = 4             # token i = bytes [4i, 4i+4) of the prompt
BLOCK_TOKENS = 16               # vLLM's default KV block size (--block-size)
BLOCK_BYTES = BYTES_PER_TOKEN * BLOCK_TOKENS

DEFAULT_MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"


# ---------------------------------------------------------------------------
# Deterministic text: realistic-looking English words from a seed.
#
# Word choice comes from BLAKE2b in counter mode (stable across Python
# versions and platforms), never from the random module.  The workload
# generator uses the same function for prompts and, through reply_text(),
# to write the assistant turns a client would send back.

VOCAB = (
    "the of and to a in is that for it as was with be by on not he this are "
    "or his from at which but have an they you were her she there one all "
    "we their been has would when if will more no out so said what up its "
    "about into than them can only other new some could time these two may "
    "then do first any my now such like our over man me even most made "
    "after also did many before must through back years where much your "
    "way well down should because each just those people how too little "
    "state good very make world still own see men work long get here "
    "between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take "
    "three states himself few house use during without again place around "
    "however home small found thought went say part once general high upon "
    "school every does got united left number course war until always away "
    "something fact though water less public put think almost hand enough "
    "far took head yet government system better set told nothing night end "
    "why called eyes find going look asked later knew point next program "
    "city business give group toward young days let room president side "
    "social present given several order national possible rather second "
    "face per among form important often things looked early white case "
    "john become large big need four within felt along children saw best "
    "church ever least power development light thing seemed family "
    "interest want members mind country area others done turned although "
    "open problem sense service certain kind began thus help means "
    "perhaps whole matter idea above question feel data report policy "
    "market value level model price answer customer invoice account support "
    "request update issue review team project design result process "
    "network server client query cache memory storage version release "
    "document section message reply summary history detail context "
    "language library function method record table field source target "
    "travel weather garden kitchen music river mountain street window "
    "morning evening winter summer letter story friend doctor teacher "
    "student meeting office lesson simple clear quick careful useful "
    "please explain describe compare suggest consider include provide "
    "follow check write read plan build test measure improve reduce"
).split()

_NV = len(VOCAB)


def words_text(key, nbytes):
    """Exactly nbytes of ASCII text: words, commas, sentences, paragraphs.

    key (str or bytes) selects the text; the same key always gives the same
    text (a shorter text is a prefix of a longer one but for its last
    character, which is never a space).
    """
    if nbytes <= 0:
        return ""
    if isinstance(key, str):
        key = key.encode()
    vocab = VOCAB
    out = []
    total = 0
    ctr = 0
    cap = True
    blake = hashlib.blake2b
    while total < nbytes:
        d = blake(key + ctr.to_bytes(8, "little"), digest_size=63).digest()
        ctr += 1
        for i in range(0, 63, 3):
            v = d[i] | (d[i + 1] << 8)
            w = vocab[(v * v * _NV) >> 32]       # skewed to common words
            if cap:
                w = w[0].upper() + w[1:]
                cap = False
            p = d[i + 2]
            if p < 16:                  # ~1 word in 16 ends a sentence
                w += ". " if p else ".\n"  # 1 in 256: a paragraph
                cap = True
            elif p < 24:
                w += ", "
            else:
                w += " "
            out.append(w)
            total += len(w)
    text = "".join(out)[:nbytes]
    if text[-1] in " \n":
        text = text[:-1] + "."
    return text


def reply_text(seed, n_tokens):
    """The simulator's completion for a request with this seed: 4n bytes."""
    return words_text(b"llmsim-reply:%d" % seed, BYTES_PER_TOKEN * n_tokens)


# ---------------------------------------------------------------------------
# Chat template, tokens and block hashes.

class BadRequest(Exception):
    def __init__(self, message, status=400, etype="BadRequestError"):
        super().__init__(message)
        self.status = status
        self.etype = etype


def _hdr(role):
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n"


_EOT = "<|eot_id|>"


def _content_text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in (
                    "text", "input_text", "output_text") \
                    and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                # images, audio, files: a placeholder and the part itself, so
                # that different parts never share a block (vLLM hashes
                # multimodal inputs into the block keys)
                out.append("<|part|>" + json.dumps(
                    part, sort_keys=True, ensure_ascii=False,
                    separators=(",", ":")))
        return "".join(out)
    raise BadRequest("message content must be a string, an array or null")


def render_chat(body):
    """The prompt text of a chat request, in a Llama-3-like template.

    <|begin_of_text|> then, for each message,
    <|start_header_id|>ROLE<|end_header_id|>\\n\\nCONTENT<|eot_id|>,
    then the generation prompt
    <|start_header_id|>assistant<|end_header_id|>\\n\\n.
    Tools (or the deprecated functions) are rendered as sorted JSON at the
    start of the system part; an assistant's tool_calls as sorted JSON after
    its content.  Other members of a message (name, ...) are ignored.
    """
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty array")
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message must be an object with a 'role'")
    tools = body.get("tools") or body.get("functions")
    out = ["<|begin_of_text|>"]
    system = []
    if tools:
        system.append("Environment: tools\nAvailable functions:\n"
                      + json.dumps(tools, sort_keys=True, ensure_ascii=False))
    first = 0
    if msgs[0]["role"] == "system":
        system.append(_content_text(msgs[0].get("content")))
        first = 1
    if system:
        out.append(_hdr("system") + "\n\n".join(system) + _EOT)
    for m in msgs[first:]:
        text = _content_text(m.get("content"))
        calls = m.get("tool_calls")
        if calls:
            text += "<|python_tag|>" + json.dumps(
                calls, sort_keys=True, ensure_ascii=False)
        out.append(_hdr(m["role"]) + text + _EOT)
    if body.get("continue_final_message"):
        out[-1] = out[-1][:-len(_EOT)]
    elif body.get("add_generation_prompt", True):
        out.append(_hdr("assistant"))
    return "".join(out)


def completion_prompt_bytes(body):
    """Prompt bytes of a legacy completions request (token ids: 4 bytes)."""
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]
    if isinstance(p, str):
        return ("<|begin_of_text|>" + p).encode()
    if isinstance(p, list) and p and all(
            isinstance(t, int) and 0 <= t < 2 ** 32 for t in p):
        return struct.pack("<%dI" % len(p), *p)
    if isinstance(p, list) and len(p) > 1:
        raise BadRequest("batched prompts are not supported by the simulator")
    raise BadRequest("'prompt' must be a string or a list of token ids")


ROOT_HASH = b"\0" * 16


def block_hashes(data, nblocks, salt=None, parent=ROOT_HASH, start=0):
    """Chained BLAKE2b-128 hashes of the 64-byte blocks start..nblocks-1.

    h[j] = BLAKE2b(h[j-1] || bytes of block j); the first block's input also
    holds the cache_salt, as in vLLM.
    """
    blake = hashlib.blake2b
    mv = memoryview(data)
    out = []
    h = parent
    for j in range(start, nblocks):
        if j == 0 and salt is not None:
            h = blake(h + b"salt:" + salt + b"\0"
                      + mv[0:BLOCK_BYTES], digest_size=16).digest()
        else:
            h = blake(h + mv[j * BLOCK_BYTES:(j + 1) * BLOCK_BYTES],
                      digest_size=16).digest()
        out.append(h)
    return out


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
# Requests.

class Request:
    __slots__ = (
        "rid", "kind", "model", "stream", "include_usage", "data", "P", "L",
        "hashes", "salt", "n_out", "seed", "reply", "arrival", "conn",
        "computed", "hit", "blocks", "registered", "t_first", "t_end",
        "emitted", "flush_handle", "aborted", "admitted", "done", "created",
        "prefix", "suffix", "last_suffix", "t_admit")

    def __init__(self):
        self.aborted = False
        self.admitted = False
        self.done = False
        self.flush_handle = None
        self.emitted = 0
        self.computed = 0
        self.hit = 0
        self.registered = 0
        self.blocks = None
        self.t_first = None


def parse_request(kind, body, args):
    """Validate an OpenAI request body and build a Request."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if model is None:
        model = args.served_model_name[0]
    elif model not in args.served_model_name:
        raise BadRequest("The model `%s` does not exist." % model,
                         404, "NotFoundError")
    if body.get("n", 1) != 1:
        raise BadRequest("n > 1 is not supported by the simulator")
    r = Request()
    r.kind = kind
    r.model = model
    if kind == "chat":
        data = render_chat(body).encode()
        n = body.get("max_completion_tokens")
        if n is None:
            n = body.get("max_tokens")
        if n is None:
            n = args.default_max_tokens
    else:
        data = completion_prompt_bytes(body)
        n = body.get("max_tokens", 16)      # the OpenAI/vLLM default
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise BadRequest("max_tokens must be a positive integer")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be a boolean")
    so = body.get("stream_options") or {}
    if not isinstance(so, dict):
        raise BadRequest("'stream_options' must be an object")
    salt = body.get("cache_salt")
    if salt is not None:
        if not isinstance(salt, str) or not salt:
            raise BadRequest("'cache_salt' must be a non-empty string")
        salt = salt.encode()
    r.stream = stream
    r.include_usage = bool(so.get("include_usage")) and stream
    r.data = data
    r.P = len(data)
    r.L = -(-len(data) // BYTES_PER_TOKEN)
    if args.max_model_len and r.L + n > args.max_model_len:
        raise BadRequest(
            "This model's maximum context length is %d tokens. However, you "
            "requested %d tokens (%d in the messages, %d in the completion)."
            % (args.max_model_len, r.L + n, r.L, n))
    r.salt = salt
    r.hashes = block_hashes(data, len(data) // BLOCK_BYTES, salt)
    r.n_out = n
    seed = body.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        seed = int.from_bytes(hashlib.blake2b(
            data, digest_size=4).digest(), "little")
    r.seed = seed
    return r


# ---------------------------------------------------------------------------
# Metrics.

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0,
                640.0, 2560.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
               30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
               7680.0)


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v):
        self.counts[bisect.bisect_left(self.buckets, v)] += 1
        self.sum += v
        self.count += 1

    def lines(self, name, labels):
        out = []
        acc = 0
        for le, c in zip(self.buckets, self.counts):
            acc += c
            out.append('%s_bucket{%s,le="%s"} %d' % (name, labels, le, acc))
        out.append('%s_bucket{%s,le="+Inf"} %d' % (name, labels, self.count))
        out.append("%s_count{%s} %d" % (name, labels, self.count))
        out.append("%s_sum{%s} %r" % (name, labels, self.sum))
        return out


# ---------------------------------------------------------------------------
# The engine: a discrete-event model of one vLLM instance, on a model clock.

class Engine:
    """Scheduler, prefill steps, decode and the cache of one backend.

    Model time t (seconds) maps to the event loop's clock as
    wall = w0 + t * time_scale.  Every state change happens at a model
    time taken from an event heap, so a late timer (a busy event loop)
    delays the bytes on the wire but never changes the simulated schedule.
    """

    def __init__(self, args, loop):
        self.args = args
        self.loop = loop
        self.scale = args.time_scale
        self.w0 = loop.time()
        self.overhead = args.prefill_overhead_ms / 1e3
        self.per_token = args.prefill_us_per_token / 1e6
        self.itl = args.itl_ms / 1e3
        self.budget = args.max_num_batched_tokens
        self.max_seqs = args.max_num_seqs
        self.tick = args.stream_tick_ms / 1e3
        self.cache = PrefixCache(args.kv_blocks)
        self.waiting = collections.deque()
        self.prefilling = []
        self.running = 0
        self.lane_busy = False
        self.heap = []
        self.seq = itertools.count()
        self.timer = None
        self.timer_t = math.inf
        self.wake_at = math.inf
        self.ids = itertools.count(1)
        # counters
        self.queries = 0
        self.hits = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished = 0
        # the counters at the last POST /sim/restart: the engine's own
        # counters in /metrics start again from 0 there, as a restarted
        # process's do (/sim/stats keeps the simulator's totals)
        self.base = self.counters(zero=True)
        self.aborted = 0
        self.busy = 0.0
        self.steps = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    # clock
    def now(self):
        return (self.loop.time() - self.w0) / self.scale

    def wall(self, t):
        return self.w0 + t * self.scale

    def push(self, t, fn, arg):
        heapq.heappush(self.heap, (t, next(self.seq), fn, arg))

    def advance(self, t):
        heap = self.heap
        while heap and heap[0][0] <= t:
            et, _, fn, arg = heapq.heappop(heap)
            fn(et, arg)

    def arm(self):
        if not self.heap:
            return
        t = self.heap[0][0]
        if self.timer is not None:
            if self.timer_t <= t:
                return
            self.timer.cancel()
        self.timer_t = t
        self.timer = self.loop.call_at(self.wall(t), self._on_timer)

    def _on_timer(self):
        self.timer = None
        self.timer_t = math.inf
        self.advance(self.now())
        self.arm()

    # requests in
    def submit(self, r):
        t = self.now()
        self.advance(t)
        r.arrival = t
        r.rid = next(self.ids)
        r.created = int(time.time())
        need = -(-(r.L + r.n_out) // BLOCK_TOKENS)
        if need > self.cache.capacity:
            raise BadRequest(
                "the request needs %d KV blocks, more than the %d the cache "
                "holds (--kv-blocks)" % (need, self.cache.capacity))
        self.waiting.append(r)
        self.plan(t)
        self.arm()

    def abort(self, r):
        t = self.now()
        self.advance(t)         # its end may be due: then it is not aborted
        if r.done or r.aborted:
            return
        r.aborted = True
        self.aborted += 1
        if r.flush_handle is not None:
            r.flush_handle.cancel()
            r.flush_handle = None
        if not r.admitted:
            try:
                self.waiting.remove(r)
            except ValueError:
                pass
        else:
            if r in self.prefilling:
                self.prefilling.remove(r)
            self.cache.release(r.blocks)
            self.running -= 1
        self.plan(t)
        self.arm()

    # scheduling
    def admit(self, r):
        """Look the prompt up and reserve its blocks; False if they do not
        fit now (the request waits, first in line)."""
        cache = self.cache
        limit = min(len(r.hashes), (r.L - 1) // BLOCK_TOKENS)
        k = cache.lookup(r.hashes, limit)
        hit = r.hashes[:k]
        need = -(-(r.L + r.n_out) // BLOCK_TOKENS) - k
        if cache.available(hit) < need:
            return False
        cache.acquire(hit)
        r.blocks = hit + cache.allocate(need)
        r.hit = k * BLOCK_TOKENS
        r.computed = r.hit
        r.registered = k
        r.admitted = True
        self.queries += r.L
        self.hits += r.hit
        return True

    def plan(self, s):
        """Start a prefill step at model time s if the lane is free and
        there is prefill work that had arrived by s.

        Requests part-way through their prefill go first, then waiting
        requests in arrival order while the token budget, max_num_seqs and
        free blocks allow (FCFS: the first that does not fit stops the
        rest).  A chunk's full blocks are cached as it is scheduled, as
        vLLM V1's allocate_slots() does, so a later request in the same
        step already hits them.
        """
        if self.lane_busy:
            return
        budget = self.budget
        batch = []
        for r in self.prefilling:
            if budget <= 0:
                break
            c = min(r.L - r.computed, budget)
            self._schedule_chunk(r, c)
            batch.append(r)
            budget -= c
        waiting = self.waiting
        while budget > 0 and waiting:
            r = waiting[0]
            if r.arrival > s:
                if not batch and r.arrival < self.wake_at:
                    self.wake_at = r.arrival
                    self.push(r.arrival, self._wake, None)
                break
            if self.running >= self.max_seqs or not self.admit(r):
                break
            waiting.popleft()
            r.t_admit = s
            self.prefilling.append(r)
            self.running += 1
            c = min(r.L - r.computed, budget)
            self._schedule_chunk(r, c)
            batch.append(r)
            budget -= c
        if not batch:
            return
        d = self.overhead + (self.budget - budget) * self.per_token
        self.lane_busy = True
        self.busy += d
        self.steps += 1
        self.push(s + d, self._end_step, batch)

    def _schedule_chunk(self, r, c):
        r.computed += c
        nfull = min(len(r.hashes), r.computed // BLOCK_TOKENS)
        cache = self.cache
        hashes = r.hashes
        blocks = r.blocks
        for j in range(r.registered, nfull):
            if cache.register(hashes[j]):
                blocks[j] = hashes[j]
        r.registered = nfull

    def _wake(self, t, _):
        self.wake_at = math.inf
        self.plan(t)

    def _end_step(self, t, batch):
        self.lane_busy = False
        done = [r for r in batch if not r.aborted and r.computed >= r.L]
        if done:
            self.prefilling = [r for r in self.prefilling if r not in done]
            for r in done:
                self._first_token(t, r)
        self.plan(t)

    # decode and responses
    def _first_token(self, t, r):
        r.t_first = t
        r.t_end = t + (r.n_out - 1) * self.itl
        r.reply = reply_text(r.seed, r.n_out)
        self.ttft.observe(t - r.arrival)
        if r.stream:
            r.conn.stream_first(r)
            r.emitted = 1
            self._schedule_flush(r)
        self.push(r.t_end, self._finish, r)

    def _schedule_flush(self, r):
        nxt = r.t_first + r.emitted * self.itl
        if nxt >= r.t_end:
            return
        w = max(self.wall(nxt), self.loop.time() + self.tick)
        if w >= self.wall(r.t_end):
            return
        r.flush_handle = self.loop.call_at(w, self._flush, r)

    def _flush(self, r):
        r.flush_handle = None
        if r.aborted or r.done:
            return
        t = self.now()
        upto = min(r.n_out - 1, 1 + int((t - r.t_first) / self.itl + 1e-9))
        if upto > r.emitted:
            r.conn.stream_tokens(r, r.emitted, upto, False)
            r.emitted = upto
        self._schedule_flush(r)

    def _finish(self, t, r):
        if r.aborted:
            return
        cache = self.cache
        # blocks filled during decode hold prompt + reply (the last output
        # token is never computed) and are cached like prompt blocks
        nfull = (r.P + BYTES_PER_TOKEN * (r.n_out - 1)) // BLOCK_BYTES
        F = len(r.hashes)
        if nfull > F:
            data = r.data + r.reply.encode()
            more = block_hashes(data, nfull, r.salt,
                                r.hashes[-1] if F else ROOT_HASH, F)
            blocks = r.blocks
            for j, h in enumerate(more, F):
                if cache.register(h):
                    blocks[j] = h
        cache.release(r.blocks)
        r.done = True
        self.running -= 1
        self.finished += 1
        self.prompt_tokens += r.L
        self.generation_tokens += r.n_out
        self.e2e.observe(t - r.arrival)
        if r.flush_handle is not None:
            r.flush_handle.cancel()
            r.flush_handle = None
        if r.stream:
            r.conn.stream_tokens(r, r.emitted, r.n_out, True)
            r.emitted = r.n_out
        else:
            r.conn.send_completion(r)
        self.plan(t)

    def reset_prefix_cache(self):
        return self.cache.reset()

    # reporting
    def stats(self):
        t = self.now()
        c = self.cache
        return {
            "name": self.args.name,
            "model": self.args.served_model_name[0],
            "time_scale": self.scale,
            "model_time_s": t,
            "requests": self.finished,
            "aborted": self.aborted,
            "running": self.running,
            "waiting": len(self.waiting),
            "prompt_tokens": self.prompt_tokens,
            "generation_tokens": self.generation_tokens,
            "prefix_cache_queries": self.queries,
            "prefix_cache_hits": self.hits,
            "prefill_busy_s": self.busy,
            "prefill_steps": self.steps,
            "kv_blocks": c.capacity,
            "kv_blocks_used": c.used(),
            "cached_blocks": len(c.ref),
            "evicted_blocks": c.evicted,
        }

    def counters(self, zero=False):
        """The engine's counters as its /metrics shows them: since its
        last restart."""
        now = {"queries": self.queries, "hits": self.hits,
               "prompt": self.prompt_tokens,
               "generation": self.generation_tokens,
               "requests": self.finished}
        if zero:
            return now
        return {k: v - self.base[k] for k, v in now.items()}

    def restart(self):
        """What a restart does: the cache is forgotten (PrefixCache.wipe)
        and the engine's counters start again.  Returns the number of
        cached blocks forgotten."""
        self.base = self.counters(zero=True)
        return self.cache.wipe()

    def metrics(self):
        a = self.args
        lab = 'engine="0",model_name="%s"' % a.served_model_name[0]
        c = self.cache
        k = self.counters()
        out = []

        def metric(name, mtype, help_, value, labels=lab, suffix=""):
            out.append("# HELP %s %s" % (name, help_))
            out.append("# TYPE %s %s" % (name, mtype))
            if labels:
                out.append("%s%s{%s} %r" % (name, suffix, labels, value))
            else:
                out.append("%s%s %r" % (name, suffix, value))

        if a.metrics_engine != "vllm":
            # another engine's names for the queue, the batch, the KV
            # cache and a counter that a restart resets (METRIC_NAMES)
            names = METRIC_NAMES[a.metrics_engine]
            elab = ('model_name="%s"' % a.served_model_name[0]
                    if a.metrics_engine == "sglang" else "")
            for key, value in (("running", self.running),
                               ("waiting", len(self.waiting)),
                               ("kv", c.used() / c.capacity),
                               ("prompt", k["prompt"]),
                               ("uncached", k["prompt"] - k["hits"]),
                               ("cached", k["hits"]),
                               ("requests", k["requests"])):
                name = names.get(key)
                if name is not None:
                    metric(name, "gauge" if key in ("running", "waiting",
                                                    "kv") else "counter",
                           "%s (as %s names it)" % (key, a.metrics_engine),
                           value, labels=elab)
            return self.sim_metrics(metric, lab, out)

        metric("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.",
               self.running)
        metric("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.",
               len(self.waiting))
        metric("vllm:kv_cache_usage_perc", "gauge",
               "KV-cache usage. 1 means 100 percent usage.",
               c.used() / c.capacity)
        metric("vllm:prefix_cache_queries", "counter",
               "Prefix cache queries, in terms of number of queried tokens.",
               k["queries"], suffix="_total")
        metric("vllm:prefix_cache_hits", "counter",
               "Prefix cache hits, in terms of number of cached tokens.",
               k["hits"], suffix="_total")
        metric("vllm:prompt_tokens", "counter",
               "Number of prefill tokens processed.",
               k["prompt"], suffix="_total")
        metric("vllm:generation_tokens", "counter",
               "Number of generation tokens processed.",
               k["generation"], suffix="_total")
        metric("vllm:request_success", "counter",
               "Count of successfully processed requests.",
               k["requests"], labels=lab + ',finished_reason="length"',
               suffix="_total")
        for name, h, help_ in (
                ("vllm:time_to_first_token_seconds", self.ttft,
                 "Histogram of time to first token in seconds (model time)."),
                ("vllm:e2e_request_latency_seconds", self.e2e,
                 "Histogram of end to end request latency in seconds "
                 "(model time).")):
            out.append("# HELP %s %s" % (name, help_))
            out.append("# TYPE %s histogram" % name)
            out.extend(h.lines(name, lab))
        return self.sim_metrics(metric, lab, out)

    def sim_metrics(self, metric, lab, out):
        a = self.args
        c = self.cache
        metric("sim:prefill_busy_seconds", "counter",
               "Model seconds the prefill engine spent in steps.",
               self.busy, suffix="_total")
        metric("sim:prefill_steps", "counter", "Prefill steps run.",
               self.steps, suffix="_total")
        metric("sim:requests", "counter", "Requests served to the end.",
               self.finished, suffix="_total")
        metric("sim:aborted_requests", "counter",
               "Requests whose client went away first.",
               self.aborted, suffix="_total")
        metric("sim:evicted_blocks", "counter",
               "Cached blocks evicted to make room.",
               c.evicted, suffix="_total")
        metric("sim:cached_blocks", "gauge",
               "Blocks holding a cached prefix (in use or free).",
               len(c.ref))
        metric("sim:kv_blocks", "gauge", "KV cache capacity in blocks.",
               c.capacity)
        metric("sim:time_scale", "gauge",
               "Wall seconds per model second.", self.scale)
        metric("sim:model_time_seconds", "gauge",
               "Model seconds since the simulator started.", self.now())
        out.append("# HELP sim:info Simulator identity.")
        out.append("# TYPE sim:info gauge")
        out.append('sim:info{%s,name="%s",version="%s"} 1'
                   % (lab, a.name, VERSION))
        return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# HTTP/1.1 with keep-alive, on asyncio.Protocol (no streams: they are slow).

REASONS = {100: "Continue", 200: "OK", 400: "Bad Request",
           404: "Not Found", 405: "Method Not Allowed",
           411: "Length Required", 413: "Payload Too Large",
           431: "Request Header Fields Too Large",
           500: "Internal Server Error", 501: "Not Implemented"}

MAX_HEAD = 64 * 1024
MAX_BODY = 256 * 1024 * 1024


class HTTP(asyncio.Protocol):
    def __init__(self, server):
        self.srv = server
        self.engine = server.engine
        self.buf = bytearray()
        self.transport = None
        self.head = None
        self.busy = False           # a response is being produced
        self.closed = False
        self.keep = True
        self.req = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True
        r = self.req
        if r is not None and not r.done:
            self.engine.abort(r)
        self.req = None

    def data_received(self, data):
        self.buf += data
        if not self.busy:
            self.process()

    # parsing
    def process(self):
        while not self.busy and not self.closed:
            msg = self.parse()
            if msg is None:
                return
            try:
                self.handle(*msg)
            except BadRequest as e:
                self.send_error(e.status, str(e), e.etype)
            except Exception as e:      # a bug: say so, keep serving
                self.send_error(500, "%s: %s" % (type(e).__name__, e),
                                "InternalServerError")

    def parse(self):
        buf = self.buf
        if self.head is None:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                if len(buf) > MAX_HEAD:
                    self.fail(431)
                return None
            lines = bytes(buf[:i]).decode("latin-1").split("\r\n")
            del buf[:i + 4]
            try:
                method, target, version = lines[0].split(" ")
            except ValueError:
                self.fail(400)
                return None
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            conn = headers.get("connection", "").lower()
            if version == "HTTP/1.1":
                keep = "close" not in conn
            else:
                keep = "keep-alive" in conn
            te = headers.get("transfer-encoding", "").lower()
            if "chunked" in te:
                length = -1
            else:
                try:
                    length = int(headers.get("content-length", "0"))
                except ValueError:
                    self.fail(400)
                    return None
                if length > MAX_BODY:
                    self.fail(413)
                    return None
            self.head = (method, target, version, headers, keep, length)
            if headers.get("expect", "").lower() == "100-continue":
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        method, target, version, headers, keep, length = self.head
        if length >= 0:
            if len(buf) < length:
                return None
            body = bytes(buf[:length])
            del buf[:length]
        else:
            body = self.dechunk()
            if body is None:
                return None
        self.head = None
        self.keep = keep
        return method, target, headers, body

    def dechunk(self):
        buf = self.buf
        pos = 0
        parts = []
        while True:
            i = buf.find(b"\r\n", pos)
            if i < 0:
                return None
            try:
                size = int(bytes(buf[pos:i]).split(b";")[0], 16)
            except ValueError:
                self.fail(400)
                return None
            if size == 0:
                j = buf.find(b"\r\n\r\n", i)
                if j < 0:
                    return None
                del buf[:j + 4]
                return b"".join(parts)
            if len(buf) < i + 2 + size + 2:
                return None
            parts.append(bytes(buf[i + 2:i + 2 + size]))
            pos = i + 2 + size + 2

    def fail(self, status):
        self.keep = False
        self.send_error(status, REASONS.get(status, "error"),
                        "BadRequestError")

    # responses
    def _head(self, status, ctype, extra=""):
        return ("HTTP/1.1 %d %s\r\ncontent-type: %s\r\nX-Backend: %s\r\n"
                "server: llmsim\r\n%s%s" % (
                    status, REASONS.get(status, ""), ctype, self.srv.name,
                    extra, "" if self.keep else "connection: close\r\n"))

    def send(self, status, body, ctype="application/json", extra=""):
        if self.closed:
            return
        if isinstance(body, str):
            body = body.encode()
        self.transport.write((self._head(status, ctype, extra)
                              + "content-length: %d\r\n\r\n" % len(body)
                              ).encode() + body)
        self.done()

    def done(self):
        self.busy = False
        self.req = None
        if not self.keep:
            self.closed = True
            self.transport.close()
        elif self.buf:
            self.srv.loop.call_soon(self.process)

    def send_error(self, status, message, etype):
        self.send(status, json.dumps({"error": {
            "message": message, "type": etype, "param": None,
            "code": status}}))

    # streaming (SSE over chunked transfer encoding)
    def stream_begin(self, r):
        self.transport.write((self._head(
            200, "text/event-stream; charset=utf-8",
            "x-request-id: %d\r\ncache-control: no-cache\r\n" % r.rid)
            + "transfer-encoding: chunked\r\n\r\n").encode())
        if r.kind == "chat":
            base = ('data: {"id":%s,"object":"chat.completion.chunk",'
                    '"created":%d,"model":%s,"choices":[{"index":0,' % (
                        _jstr("chatcmpl-%s-%d" % (self.srv.name, r.rid)),
                        r.created, _jstr(r.model)))
            r.prefix = base + '"delta":{"content":'
            r.suffix = '},"logprobs":null,"finish_reason":null}]}\n\n'
            r.last_suffix = ('},"logprobs":null,"finish_reason":"length",'
                             '"stop_reason":null}]')
        else:
            base = ('data: {"id":%s,"object":"text_completion",'
                    '"created":%d,"model":%s,"choices":[{"index":0,' % (
                        _jstr("cmpl-%s-%d" % (self.srv.name, r.rid)),
                        r.created, _jstr(r.model)))
            r.prefix = base + '"text":'
            r.suffix = ',"logprobs":null,"finish_reason":null,' \
                       '"stop_reason":null}]}\n\n'
            r.last_suffix = ',"logprobs":null,"finish_reason":"length",' \
                            '"stop_reason":null}]'

    def _chunk(self, text):
        if self.closed:
            return
        data = text.encode()
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def stream_first(self, r):
        out = []
        if r.kind == "chat":
            out.append(r.prefix[:-len('"delta":{"content":')]
                       + '"delta":{"role":"assistant","content":""},'
                         '"logprobs":null,"finish_reason":null}]}\n\n')
        if r.n_out > 1:
            out.append(r.prefix + _jstr(r.reply[0:BYTES_PER_TOKEN]) + r.suffix)
        if out:
            self._chunk("".join(out))

    def stream_tokens(self, r, a, b, last):
        reply = r.reply
        pre = r.prefix
        suf = r.suffix
        out = []
        end = b - 1 if last else b
        for i in range(a, end):
            out.append(pre + _jstr(reply[4 * i:4 * i + 4]) + suf)
        if last:
            i = b - 1
            out.append(pre + _jstr(reply[4 * i:4 * i + 4]) + r.last_suffix
                       + ',"sim":' + _dumps(self.srv.timing(r)) + "}\n\n")
            if r.include_usage and self.srv.args.usage != "none":
                out.append(
                    r.prefix[:r.prefix.index('"choices":')]
                    + '"choices":[],"usage":'
                    + _dumps(usage(r, self.srv.args.usage)) + "}\n\n")
            out.append("data: [DONE]\n\n")
        if out:
            self._chunk("".join(out))
        if last and not self.closed:
            self.transport.write(b"0\r\n\r\n")
            self.done()

    def send_completion(self, r):
        if r.kind == "chat":
            obj = {"id": "chatcmpl-%s-%d" % (self.srv.name, r.rid),
                   "object": "chat.completion", "created": r.created,
                   "model": r.model,
                   "choices": [{"index": 0,
                                "message": {"role": "assistant",
                                            "content": r.reply,
                                            "tool_calls": []},
                                "logprobs": None, "finish_reason": "length",
                                "stop_reason": None}],
                   "usage": usage(r, self.srv.args.usage),
                   "prompt_logprobs": None,
                   "sim": self.srv.timing(r)}
        else:
            obj = {"id": "cmpl-%s-%d" % (self.srv.name, r.rid),
                   "object": "text_completion", "created": r.created,
                   "model": r.model,
                   "choices": [{"index": 0, "text": r.reply,
                                "logprobs": None, "finish_reason": "length",
                                "stop_reason": None,
                                "prompt_logprobs": None}],
                   "usage": usage(r, self.srv.args.usage),
                   "sim": self.srv.timing(r)}
        self.send(200, _dumps(obj),
                  extra="x-request-id: %d\r\n" % r.rid)

    # routing
    def handle(self, method, target, headers, body):
        path = target.split("?", 1)[0]
        srv = self.srv
        if path in ("/v1/chat/completions", "/v1/completions"):
            if method != "POST":
                raise BadRequest("use POST", 405, "MethodNotAllowed")
            try:
                obj = json.loads(body)
            except ValueError as e:
                raise BadRequest("invalid JSON body: %s" % e)
            kind = "chat" if path == "/v1/chat/completions" else "completion"
            r = parse_request(kind, obj, srv.args)
            r.conn = self
            self.busy = True
            try:
                self.engine.submit(r)
            except BadRequest:
                self.busy = False
                raise
            self.req = r
            if r.stream:
                self.stream_begin(r)
            if srv.args.access_log:
                print("%s %s prompt=%d out=%d" % (srv.name, path, r.L,
                                                  r.n_out), file=sys.stderr)
            return
        if method not in ("GET", "HEAD") and path in (
                "/health", "/v1/models", "/metrics", "/sim/stats",
                "/version"):
            raise BadRequest("use GET", 405, "MethodNotAllowed")
        if path == "/health":
            self.send(200, b"")
        elif path == "/v1/models":
            now = int(srv.started)
            self.send(200, json.dumps({"object": "list", "data": [
                {"id": m, "object": "model", "created": now,
                 "owned_by": "vllm", "root": m, "parent": None,
                 "max_model_len": srv.args.max_model_len or None}
                for m in srv.args.served_model_name]}))
        elif path == "/metrics":
            self.send(200, self.engine.metrics(),
                      "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/sim/stats":
            self.send(200, json.dumps(self.engine.stats()))
        elif path == "/version":
            self.send(200, json.dumps({"version": "llmsim-" + VERSION}))
        elif path == "/sim/restart":
            # a restarted engine: its prefix cache is empty and its
            # counters start again, the requests running go on (their
            # blocks are not found again)
            if method != "POST":
                raise BadRequest("use POST", 405, "MethodNotAllowed")
            self.send(200, json.dumps({"forgotten": self.engine.restart()}))
        elif path == "/reset_prefix_cache":
            if method != "POST":
                raise BadRequest("use POST", 405, "MethodNotAllowed")
            if not self.engine.reset_prefix_cache():
                raise BadRequest("requests are running; the prefix cache "
                                 "was not reset")
            self.send(200, b"")
        else:
            raise BadRequest("Not Found", 404, "NotFoundError")


def usage(r, mode="full"):
    """The usage object of --usage: "full" with the cached tokens,
    "tokens" without (vLLM without --enable-prompt-tokens-details), "none":
    None (no usage reported)."""
    if mode == "none":
        return None
    return {"prompt_tokens": r.L, "total_tokens": r.L + r.n_out,
            "completion_tokens": r.n_out,
            "prompt_tokens_details": {"cached_tokens": r.hit}
            if mode == "full" else None}


class Server:
    def __init__(self, args, loop):
        self.args = args
        self.loop = loop
        self.engine = Engine(args, loop)
        self.started = time.time()
        self.name = args.name

    def timing(self, r):
        """Model-time latencies of a finished request (vendor extension
        'sim' in the last chunk or the response): free of event-loop lag
        and of the time-scale's magnification of real network time."""
        return {"backend": self.name,
                "arrival_s": round(r.arrival, 6),
                "queue_ms": round(1e3 * (r.t_admit - r.arrival), 3),
                "ttft_ms": round(1e3 * (r.t_first - r.arrival), 3),
                "e2e_ms": round(1e3 * (r.t_end - r.arrival), 3),
                "cached_tokens": r.hit, "prompt_tokens": r.L}


# --metrics-engine: the gauges of the running batch, the waiting queue and
# KV cache use, and a counter a restart resets, as each engine names them
# (vLLM's docs "Production Metrics"; SGLang's "Production Metrics"; TGI's
# reference/metrics; llama.cpp's tools/server/server-task.cpp, with
# --metrics, which has no KV gauge).  "vllm" is the full set above.
METRIC_NAMES = {
    "sglang": {"running": "sglang:num_running_reqs",
               "waiting": "sglang:num_queue_reqs",
               "kv": "sglang:token_usage",
               "prompt": "sglang:prompt_tokens_total"},
    "tgi": {"running": "tgi_batch_current_size",
            "waiting": "tgi_queue_size",
            "requests": "tgi_request_count"},
    "llamacpp": {"running": "llamacpp:requests_processing",
                 "waiting": "llamacpp:requests_deferred",
                 "uncached": "llamacpp:prompt_tokens_total",
                 "cached": "llamacpp:prompt_tokens_cached_total"},
}


# ---------------------------------------------------------------------------
# Command line.

def positive(conv):
    def f(s):
        v = conv(s)
        if v <= 0:
            raise argparse.ArgumentTypeError("must be > 0")
        return v
    return f


def serve_parser():
    p = argparse.ArgumentParser(
        prog="llmsim.py",
        description="Simulated vLLM server (OpenAI API, prefix cache, "
                    "model clock).  Defaults model Llama-3-8B-Instruct on "
                    "one H100 80GB; README.md beside this file gives the "
                    "sources.  'llmsim.py bound --help': the pooled-cache "
                    "bound of a workload.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000,
                   help="0 picks a free port (printed on stdout)")
    p.add_argument("--name", default=argparse.SUPPRESS,
                   help="backend name, sent as 'X-Backend: NAME' "
                        "(default: HOST:PORT)")
    p.add_argument("--served-model-name", nargs="+", default=[DEFAULT_MODEL],
                   help="model names accepted; others get 404 as in vLLM")
    p.add_argument("--time-scale", type=positive(float), default=1.0,
                   help="wall seconds per model second: 0.1 runs the clock "
                        "ten times faster; every latency on the wire shrinks "
                        "by this factor, every figure in /metrics stays in "
                        "model seconds")
    p.add_argument("--prefill-overhead-ms", type=float, default=20.0,
                   help="fixed cost of one prefill step, shared by the "
                        "requests in it (15-30 ms fixed TTFT cost of "
                        "Llama-3-8B on one H100)")
    p.add_argument("--prefill-us-per-token", type=float, default=35.0,
                   help="cost of one uncached prompt token (2 x 8.0e9 FLOP "
                        "at ~45%% of the H100's 989 TFLOPS BF16 = 36 us; "
                        "NVIDIA NIM's 5000-token TTFT for Llama-3.3-70B on "
                        "2 x H100 FP8 scales to 37 us)")
    p.add_argument("--itl-ms", type=float, default=13.0,
                   help="inter-token latency of decode ('Llama3 8B can "
                        "generate 1 token every 13 ms under light load' on "
                        "one H100, vLLM blog 2024-09-05)")
    p.add_argument("--max-num-batched-tokens", type=positive(int),
                   default=8192,
                   help="prefill token budget of one step (vLLM's default "
                        "for the OpenAI server on a >= 70 GiB GPU)")
    p.add_argument("--max-num-seqs", type=positive(int), default=1024,
                   help="cap on running requests, beyond which they wait "
                        "(vLLM's default on a >= 70 GiB GPU; 256 on others)")
    p.add_argument("--kv-blocks", type=positive(int), default=28672,
                   help="KV cache capacity in 16-token blocks: 56 GiB free "
                        "on an 80 GB H100 / 128 KiB of KV per Llama-3-8B "
                        "token = 458,752 tokens")
    p.add_argument("--max-model-len", type=int, default=0,
                   help="reject longer requests with 400 as vLLM does; "
                        "0: no limit")
    p.add_argument("--default-max-tokens", type=positive(int), default=128,
                   help="output length of a chat request without max_tokens "
                        "(vLLM would generate until EOS)")
    p.add_argument("--stream-tick-ms", type=float, default=5.0,
                   help="wall-clock floor between two writes of one stream: "
                        "tokens due within it go out in one write (the first "
                        "and the last token are always on time)")
    p.add_argument("--metrics-engine",
                   choices=("vllm",) + tuple(METRIC_NAMES), default="vllm",
                   help="whose metric names /metrics uses")
    p.add_argument("--usage", choices=("full", "tokens", "none"),
                   default="full",
                   help="the usage of responses: with cached tokens, "
                        "without them (vLLM without "
                        "--enable-prompt-tokens-details), or none")
    p.add_argument("--access-log", action="store_true",
                   help="one line per request on stderr")
    return p


def serve(argv):
    args = serve_parser().parse_args(argv)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    if getattr(args, "name", None) is None:
        args.name = "%s:%d" % (args.host, args.port)
    srv = Server(args, loop)
    server = loop.run_until_complete(loop.create_server(
        lambda: HTTP(srv), args.host, args.port, backlog=1024,
        reuse_address=True))
    port = server.sockets[0].getsockname()[1]
    if args.port == 0 and args.name == "%s:0" % args.host:
        args.name = srv.name = "%s:%d" % (args.host, port)
    print("llmsim %s listening on http://%s:%d (time-scale %g, kv-blocks %d)"
          % (args.name, args.host, port, args.time_scale, args.kv_blocks),
          flush=True)
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(1))
    gc.collect()
    gc.freeze()
    gc.set_threshold(100000, 50, 100)
    try:
        loop.run_until_complete(stop)
    finally:
        server.close()
        loop.close()


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
            for line in f:
                if line.strip():
                    items.append(json.loads(line))
    items.sort(key=lambda o: o["t"])
    ns = argparse.Namespace(served_model_name=None, default_max_tokens=128,
                            max_model_len=0)
    queries = hits = skipped = 0
    for o in items:
        body = o["body"]
        path = o.get("path", "/v1/chat/completions")
        kind = "chat" if path.endswith("chat/completions") else "completion"
        ns.served_model_name = a.served_model_name or [body.get("model")]
        r = parse_request(kind, body, ns)
        limit = min(len(r.hashes), (r.L - 1) // BLOCK_TOKENS)
        k = cache.lookup(r.hashes, limit)
        hit = r.hashes[:k]
        need = -(-(r.L + r.n_out) // BLOCK_TOKENS) - k
        queries += r.L
        if cache.available(hit) < need:
            skipped += 1
            continue
        hits += k * BLOCK_TOKENS
        cache.acquire(hit)
        blocks = hit + cache.allocate(need)
        for j in range(k, len(r.hashes)):
            if cache.register(r.hashes[j]):
                blocks[j] = r.hashes[j]
        nfull = (r.P + BYTES_PER_TOKEN * (r.n_out - 1)) // BLOCK_BYTES
        F = len(r.hashes)
        if nfull > F:
            data = r.data + reply_text(r.seed, r.n_out).encode()
            for j, h in enumerate(block_hashes(
                    data, nfull, r.salt, r.hashes[-1] if F else ROOT_HASH,
                    F), F):
                if cache.register(h):
                    blocks[j] = h
        cache.release(blocks)
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
