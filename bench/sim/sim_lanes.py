"""The queueing reference: a workload's time to first token when every
prefix is on every backend for free.

N engines (sim_engine.Engine, the servers' own scheduler and step costs)
share one pooled cache of N x KV_BLOCKS blocks: a prefix computed on one
is a hit on all, which no router can give (it would have to compute each
prefix on each backend).  Each request goes, at its arrival, to the
engine with the least prefill work ahead of it.  So the reference keeps
what any placement must pay, a request waiting for the prefill step in
progress (steps are not preempted) and for the work queued before it, and
drops the misses that placing a prefix on one backend only costs.  It is
not a proof of optimality (the choice is greedy); it tells how far the
no-queue floor is from what queueing alone allows.

The engines run offline on the model clock: no sockets, no wall time.
"""

import math

from sim_cache import PrefixCache, workload_request
from sim_engine import Engine
from sim_server import serve_parser


class _Clock:
    """The event loop an Engine asks for the time and its timers, driven
    by hand: the engines advance by their event heaps only."""

    t = 0.0

    def time(self):
        return self.t

    def call_at(self, when, fn, *args):
        return self

    def cancel(self):
        pass


class _Client:
    """The connection of a request: nothing is sent."""

    def send_completion(self, r):
        pass

    def stream_first(self, r):
        pass

    def stream_tokens(self, r, a, b, last):
        pass


def _work_ahead(e, t):
    """Model seconds before engine e could start a new request's prefill:
    the step in progress, then the queued prompt tokens in steps of the
    token budget."""
    step_end = min((ev[0] for ev in e.heap if ev[2] == e._end_step),
                   default=t)
    tokens = sum(r.L - r.computed for r in e.prefilling) \
        + sum(r.L - r.computed for r in e.waiting)
    steps = -(-tokens // e.budget)
    return max(0.0, step_end - t) + steps * e.overhead + tokens * e.per_token


def _advance(engines, t):
    """Every engine's events up to t, in order of time across engines:
    they share the cache."""
    while True:
        e = min(engines, key=lambda e: e.heap[0][0] if e.heap else math.inf)
        if not e.heap or e.heap[0][0] > t:
            return
        e.advance(e.heap[0][0])


def lanes(items, n, kv_blocks=None):
    """TTFT (ms, model time) of each request of a workload (items: its
    lines, bench/workload) on n engines sharing one pooled cache, and
    their hit rate (see the top)."""
    args = serve_parser().parse_args([])
    if kv_blocks:
        args.kv_blocks = kv_blocks
    clock = _Clock()
    pooled = PrefixCache(n * args.kv_blocks)
    engines = []
    for _ in range(n):
        e = Engine(args, clock)
        e.cache = pooled
        engines.append(e)
    client = _Client()
    done = []
    for o in sorted(items, key=lambda o: o["t"]):
        r = workload_request(o)
        r.conn = client
        r.stream = False
        t = o["t"]
        _advance(engines, t)
        clock.t = t
        min(engines, key=lambda e: _work_ahead(e, t)).submit(r)
        done.append(r)
    _advance(engines, math.inf)
    ttft = [1e3 * (r.t_first - r.arrival) for r in done
            if r.t_first is not None]
    q = sum(r.L for r in done)
    return {"requests": len(done), "ttft_ms": ttft,
            "hit_rate": sum(r.hit for r in done) / q if q else None}
