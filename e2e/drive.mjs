// e2e/drive.mjs: the official SDKs through nginx (make e2e).
//
//   node e2e/drive.mjs workload URL [--groups 4 --questions 10]
//   node e2e/drive.mjs sdk URL
//
// workload: G system prompts of ~1,500 tokens x Q questions, interleaved
// (one client, one request at a time), streamed chat with usage, 8 output
// tokens; prints one JSON line: engine-reported hit rate (cached / prompt
// tokens), client TTFT (ms, to the first streamed chunk) p50/mean/p90,
// requests mostly uncached (cached < half the prompt), and the server of
// each request (X-Upstream, set by nginx) per group.
// sdk: chat, legacy completions, Responses and Anthropic Messages, each
// streamed and not, and a 3-turn conversation; prints the calls that
// failed and how many servers the conversation's turns went to.

import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const [mode, url, ...rest] = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = rest.indexOf("--" + name);
  return i >= 0 ? Number(rest[i + 1]) : dflt;
};
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "none", maxRetries: 0 });
const MODEL = "e2e";

// deterministic words: ~4 characters a token
function words(seed, tokens) {
  let x = seed >>> 0 || 1;
  const out = [];
  for (let i = 0; i < tokens; i++) {
    x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0;
    out.push("w" + (x % 5000).toString(36));
  }
  return out.join(" ");
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor((s.length - 1) * p))] : null;
}

async function chatStream(messages) {
  const t0 = performance.now();
  const { data: stream, response } = await openai.chat.completions
    .create({ model: MODEL, messages, max_tokens: 8, stream: true,
              stream_options: { include_usage: true } })
    .withResponse();
  let ttft = null, usage = null;
  for await (const chunk of stream) {
    if (ttft === null && chunk.choices?.length) ttft = performance.now() - t0;
    if (chunk.usage) usage = chunk.usage;
  }
  return { ttft, usage, server: response.headers.get("x-upstream") };
}

async function workload() {
  const G = opt("groups", 4), Q = opt("questions", 10);
  const systems = Array.from({ length: G }, (_, g) => words(1000 + g, 1500));
  let prompt = 0, cached = 0, uncached = 0;
  const ttfts = [], servers = Array.from({ length: G }, () => new Set());
  for (let q = 0; q < Q; q++) {
    for (let g = 0; g < G; g++) {
      const r = await chatStream([
        { role: "system", content: systems[g] },
        { role: "user", content: words(50000 + g * 100 + q, 20) }]);
      const p = r.usage?.prompt_tokens ?? 0;
      const c = r.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      prompt += p; cached += c;
      if (c < p / 2) uncached++;
      ttfts.push(r.ttft);
      servers[g].add(r.server);
    }
  }
  const mean = ttfts.reduce((a, b) => a + b, 0) / ttfts.length;
  console.log(JSON.stringify({
    requests: G * Q, hit_rate: prompt ? +(cached / prompt).toFixed(3) : null,
    ttft_ms: { p50: +pct(ttfts, 0.5).toFixed(1), mean: +mean.toFixed(1),
               p90: +pct(ttfts, 0.9).toFixed(1) },
    mostly_uncached: uncached,
    servers_per_group: servers.map((s) => s.size) }));
}

async function sdk() {
  const anthropic = new Anthropic({ baseURL: url, apiKey: "none", maxRetries: 0 });
  const sys = words(7, 300);
  const checks = {
    "chat": () => openai.chat.completions.create({ model: MODEL, max_tokens: 4,
      messages: [{ role: "system", content: sys }, { role: "user", content: "hi" }] }),
    "chat stream": () => chatStream([{ role: "system", content: sys },
                                     { role: "user", content: "hi" }]),
    "completions": () => openai.completions.create({ model: MODEL, prompt: sys, max_tokens: 4 }),
    "completions stream": async () => {
      const s = await openai.completions.create({ model: MODEL, prompt: sys, max_tokens: 4, stream: true });
      for await (const _ of s) { /* drain */ }
    },
    "responses": () => openai.responses.create({ model: MODEL, instructions: sys,
      input: "hi", max_output_tokens: 4 }),
    "responses stream": async () => {
      const s = await openai.responses.create({ model: MODEL, instructions: sys,
        input: "hi", max_output_tokens: 4, stream: true });
      for await (const _ of s) { /* drain */ }
    },
    "messages": () => anthropic.messages.create({ model: MODEL, max_tokens: 4,
      system: sys, messages: [{ role: "user", content: "hi" }] }),
    "messages stream": async () => {
      const s = await anthropic.messages.create({ model: MODEL, max_tokens: 4,
        system: sys, messages: [{ role: "user", content: "hi" }], stream: true });
      for await (const _ of s) { /* drain */ }
    },
    "conversation": async () => {
      const m = [{ role: "system", content: words(8, 800) }];
      const seen = new Set();
      for (let t = 0; t < 3; t++) {
        m.push({ role: "user", content: words(900 + t, 30) });
        const r = await openai.chat.completions.create({ model: MODEL, max_tokens: 4, messages: m })
          .withResponse();
        seen.add(r.response.headers.get("x-upstream"));
        m.push({ role: "assistant", content: r.data.choices[0].message.content || "." });
      }
      conversation = seen.size;
    },
  };
  const failed = [];
  let conversation = null;
  for (const [name, fn] of Object.entries(checks)) {
    try { await fn(); } catch (e) { failed.push(name + ": " + e.message); }
  }
  console.log(JSON.stringify({ calls: Object.keys(checks).length, failed,
                               conversation_servers: conversation }));
  process.exitCode = failed.length ? 1 : 0;
}

await (mode === "sdk" ? sdk() : workload());
