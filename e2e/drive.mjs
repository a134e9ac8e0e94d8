// e2e/drive.mjs: the official SDKs through nginx (make e2e, make demo
// ENGINE=llama).
//
//   node e2e/drive.mjs shared-prefix URL [--clients 3]
//   node e2e/drive.mjs multi-turn URL [--clients 3]
//   node e2e/drive.mjs sdk URL
//
// shared-prefix: 4 system prompts of ~4,500 tokens x 10 questions,
// interleaved; multi-turn: 9 conversations of 6 turns whose system prompts
// (~1,200 tokens) open with one ~300-token preamble, each turn adding a
// ~130-token question and the answer; --clients run concurrently, each taking the next request
// (shared-prefix) or its own conversations in turn (multi-turn).  Streamed
// chat with usage, 8 output tokens.  Prints one JSON line: requests and
// errors, engine-reported hit rate (cached / prompt tokens), client TTFT
// (ms, to the first streamed chunk) p50/mean/p90, requests mostly uncached
// (cached < half the prompt), and the servers (X-Upstream, set by nginx)
// of each system prompt or conversation.
// sdk: chat, legacy completions, Responses and Anthropic Messages, each
// streamed and not, and a 3-turn conversation; prints the calls that
// failed and how many servers the conversation's turns went to.  Then
// llama-server's native /completion (no SDK): one prompt twice, the
// servers it went to, the share of the second that the server reported
// cached (timings), and how many responses the module's status counted
// meanwhile and how many of them agreed with the prediction (null
// without a status page); then the same for a prompt of token ids, as RL
// rollout frameworks send them.

import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const [mode, url, ...rest] = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = rest.indexOf("--" + name);
  return i >= 0 ? Number(rest[i + 1]) : dflt;
};
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "none", maxRetries: 0 });
const MODEL = "e2e";

