"""llmsim's engine: a discrete-event model of one vLLM instance, on a
model clock, and its metrics."""


import bisect
import collections
import heapq
import itertools
import math
import time
from sim_cache import PrefixCache, cache_admit, cache_compute, cache_finish
from sim_template import BLOCK_TOKENS, VERSION, BadRequest
from sim_text import reply_text


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
        if not cache_admit(self.cache, r):
            return False
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
        cache_compute(self.cache, r, c)

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
        cache_finish(self.cache, r, r.reply)
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
