#!/usr/bin/python3
"""loadgen: replay a bench/workload JSONL file against one or more nginx
addresses and report what the field measures.

    bench/loadgen/loadgen.py WORKLOAD.jsonl --url http://127.0.0.1:21000 \\
        --backend http://127.0.0.1:21010 ... --time-scale 0.25 -o run.json

* Arrivals: a first turn (turn 0) is sent at t x time-scale / speedup wall
  seconds after the start; turn k > 0 of a conversation (session) is sent
  think x time-scale / speedup after turn k-1 finished, never before.
  --rate R replaces the first turns' arrival times by R a model second
  (file order); --concurrency N caps the requests in flight (the others
  wait, in order of their due time).
* Several --url: each request picks one at random (seeded), as a client
  spreading over several nginx instances would.  --direct S sends a share
  S of the requests straight to a random --backend instead, as clients
  that bypass nginx.
* Every request carries 'X-Session: <session>' (for
  'hash $http_x_session consistent'); its body is sent as the workload
  holds it (streamed with stream_options.include_usage).
* Per request: TTFT = first streamed 'data:' chunk, wall clock; the
  simulator's model-time TTFT and end-to-end latency (vendor field 'sim'
  of the last chunk); prompt and cached tokens (usage); the backend
  (X-Backend).
* Per run (JSON, -o; and one summary line on stdout): token-weighted hit
  rate from the backends' cached_tokens, TTFT and end-to-end p50/p90/p99
  in model time (primary) and wall time, output tokens per model second,
  errors, and per backend (from each simulator's /sim/stats before,
  during and after the run) requests, prefill busy time, utilisation =
  busy / model time while requests were sent (and in the middle half of
  the run), and max/mean across backends.

Standard library only (Debian's python3).  See README.md beside this file.
"""

import argparse
import asyncio
import json
import math
import os
import random
import sys
import time
import urllib.parse

PERCENTS = (50, 90, 99)


