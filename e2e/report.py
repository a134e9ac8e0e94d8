"""e2e/report.py MODE RESULTS.json E2E.md: the figures of e2e/run.

MODE check: prints and writes E2E.md (bench/results/e2e.md) with issue
11's pass criteria, and exits 1 when one fails; MODE demo: prints the
comparison only.  RESULTS maps balancer -> workload -> e2e/drive.mjs's
JSON line (null when drive.mjs printed nothing), and upstream_errors, the
attempts nginx logged as failed (and retried on another server).
"""

import datetime
import json
import sys

WORKLOADS = ("shared-prefix", "multi-turn")


def table(r):
    out = ["| balancer | workload | hit rate | TTFT p50 | mean | p90 "
           "| mostly uncached | servers per group | errors |\n",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"]
    for b, ws in r.items():
        for w in WORKLOADS:
            x = ws.get(w)
            if x is None:
                continue
            t = x["ttft_ms"]
            out.append("| %s | %s | %.3f | %.0f | %.0f | %.0f | %d of %d "
                       "| %s | %d |\n"
                       % (b, w, x["hit_rate"], t["p50"], t["mean"], t["p90"],
                          x["mostly_uncached"], x["requests"],
                          x["servers_per_group"], x["errors"]))
    return out


def checks(r):
    rr, pr = r["round_robin"], r["prefix_route"]
    out = []
    for w in WORKLOADS:
        a, b = pr[w], rr[w]
        out.append(("%s: prefix_route's hit rate >= round robin's + 0.15" % w,
                    a["hit_rate"] >= b["hit_rate"] + 0.15,
                    "%.3f vs %.3f" % (a["hit_rate"], b["hit_rate"])))
        ratio = a["ttft_ms"]["mean"] / b["ttft_ms"]["mean"]
        out.append(("%s: prefix_route's mean TTFT <= 0.7 x round robin's" % w,
                    ratio <= 0.7,
                    "%.0f vs %.0f ms (%.2f)" % (a["ttft_ms"]["mean"],
                                                b["ttft_ms"]["mean"], ratio)))
    out.append(("no request failed (3 concurrent clients, upstream "
                "keepalive on; attempts retried: %s)"
                % {k: ws["upstream_errors"] for k, ws in r.items()},
                all(x["errors"] == 0 for ws in r.values() for w, x in
                    ws.items() if w in WORKLOADS),
                "%d requests" % sum(x["requests"] for ws in r.values()
                                    for w, x in ws.items()
                                    if w in WORKLOADS)))
    out.append(("every SDK call succeeds",
                all(not ws["sdk"]["failed"] for ws in r.values()),
                "; ".join("%s: %s" % (k, ws["sdk"]["failed"])
                          for k, ws in r.items() if ws["sdk"]["failed"])
                or "all %d calls, every balancer" % pr["sdk"]["calls"]))
    peers = [p for u in pr["status"]["upstreams"] for p in u["peers"]]
    out.append(("prefix_route_probe read every llama-server's /metrics, "
                "none failed",
                all("engine" in p and p["probe_failures"] == 0
                    and p["state"] == "up" for p in peers),
                "; ".join("%s: %s, %d failed" % (
                    p["name"], "read %d ms before the end" %
                    p["engine"]["age_ms"] if "engine" in p else "not read",
                    p["probe_failures"]) for p in peers)))
    nat = {k: ws["sdk"]["native"] for k, ws in r.items()}
    out.append(("llama-server's native /completion, one prompt twice: one "
                "server, and both answers' timings read (prefix_route, "
                "cache_aware)",
                all(nat[k] and nat[k]["servers"] == 1
                    and nat[k]["fed_back"] == 2
                    for k in ("prefix_route", "cache_aware")),
                "; ".join("%s: %s" % (k, "failed" if not n else
                                      "%d server(s), %.2f of the second "
                                      "cached, %s answer(s) read"
                                      % (n["servers"], n["cached"],
                                         n["fed_back"]))
                          for k, n in nat.items())))
    tok = {k: ws["sdk"].get("tokens") for k, ws in r.items()}
    out.append(("llama-server's native /completion, one prompt of token "
                "ids twice: one server, the second at least 0.9 cached, "
                "and both answers' cached tokens within one block of the "
                "prediction, the ids counted (prefix_route, cache_aware)",
                all(tok[k] and tok[k]["servers"] == 1
                    and tok[k]["cached"] >= 0.9
                    and tok[k].get("fed_back") == 2
                    and tok[k].get("agreed") == 2
                    for k in ("prefix_route", "cache_aware")),
                "; ".join("%s: %s" % (k, "failed" if not n else
                                      "%d server(s), %.2f of the second "
                                      "cached, %s answer(s) read, %s "
                                      "agreed"
                                      % (n["servers"], n["cached"],
                                         n.get("fed_back"), n.get("agreed")))
                          for k, n in tok.items())))
    conv = {k: ws["sdk"]["conversation_servers"] for k, ws in r.items()}
    out.append(("every turn of the SDK conversation on one server "
                "(prefix_route, cache_aware)",
                all(conv[k] == 1 for k in ("prefix_route", "cache_aware")),
                "servers: %s" % conv))
    return out


def feedback(ws):
    """The engine's usage against the index's prediction, from the status
    of a prefix_route run: responses whose cached tokens were within one block of
    the prediction, and predicted and reported cached tokens over the
    prompt tokens reported (token-weighted)."""
    peers = [p for u in ws["status"]["upstreams"] for p in u["peers"]]
    n = sum(p["feedback_responses"] for p in peers)
    prompt = sum(p["reported_prompt_tokens"] for p in peers)
    if not n or not prompt:
        return None
    return {"responses": n,
            "agreed": sum(p["feedback_agreed"] for p in peers) / n,
            "predicted": sum(p["predicted_cached_tokens"] for p in peers)
            / prompt,
            "reported": sum(p["reported_cached_tokens"] for p in peers)
            / prompt,
            "under": sum(p["feedback_under"] for p in peers),
            "over": sum(p["feedback_over"] for p in peers),
            "dropped": sum(p["feedback_dropped"] for p in peers),
            "models": ws["status"]["upstreams"][0]["models"]}


def moves(r):
    """Conversations of the multi-turn workload that changed server, by
    balancer: prefix_route moves one when its server's queue would cost
    more than recomputing it elsewhere (README.md, "How it chooses")."""
    return {k: sum(n - 1 for n in ws["multi-turn"]["servers_per_group"])
            for k, ws in r.items()}


def main():
    mode, path, md_path = sys.argv[1:4]
    r = json.load(open(path))
    missing = [(b, w) for b, ws in r.items() for w, x in ws.items()
               if x is None and w not in ("upstream_errors", "status")]
    if missing:
        print("e2e: no figures from %s" % missing)
        return 1
    if mode == "demo":
        print("".join(table(r)))
        a, b = r["prefix_route"]["multi-turn"], r["round_robin"]["multi-turn"]
        print("prefix_route: hit rate %.3f vs round robin's %.3f, mean TTFT "
              "%.2f x round robin's" % (a["hit_rate"], b["hit_rate"],
                                        a["ttft_ms"]["mean"]
                                        / b["ttft_ms"]["mean"]))
        return 0
    cs = checks(r)
    md = ["# make e2e: llama.cpp behind nginx\n\n",
          "Written by `make e2e` (e2e/run) on %s: 3 llama-servers built from "
          "node-llama-cpp's llama.cpp bundle, a random-weight 8-layer Llama "
          "(e2e/model.py), nginx with 2 workers and upstream keepalive; the "
          "official SDKs (e2e/drive.mjs) from 3 concurrent clients. Hit "
          "rate: cached / prompt tokens as the servers reported them; TTFT: "
          "client wall ms to the first streamed chunk; a group is a system "
          "prompt (shared-prefix) or a conversation (multi-turn).\n\n"
          % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")]
    md += table(r)
    md.append("\nServer changes within the multi-turn conversations (not a "
              "pass criterion: under 3 concurrent clients on single-slot "
              "servers, prefix_route moves a conversation when its "
              "server's queue costs more than recomputing it): %s.\n"
              % moves(r))
    for k, ws in r.items():
        f = ws.get("status") and feedback(ws)
        if f:
            md.append("\nFeedback (%s, all workloads): %d responses reported "
                      "cached tokens; %.0f%% within one block of the index's "
                      "prediction; cached tokens predicted %.3f of the "
                      "prompt tokens, reported %.3f; %d held less than "
                      "predicted, %d more; %d index entries dropped; bytes "
                      "of prompt a token: %s.\n"
                      % (k, f["responses"], 100 * f["agreed"], f["predicted"],
                         f["reported"], f["under"], f["over"], f["dropped"],
                         ", ".join("%s %s" % (m["name"] or "(no model: "
                                              "native /completion)",
                                              m["bytes_per_token"])
                                   for m in f["models"])))
    md.append("\n| check | | measured |\n| --- | --- | --- |\n")
    for what, ok, txt in cs:
        md.append("| %s | %s | %s |\n"
                  % (what, "met" if ok else "**failed**", txt))
    open(md_path, "w").write("".join(md))
    print("".join(md))
    return 0 if all(ok for _, ok, _ in cs) else 1


if __name__ == "__main__":
    sys.exit(main())
