#!/usr/bin/python3
"""bench/run/bench.py: the benchmark behind `make bench` and `make demo`.

    bench/run/bench.py bench [--workloads multi-turn,shared-prefix,mooncake]
                             [--balancers round_robin,...] [--port-base 21000]
    bench/run/bench.py demo  [--port 18480]
    bench/run/bench.py estimate WORKLOAD.jsonl [--backends 4]

For every workload and balancer: fresh simulated backends
(bench/sim/llmsim.py), a fresh nginx (/usr/sbin/nginx with the module
loaded) in front of them, the workload replayed by bench/loadgen/loadgen.py,
then everything stopped (harness.py).  Beside them the pooled-cache bound
(`llmsim.py bound`).  Results go to bench/results/: a Markdown table, PNG
plots (when python3-matplotlib is installed), a JSON summary and each run's
JSON under raw/.  See README.md beside this file for the workloads, how
their rates were chosen and how to read the figures.

Standard library only, but for the plots (python3-matplotlib).
"""

import argparse
import collections
import datetime
import glob
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))
SIM = os.path.join(TOP, "bench", "sim", "llmsim.py")
WORKLOAD = os.path.join(TOP, "bench", "workload", "workload.py")
LOADGEN = os.path.join(TOP, "bench", "loadgen", "loadgen.py")
RESULTS = os.path.join(TOP, "bench", "results")
WORKLOADS_DIR = os.path.join(RESULTS, "workloads")
MOONCAKE = os.path.normpath(os.path.join(
    TOP, "..", "shared", "workloads", "mooncake", "synthetic_trace.jsonl"))
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable

sys.path.insert(0, os.path.join(TOP, "bench", "sim"))
sys.path.insert(0, os.path.join(TOP, "bench", "loadgen"))
sys.dont_write_bytecode = True          # no __pycache__ in the tree

from harness import Nginx, Procs, error_lines, port_free, tail, \
    wait_ready  # noqa: E402

# ---------------------------------------------------------------------------
# What is run.
#
# Every workload keeps its generator's defaults but for the load: the
# arrival rate (and, for multi-turn, the number of users, since one
# conversation sends a request every ~11 model seconds whatever its start
# rate), chosen so that round robin keeps 4 backends' prefill engines 60-80%
# busy (README.md: "Load").  The simulators run with their defaults
# (Llama-3-8B on an H100: 28,672 KV blocks each) but for --time-scale and
# --stream-tick-ms, which change wall-clock pacing only, never a model-time
# figure.

BACKENDS = 4
PREAMBLE = 1000         # vLLM production-stack's shared system prompt
# prefix_route's parameters on a workload's runs, as docs/tuning.md
# ("max_prefix") advises an operator: Mooncake's prompts average ~61 KB
# and 1,587 of 3,993 run past the default 64k (bench/run/README.md gives
# the default's figures)
MOONCAKE_PARAMS = "max_prefix=256k"
# Runs of a short workload (512 requests) whose TTFT the targets compare:
# one run's p90 is its 52nd slowest request, and over 8 runs of one build
# each on mixed-output the simple rule's p90 moved between 98 and 133 ms,
# prefix_route's between 106 and 119 (2026-12-04).  The balancers of
# REPEATED run this many times in turn, and each row shows its run of
# median p90 (as make bench-probes does).
SHORT_REPEATS = 3
REPEATED = ("cache_aware", "prefix_route")

WORKLOADS = collections.OrderedDict([
    ("multi-turn", {
        "title": "multi-turn chat, 1000-token global preamble",
        "gen": ["multi-turn", "--preamble-tokens", str(PREAMBLE),
                "--users", "600", "--rate", "6"],
        "scale": 0.1,
        "load": "600 users x 2 conversations x 6 turns, 6 conversation "
                "starts/s (defaults: 16 users, 1/s)",
    }),
    ("shared-prefix", {
        "title": "shared prefix, 32 groups x 16 questions",
        "gen": ["shared-prefix", "--rate", "80"],
        "scale": 1.0,
        "load": "80 requests/s (default 16/s)",
        "repeats": SHORT_REPEATS,
    }),
    ("multi-turn-light", {
        "title": "multi-turn chat, 1000-token preamble, the generator's "
                 "default size (light load, for reference)",
        "gen": ["multi-turn", "--preamble-tokens", str(PREAMBLE)],
        "scale": 0.1,
        "load": "16 users x 2 conversations x 6 turns, 1 conversation "
                "start/s: the defaults, some 2% utilisation",
    }),
    ("mooncake", {
        "title": "Mooncake trace (FAST'25 synthetic), 1.4x speed",
        "gen": ["mooncake", "--speedup", "1.4"],
        "scale": 0.05,
        "trace": True,
        "load": "the trace's timestamps / 1.4",
        "prefix_route": MOONCAKE_PARAMS,
    }),
    ("mooncake-8", {
        "title": "Mooncake trace on 8 backends, 2.8x speed",
        "gen": ["mooncake", "--speedup", "2.8"],
        "scale": 0.05,
        "trace": True,
        "backends": 8,
        "load": "the trace's timestamps / 2.8: twice the rate on twice the "
                "backends, whose caches then hold twice the working set",
        "prefix_route": MOONCAKE_PARAMS,
    }),
    ("mixed-output", {
        "title": "shared prefix, 8-token answers mixed with 400-token "
                 "generations",
        "gen": ["shared-prefix", "--rate", "80", "--output-len", "8",
                "--long-output-len", "400", "--long-share", "0.25"],
        "scale": 1.0,
        "load": "80 requests/s; a quarter of them generate 50x the others' "
                "output",
        "repeats": SHORT_REPEATS,
    }),
    # make bench-feedback only: multi-turn chat on engines with a quarter
    # of the H100's KV cache (14 GiB of Llama-3-8B's 128 KiB a token, about
    # what a 40 GB A100 leaves after the weights), where live conversations
    # are evicted (the bound falls from 0.92 to about 0.6), so that a
    # capacity= sized for the H100 is 4x too large for the cache that
    # evicts: with the default cache the workload fits, and no capacity
    # is wrong enough to matter
    ("multi-turn-evict", {
        "title": "multi-turn chat on engines with a quarter of the cache",
        "gen": ["multi-turn", "--preamble-tokens", str(PREAMBLE),
                "--users", "600", "--rate", "6"],
        "scale": 0.1,
        "load": "as multi-turn; 7,168 KV blocks a backend",
        "kv_blocks": 7168,
    }),
])

# the targets apply to these
TARGET_WORKLOADS = ("multi-turn", "shared-prefix", "mooncake", "mooncake-8",
                    "mixed-output")

# The balancers, by name: the title in the reports, the balancing line of
# the upstream block (prefix_route's completed by nginx_conf() with the
# zone and its capacity, the servers' cache times capacity_x), the nginx
# instances in front of the backends, and whether prefix_route_probe
# reads the simulators' /metrics every PROBE_INTERVAL_S of model time
# (scaled with the workload, as every latency).  prefix_route: whether the
# module routes or watches, for its figures (status, feedback).
Balancer = collections.namedtuple(
    "Balancer", "title upstream instances capacity_x probe",
    defaults=(1, 1, False))

BALANCERS = collections.OrderedDict([
    ("round_robin", Balancer("round robin", "")),
    ("least_conn", Balancer("least_conn", "least_conn;")),
    ("random_two", Balancer("random two least_conn",
                            "random two least_conn;")),
    ("hash_session", Balancer("hash $http_x_session consistent",
                              "hash $http_x_session consistent;")),
    ("cache_aware", Balancer("prefix_route policy=cache_aware (simple rule)",
                             "prefix_route policy=cache_aware")),
    ("prefix_route", Balancer("prefix_route", "prefix_route")),
    ("prefix_route_x3", Balancer("prefix_route, 3 nginx instances",
                                 "prefix_route instances=3", 3)),
    # not in make bench: the simple rule behind 3 instances, on request
    ("cache_aware_x3", Balancer(
        "prefix_route policy=cache_aware (simple rule), 3 nginx instances",
        "prefix_route policy=cache_aware", 3)),
    # round robin routes; prefix_route indexes and predicts (shadow mode)
    ("shadow", Balancer("round robin, prefix_route shadow",
                        "prefix_route shadow")),
    # make bench-feedback: the index corrected by the engines' usage
    ("prefix_route_correct", Balancer("prefix_route feedback=correct",
                                      "prefix_route feedback=correct")),
    ("prefix_route_cap4", Balancer(
        "prefix_route, capacity= 4x the servers' cache", "prefix_route",
        capacity_x=4)),
    ("prefix_route_cap4_correct", Balancer(
        "prefix_route feedback=correct, capacity= 4x the servers' cache",
        "prefix_route feedback=correct", capacity_x=4)),
    # make bench-probes: the engines' metrics pages read by nginx
    ("prefix_route_probe", Balancer("prefix_route with prefix_route_probe",
                                    "prefix_route", probe=True)),
    ("prefix_route_x3_probe", Balancer(
        "prefix_route with prefix_route_probe, 3 nginx instances",
        "prefix_route instances=3", 3, probe=True)),
])
PROBE_INTERVAL_S = 1.0


def uses_module(balancer):
    """Whether the balancer's upstream has prefix_route (routing or in
    shadow mode): it has a zone, a status page and feedback figures."""
    return BALANCERS[balancer].upstream.startswith("prefix_route")


# make bench runs these unless told otherwise
BENCH_BALANCERS = ("round_robin", "least_conn", "random_two", "hash_session",
                   "cache_aware", "prefix_route", "prefix_route_x3", "shadow")
BENCH_WORKLOADS = ("multi-turn", "shared-prefix", "multi-turn-light",
                   "mooncake", "mooncake-8", "mixed-output")
STOCK = ("round_robin", "least_conn", "random_two", "hash_session")

KV_BLOCKS = 28672       # the simulator's default, H100 80GB
STREAM_TICK_MS = 50     # wall-clock write coalescing of the simulators

DEMO = {
    "title": "multi-turn chat, 1000-token global preamble",
    "gen": ["multi-turn", "--preamble-tokens", str(PREAMBLE),
            "--users", "350", "--rate", "7"],
    "scale": 0.1,
    "balancers": ("round_robin", "prefix_route"),
}


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------------------
# nginx configurations