def percentile(sorted_xs, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_xs:
        return None
    k = (len(sorted_xs) - 1) * p / 100.0
    f = math.floor(k)
    c = min(f + 1, len(sorted_xs) - 1)
    return sorted_xs[f] + (sorted_xs[c] - sorted_xs[f]) * (k - f)


def dist(xs, ndigits=1):
    """p50/p90/p99/mean/max of a list, and its CDF at 1% steps."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    out = {"p%d" % p: round(percentile(xs, p), ndigits) for p in PERCENTS}
    out["mean"] = round(sum(xs) / len(xs), ndigits)
    out["max"] = round(xs[-1], ndigits)
    out["n"] = len(xs)
    return out


def cdf(xs, ndigits=1):
    """Percentiles 0..100 (101 values): enough to draw a CDF."""
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return []
    return [round(percentile(xs, p), ndigits) for p in range(101)]


# ---------------------------------------------------------------------------
# HTTP/1.1 client: keep-alive pools, chunked responses, SSE.

class HTTPError(Exception):
    pass


def parse_url(url):
    u = urllib.parse.urlsplit(url if "//" in url else "http://" + url)
    if u.scheme != "http":
        raise SystemExit("only http:// URLs: %s" % url)
    return u.hostname, u.port or 80


class Pool:
    """Idle keep-alive connections to one address."""

    def __init__(self, host, port):
        self.host = host
        self.port = port
        self.idle = []
        self.hostport = "%s:%d" % (host, port)

    async def get(self):
        while self.idle:
            r, w = self.idle.pop()
            if not w.is_closing() and not r.at_eof():
                return r, w, True
            w.close()
        r, w = await asyncio.open_connection(self.host, self.port,
                                             limit=1 << 20)
        return r, w, False

    def put(self, r, w):
        self.idle.append((r, w))

    def close(self):
        for _, w in self.idle:
            w.close()
        self.idle = []


class Response:
    __slots__ = ("status", "headers", "body", "t_first")


async def read_response(reader, t_first_cb):
    """Status, headers, de-chunked body; calls t_first_cb() when the first
    body bytes holding 'data:' arrive."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise HTTPError("bad status line %r" % lines[0][:80])
    resp = Response()
    resp.status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        if line:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
    resp.headers = headers
    resp.t_first = None
    body = bytearray()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                # trailers, then an empty line
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            data = await reader.readexactly(size + 2)
            if resp.t_first is None and b"data:" in data:
                resp.t_first = t_first_cb()
            body += memoryview(data)[:size]
    elif "content-length" in headers:
        n = int(headers["content-length"])
        if n:
            body = await reader.readexactly(n)
            resp.t_first = t_first_cb()
    else:
        body = await reader.read()
        resp.t_first = t_first_cb()
    resp.body = bytes(body)
    return resp


def sse_tail(body):
    """The 'sim' and 'usage' objects of a streamed response (the last two
    events before [DONE]), and the number of content events."""
    sim = usage = None
    events = body.split(b"\n\n")
    for ev in reversed(events):
        if sim is not None and usage is not None:
            break
        ev = ev.strip()
        if not ev.startswith(b"data:"):
            continue
        data = ev[5:].strip()
        if data == b"[DONE]" or (b'"usage"' not in data
                                 and b'"sim"' not in data):
            continue
        try:
            o = json.loads(data)
        except ValueError:
            continue
        if usage is None and o.get("usage"):
            usage = o["usage"]
        if sim is None and o.get("sim"):
            sim = o["sim"]
    return sim, usage


# ---------------------------------------------------------------------------
# The replay.

class Item:
    __slots__ = ("i", "t", "session", "turn", "think", "path", "body",
                 "out_tokens", "due", "rec", "next")


class Replay:
    def __init__(self, a, items):
        self.a = a
        self.items = items
        self.pools = [Pool(*parse_url(u)) for u in a.url]
        # --direct: clients that reach the backends past nginx
        self.direct = [Pool(*parse_url(u))
                       for u in a.backend[:a.direct_to or None]] \
            if a.direct > 0 else []
        self.rng = random.Random(a.seed)
        self.sem = asyncio.Semaphore(a.concurrency) if a.concurrency else None
        self.k = a.time_scale / a.speedup     # wall seconds per workload s
        self.records = []
        self.inflight = 0
        self.max_inflight = 0
        self.loop = asyncio.get_running_loop()
        self.pending = 0
        self.all_done = self.loop.create_future()

    async def run(self):
        items = self.items
        # chain the turns of each conversation; first turns are scheduled
        last = {}
        firsts = []
        for it in items:
            it.next = None
            prev = last.get(it.session)
            if it.turn > 0 and prev is not None:
                prev.next = it
            else:
                firsts.append(it)
            last[it.session] = it
        if self.a.rate:
            for n, it in enumerate(firsts):
                it.t = n / self.a.rate
        self.pending = len(items)
        self.w0 = self.loop.time() + 0.05
        for it in firsts:
            self.schedule(it, self.w0 + it.t * self.k)
        if self.pending:
            await self.all_done

    def schedule(self, it, due):
        it.due = due
        self.loop.call_at(due, lambda: self.loop.create_task(self.send(it)))

    async def send(self, it):
        if self.sem is not None:
            await self.sem.acquire()
        try:
            rec = await self.request(it)
        finally:
            if self.sem is not None:
                self.sem.release()
        self.records.append(rec)
        nxt = it.next
        if nxt is not None:
            # the next turn: think time after this one finished (even after
            # an error: the user retries with the same history)
            self.schedule(nxt, self.loop.time() + nxt.think * self.k)
        self.pending -= 1
        if self.pending == 0 and not self.all_done.done():
            self.all_done.set_result(True)

    async def request(self, it):
        a = self.a
        ui = self.rng.randrange(len(self.pools)) if len(self.pools) > 1 else 0
        pool = self.pools[ui]
        if self.direct and self.rng.random() < a.direct:
            ui = -1 - self.rng.randrange(len(self.direct))
            pool = self.direct[-1 - ui]
        rec = {"i": it.i, "session": it.session, "turn": it.turn,
               "url": ui, "lag_ms": None, "status": None, "error": None}
        body = it.body
        head = ("POST %s HTTP/1.1\r\nHost: %s\r\n"
                "Content-Type: application/json\r\n"
                "Content-Length: %d\r\n"
                "%s: %s\r\n\r\n" % (it.path, pool.hostport, len(body),
                                    a.session_header, it.session)).encode()
        loop = self.loop
        self.inflight += 1
        self.max_inflight = max(self.max_inflight, self.inflight)
        t0 = loop.time()
        rec["lag_ms"] = round(1e3 * (t0 - it.due), 3)
        rec["t_send"] = t0 - self.w0
        try:
            for attempt in (0, 1):
                r, w, reused = await pool.get()
                t0 = loop.time()
                try:
                    w.write(head + body)
                    resp = await asyncio.wait_for(
                        read_response(r, loop.time), a.timeout)
                    break
                except (ConnectionError, asyncio.IncompleteReadError):
                    w.close()
                    # a keep-alive connection closed under us: once more
                    if not reused or attempt:
                        raise
                except BaseException:
                    w.close()
                    raise
            if "close" in resp.headers.get("connection", "").lower():
                w.close()
            else:
                pool.put(r, w)
            t_end = loop.time()
            rec["status"] = resp.status
            rec["backend"] = resp.headers.get("x-backend")
            rec["prefix_route"] = resp.headers.get("x-prefix-route")
            rec["wall_ttft_ms"] = round(1e3 * (resp.t_first - t0), 3) \
                if resp.t_first is not None else None
            rec["wall_e2e_ms"] = round(1e3 * (t_end - t0), 3)
            rec["t_end"] = t_end - self.w0
            if resp.status != 200:
                rec["error"] = "http %d" % resp.status
                return rec
            if resp.headers.get("content-type", "").startswith(
                    "text/event-stream"):
                sim, usage = sse_tail(resp.body)
            else:
                o = json.loads(resp.body)
                sim, usage = o.get("sim"), o.get("usage")
            if usage is None:
                rec["error"] = "no usage"
                return rec
            rec["prompt_tokens"] = usage.get("prompt_tokens", 0)
            rec["cached_tokens"] = (usage.get("prompt_tokens_details")
                                    or {}).get("cached_tokens", 0) or 0
            rec["completion_tokens"] = usage.get("completion_tokens", 0)
            if sim:
                rec["ttft_ms"] = sim.get("ttft_ms")
                rec["e2e_ms"] = sim.get("e2e_ms")
                rec["queue_ms"] = sim.get("queue_ms")
                rec["backend"] = sim.get("backend", rec["backend"])
            return rec
        except asyncio.TimeoutError:
            rec["error"] = "timeout"
            return rec
        except Exception as e:
            rec["error"] = "%s: %s" % (type(e).__name__, str(e)[:100])
            return rec
        finally:
            self.inflight -= 1


async def get_json(url, path):
    host, port = parse_url(url)
    r, w = await asyncio.open_connection(host, port)
    try:
        w.write(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close"
                 "\r\n\r\n" % (path, host, port)).encode())
        resp = await asyncio.wait_for(read_response(r, lambda: 0), 10)
        if resp.status != 200:
            raise HTTPError("%s%s: %d" % (url, path, resp.status))
        return json.loads(resp.body)
    finally:
        w.close()