// n deterministic words, ~3 tokens each in Llama 3's tokenizer
function words(seed, n) {
  let x = seed >>> 0 || 1;
  const out = [];
  for (let i = 0; i < n; i++) {
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
  let ttft = null, usage = null, text = "";
  for await (const chunk of stream) {
    if (ttft === null && chunk.choices?.length) ttft = performance.now() - t0;
    text += chunk.choices?.[0]?.delta?.content ?? "";
    if (chunk.usage) usage = chunk.usage;
  }
  return { ttft, usage, text, server: response.headers.get("x-upstream") };
}

// Runs tasks[c] (a list of async functions) for each client c at once;
// gathers usage, TTFT and server per group; a failed request is counted,
// not retried.
async function run(tasks, groups) {
  let prompt = 0, cached = 0, uncached = 0, errors = 0;
  const ttfts = [], servers = Array.from({ length: groups }, () => new Set());
  await Promise.all(tasks.map(async (next) => {
    for (let t = next(); t; t = next()) {
      let r;
      try { r = await chatStream(t.messages()); } catch (e) {
        errors++;
        console.error("request failed: " + e.message);
        continue;
      }
      const p = r.usage?.prompt_tokens ?? 0;
      const c = r.usage?.prompt_tokens_details?.cached_tokens ?? 0;
      prompt += p; cached += c;
      if (c < p / 2) uncached++;
      ttfts.push(r.ttft);
      servers[t.group].add(r.server);
      t.done?.(r);
    }
  }));
  // every request failed: no figures (null), which report.py fails on
  const ms = (x) => (x === null || Number.isNaN(x) ? null : +x.toFixed(1));
  const mean = ttfts.reduce((a, b) => a + b, 0) / ttfts.length;
  console.log(JSON.stringify({
    requests: ttfts.length + errors, errors,
    hit_rate: prompt ? +(cached / prompt).toFixed(3) : null,
    ttft_ms: { p50: ms(pct(ttfts, 0.5)), mean: ms(mean),
               p90: ms(pct(ttfts, 0.9)) },
    mostly_uncached: uncached,
    servers_per_group: servers.map((s) => s.size) }));
}

async function sharedPrefix() {
  const G = 4, Q = 10, C = opt("clients", 3);
  const systems = Array.from({ length: G }, (_, g) => words(1000 + g, 1500));
  const queue = [];
  for (let q = 0; q < Q; q++) {
    for (let g = 0; g < G; g++) {
      const question = words(50000 + g * 100 + q, 20);
      queue.push({ group: g, messages: () => [
        { role: "system", content: systems[g] },
        { role: "user", content: question }] });
    }
  }
  const next = () => queue.shift();
  await run(Array.from({ length: C }, () => next), G);
}

async function multiTurn() {
  const N = 9, T = 6, C = opt("clients", 3);
  // the preamble is a quarter of the system prompt: llama-server keeps one
  // prompt a slot and saves it to its prompt cache only when the next
  // prompt would keep less than half of it (e2e/README.md)
  const preamble = words(3000, 100);
  const convs = Array.from({ length: N }, (_, n) => ({ turn: 0, messages: [
    { role: "system", content: preamble + " " + words(3100 + n, 300) }] }));
  // client c holds conversations c, c + C, ...; it asks their turns in
  // rotation, so a conversation's turns are apart in time
  const tasks = Array.from({ length: C }, (_, c) => {
    const mine = convs.filter((_, n) => n % C === c);
    let i = 0;
    return () => {
      for (let k = 0; k < mine.length; k++) {
        const conv = mine[(i + k) % mine.length];
        if (conv.turn < T) {
          i = (i + k + 1) % mine.length;
          const n = convs.indexOf(conv);
          conv.messages.push({ role: "user",
                               content: words(4000 + n * 10 + conv.turn, 40) });
          conv.turn++;
          return { group: n, messages: () => conv.messages,
                   done: (r) => conv.messages.push(
                     { role: "assistant", content: r.text || "." }) };
        }
      }
      return null;
    };
  });
  await run(tasks, N);
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
  let native = null, tokens = null;
  try { native = await nativeCompletion(words(11, 600)); } catch (e) { failed.push("native: " + e.message); }
  // ids well inside Llama 3's vocabulary of 128,256 (e2e/model.py)
  const ids = Array.from({ length: 600 }, (_, i) => 1000 + 7 * i);
  try { tokens = await nativeCompletion(ids); } catch (e) { failed.push("native token ids: " + e.message); }
  console.log(JSON.stringify({ calls: Object.keys(checks).length, failed,
                               conversation_servers: conversation, native,
                               tokens }));
  process.exitCode = failed.length ? 1 : 0;
}

// the responses the status page counted, and those whose cached tokens
// agreed with the prediction, or null without a status page
async function fedBack() {
  const r = await fetch(url + "/status");
  if (!r.ok) return null;
  const st = await r.json();
  const peers = st.upstreams.flatMap((u) => u.peers);
  return { read: peers.reduce((n, p) => n + p.feedback_responses, 0),
           agreed: peers.reduce((n, p) => n + p.feedback_agreed, 0) };
}

async function nativeCompletion(prompt) {
  const before = await fedBack();
  const servers = new Set();
  let timings = null;
  for (let i = 0; i < 2; i++) {
    const r = await fetch(url + "/completion", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt, n_predict: 4 }) });
    if (!r.ok) throw new Error("/completion: HTTP " + r.status);
    servers.add(r.headers.get("x-upstream"));
    timings = (await r.json()).timings;
  }
  const after = await fedBack();
  const known = before !== null && after !== null;
  return { servers: servers.size,
           cached: timings.cache_n / (timings.cache_n + timings.prompt_n),
           fed_back: known ? after.read - before.read : null,
           agreed: known ? after.agreed - before.agreed : null };
}

const modes = { "shared-prefix": sharedPrefix, "multi-turn": multiTurn, sdk };
if (!modes[mode]) {
  console.error("usage: drive.mjs shared-prefix|multi-turn|sdk URL [--clients N]");
  process.exit(2);
}
await modes[mode]();