def nginx_conf(module, port, backend_ports, balancer, zone, workers=2,
               scale=1.0, params=None, kv_blocks=None):
    """nginx.conf of one instance, paths relative to its prefix; params:
    more parameters of prefix_route (the workload's); kv_blocks: the
    blocks of the cache capacity= is sized for (KV_BLOCKS)."""
    bal = BALANCERS[balancer]
    method = bal.upstream
    if uses_module(balancer):
        # capacity: the bytes of prompt a backend caches (README: tokens x
        # 4): 28,672 blocks x 16 tokens x 4 bytes
        method = method.replace("prefix_route", "prefix_route zone=%s:32m "
                                "capacity=%dk%s" % (
                                    zone, (kv_blocks or KV_BLOCKS) * 16 * 4
                                    // 1024 * bal.capacity_x,
                                    " " + params if params else "")) + ";"
    if bal.probe:
        ms = max(10, int(PROBE_INTERVAL_S * scale * 1000))
        method += ("\n        prefix_route_probe interval=%dms timeout=%dms;"
                   % (ms, max(100, 2 * ms)))
    servers = "\n".join("        server 127.0.0.1:%d;" % p
                        for p in backend_ports)
    return """\
load_module %(module)s;
worker_processes %(workers)d;
worker_rlimit_nofile 16384;
master_process on;
error_log logs/error.log warn;
pid logs/nginx.pid;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path body;
    proxy_temp_path proxy;

    upstream llm {
        zone upstream_llm 1m;
        %(method)s
%(servers)s
        keepalive 256;
    }

    server {
        listen 127.0.0.1:%(port)d reuseport;
        keepalive_requests 100000;
        # prompts stay in memory (Mooncake's longest is ~750 KB)
        client_body_buffer_size 2m;
        client_max_body_size 16m;

        location /v1/ {
            proxy_pass http://llm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
            add_header X-Prefix-Route "$prefix_route_status $prefix_route_match $prefix_route_length";
        }
        location = /prefix-route-status {
            prefix_route_status;
        }
        # the harness's check that nginx is up (Fleet)
        location = /health {
            return 204;
        }
        # a browser on the status page asks for it (make browser-check)
        location = /favicon.ico {
            return 204;
        }
    }
}
""" % {"module": module, "port": port, "method": method,
       "servers": servers, "workers": workers}


class Fleet:
    """N simulators and one or more nginx instances, for one run."""

    def __init__(self, procs, workdir, module, nginx, port_base, n_backends,
                 balancer, scale, n_nginx=1, nginx_ports=None,
                 backend_ports=None, workers=2, params=None, kv_blocks=None):
        self.procs = procs
        self.mine = []
        self.dir = workdir
        self.nginx_ports = nginx_ports or [port_base + i
                                           for i in range(n_nginx)]
        self.backend_ports = backend_ports or [
            port_base + 10 + i for i in range(n_backends)]
        for port in self.nginx_ports + self.backend_ports:
            if not port_free(port):
                raise RuntimeError(
                    "port %d is in use: choose others (make bench "
                    "BENCH_PORT=..., make demo DEMO_PORT=...)" % port)
        sims = []
        for i, port in enumerate(self.backend_ports):
            p = procs.start([PY, SIM, "--port", str(port),
                             "--name", "b%d" % (i + 1),
                             "--time-scale", repr(scale),
                             "--kv-blocks", str(kv_blocks or KV_BLOCKS),
                             "--stream-tick-ms", str(STREAM_TICK_MS)],
                            os.path.join(workdir, "sim%d.log" % (i + 1)))
            self.mine.append(p)
            sims.append((port, p))
        self.nginx = []
        for i, port in enumerate(self.nginx_ports):
            n = Nginx(os.path.join(workdir, "nginx%d" % i), nginx)
            n.write(nginx_conf(module, port, self.backend_ports, balancer,
                               "prefix%d" % i, workers, scale, params,
                               kv_blocks))
            self.nginx.append(n)
            n.start(port, "/health", procs)
            self.mine.append(n.proc)
        for port, p in sims:
            try:
                wait_ready(port, "/health", lambda: p.poll() is None, 15)
            except RuntimeError as e:
                raise RuntimeError("%s: %s; log: %s\n%s"
                                   % (p.argv0, e, p.log, tail(p.log)))

    @property
    def urls(self):
        return ["http://127.0.0.1:%d" % p for p in self.nginx_ports]

    @property
    def backends(self):
        return ["http://127.0.0.1:%d" % p for p in self.backend_ports]

    def error_logs(self):
        return [n.error_log for n in self.nginx]

    def stop(self):
        for n in self.nginx:
            n.stop()
        self.procs.stop(self.mine)
        self.mine = []


# ---------------------------------------------------------------------------
# Workloads, bound, one run

def workload_spec(wl, a):
    """The workload's spec, with the trace file of --trace when it reads
    one; None (and a line saying so) when that file is missing."""
    spec = WORKLOADS[wl]
    if spec.get("trace"):
        if not os.path.exists(a.trace):
            print("skip %s: no trace at %s (--trace)" % (wl, a.trace),
                  flush=True)
            return None
        spec = dict(spec, gen=spec["gen"] + ["--trace", a.trace])
    return spec