async def backend_stats(urls):
    return await asyncio.gather(*(get_json(u, "/sim/stats") for u in urls))


async def sample_stats(a, rp, samples):
    """/sim/stats of every backend every --sample model seconds: the
    utilisation over time."""
    loop = asyncio.get_running_loop()
    while True:
        await asyncio.sleep(a.sample * a.time_scale)
        try:
            st = await backend_stats(a.backend)
        except Exception:
            continue
        samples.append((loop.time() - rp.w0, st))


def steady_utilisation(res, recs, before, samples, after, rp):
    """Utilisation in the middle half of the run (between the 25th and the
    75th percentile of send times), where arrivals ramp neither up nor
    down, and over time (mean and max over backends per sample period)."""
    sends = sorted(r["t_send"] for r in recs if r.get("t_send") is not None)
    if not sends or not samples:
        return
    lo = percentile(sends, 25)
    hi = percentile(sends, 75)
    pts = [(0.0, before)] + samples + [(float("inf"), after)]
    a_i = next((i for i, (t, _) in enumerate(pts) if t >= lo), None)
    b_i = max((i for i, (t, _) in enumerate(pts) if t <= hi), default=None)
    series = []
    for (t0, s0), (t1, s1) in zip(pts, pts[1:]):
        us = [(y["prefill_busy_s"] - x["prefill_busy_s"])
              / (y["model_time_s"] - x["model_time_s"])
              for x, y in zip(s0, s1) if y["model_time_s"] > x["model_time_s"]]
        if us:
            series.append([round(s1[0]["model_time_s"]
                                 - before[0]["model_time_s"], 1),
                           round(sum(us) / len(us), 3), round(max(us), 3)])
    res["utilisation_series"] = series
    if a_i is None or b_i is None or b_i <= a_i:
        return
    s0, s1 = pts[a_i][1], pts[b_i][1]
    us = [(y["prefill_busy_s"] - x["prefill_busy_s"])
          / (y["model_time_s"] - x["model_time_s"]) for x, y in zip(s0, s1)]
    busy = [y["prefill_busy_s"] - x["prefill_busy_s"] for x, y in zip(s0, s1)]
    res["steady_window_model_s"] = [
        round(s0[0]["model_time_s"] - before[0]["model_time_s"], 1),
        round(s1[0]["model_time_s"] - before[0]["model_time_s"], 1)]
    res["utilisation_steady_mean"] = round(sum(us) / len(us), 4)
    res["utilisation_steady_max"] = round(max(us), 4)
    mb = sum(busy) / len(busy)
    res["busy_max_over_mean_steady"] = round(max(busy) / mb, 3) if mb else None


