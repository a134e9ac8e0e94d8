"""bench/cold's client (see run).

load.py URL SECONDS CLIENTS: closed-loop multi-turn chat, each
conversation 2-6 turns behind one shared 1.2 KB system prompt, streamed
with usage; prints "ttft_ms=P50/P90 errors=E" (wall ms to the first
line of the answer).

load.py --stats FILE PORT...: saves each simulated engine's /sim/stats;
load.py --stats FILE: prints "requests=R/R/... hit=H busy=B" for the
time since (requests, prefix cache hit rate, prefill busy max/mean).
"""

import json
import random
import sys
import threading
import time
import urllib.request

SYSTEM = ("You are a helpful assistant for the Contoso fleet. "
          + "Follow the policy carefully. " * 40)


def stats(port):
    url = "http://127.0.0.1:%s/sim/stats" % port
    return json.load(urllib.request.urlopen(url))


def compare(path):
    before = json.load(open(path))
    req, busy, queries, hits = [], [], 0, 0
    for port, a in before.items():
        b = stats(port)
        req.append(b["requests"] - a["requests"])
        busy.append(b["prefill_busy_s"] - a["prefill_busy_s"])
        queries += b["prefix_cache_queries"] - a["prefix_cache_queries"]
        hits += b["prefix_cache_hits"] - a["prefix_cache_hits"]
    mean = sum(busy) / len(busy)
    print("requests=%s hit=%.3f busy=%.2f"
          % ("/".join(map(str, req)), hits / max(queries, 1),
             max(busy) / mean if mean else 0))


def client(url, stop, seed, ttfts, errors):
    rnd = random.Random(seed)
    n = 0
    while time.time() < stop:
        msgs = [{"role": "system", "content": SYSTEM}]
        for turn in range(rnd.randint(2, 6)):
            msgs.append({"role": "user",
                         "content": "c%d.%d t%d %f" % (seed, n, turn,
                                                        rnd.random())})
            body = {"model": "meta-llama/Meta-Llama-3-8B-Instruct",
                    "max_tokens": 10, "messages": msgs, "stream": True,
                    "stream_options": {"include_usage": True}}
            req = urllib.request.Request(
                url, data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"})
            try:
                t0 = time.time()
                with urllib.request.urlopen(req, timeout=30) as r:
                    r.readline()
                    ttfts.append(time.time() - t0)
                    data = r.read().decode()
            except Exception:
                errors.append(1)
                break
            text = "".join(c.get("delta", {}).get("content") or ""
                           for line in data.splitlines()
                           if line.startswith("data: {")
                           for c in json.loads(line[6:])["choices"])
            msgs.append({"role": "assistant", "content": text})
        n += 1


def main():
    if sys.argv[1] == "--stats":
        if len(sys.argv) == 3:
            compare(sys.argv[2])
        else:
            json.dump({p: stats(p) for p in sys.argv[3:]},
                      open(sys.argv[2], "w"))
        return
    url, seconds, clients = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    stop = time.time() + seconds
    ttfts, errors = [], []
    threads = [threading.Thread(target=client,
                                args=(url, stop, 1000 + i, ttfts, errors))
               for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ttfts.sort()

    def q(p):
        return 1000 * ttfts[min(len(ttfts) - 1, int(p * len(ttfts)))]

    print("ttft_ms=%.1f/%.1f errors=%d" % (q(.5), q(.9), len(errors)))


if __name__ == "__main__":
    main()