def generate(name, spec, quiet=False):
    os.makedirs(WORKLOADS_DIR, exist_ok=True)
    path = os.path.join(WORKLOADS_DIR, name + ".jsonl")
    argsfile = path + ".args"
    import hashlib
    h = hashlib.sha256()
    for src in [WORKLOAD] + sorted(glob.glob(os.path.join(TOP, "bench", "sim",
                                                          "*.py"))):
        with open(src, "rb") as f:
            h.update(f.read())
    want = json.dumps([spec["gen"], h.hexdigest()[:16]])
    if os.path.exists(path) and os.path.exists(argsfile) \
            and open(argsfile).read() == want:
        return path
    r = subprocess.run([PY, WORKLOAD] + spec["gen"] + ["-o", path],
                       stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError("workload.py failed:\n" + r.stdout + r.stderr)
    if not quiet:
        sys.stderr.write(r.stderr)
    with open(argsfile, "w") as f:
        f.write(want)
    return path


def bound(path, n, kv_blocks=KV_BLOCKS):
    """llmsim.py bound (the hit rate no router can beat with n backends'
    pooled capacity of kv_blocks each), plus the TTFT floor of the same
    pass and the queueing reference (bench/sim/sim_lanes.py: n engines
    sharing that pooled cache, every prefix on every backend)."""
    import sim_lanes
    from loadgen import dist, cdf
    r = subprocess.run([PY, SIM, "bound", "--backends", str(n),
                        "--kv-blocks", str(kv_blocks), path],
                       stdout=subprocess.PIPE, text=True, check=True)
    b = json.loads(r.stdout)
    fl = replay_caches(path, n, pooled=True, kv_blocks=kv_blocks)
    b["ttft_floor_ms"] = fl["ttft_ms"]
    b["ttft_floor_cdf_ms"] = fl["ttft_cdf_ms"]
    with open(path) as f:
        q = sim_lanes.lanes([json.loads(line) for line in f if line.strip()],
                            n, kv_blocks)
    b["ttft_queue_ms"] = dist(q["ttft_ms"])
    b["ttft_queue_cdf_ms"] = cdf(q["ttft_ms"])
    b["queue_hit_rate"] = q["hit_rate"]
    return b


def replay_caches(path, n, pooled=False, kv_blocks=KV_BLOCKS,
                  overhead_ms=20.0, us_per_token=35.0, budget=8192):
    """Feed a workload, in order of t and each request alone, through n
    backends' caches taken in turn (round robin), or through one pooled
    cache of n x kv_blocks (pooled, as `llmsim.py bound`), with the
    simulator's own cache model (llmsim.replay).  Returns the hit rate,
    the prefill work (model seconds) and each request's TTFT without
    queueing: ceil(uncached / budget) steps of overhead_ms plus
    us_per_token per uncached token, on the simulator's defaults."""
    import llmsim
    from loadgen import dist, cdf
    with open(path) as f:
        items = [json.loads(line) for line in f if line.strip()]
    caches = [llmsim.PrefixCache(kv_blocks * (n if pooled else 1))
              for _ in range(1 if pooled else n)]
    work = 0.0
    q = h = 0
    ttft = []
    for r, fit in llmsim.replay(items, caches):
        q += r.L
        if not fit:
            continue
        h += r.hit
        u = r.L - r.hit
        t = -(-u // budget) * overhead_ms / 1e3 + u * us_per_token / 1e6
        work += t
        ttft.append(1e3 * t)
    ts = [o["t"] for o in items]
    return {"requests": len(items), "hit_rate": h / q if q else None,
            "work_s": work, "ttft_ms": dist(ttft), "ttft_cdf_ms": cdf(ttft),
            "span_s": max(ts) - min(ts) if ts else 0}


def run_one(procs, a, workdir, wl_name, spec, wl_path, balancer, port_base,
            n_backends, raw_dir, nginx_ports=None, backend_ports=None,
            restart_at=None, records=None, direct=0, direct_to=0,
            hold=None):
    """One workload through one balancer; restart_at (wall s after the
    start): the first backend restarts then (POST /sim/restart); records:
    write every request's record there; direct: the share of requests
    sent straight to a random backend, past nginx, one of the first
    direct_to (0: any); hold: called with the fleet after the replay,
    before it stops (bench.py serve)."""
    scale = spec["scale"]
    n_nginx = BALANCERS[balancer].instances
    rundir = os.path.join(workdir, "%s-%s" % (wl_name, balancer))
    os.makedirs(rundir, exist_ok=True)
    fleet = Fleet(procs, rundir, a.module, a.nginx, port_base, n_backends,
                  balancer, scale, n_nginx, nginx_ports, backend_ports,
                  params=spec.get("prefix_route"),
                  kv_blocks=spec.get("kv_blocks"))
    out = os.path.join(raw_dir, "%s.%s.json" % (wl_name, balancer))
    argv = [PY, LOADGEN, wl_path, "--time-scale", repr(scale),
            "--label", "%s %s" % (wl_name, balancer), "-o", out]
    if direct:
        argv += ["--direct", repr(direct), "--direct-to", str(direct_to)]
    if records:
        argv += ["--records", records]
    elif getattr(a, "records", False):
        argv += ["--records", os.path.join(rundir, "records.jsonl")]
    for u in fleet.urls:
        argv += ["--url", u]
    for b in fleet.backends:
        argv += ["--backend", b]
    try:
        t0 = time.monotonic()
        lg = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        procs.record(lg)
        if restart_at is not None:
            import threading
            timer = threading.Timer(restart_at, sim_restart,
                                    (fleet.backend_ports[0],))
            timer.daemon = True
            timer.start()
        try:
            rc = lg.wait()
        finally:
            if lg.poll() is None:
                lg.kill()
                lg.wait()
        wall = time.monotonic() - t0
        if rc not in (0, 2):
            raise RuntimeError("loadgen failed (status %d)" % rc)
        fb = feedback_of(fleet) if uses_module(balancer) \
            else None
        if hold:
            hold(fleet)
        logs = fleet.error_logs()
        errlog = "".join(tail(f, 5) for f in logs)
        errors = error_lines(logs)
    finally:
        fleet.stop()
    if errors:
        raise RuntimeError("nginx logged %d line(s) at level error or above "
                           "in %s %s, e.g.\n%s" % (len(errors), wl_name,
                                                   balancer,
                                                   "".join(errors[:5])))
    with open(out) as f:
        res = json.load(f)
    res["balancer"] = balancer
    res["run_wall_s"] = round(wall, 1)
    res["module_sha256"] = module_sha(a.module)
    if errlog.strip():
        res["nginx_error_log_tail"] = errlog[-2000:]
    if fb:
        res["feedback"] = fb
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    return res


def sim_restart(port):
    """What a restarted engine's cache looks like: the simulator forgets
    it (bench/sim/README.md, POST /sim/restart)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("POST", "/sim/restart", b"")
        c.getresponse().read()
    finally:
        c.close()


def recovery(path, backend, t_restart):
    """From a run's records: the restarted backend's hit rate (cached /
    prompt tokens) before the restart, and the number of its requests
    after it until the hit rate of its last 20 is back to 90% of that."""
    with open(path) as f:
        recs = [json.loads(line) for line in f]
    mine = sorted((r for r in recs if r.get("backend") == backend
                   and r.get("prompt_tokens")), key=lambda r: r["t_send"])
    before = [r for r in mine if r["t_send"] < t_restart]
    after = [r for r in mine if r["t_send"] >= t_restart]
    hit = (sum(r["cached_tokens"] for r in before)
           / max(1, sum(r["prompt_tokens"] for r in before)))
    for n in range(20, len(after) + 1):
        w = after[n - 20:n]
        if (sum(r["cached_tokens"] for r in w)
                >= 0.9 * hit * sum(r["prompt_tokens"] for r in w)):
            return {"hit_before": hit, "requests_to_recover": n,
                    "requests_after": len(after)}
    return {"hit_before": hit, "requests_to_recover": None,
            "requests_after": len(after)}


def feedback_of(fleet):
    """The engines' usage against the index, summed over the nginx
    instances' status: responses that reported cached tokens, the share
    whose report was within one block of the prediction, cached tokens
    predicted and reported over the prompt tokens reported, and the
    corrections."""
    keys = ("feedback_responses", "feedback_agreed", "feedback_under",
            "feedback_over", "feedback_dropped", "reported_prompt_tokens",
            "reported_cached_tokens", "predicted_cached_tokens")
    ukeys = ("prompt_bytes", "matched_bytes", "predicted_bytes",
             "longest_bytes", "reusable", "predicted_tokens",
             "reported_tokens")
    tot = dict.fromkeys(keys + ukeys, 0)
    ratios = []
    learned = []
    for url in fleet.urls:
        with urllib.request.urlopen(url + "/prefix-route-status",
                                    timeout=10) as f:
            st = json.load(f)
        for u in st["upstreams"]:
            ratios += [m["bytes_per_token"] for m in u["models"]]
            for k in ukeys:
                tot[k] += u[k]
            for p in u["peers"]:
                for k in keys:
                    tot[k] += p[k]
                learned.append(p.get("learned_capacity", 0))
    n, prompt = tot["feedback_responses"], tot["reported_prompt_tokens"]
    pb = tot["prompt_bytes"]
    return {"responses": n,
            # the index's view, bytes of canonical prompt: the share the
            # chosen servers held, the cost model's choice held (in shadow
            # mode, would have), and the best server held
            "index_matched": tot["matched_bytes"] / pb if pb else None,
            "index_predicted": tot["predicted_bytes"] / pb if pb else None,
            "index_longest": tot["longest_bytes"] / pb if pb else None,
            # the same choices' predicted cached tokens, in the engines'
            # tokens (usage), over the prompt tokens reported
            "tokens_predicted": tot["predicted_tokens"]
            / tot["reported_tokens"] if tot["reported_tokens"] else None,
            "agreed": tot["feedback_agreed"] / n if n else None,
            "predicted": tot["predicted_cached_tokens"] / prompt
            if prompt else None,
            "reported": tot["reported_cached_tokens"] / prompt
            if prompt else None,
            "under": tot["feedback_under"], "over": tot["feedback_over"],
            "dropped": tot["feedback_dropped"],
            # feedback=correct: bytes of prompt each server's engine was
            # found to hold at most (0: none learned)
            "learned_capacity": learned,
            "bytes_per_token": ratios}


# ---------------------------------------------------------------------------
# Reporting

def fmt(x, spec="%.0f"):
    return "-" if x is None else spec % x


def row_of(res, bnd, rr):
    t = res.get("ttft_ms") or {}
    w = res.get("ttft_wall_ms") or {}
    e = res.get("e2e_ms") or {}
    hit = res.get("hit_rate")
    return {
        "hit_rate": hit,
        "hit_vs_bound": hit / bnd if hit is not None and bnd else None,
        "hit_vs_round_robin": hit / rr if hit is not None and rr else None,
        "ttft_p50_ms": t.get("p50"), "ttft_p90_ms": t.get("p90"),
        "ttft_p99_ms": t.get("p99"),
        "ttft_routed_p90_ms": (res.get("ttft_routed_ms") or {}).get("p90"),
        "ttft_direct_p90_ms": (res.get("ttft_direct_ms") or {}).get("p90"),
        "ttft_wall_p50_ms": w.get("p50"), "ttft_wall_p90_ms": w.get("p90"),
        "ttft_wall_p99_ms": w.get("p99"),
        "e2e_p50_ms": e.get("p50"), "e2e_p99_ms": e.get("p99"),
        "output_tokens_per_s": res.get("output_tokens_per_s"),
        "busy_max_over_mean": res.get("busy_max_over_mean"),
        "requests_max_over_mean": res.get("requests_max_over_mean"),
        "utilisation_mean": res.get("utilisation_steady_mean",
                                    res.get("utilisation_mean")),
        "utilisation_max": res.get("utilisation_steady_max",
                                   res.get("utilisation_max")),
        "utilisation_run_mean": res.get("utilisation_mean"),
        "busy_s_total": res.get("busy_s_total"),
        "evicted_blocks": res.get("evicted_blocks"),
        "requests": res.get("requests"), "errors": res.get("errors"),
        "send_lag_p99_wall_ms": (res.get("send_lag_wall_ms") or {}).get(
            "p99"),
        "prefix_route_status": res.get("prefix_route_status"),
        "feedback": res.get("feedback"),
        "module_sha256": res.get("module_sha256"),
    }


TABLE_HEAD = (
    "| balancer | hit rate | / bound | / RR | TTFT p50 | p90 | p99 "
    "| wall TTFT p50 | p90 | p99 | e2e p50 | out tok/s | busy max/mean "
    "| util mean (max) | evicted blocks | requests | errors |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
    "| --- | --- | --- | --- | --- | --- |\n")


def table(rows, bnd, names, scale):
    out = [TABLE_HEAD]
    for name in names:
        r = rows.get(name)
        if r is None:
            continue
        out.append(
            "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
            "| %s | %s (%s) | %s | %s | %s |\n" % (
                BALANCERS[name].title if name in BALANCERS else name,
                fmt(r["hit_rate"], "%.3f"),
                fmt(r["hit_vs_bound"], "%.2f"),
                fmt(r["hit_vs_round_robin"], "%.2fx"),
                fmt(r["ttft_p50_ms"]), fmt(r["ttft_p90_ms"]),
                fmt(r["ttft_p99_ms"]),
                fmt(r["ttft_wall_p50_ms"], "%.1f"),
                fmt(r["ttft_wall_p90_ms"], "%.1f"),
                fmt(r["ttft_wall_p99_ms"], "%.1f"),
                fmt(r["e2e_p50_ms"]), fmt(r["output_tokens_per_s"]),
                fmt(r["busy_max_over_mean"], "%.2f"),
                fmt(r["utilisation_mean"], "%.2f"),
                fmt(r["utilisation_max"], "%.2f"),
                fmt(r["evicted_blocks"], "%d"), fmt(r["requests"], "%d"),
                fmt(r["errors"], "%d")))
    if bnd is not None:
        fl = bnd.get("ttft_floor_ms") or {}
        out.append("| pooled-cache bound (TTFT: floor) | %.3f | 1.00 | | "
                   "%s | %s | %s | | | | | | | | %s | %d | |\n" % (
                       bnd["hit_rate"], fmt(fl.get("p50")),
                       fmt(fl.get("p90")), fmt(fl.get("p99")),
                       fmt(bnd.get("evicted_blocks"), "%d"),
                       bnd["requests"]))
        q = bnd.get("ttft_queue_ms")
        if q:
            out.append("| queueing reference (every prefix on every backend)"
                       " | %s | | | %s | %s | %s | | | | | | | | | | |\n" % (
                           fmt(bnd.get("queue_hit_rate"), "%.3f"),
                           fmt(q.get("p50")), fmt(q.get("p90")),
                           fmt(q.get("p99"))))
    return "".join(out)


def targets(summary):
    """The placement targets, met or missed, on every target workload."""
    lines = []
    for wl in TARGET_WORKLOADS:
        s = summary["workloads"].get(wl)
        if not s:
            continue
        rows = s["rows"]
        pr = rows.get("prefix_route")
        if pr is None:
            continue
        bnd = (s.get("bound") or {}).get("hit_rate")
        fl = (s.get("bound") or {}).get("ttft_floor_ms") or {}
        checks = []
        ca = rows.get("cache_aware")
        if ca:
            for p in ("p50", "p90", "p99"):
                k = "ttft_%s_ms" % p
                if pr[k] is not None and ca[k]:
                    checks.append((
                        "TTFT %s <= the simple rule's" % p, pr[k] / ca[k],
                        "<=", 1.0, "%.0f ms / %.0f ms = %.2f%s" % (
                            pr[k], ca[k], pr[k] / ca[k],
                            "; each the run of median p90 of %d"
                            % len(pr["repeat_ttft_p90_ms"])
                            if len(pr.get("repeat_ttft_p90_ms") or ()) > 1
                            else "")))
        stock = [(rows[b]["ttft_p90_ms"], b) for b in STOCK
                 if b in rows and rows[b]["ttft_p90_ms"] is not None]
        if stock and pr["ttft_p90_ms"] is not None:
            best, who = min(stock)
            txt = "%.0f ms / %.0f ms (%s) = %.2f" % (
                pr["ttft_p90_ms"], best, BALANCERS[who].title,
                pr["ttft_p90_ms"] / best)
            lim = 0.5
            if fl.get("p90") is not None and fl["p90"] > best / 2:
                txt += ("; the floor's p90 is %.0f ms, above half of %.0f: "
                        "the pooled bound does not allow it, so the floor "
                        "is the target" % (fl["p90"], best))
                lim = fl["p90"] / best
            checks.append(("TTFT p90 <= half the best stock balancer's",
                           pr["ttft_p90_ms"] / best, "<=", lim, txt))
        if wl == "shared-prefix" and fl.get("p90") and pr["ttft_p90_ms"]:
            q = (s.get("bound") or {}).get("ttft_queue_ms") or {}
            checks.append(("TTFT p90 <= 2x the floor's",
                           pr["ttft_p90_ms"] / fl["p90"], "<=", 2.0,
                           "%.0f ms / %.0f ms = %.2f%s" % (
                               pr["ttft_p90_ms"], fl["p90"],
                               pr["ttft_p90_ms"] / fl["p90"],
                               "; the queueing reference's p90 is %.0f ms"
                               " = %.2fx the floor" % (
                                   q["p90"], q["p90"] / fl["p90"])
                               if q.get("p90") else "")))
        if bnd:
            checks.append(("hit rate >= 95% of the pooled-cache bound",
                           pr["hit_rate"] / bnd, ">=", 0.95,
                           "%.3f / %.3f = %.2f" % (pr["hit_rate"], bnd,
                                                   pr["hit_rate"] / bnd)))
        if pr["busy_max_over_mean"] is not None:
            checks.append(("busy time max/mean <= 1.15",
                           pr["busy_max_over_mean"], "<=", 1.15,
                           "%.2f" % pr["busy_max_over_mean"]))
        x3 = rows.get("prefix_route_x3")
        if x3 and x3["hit_rate"] is not None and pr["hit_rate"]:
            checks.append(("3 nginx instances: hit rate >= 90% of one's",
                           x3["hit_rate"] / pr["hit_rate"], ">=", 0.9,
                           "%.3f / %.3f = %.2f" % (
                               x3["hit_rate"], pr["hit_rate"],
                               x3["hit_rate"] / pr["hit_rate"])))
        for what, v, op, lim, txt in checks:
            ok = v >= lim if op == ">=" else v <= lim
            lines.append("| %s | %s | %s | %s |" % (
                wl, what, txt, "met" if ok else "**missed**"))
    hs = [r for r in summary.get("hotspot") or []
          if r["balancer"] == "prefix_route"]
    if hs:
        worst = max(r["max_over_mean"] or 0 for r in hs)
        lines.append("| hotspot | busiest server <= 1.5x the mean, idle or "
                     "after a burst, 1 and 2 workers | %.2f | %s |" % (
                         worst, "met" if worst <= 1.5 else "**missed**"))
    if not lines:
        return ""
    return ("| workload | target | measured | |\n| --- | --- | --- | --- |\n"
            + "\n".join(lines) + "\n")


def plots(summary, outdir, prefix=""):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("plots skipped: python3-matplotlib is not installed "
              "(make check-deps, as root)")
        return []
    made = []
    wls = [w for w in summary["workloads"] if summary["workloads"][w]["rows"]]
    for wl in wls:
        s = summary["workloads"][wl]
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for name in BALANCERS:
            c = s["cdf"].get(name)
            if not c:
                continue
            ax.plot(c, [p / 100 for p in range(101)],
                    label=BALANCERS[name].title,
                    linestyle="--" if BALANCERS[name].instances > 1 else "-")
        fl = (s.get("bound") or {}).get("ttft_floor_cdf_ms")
        if fl:
            ax.plot(fl, [p / 100 for p in range(101)], color="black",
                    linestyle=":", label="floor: pooled cache, no queueing")
        q = (s.get("bound") or {}).get("ttft_queue_cdf_ms")
        if q:
            ax.plot(q, [p / 100 for p in range(101)], color="grey",
                    linestyle=":", label="queueing reference")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(
            matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))
        ax.set_xlabel("TTFT, model ms (simulator clock), log scale")
        ax.set_ylabel("fraction of requests")
        ax.set_title("TTFT CDF: %s" % s["title"], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        fig.tight_layout()
        path = os.path.join(outdir, "%sttft-cdf-%s.png" % (prefix, wl))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    # hit rate per balancer, one group per workload, bound as a marker
    names = [n for n in BALANCERS
             if any(n in summary["workloads"][w]["rows"] for w in wls)]
    if wls and names:
        fig, ax = plt.subplots(figsize=(max(6, 2.4 * len(wls)), 5))
        width = 0.8 / (len(names) + 1)
        for j, name in enumerate(names + ["bound"]):
            xs, ys = [], []
            for i, wl in enumerate(wls):
                s = summary["workloads"][wl]
                v = (s.get("bound") or {}).get("hit_rate") \
                    if name == "bound" else \
                    (s["rows"].get(name) or {}).get("hit_rate")
                if v is not None:
                    xs.append(i + (j - len(names) / 2) * width)
                    ys.append(v)
            ax.bar(xs, ys, width,
                   label="pooled-cache bound" if name == "bound"
                   else BALANCERS[name].title,
                   hatch="//" if name == "bound" else None,
                   color="lightgrey" if name == "bound" else None,
                   edgecolor="black" if name == "bound" else None)
        ax.set_xticks(range(len(wls)))
        ax.set_xticklabels(wls)
        ax.set_ylabel("prefix cache hit rate (token-weighted, engines)")
        ax.set_ylim(0, 1)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=4, loc="upper center",
                  bbox_to_anchor=(0.5, -0.08), frameon=False)
        ax.set_title("Prefix cache hit rate per balancer (bench.md gives "
                     "each workload's backends)", fontsize=10)
        fig.tight_layout()
        path = os.path.join(outdir, "%shit-rate.png" % prefix)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        made.append(path)
    return made


def environment(a):
    env = {"date": datetime.datetime.now(datetime.timezone.utc)
           .strftime("%Y-%m-%dT%H:%M:%SZ"),
           "nproc": os.cpu_count(), "backends": BACKENDS,
           "kv_blocks": KV_BLOCKS, "stream_tick_ms": STREAM_TICK_MS}
    try:
        env["loadavg_start"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    try:
        r = subprocess.run([a.nginx, "-v"], stderr=subprocess.PIPE,
                           text=True)
        env["nginx"] = r.stderr.strip().split("/")[-1]
    except OSError:
        pass
    try:
        r = subprocess.run(["git", "-C", TOP, "rev-parse", "--short",
                            "HEAD"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if r.returncode == 0:
            env["commit"] = r.stdout.strip()
            # read-only: are the module's sources those of the commit?
            r = subprocess.run(
                ["git", "-C", TOP, "status", "--porcelain", "--",
                 "ngx_http_prefix_route_module.c", "src", "config"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True)
            if r.returncode == 0 and r.stdout.strip():
                env["commit"] += "+modified"
    except OSError:
        pass
    env["module_sha256"] = module_sha(a.module)
    return env


def module_sha(path):
    """The module under test (others may rebuild it during a long run)."""
    import hashlib
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()[:16]
    except OSError:
        return None


# ---------------------------------------------------------------------------
# make bench

def cmd_bench(a):
    names = [w for w in a.workloads.split(",") if w]
    balancers = [b for b in a.balancers.split(",") if b]
    for w in names:
        if w not in WORKLOADS:
            raise SystemExit("unknown workload %s (%s)"
                             % (w, ", ".join(WORKLOADS)))
    for b in balancers:
        if b not in BALANCERS:
            raise SystemExit("unknown balancer %s (%s)"
                             % (b, ", ".join(BALANCERS)))
    raw_dir = os.path.join(a.out, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    summary = {"environment": environment(a), "workloads": {}}
    if a.merge and os.path.exists(os.path.join(a.out, "bench.json")):
        with open(os.path.join(a.out, "bench.json")) as f:
            old = json.load(f)
        summary["workloads"] = old.get("workloads", {})
        summary["environment"]["merged_into"] = old.get("environment")
        if old.get("hotspot"):
            summary["hotspot"] = old["hotspot"]
    procs = Procs()
    t_start = time.monotonic()
    workdir = tempfile.mkdtemp(prefix="prefix-route-bench.")
    try:
        for wl in names:
            spec = workload_spec(wl, a)
            if spec is None:
                continue
            n = spec.get("backends", BACKENDS)
            print("== %s: %s (%s; time scale %g)" % (
                wl, spec["title"], spec["load"], spec["scale"]), flush=True)
            path = generate(wl, spec)
            kv = spec.get("kv_blocks", KV_BLOCKS)
            bnd = bound(path, n, kv)
            print("%s pooled-cache bound (%d x %d blocks): hit rate %.3f"
                  % (wl, n, kv, bnd["hit_rate"]), flush=True)
            results = {b: [run_one(procs, a, workdir, wl, spec, path, b,
                                   a.port_base, n, raw_dir)]
                       for b in balancers}
            for r in range(1, spec.get("repeats", 1)):
                for b in balancers:
                    if b in REPEATED:
                        results[b].append(run_one(
                            procs, a, workdir, "%s-%d" % (wl, r), spec,
                            path, b, a.port_base, n, raw_dir))
            rr = (results.get("round_robin") or [{}])[0].get("hit_rate")
            rows, cdfs = {}, {}
            for b, runs in results.items():
                rs = [row_of(x, bnd["hit_rate"], rr) for x in runs]
                rows[b] = median_run(rs)
                cdfs[b] = runs[median_at(rs)].get("ttft_cdf_ms")
            if a.merge and wl in summary["workloads"]:
                prev = summary["workloads"][wl]
                for b, row in prev["rows"].items():
                    rows.setdefault(b, row)
                    cdfs.setdefault(b, prev["cdf"].get(b))
                rows = {b: rows[b] for b in BALANCERS if b in rows}
            summary["workloads"][wl] = {
                "title": spec["title"], "load": spec["load"],
                "generator": ["bench/workload/workload.py"] + spec["gen"],
                "time_scale": spec["scale"], "backends": n,
                "prefix_route": spec.get("prefix_route"),
                "bound": bnd, "rows": rows,
                "cdf": cdfs,
                "requests": next(iter(results.values()))[0]["requests"]
                if results else None,
            }
            write_report(summary, a.out)
    finally:
        procs.stop()
        if not a.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print("run directory kept: %s" % workdir)
    if a.hotspot:
        workdir = tempfile.mkdtemp(prefix="prefix-route-hotspot.")
        try:
            summary["hotspot"] = hotspot(procs, a, workdir,
                                         ["cache_aware", "prefix_route"])
        finally:
            procs.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    summary["environment"]["bench_wall_s"] = round(
        time.monotonic() - t_start, 1)
    write_report(summary, a.out)
    made = plots(summary, a.out)
    print()
    print(open(os.path.join(a.out, "bench.md")).read())
    print("results: %s/bench.md, bench.json, raw/*.json%s" % (
        os.path.relpath(a.out), "".join(", " + os.path.basename(p)
                                        for p in made)))
    print("bench took %.0f s" % summary["environment"]["bench_wall_s"])
    return 0


def write_report(summary, outdir):
    s = dict(summary)
    with open(os.path.join(outdir, "bench.json"), "w") as f:
        json.dump(s, f, indent=1)
        f.write("\n")
    env = summary["environment"]
    md = ["# prefix_route benchmark results\n\n",
          "Written by `make bench` (bench/run/bench.py) on %s, nginx %s, "
          "commit %s, %s cores; %d simulated backends (bench/sim, "
          "Llama-3-8B on an H100: %d KV blocks each).  TTFT and e2e are "
          "model-time figures from the simulators (ms); wall TTFT is what "
          "the client measured, in wall ms at the run's time scale.  "
          "util = prefill busy time / model time in the middle half of the "
          "run (steady state), mean over backends (max).  The bound row "
          "gives the hit rate of one pooled cache with all backends' "
          "blocks (`llmsim.py bound`) and the TTFT floor: each request "
          "alone on that cache, no queueing; the queueing reference row: "
          "that cache served by the backends' engines, every prefix on "
          "every backend for free, each request to the one with the least "
          "work ahead (bench/sim/README.md).  bench/run/README.md explains "
          "every column and how the loads were chosen.\n\n" % (
              env.get("date"), env.get("nginx"), env.get("commit", "?"),
              env.get("nproc"), env["backends"], env["kv_blocks"])]
    for wl, s in summary["workloads"].items():
        md.append("## %s\n\n" % s["title"])
        md.append("`%s`: %s requests, %s, time scale %g, %d backends%s.\n\n"
                  % (" ".join(s["generator"]), s["requests"], s["load"],
                     s["time_scale"], s.get("backends", BACKENDS),
                     "; prefix_route with `%s` (docs/tuning.md)"
                     % s["prefix_route"] if s.get("prefix_route") else ""))
        md.append(table(s["rows"], s["bound"], list(BALANCERS),
                        s["time_scale"]))
        md.append(repeats_note(s["rows"]))
        st = (s["rows"].get("prefix_route") or {}).get("prefix_route_status")
        if st:
            md.append("\nprefix_route decisions (one instance): %s.\n"
                      % ", ".join("%s %d" % kv for kv in st.items()))
        lags = [r["send_lag_p99_wall_ms"] for r in s["rows"].values()
                if r.get("send_lag_p99_wall_ms") is not None]
        if lags:
            md.append("\nClient send lag p99: %.1f-%.1f wall ms (%.0f-%.0f "
                      "model ms) behind schedule.\n" % (
                          min(lags), max(lags), min(lags) / s["time_scale"],
                          max(lags) / s["time_scale"]))
        md.append("\n")
    shas = sorted(set(r.get("module_sha256") for s in
                      summary["workloads"].values()
                      for r in s["rows"].values() if r.get("module_sha256")))
    if len(shas) > 1:
        md.append("**Warning**: the rows are of %d builds of the module "
                  "(sha256 %s): merged from another run (--merge), or "
                  "rebuilt during this one.\n\n"
                  % (len(shas), ", ".join(shas)))
    if summary.get("hotspot"):
        md.append(hotspot_report(summary["hotspot"]))
    t = targets(summary)
    if t:
        md.append("## Targets\n\n" + t + "\n")
    t = shadow_report(summary)
    if t:
        md.append(t)
    if env.get("bench_wall_s"):
        md.append("The bench took %.0f s.\n" % env["bench_wall_s"])
    with open(os.path.join(outdir, "bench.md"), "w") as f:
        f.write("".join(md))


SHADOW_TARGET = 0.05


def shadow_report(summary):
    """Shadow mode over round robin against prefix_route routing the same
    workload: the hit rate shadow mode predicts for prefix_route (the
    index's bytes) against the one the engines reported when it routed
    (the target: within SHADOW_TARGET)."""
    out = []
    for wl, s in summary["workloads"].items():
        sh = s["rows"].get("shadow")
        pr = s["rows"].get("prefix_route")
        if not sh or not pr or not sh.get("feedback"):
            continue
        f = sh["feedback"]
        pred, real = f.get("tokens_predicted"), pr.get("hit_rate")
        if pred is None or real is None:
            continue
        d = pred - real
        out.append("| %s | %s | %s | %s | %s | %s | %s | %+.3f | %s |\n" % (
            wl, fmt(sh["hit_rate"], "%.3f"), fmt(f.get("index_matched"),
                                                  "%.3f"),
            fmt(f.get("index_longest"), "%.3f"),
            fmt(f.get("index_predicted"), "%.3f"), fmt(pred, "%.3f"),
            fmt(real, "%.3f"), d,
            "met" if abs(d) <= SHADOW_TARGET else "**missed**"))
    if not out:
        return ""
    return ("## Shadow mode\n\n"
            "`prefix_route ... shadow` over round robin: round robin routes, "
            "prefix_route indexes and predicts. *engine*: the hit rate the "
            "engines reported under round robin; *index, current*: the "
            "share of prompt bytes (at most `max_prefix` a prompt) the "
            "chosen servers held, as the index saw it; *best*: the share "
            "the best server held; *predicted, bytes*: the share "
            "prefix_route's choice would have held; *predicted*: the same "
            "in the engines' tokens, over the prompt tokens they reported "
            "(status `predicted_tokens / reported_tokens`); *routed*: the "
            "engines' hit rate when prefix_route routed the same workload "
            "(the row above). Target: predicted within %.2f of routed.\n\n"
            "| workload | engine | index, current | best | predicted, bytes "
            "| predicted | routed | predicted - routed | target |\n"
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
            % SHADOW_TARGET + "".join(out) + "\n")


# ---------------------------------------------------------------------------
# hotspot: many concurrent identical prompts, the busiest server's share

HOTSPOT = {"requests": 64, "prompt_tokens": 15000, "output_tokens": 230,
           "burst": 64, "burst_tokens": 4000}


def hotspot_send(url, bodies):
    """Sends the bodies at once, one thread each; returns each response's
    X-Backend (None on an error)."""
    import threading
    u = urllib.parse.urlsplit(url)
    got = [None] * len(bodies)
    go = threading.Barrier(len(bodies))

    def one(i):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
        try:
            data = json.dumps(bodies[i]).encode()
            go.wait()
            c.request("POST", "/v1/chat/completions", data,
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            if r.status == 200:
                got[i] = r.getheader("X-Backend")
        except OSError:
            pass
        finally:
            c.close()

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return got


def hotspot_body(text, out):
    return {"model": "meta-llama/Meta-Llama-3-8B-Instruct", "stream": True,
            "max_tokens": out, "ignore_eos": True,
            "messages": [{"role": "user", "content": text}]}


def hotspot_run(procs, a, workdir, balancer, workers, burst, port_base):
    """One run: optionally a burst of distinct prompts first, then the
    identical ones; returns the identical requests per backend."""
    import llmsim
    h = HOTSPOT
    rundir = os.path.join(workdir, "hotspot-%s-%d-%d" % (balancer, workers,
                                                         burst))
    os.makedirs(rundir, exist_ok=True)
    fleet = Fleet(procs, rundir, a.module, a.nginx, port_base, BACKENDS,
                  balancer, 1.0, workers=workers)
    try:
        if burst:
            hotspot_send(fleet.urls[0], [
                hotspot_body(llmsim.words_text("burst-%d" % i,
                                               4 * h["burst_tokens"]), 8)
                for i in range(h["burst"])])
        same = hotspot_body(llmsim.words_text("hotspot",
                                              4 * h["prompt_tokens"]),
                            h["output_tokens"])
        got = hotspot_send(fleet.urls[0], [same] * h["requests"])
    finally:
        fleet.stop()
    per = collections.Counter(g for g in got if g)
    counts = [per.get("b%d" % (i + 1), 0) for i in range(BACKENDS)]
    mean = sum(counts) / BACKENDS
    return {"balancer": balancer, "workers": workers,
            "after_burst": bool(burst), "per_backend": counts,
            "errors": got.count(None),
            "max_over_mean": round(max(counts) / mean, 2) if mean else None}


def hotspot(procs, a, workdir, balancers):
    """64 concurrent identical 60 KB prompts, each ~3 s on its server
    (230 output tokens at 13 ms), on an idle fleet and right after a burst
    of 64 distinct prompts; with 1 and 2 workers.  All 64 are in flight
    together, so the requests each server got are its peak in flight."""
    out = []
    for b in balancers:
        for workers in (1, 2):
            for burst in (0, 1):
                r = hotspot_run(procs, a, workdir, b, workers, burst,
                                a.port_base)
                out.append(r)
                print("hotspot %-14s workers %d %-12s per backend %-16s "
                      "max/mean %.2f errors %d" % (
                          b, workers, "after burst" if burst else "idle",
                          "/".join(map(str, r["per_backend"])),
                          r["max_over_mean"] or 0, r["errors"]),
                      flush=True)
    return out


def cmd_hotspot(a):
    procs = Procs()
    workdir = tempfile.mkdtemp(prefix="prefix-route-hotspot.")
    try:
        out = hotspot(procs, a, workdir, a.balancers.split(","))
    finally:
        procs.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    return 0 if all(r["errors"] == 0 for r in out) else 1


def hotspot_report(rows):
    """bench.md's section for the hotspot runs."""
    out = ["## Hot spot: 64 identical prompts at once\n\n",
           "`bench.py hotspot`: 4 backends at time scale 1, 64 concurrent "
           "identical 60 KB chat prompts of 230 output tokens each (~3 s "
           "on a server), on an idle fleet and right after a burst of 64 "
           "distinct 16 KB prompts; the requests each backend got (all 64 "
           "are in flight together).\n\n",
           "| balancer | workers | before | per backend | busiest / mean "
           "| errors |\n| --- | --- | --- | --- | --- | --- |\n"]
    for r in rows:
        out.append("| %s | %d | %s | %s | %.2f | %d |\n" % (
            BALANCERS[r["balancer"]][0], r["workers"],
            "a burst" if r["after_burst"] else "idle",
            "/".join(map(str, r["per_backend"])), r["max_over_mean"] or 0,
            r["errors"]))
    return "".join(out) + "\n"

# ---------------------------------------------------------------------------
# make demo

def cmd_demo(a):
    workdir = a.workdir or tempfile.mkdtemp(prefix="prefix-route-demo.")
    procs = Procs(a.pidfile)
    spec = DEMO
    port = a.port
    t0 = time.monotonic()
    print("demo: %d simulated vLLM backends (Llama-3-8B on an H100) on "
          "127.0.0.1:%d-%d, nginx with the module on 127.0.0.1:%d"
          % (BACKENDS, port + 1, port + BACKENDS, port), flush=True)
    path = generate("demo-multi-turn", spec, quiet=True)
    n = sum(1 for _ in open(path))
    print("workload: bench/workload/workload.py %s: %d requests (%d "
          "conversations of 6 turns, every system prompt opening with the "
          "same %d-token preamble), replayed at %gx real time"
          % (" ".join(spec["gen"]), n, n // 6, PREAMBLE, 1 / spec["scale"]),
          flush=True)
    bnd = bound(path, BACKENDS)
    results = {}
    raw = os.path.join(workdir, "raw")
    os.makedirs(raw, exist_ok=True)
    try:
        for b in spec["balancers"]:
            print("-- %s" % BALANCERS[b].title, flush=True)
            results[b] = run_one(
                procs, a, workdir, "demo", spec, path, b, port, BACKENDS,
                raw, nginx_ports=[port],
                backend_ports=[port + 1 + i for i in range(BACKENDS)])
    finally:
        procs.stop()
    rr = results["round_robin"]["hit_rate"]
    rows = {b: row_of(r, bnd["hit_rate"], rr) for b, r in results.items()}
    demo = {}
    for b, r in rows.items():
        demo[b] = {k: r[k] for k in (
            "hit_rate", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms",
            "busy_max_over_mean", "requests", "errors")}
        demo[b]["utilisation_mean"] = r["utilisation_mean"]
    demo["bound"] = {"hit_rate": round(bnd["hit_rate"], 4),
                     "ttft_p50_ms": None, "ttft_p90_ms": None,
                     "ttft_p99_ms": None, "busy_max_over_mean": None,
                     "requests": bnd["requests"], "errors": None}
    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, "demo.json")
    with open(out + ".tmp", "w") as f:
        json.dump(demo, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    print()
    print("%-22s %8s %9s %9s %9s %9s %6s %8s %6s" % (
        "", "hit rate", "TTFT p50", "TTFT p90", "TTFT p99", "busy", "util",
        "requests", "errors"))
    print("%-22s %8s %9s %9s %9s %9s %6s %8s %6s" % (
        "", "", "ms", "ms", "ms", "max/mean", "", "", ""))
    for b in spec["balancers"] + ("bound",):
        d = demo[b]
        print("%-22s %8s %9s %9s %9s %9s %6s %8s %6s" % (
            "pooled-cache bound" if b == "bound" else BALANCERS[b].title,
            fmt(d["hit_rate"], "%.3f"), fmt(d["ttft_p50_ms"]),
            fmt(d["ttft_p90_ms"]), fmt(d["ttft_p99_ms"]),
            fmt(d["busy_max_over_mean"], "%.2f"),
            fmt(d.get("utilisation_mean"), "%.2f"),
            fmt(d["requests"], "%d"), fmt(d["errors"], "%d")))
    pr, rrr = demo["prefix_route"], demo["round_robin"]
    print()
    print("hit rate: cached / prompt tokens as the backends reported them "
          "(usage.prompt_tokens_details.cached_tokens); TTFT: model time "
          "on the simulators' clock; busy max/mean: prefill busy time of the "
          "busiest backend over the mean; util: prefill busy time / model "
          "time in the middle of the run (the \"steady\" figure above), "
          "mean over the backends (the same requests in both runs: a "
          "balancer that hits more is less busy); pooled-cache bound: the "
          "hit rate of one cache as large as the 4 backends' together, fed "
          "the same requests, which no router can beat.")
    if pr["hit_rate"] and rrr["hit_rate"] and pr["ttft_p90_ms"] \
            and rrr["ttft_p90_ms"]:
        print("prefix_route: %.2fx round robin's hit rate (%.0f%% of the "
              "pooled-cache bound), TTFT p90 %.0f ms against %.0f ms."
              % (pr["hit_rate"] / rrr["hit_rate"],
                 100 * pr["hit_rate"] / bnd["hit_rate"],
                 pr["ttft_p90_ms"], rrr["ttft_p90_ms"]))
    print("results: %s (took %.0f s)" % (os.path.relpath(out),
                                         time.monotonic() - t0))
    return 0 if all(r["errors"] == 0 for r in results.values()) else 1


# ---------------------------------------------------------------------------
# serve: a fleet after a replay, held for a command (t/browser/status-page)

def cmd_serve(a):
    if a.command[:1] == ["--"]:
        a.command = a.command[1:]
    if not a.command:
        raise RuntimeError("no command to run")
    spec = WORKLOADS[a.workload]
    if a.time_scale:
        spec = dict(spec, scale=a.time_scale)
    path = generate(a.workload, spec, quiet=True)
    workdir = tempfile.mkdtemp(prefix="prefix-route-serve.")
    procs = Procs()
    rc = []

    def hold(fleet):
        # the charts' last interval sampled (every 10 s, by the 1 s sweep)
        time.sleep(a.settle)
        env = dict(os.environ, PREFIX_ROUTE_STATUS_URL=fleet.urls[0]
                   + "/prefix-route-status")
        rc.append(subprocess.call(a.command, env=env))

    try:
        res = run_one(procs, a, workdir, a.workload, spec, path, a.balancer,
                      a.port_base, spec.get("backends", BACKENDS), workdir,
                      hold=hold)
    finally:
        procs.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    if res.get("errors"):
        print("serve: %d of %d requests failed" % (res["errors"],
                                                  res["requests"]),
              file=sys.stderr)
        return 1
    return rc[0] if rc else 1


# ---------------------------------------------------------------------------
# estimate: the load of a workload on N backends from the simulator's
# capacity, under round robin, without running anything

# make bench-feedback: the index with and without the engines' corrections
# (feedback=on, the default, reads and counts the usage and changes
# nothing: it routes as feedback=off), in one sitting; behind 3 instances
# (instances=3) feedback=correct works as on, so they run with on alone;
# capacity= 4x too large on multi-turn and shared-prefix, whose accuracy
# the issue judges with it
FEEDBACK_RUNS = (
    ("multi-turn", ("prefix_route", "prefix_route_correct",
                    "prefix_route_cap4", "prefix_route_cap4_correct",
                    "prefix_route_x3")),
    ("multi-turn-evict", ("prefix_route", "prefix_route_correct",
                          "prefix_route_cap4", "prefix_route_cap4_correct")),
    ("shared-prefix", ("prefix_route", "prefix_route_correct",
                       "prefix_route_cap4", "prefix_route_cap4_correct",
                       "prefix_route_x3")),
    ("mooncake", ("prefix_route", "prefix_route_correct",
                  "prefix_route_x3")),
    ("mooncake-8", ("prefix_route", "prefix_route_correct",
                    "prefix_route_x3")),
    ("mixed-output", ("prefix_route", "prefix_route_correct",
                      "prefix_route_x3")),
)


# wall s into the multi-turn run (about 32 s) when b1 restarts
RESTART_AT = 13.0


def cmd_feedback(a):
    """The targets of response feedback: capacity= 4x too large,
    3 nginx instances, a backend restarted, the prediction's accuracy;
    feedback.md."""
    raw_dir = os.path.join(a.out, "raw-feedback")
    os.makedirs(raw_dir, exist_ok=True)
    procs = Procs()
    workdir = tempfile.mkdtemp(prefix="prefix-route-feedback.")
    t0 = time.monotonic()
    out = {"environment": environment(a), "workloads": {}}
    try:
        for wl, balancers in FEEDBACK_RUNS:
            if wl not in a.workloads.split(","):
                continue
            spec = workload_spec(wl, a)
            if spec is None:
                continue
            n = spec.get("backends", BACKENDS)
            path = generate(wl, spec)
            bnd = bound(path, n, spec.get("kv_blocks", KV_BLOCKS))["hit_rate"]
            rows = {}
            for b in balancers:
                res = run_one(procs, a, workdir, wl, spec, path, b,
                              a.port_base, n, raw_dir)
                rows[b] = row_of(res, bnd, None)
                f = rows[b]["feedback"] or {}
                print("%s %s: hit rate %.3f (%.3f of the bound), TTFT p90 "
                      "%s ms; agreed %s" % (
                          wl, b, rows[b]["hit_rate"],
                          rows[b]["hit_vs_bound"],
                          fmt(rows[b]["ttft_p90_ms"]),
                          fmt(f.get("agreed"), "%.3f")), flush=True)
            out["workloads"][wl] = {"bound": bnd, "rows": rows,
                                    "kv_blocks": spec.get("kv_blocks",
                                                          KV_BLOCKS)}
        # one backend restarted at about 40% of the multi-turn run
        wl = "multi-turn"
        spec = WORKLOADS[wl]
        path = generate(wl, spec)
        bnd = bound(path, BACKENDS)["hit_rate"]
        out["restart"] = restarts(procs, a, workdir, raw_dir, spec, path,
                                  ("prefix_route", "prefix_route_correct"),
                                  bnd)
    finally:
        procs.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return write_results(a, "feedback", out, t0, feedback_report)


def restarts(procs, a, workdir, raw_dir, spec, path, balancers, bnd):
    """The multi-turn workload with b1 restarted RESTART_AT s in, through
    each balancer: how many of b1's requests its hit rate takes to
    recover."""
    out = {}
    for b in balancers:
        rec = os.path.join(workdir, "restart-%s.jsonl" % b)
        res = run_one(procs, a, workdir, "multi-turn-restart", spec, path, b,
                      a.port_base, BACKENDS, raw_dir, restart_at=RESTART_AT,
                      records=rec)
        out[b] = dict(recovery(rec, "b1", RESTART_AT),
                      hit_rate=res["hit_rate"],
                      hit_vs_bound=res["hit_rate"] / bnd,
                      ttft_p90_ms=(res.get("ttft_ms") or {}).get("p90"),
                      restart_at_s=RESTART_AT)
        print("restart, %s: %s" % (b, out[b]), flush=True)
    return out


def write_results(a, name, out, t0, report):
    """NAME.json and NAME.md (from report(out)) in the results directory;
    prints the report."""
    out["environment"]["bench_wall_s"] = round(time.monotonic() - t0, 1)
    with open(os.path.join(a.out, name + ".json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    md = report(out)
    with open(os.path.join(a.out, name + ".md"), "w") as f:
        f.write(md)
    print(md)
    return 0


# make bench-probes: prefix_route with and without prefix_route_probe
# while a share of the load goes straight to the backends, in one sitting:
# spread over all of them, or all to b1 (clients pinned to one server)
PROBE_WORKLOADS = ("multi-turn", "shared-prefix", "mooncake")
PROBE_DIRECT = 0.3
PROBE_DIRECT_TO = (("spread", 0), ("to b1", 1))
# a p90 over a few hundred requests moves 20% between runs of one sitting
# (shared-prefix's without probes: 370 or 449 ms), so each direct-load row
# is run this many times, with and without probes in turn
PROBE_REPEATS = 3


def at_least_one(text):
    """argparse type: an integer of 1 or more."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("%r is not 1 or more" % text)
    return n


def median_at(rows):
    """Of the repeats of one row, the index of the run whose TTFT p90 is
    the median (the lower middle one of an even number); the first when
    no run has a p90."""
    done = sorted((r["ttft_p90_ms"], i) for i, r in enumerate(rows)
                  if r["ttft_p90_ms"] is not None)
    return done[(len(done) - 1) // 2][1] if done else 0


def median_run(rows):
    """Of the repeats of one row, the run whose TTFT p90 is the median,
    with every repeat's p90."""
    row = dict(rows[median_at(rows)])
    row["repeat_ttft_p90_ms"] = [r["ttft_p90_ms"] for r in rows]
    return row


def repeats_note(rows):
    """The line under a table whose rows ran more than once: every run's
    TTFT p90, in the order they ran ("" when none did)."""
    rep = [(b, r["repeat_ttft_p90_ms"]) for b, r in rows.items()
           if len(r.get("repeat_ttft_p90_ms") or ()) > 1]
    if not rep:
        return ""
    return ("\nThese ran %d times in turn, and their rows give the run of "
            "median TTFT p90; the p90 of each run, ms: %s.\n" % (
                max(len(p) for _, p in rep),
                "; ".join("%s %s" % (
                    BALANCERS[b].title if b in BALANCERS else b,
                    "/".join(fmt(x) for x in p)) for b, p in rep)))


def cmd_probes(a):
    """The targets of engine probes: 30% of the load past nginx,
    a backend restarted, 3 nginx instances; probes.md."""
    raw_dir = os.path.join(a.out, "raw-probes")
    os.makedirs(raw_dir, exist_ok=True)
    procs = Procs()
    workdir = tempfile.mkdtemp(prefix="prefix-route-probes.")
    t0 = time.monotonic()
    global PROBE_INTERVAL_S
    PROBE_INTERVAL_S = a.probe_interval
    out = {"environment": environment(a), "direct": PROBE_DIRECT,
           "probe_interval_s": a.probe_interval, "repeats": a.repeats,
           "workloads": {}, "x3": {}, "restart": {}}
    try:
        for wl in a.workloads.split(","):
            spec = workload_spec(wl, a)
            if spec is None:
                continue
            path = generate(wl, spec)
            bnd = bound(path, BACKENDS)["hit_rate"]
            out["workloads"][wl] = {"bound": bnd}
            for how, to in PROBE_DIRECT_TO if a.direct else ():
                runs = {"prefix_route": [], "prefix_route_probe": []}
                for r in range(a.repeats):
                    for b in runs:
                        name = "%s-direct%d" % (wl, to) + (
                            "-%d" % r if r else "")
                        res = run_one(procs, a, workdir, name, spec, path,
                                      b, a.port_base, BACKENDS, raw_dir,
                                      direct=PROBE_DIRECT, direct_to=to)
                        row = row_of(res, bnd, None)
                        runs[b].append(row)
                        print("%s, %d%% direct %s, %s: hit rate %.3f, "
                              "TTFT p50/p90/p99 %s/%s/%s ms" % (
                                  wl, 100 * PROBE_DIRECT, how, b,
                                  row["hit_rate"],
                                  fmt(row["ttft_p50_ms"]),
                                  fmt(row["ttft_p90_ms"]),
                                  fmt(row["ttft_p99_ms"])), flush=True)
                out["workloads"][wl][how] = {
                    b: median_run(rs) for b, rs in runs.items()}
            if not a.x3:
                continue
            rows = {}
            for b in ("prefix_route", "prefix_route_x3",
                      "prefix_route_x3_probe"):
                res = run_one(procs, a, workdir, wl, spec, path, b,
                              a.port_base, BACKENDS, raw_dir)
                rows[b] = row_of(res, bnd, None)
                print("%s, %s: hit rate %.3f, TTFT p90 %s ms" % (
                    wl, b, rows[b]["hit_rate"],
                    fmt(rows[b]["ttft_p90_ms"])), flush=True)
            out["x3"][wl] = {"bound": bnd, "rows": rows}
        if a.restart:
            # one backend restarted at about 40% of the multi-turn run
            spec = WORKLOADS["multi-turn"]
            path = generate("multi-turn", spec)
            out["restart"] = restarts(procs, a, workdir, raw_dir, spec, path,
                                      ("prefix_route", "prefix_route_probe"),
                                      bound(path, BACKENDS)["hit_rate"])
    finally:
        procs.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return write_results(a, "probes", out, t0, probes_report)


def probes_report(out):
    """probes.md: the direct-load table, the 3-instance table, the
    restart, then the targets."""
    md = ["# Engine probes (make bench-probes)\n\n",
          "One sitting, nginx with %s workers, 4 simulated backends whose "
          "`/metrics` nginx reads every %g s of model time "
          "(`prefix_route_probe`, the interval scaled with the workload). "
          "Took %.0f s.\n\n"
          % (out["environment"].get("workers", 2), out["probe_interval_s"],
             out["environment"]["bench_wall_s"]),
          "## %d%% of the load straight to the backends\n\n"
          "A client sends that share of the requests past nginx "
          "(`loadgen.py --direct`), to a random backend (*spread*) or "
          "all to b1 (*to b1*, clients pinned to one server); nginx sees "
          "only its own. TTFT over all requests, model ms; *p90 routed* "
          "and *direct*: of the requests nginx routed and of those it "
          "never saw. Each row ran %d time(s), with and without probes in "
          "turn; the run shown is the one of median p90 (of all requests), "
          "and the last column gives every run's."
          "\n\n" % (100 * out["direct"], out.get("repeats", 1)),
          "| workload | direct | balancer | hit rate | TTFT p50 | p90 | p99 "
          "| p90 routed | p90 direct | busy max/mean | p90 of each run |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
          "| --- |\n"]
    targets = []
    for wl, w in out["workloads"].items():
        for how, _ in PROBE_DIRECT_TO:
            for b, r in w.get(how, {}).items():
                md.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s "
                          "| %s | %s |\n"
                          % (wl, how, b, fmt(r["hit_rate"], "%.3f"),
                             fmt(r["ttft_p50_ms"]), fmt(r["ttft_p90_ms"]),
                             fmt(r["ttft_p99_ms"]),
                             fmt(r.get("ttft_routed_p90_ms")),
                             fmt(r.get("ttft_direct_p90_ms")),
                             fmt(r["busy_max_over_mean"], "%.2f"),
                             "/".join(fmt(x) for x in
                                      r.get("repeat_ttft_p90_ms", []))))
            if how not in w:
                continue
            r0 = w[how]["prefix_route"]
            r1 = w[how]["prefix_route_probe"]
            p0, p1 = r0["ttft_p90_ms"], r1["ttft_p90_ms"]
            pairs = zip(r1.get("repeat_ttft_p90_ms", []),
                        r0.get("repeat_ttft_p90_ms", []))
            each = "/".join("%.2f" % (x / y) for x, y in pairs if x and y)
            # a few ms either way is the runs' noise, not the probes' doing
            # (the runs in turn move 5-10%), so lower means by over 3%
            if p0 and p1:
                targets.append("- %s, %d%% direct, %s: TTFT p90 with "
                               "probes %s vs %s ms without (%.2fx; runs in "
                               "turn %s): %s\n" % (
                                   wl, 100 * out["direct"], how, fmt(p1),
                                   fmt(p0), p1 / p0, each,
                                   "lower" if p1 < 0.97 * p0
                                   else "NOT lower" if p1 > 1.03 * p0
                                   else "NOT lower (the same within 3%)"))
    if out["x3"]:
        md.append("\n## 3 nginx instances\n\n"
                  "| workload | balancer | hit rate | / one instance "
                  "| TTFT p90 |\n| --- | --- | --- | --- | --- |\n")
    for wl, w in out["x3"].items():
        one = w["rows"]["prefix_route"]["hit_rate"]
        for b, r in w["rows"].items():
            md.append("| %s | %s | %s | %s | %s |\n" % (
                wl, b, fmt(r["hit_rate"], "%.3f"),
                fmt(r["hit_rate"] / one if one else None, "%.3f"),
                fmt(r["ttft_p90_ms"])))
        x3 = w["rows"].get("prefix_route_x3_probe", {}).get("hit_rate")
        if one and x3 is not None:
            targets.append("- %s, 3 instances with probes and feedback "
                           "(feedback=correct works as on there): %.3f of "
                           "one instance's hit rate (target 0.95): %s\n" % (
                               wl, x3 / one,
                               "met" if x3 / one >= 0.95 else "MISSED"))
    if out.get("restart"):
        md.append("\n## One backend restarted mid-run (multi-turn)\n\n"
                  "b1's cache is wiped and its counters start again (POST "
                  "/sim/restart) %g s into the run. *Requests to recover*: "
                  "b1's requests after the restart until the hit rate of "
                  "its last 20 is back to 90%% of its rate before.\n\n"
                  "| balancer | hit rate | TTFT p90 | b1 before "
                  "| requests to recover |\n"
                  "| --- | --- | --- | --- | --- |\n" % RESTART_AT)
        for b, r in out["restart"].items():
            md.append("| %s | %s | %s | %s | %s |\n" % (
                b, fmt(r["hit_rate"], "%.3f"), fmt(r.get("ttft_p90_ms")),
                fmt(r["hit_before"], "%.3f"),
                fmt(r["requests_to_recover"], "%d")))
    md.append("\n## Targets\n\n")
    md.extend(targets)
    return "".join(md)


def feedback_report(out):
    """feedback.md: a table per workload, then the targets."""
    md = ["# Feedback from the engines (make bench-feedback)\n\n",
          "One sitting, nginx with %s workers, the simulator's usage "
          "(`prompt_tokens_details.cached_tokens`, streams with "
          "`include_usage`). *Agreed*: responses whose reported cached "
          "tokens were within one block (16 tokens, or 64 bytes if more) of the "
          "index's prediction; *predicted* and "
          "*reported*: cached tokens over the prompt tokens reported; "
          "*under*/*over*: the engine held less/more; *dropped*: index "
          "entries dropped on its word; *learned*: the capacity "
          "feedback=correct learned, the mean over the servers that "
          "learned one, over the engines' cache (its blocks x 16 tokens "
          "x 4 bytes, capacity= set right). Took %.0f s.\n\n"
          % (out["environment"].get("workers", 2),
             out["environment"]["bench_wall_s"])]
    checks = []
    for wl, w in out["workloads"].items():
        rows = w["rows"]
        md.append("## %s (pooled-cache bound %.3f)\n\n" % (wl, w["bound"]))
        md.append("| balancer | hit rate | / bound | TTFT p50 | p90 | p99 "
                  "| agreed | predicted | reported | under | over "
                  "| dropped | learned |\n" + "| --- " * 13 + "|\n")
        cache = w.get("kv_blocks", KV_BLOCKS) * 16 * 4
        for b, r in rows.items():
            f = r["feedback"] or {}
            learned = [c for c in f.get("learned_capacity") or [] if c]
            md.append("| %s | %.3f | %.3f | %s | %s | %s | %s | %s | %s "
                      "| %s | %s | %s | %s |\n" % (
                          BALANCERS[b].title, r["hit_rate"], r["hit_vs_bound"],
                          fmt(r["ttft_p50_ms"]), fmt(r["ttft_p90_ms"]),
                          fmt(r["ttft_p99_ms"]), fmt(f.get("agreed"), "%.3f"),
                          fmt(f.get("predicted"), "%.3f"),
                          fmt(f.get("reported"), "%.3f"),
                          fmt(f.get("under"), "%d"), fmt(f.get("over"), "%d"),
                          fmt(f.get("dropped"), "%d"),
                          fmt(sum(learned) / len(learned) / cache
                              if learned else None, "%.2f")))
        md.append("\n")

        def hit(b):
            return rows[b]["hit_rate"] if b in rows else None

        if "prefix_route_cap4_correct" in rows:
            checks.append(("%s, capacity= 4x too large: hit rate with "
                           "feedback=correct >= 0.95 x the bound" % wl,
                           rows["prefix_route_cap4_correct"]["hit_vs_bound"]
                           >= 0.95,
                           "%.3f (without corrections %.3f)" % (
                               rows["prefix_route_cap4_correct"]
                               ["hit_vs_bound"],
                               rows["prefix_route_cap4"]["hit_vs_bound"])))
        if "prefix_route_x3" in rows:
            v = hit("prefix_route_x3") / hit("prefix_route")
            checks.append(("%s, 3 nginx instances with feedback "
                           "(feedback=correct works as on there): >= 0.95 x "
                           "one instance's hit rate" % wl, v >= 0.95,
                           "%.3f" % v))
        if wl in ("multi-turn", "multi-turn-evict", "shared-prefix"):
            # feedback=on reads and changes nothing: a capacity too large
            # stays so; feedback=correct learns the engines' own
            for b in ("prefix_route", "prefix_route_cap4",
                      "prefix_route_cap4_correct"):
                f = (rows.get(b) or {}).get("feedback") or {}
                if f.get("agreed") is not None:
                    checks.append(("%s, %s: predictions within one block "
                                   ">= 0.9" % (wl, BALANCERS[b].title),
                                   f["agreed"] >= 0.9,
                                   "%.3f of %d" % (f["agreed"],
                                                   f["responses"])))
    if out.get("restart"):
        md.append("## One backend restarted mid-run (multi-turn)\n\n"
                  "b1's cache is wiped (POST /sim/restart) 13 s into the "
                  "multi-turn run. *Requests to recover*: b1's requests "
                  "after the restart until the hit rate of its last 20 is "
                  "back to 90% of its rate before.\n\n"
                  "| balancer | b1 hit rate before | requests to recover "
                  "| b1 requests after | run hit rate |\n"
                  "| --- | --- | --- | --- | --- |\n")
        for b, r in out["restart"].items():
            md.append("| %s | %.3f | %s | %d | %.3f |\n" % (
                BALANCERS[b].title, r["hit_before"],
                fmt(r["requests_to_recover"], "%d"), r["requests_after"],
                r["hit_rate"]))
        md.append("\n")
    md.append("## Targets\n\n| target | | measured |\n"
              "| --- | --- | --- |\n")
    for what, ok, txt in checks:
        md.append("| %s | %s | %s |\n" % (what, "met" if ok else "missed",
                                           txt))
    return "".join(md)


def cmd_report(a):
    """bench.md and the plots again, from bench.json."""
    with open(os.path.join(a.out, "bench.json")) as f:
        summary = json.load(f)
    write_report(summary, a.out)
    made = plots(summary, a.out)
    print("rewrote %s/bench.md%s" % (os.path.relpath(a.out), "".join(
        ", " + os.path.basename(p) for p in made)))
    return 0


def cmd_estimate(a):
    for path in a.workload:
        if path in WORKLOADS:
            # a workload of the bench by name: its file, generated if needed
            spec = workload_spec(path, a)
            if spec is None:
                return 1
            path = generate(path, spec, quiet=True)
        elif not os.path.exists(path):
            raise RuntimeError("%s: neither a file nor a workload of the "
                               "bench (%s)" % (path, ", ".join(WORKLOADS)))
        r = replay_caches(path, a.backends, kv_blocks=a.kv_blocks,
                          overhead_ms=a.overhead_ms,
                          us_per_token=a.us_per_token)
        span = r["span_s"]
        print(json.dumps({
            "workload": path, "requests": r["requests"],
            "arrival_span_s": round(span, 1),
            "round_robin_hit_rate": round(r["hit_rate"], 4),
            "prefill_work_s": round(r["work_s"], 1),
            "work_per_request_ms": round(
                1e3 * r["work_s"] / r["requests"], 1),
            "round_robin_utilisation": round(
                r["work_s"] / (a.backends * span), 3) if span else None}))
    return 0


def main():
    p = argparse.ArgumentParser(
        description="prefix_route benchmark: make bench, make demo.")
    sub = p.add_subparsers(dest="cmd", required=True)

    def common(sp):
        sp.add_argument("--module", default=os.path.join(
            TOP, "objs", "ngx_http_prefix_route_module.so"))
        sp.add_argument("--nginx", default=os.environ.get(
            "NGINX_BIN", "/usr/sbin/nginx"))
        sp.add_argument("--out", default=RESULTS,
                        help="results directory")

    sp = sub.add_parser("bench", help="the whole benchmark (make bench)")
    common(sp)
    sp.add_argument("--workloads", default=",".join(BENCH_WORKLOADS))
    sp.add_argument("--balancers", default=",".join(BENCH_BALANCERS))
    sp.add_argument("--port-base", type=int, default=21000,
                    help="nginx on PORT..PORT+2, backends from PORT+10")
    sp.add_argument("--hotspot", action=argparse.BooleanOptionalAction,
                    default=True, help="the hotspot runs too")
    sp.add_argument("--trace", default=MOONCAKE,
                    help="the Mooncake JSONL trace of the mooncake "
                         "workloads (skipped when absent)")
    sp.add_argument("--merge", action="store_true",
                    help="keep the other workloads (and balancers) of the "
                         "existing bench.json")
    sp.add_argument("--keep", action="store_true",
                    help="keep the run directory (configurations, logs)")
    sp.add_argument("--records", action="store_true",
                    help="with --keep: every request's record in the run "
                         "directory (records.jsonl)")

    sp = sub.add_parser("hotspot", help="concurrent identical prompts: the "
                                        "busiest server's share")
    common(sp)
    sp.add_argument("--balancers", default="cache_aware,prefix_route")
    sp.add_argument("--port-base", type=int, default=21000)
    sp.add_argument("--json", help="write the figures here")

    sp = sub.add_parser("demo", help="make demo")
    common(sp)
    sp.add_argument("--port", type=int, default=18480,
                    help="nginx on PORT, backends on the next 4")
    sp.add_argument("--pidfile", help="append every PID started here")
    sp.add_argument("--workdir", help="scratch directory (default: new "
                                      "one under /tmp)")

    sp = sub.add_parser("feedback", help="with and without feedback=correct "
                                         "(make bench-feedback)")
    common(sp)
    sp.add_argument("--port-base", type=int, default=21000)
    sp.add_argument("--trace", default=MOONCAKE)
    sp.add_argument("--workloads",
                    default=",".join(wl for wl, _ in FEEDBACK_RUNS))

    sp = sub.add_parser("probes", help="with and without "
                                       "prefix_route_probe (make "
                                       "bench-probes)")
    common(sp)
    sp.add_argument("--port-base", type=int, default=21000)
    sp.add_argument("--trace", default=MOONCAKE)
    sp.add_argument("--probe-interval", type=float, default=PROBE_INTERVAL_S,
                    help="prefix_route_probe's interval, seconds of model "
                         "time")
    sp.add_argument("--workloads", default=",".join(PROBE_WORKLOADS))
    sp.add_argument("--direct", action=argparse.BooleanOptionalAction,
                    default=True, help="the direct-load runs too")
    sp.add_argument("--repeats", type=at_least_one, default=PROBE_REPEATS,
                    help="runs of each direct-load row, alternating with "
                         "and without probes; the median p90's is shown")
    sp.add_argument("--x3", action=argparse.BooleanOptionalAction,
                    default=True, help="the 3-instance runs too")
    sp.add_argument("--restart", action=argparse.BooleanOptionalAction,
                    default=True, help="the restart runs too")

    sp = sub.add_parser("serve", help="replay a workload through a "
                                      "balancer, then run a command while "
                                      "the fleet still runs, with "
                                      "PREFIX_ROUTE_STATUS_URL set")
    common(sp)
    sp.add_argument("--balancer", default="shadow", choices=BALANCERS)
    sp.add_argument("--workload", default="multi-turn-light",
                    choices=[w for w in WORKLOADS
                             if not WORKLOADS[w].get("trace")])
    sp.add_argument("--time-scale", type=float,
                    help="wall s a model s (default: the workload's)")
    sp.add_argument("--settle", type=float, default=11.0,
                    help="wall s between the replay and the command")
    sp.add_argument("--port-base", type=int, default=21000)
    sp.add_argument("command", nargs=argparse.REMAINDER)

    sp = sub.add_parser("report", help="bench.md and the plots again from "
                                       "bench.json")
    sp.add_argument("--out", default=RESULTS, help="results directory")

    sp = sub.add_parser("estimate", help="round robin's prefill load of a "
                                         "workload, from the simulator's "
                                         "cost model (nothing is run)")
    sp.add_argument("workload", nargs="+",
                    help="JSONL files, or workloads of the bench by name")
    sp.add_argument("--trace", default=MOONCAKE)
    sp.add_argument("--backends", type=int, default=BACKENDS)
    sp.add_argument("--kv-blocks", type=int, default=KV_BLOCKS)
    sp.add_argument("--overhead-ms", type=float, default=20.0)
    sp.add_argument("--us-per-token", type=float, default=35.0)

    a = p.parse_args()
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    if a.cmd in ("bench", "demo", "hotspot", "feedback", "serve"):
        a.module = os.path.abspath(a.module)
        if not os.path.exists(a.module):
            raise SystemExit("no module at %s: run make first" % a.module)
    try:
        return {"bench": cmd_bench, "demo": cmd_demo, "report": cmd_report,
                "estimate": cmd_estimate, "hotspot": cmd_hotspot,
                "feedback": cmd_feedback, "probes": cmd_probes,
                "serve": cmd_serve}[a.cmd](a)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print("%s: %s" % (a.cmd, e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