def load_items(path, limit):
    items = []
    with open(path, "rb") as f:
        for n, line in enumerate(f):
            if not line.strip():
                continue
            if limit and len(items) >= limit:
                break
            o = json.loads(line)
            it = Item()
            it.i = len(items)
            it.t = float(o["t"])
            it.session = str(o.get("session", "s%d" % n))
            it.turn = int(o.get("turn", 0))
            it.think = float(o.get("think", 0))
            it.path = o.get("path", "/v1/chat/completions")
            # bodies are sent as compact JSON, encoded once here
            it.body = json.dumps(o["body"], ensure_ascii=False,
                                 separators=(",", ":")).encode()
            it.out_tokens = o.get("output_tokens")
            items.append(it)
    items.sort(key=lambda it: it.t)     # stable: file order at equal t
    return items


def summarise(a, recs, before, after, wall_s, max_inflight):
    ok = [r for r in recs if r["error"] is None]
    errors = {}
    for r in recs:
        if r["error"] is not None:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    prompt = sum(r["prompt_tokens"] for r in ok)
    cached = sum(r["cached_tokens"] for r in ok)
    out_tokens = sum(r["completion_tokens"] for r in ok)
    model_s = wall_s / a.time_scale
    sends = [r["t_send"] for r in recs if r.get("t_send") is not None]
    # the model time during which load was offered: first to last send
    offered_s = (max(sends) - min(sends)) / a.time_scale if sends else 0
    res = {
        "label": a.label,
        "workload": os.path.basename(a.workload),
        "urls": a.url,
        "time_scale": a.time_scale,
        "speedup": a.speedup,
        "requests": len(recs),
        "ok": len(ok),
        "errors": len(recs) - len(ok),
        "error_kinds": errors,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "hit_rate": round(cached / prompt, 4) if prompt else None,
        "ttft_ms": dist([r.get("ttft_ms") for r in ok]),
        "ttft_wall_ms": dist([r.get("wall_ttft_ms") for r in ok], 2),
        "e2e_ms": dist([r.get("e2e_ms") for r in ok]),
        "e2e_wall_ms": dist([r.get("wall_e2e_ms") for r in ok], 2),
        "queue_ms": dist([r.get("queue_ms") for r in ok]),
        "send_lag_wall_ms": dist([r.get("lag_ms") for r in recs], 2),
        "output_tokens": out_tokens,
        "duration_wall_s": round(wall_s, 3),
        "duration_model_s": round(model_s, 3),
        "offered_model_s": round(offered_s, 3),
        "output_tokens_per_s": round(out_tokens / model_s, 1)
        if model_s > 0 else None,
        "max_inflight": max_inflight,
        "ttft_cdf_ms": cdf([r.get("ttft_ms") for r in ok]),
    }
    if a.direct > 0:
        # --direct: the requests nginx routed apart from those it never saw
        res["ttft_routed_ms"] = dist([r.get("ttft_ms") for r in ok
                                      if r["url"] >= 0])
        res["ttft_direct_ms"] = dist([r.get("ttft_ms") for r in ok
                                      if r["url"] < 0])
    by_backend = {}
    for r in ok:
        b = r.get("backend") or "?"
        by_backend[b] = by_backend.get(b, 0) + 1
    res["requests_by_backend_seen"] = dict(sorted(by_backend.items()))
    statuses = {}
    for r in ok:
        s = (r.get("prefix_route") or "").split(" ")[0]
        if s:
            statuses[s] = statuses.get(s, 0) + 1
    if statuses:
        res["prefix_route_status"] = dict(sorted(statuses.items()))
    if before and after:
        bes = []
        for u, b0, b1 in zip(a.backend, before, after):
            dt = b1["model_time_s"] - b0["model_time_s"]
            busy = b1["prefill_busy_s"] - b0["prefill_busy_s"]
            q = b1["prefix_cache_queries"] - b0["prefix_cache_queries"]
            h = b1["prefix_cache_hits"] - b0["prefix_cache_hits"]
            bes.append({
                "name": b1["name"], "url": u,
                "requests": b1["requests"] - b0["requests"],
                "aborted": b1["aborted"] - b0["aborted"],
                "busy_s": round(busy, 3),
                "model_time_s": round(dt, 3),
                "utilisation": round(busy / offered_s, 4)
                if offered_s > 0 else None,
                "utilisation_run": round(busy / dt, 4) if dt > 0 else None,
                "prefix_cache_queries": q, "prefix_cache_hits": h,
                "hit_rate": round(h / q, 4) if q else None,
                "evicted_blocks": b1["evicted_blocks"] - b0["evicted_blocks"],
            })
        res["backends"] = bes
        busy = [b["busy_s"] for b in bes]
        reqs = [b["requests"] for b in bes]
        utils = [b["utilisation"] or 0 for b in bes]
        q = sum(b["prefix_cache_queries"] for b in bes)
        h = sum(b["prefix_cache_hits"] for b in bes)
        mean_busy = sum(busy) / len(busy)
        mean_req = sum(reqs) / len(reqs)
        res["busy_s_total"] = round(sum(busy), 3)
        res["busy_max_over_mean"] = round(max(busy) / mean_busy, 3) \
            if mean_busy else None
        res["requests_max_over_mean"] = round(max(reqs) / mean_req, 3) \
            if mean_req else None
        res["utilisation_mean"] = round(sum(utils) / len(utils), 4)
        res["utilisation_max"] = round(max(utils), 4)
        res["backend_hit_rate"] = round(h / q, 4) if q else None
        res["evicted_blocks"] = sum(b["evicted_blocks"] for b in bes)
    return res


def summary_line(res):
    def f(d, k):
        return "-" if not d or d.get(k) is None else "%.0f" % d[k]
    t, w = res["ttft_ms"], res["ttft_wall_ms"]
    s = ("%s: %d requests, %d errors, hit rate %s, TTFT p50/p90/p99 "
         "%s/%s/%s ms model (wall %s/%s/%s ms), e2e p50 %s ms, %s out tok/s"
         % (res["label"] or res["workload"], res["requests"], res["errors"],
            "-" if res["hit_rate"] is None else "%.3f" % res["hit_rate"],
            f(t, "p50"), f(t, "p90"), f(t, "p99"),
            f(w, "p50"), f(w, "p90"), f(w, "p99"),
            f(res["e2e_ms"], "p50"), res["output_tokens_per_s"]))
    if "busy_max_over_mean" in res:
        s += (", busy max/mean %s, utilisation %.2f (max %.2f)"
              % (res["busy_max_over_mean"], res["utilisation_mean"],
                 res["utilisation_max"]))
    if "utilisation_steady_mean" in res:
        s += ", steady %.2f (max %.2f)" % (res["utilisation_steady_mean"],
                                            res["utilisation_steady_max"])
    return s


async def amain(a):
    items = load_items(a.workload, a.limit)
    if not items:
        raise SystemExit("no request in %s" % a.workload)
    before = await backend_stats(a.backend) if a.backend else None
    rp = Replay(a, items)
    w_start = time.monotonic()
    samples = []
    sampler = None
    if a.sample == 0 and len(items) > 1:
        # auto: some 40 samples over the arrivals
        a.sample = max(0.2, (items[-1].t - items[0].t) / a.speedup / 40)
    if a.backend and a.sample > 0:
        sampler = asyncio.get_running_loop().create_task(
            sample_stats(a, rp, samples))
    await rp.run()
    wall_s = time.monotonic() - w_start - 0.05
    if sampler is not None:
        sampler.cancel()
    after = await backend_stats(a.backend) if a.backend else None
    for p in rp.pools + rp.direct:
        p.close()
    rp.records.sort(key=lambda r: r["i"])
    res = summarise(a, rp.records, before, after, wall_s, rp.max_inflight)
    if before and after:
        steady_utilisation(res, rp.records, before, samples, after, rp)
    if a.records:
        with open(a.records, "w") as f:
            for r in rp.records:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return res


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Replay a workload JSONL (bench/workload) against nginx "
                    "and report hit rate, TTFT, latency, throughput and "
                    "backend load as JSON.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("workload")
    p.add_argument("--url", action="append", required=True,
                   help="nginx address (repeat: a random one per request)")
    p.add_argument("--backend", action="append", default=[],
                   help="a simulator's address, for /sim/stats before and "
                        "after (repeat for every backend)")
    p.add_argument("--direct", type=float, default=0,
                   help="this share of the requests goes straight to a "
                        "random --backend, past nginx, as clients that "
                        "bypass the router (their record's url is -1 - the "
                        "backend's index)")
    p.add_argument("--direct-to", type=int, default=0, metavar="K",
                   help="--direct goes to the first K --backend only (0: "
                        "all), as clients pinned to some servers")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="wall seconds per model second (the simulators' "
                        "--time-scale)")
    p.add_argument("--speedup", type=float, default=1.0,
                   help="divide the workload's times (arrivals and think "
                        "times) by this")
    p.add_argument("--rate", type=float, default=0,
                   help="first turns at this many a model second, in file "
                        "order, instead of their 't' (0: use 't')")
    p.add_argument("--concurrency", type=int, default=0,
                   help="at most this many requests in flight (0: no cap)")
    p.add_argument("--limit", type=int, default=0,
                   help="first N requests of the file only")
    p.add_argument("--timeout", type=float, default=600,
                   help="wall seconds before a request counts as an error")
    p.add_argument("--session-header", default="X-Session")
    p.add_argument("--sample", type=float, default=0,
                   help="read every backend's /sim/stats every this many "
                        "model seconds, for the utilisation over time (0: "
                        "some 40 times over the arrivals; -1: only before "
                        "and after)")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the random choice among --url")
    p.add_argument("--label", default="")
    p.add_argument("-o", "--output", help="JSON result file ('-': stdout)")
    p.add_argument("--records", help="also write one JSON line per request")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no summary line")
    a = p.parse_args(argv)
    if a.time_scale <= 0 or a.speedup <= 0:
        p.error("--time-scale and --speedup must be positive")
    res = asyncio.run(amain(a))
    if a.output == "-":
        json.dump(res, sys.stdout, indent=1)
        print()
    elif a.output:
        tmp = a.output + ".tmp"
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.output)
    if not a.quiet:
        print(summary_line(res), flush=True)
    return 0 if res["errors"] == 0 else 2


if __name__ == "__main__":
    sys.exit(main())
