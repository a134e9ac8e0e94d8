-- wrk script of t/stress/soak: a mix of LLM request bodies, optionally
-- paced to a fixed rate.  Each thread cycles through 20 slots:
--
--   hot       7 of 20  one of 4 long system prompts (3 to 6 KB) shared by
--                      every thread, then a distinct short question;
--                      Chat Completions, Anthropic Messages (top-level
--                      "system") and Responses ("instructions") bodies
--   conv      6 of 20  multi-turn conversations: 48 per thread, taken in
--                      turn, each request the whole conversation so far
--                      plus one more user turn (the assistant turns are
--                      made up); after 12 turns a conversation starts anew;
--                      half of them behind one of the hot system prompts
--   distinct  5 of 20  a new prompt (about 1.5 KB) every time, also as
--                      legacy Completions ("prompt")
--   hostile   2 of 20  bodies the module must decline or read oddly, the
--                      variants of HOSTILE below in turn: not JSON,
--                      truncated, deeply nested, huge strings, wrong types,
--                      bad UTF-8, NUL bytes, empty: each must still be
--                      proxied and answered 200
--
-- Environment:
--   SOAK_RATE     responses a second for the whole run, shared by the
--                 threads (0 or absent: as fast as possible).  The pacing:
--                 each thread keeps a schedule of send times one interval
--                 apart; wrk calls delay() before each request of a
--                 connection, and the request takes the next free slot, so
--                 that the thread sends at the rate as long as it has an
--                 idle connection (with too few connections, or an
--                 overloaded nginx, it falls behind, as a closed loop would:
--                 a schedule more than 1 s late is restarted from now, no
--                 burst to catch up).  Like wrk2 without its latency
--                 correction.
--   SOAK_THREADS  wrk's -t (1), to share the rate
--   SOAK_TAG      a word in every prompt, so that two runs differ ("soak")
--   SOAK_CLOSE    1: "Connection: close", a connection a request
--   SOAK_HOSTILE  0: no hostile bodies, distinct prompts in their slots
--
-- Every request carries "X-Soak: KIND" (hot, conv, distinct, or h-VARIANT
-- for a hostile body), for the logs of nginx.  done() prints one line:
-- "SOAKSTAT requests=N generated=N ... not200=N gen_hot=N ...".  No prompt
-- text is printed.

local ffi = require("ffi")

local rate = tonumber(os.getenv("SOAK_RATE") or "0")
local nthreads = tonumber(os.getenv("SOAK_THREADS") or "1")
local tag = os.getenv("SOAK_TAG") or "soak"
local hostile_on = os.getenv("SOAK_HOSTILE") ~= "0"

local words = {
    "the", "model", "reads", "a", "prompt", "and", "answers", "with",
    "tokens", "from", "its", "cache", "when", "prefix", "is", "known",
    "server", "queue", "block", "hash", "chain", "of", "bytes", "index",
    "route", "balance", "load", "request", "reply", "stream", "batch",
    "kernel", "memory", "page", "attention", "layer", "weight", "shard",
}

-- text of about n bytes from seed, plain ASCII (no JSON escapes needed)
local function text(seed, n)
    local t, len, x = {}, 0, seed % 2147483647 + 1
    while len < n do
        x = (x * 48271) % 2147483647
        local w = words[x % #words + 1]
        t[#t + 1] = w
        len = len + #w + 1
    end
    return table.concat(t, " ")
end

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    thread:set("tid", #threads)
end

local headers = { ["Content-Type"] = "application/json" }
if os.getenv("SOAK_CLOSE") == "1" then
    headers["Connection"] = "close"
end

-- the 20 slots of a cycle
local slots = {
    "hot", "conv", "distinct", "hot", "conv", "hot", "distinct", "conv",
    "hostile", "hot", "conv", "distinct", "hot", "conv", "distinct", "hot",
    "conv", "distinct", "hot", "hostile",
}

local systems = {}
local convs = {}
local nconv = 48
local turns = 12
local hostile = {}

local function q(s)
    return '"' .. s .. '"'
end

local function msg(role, content)
    return '{"role":"' .. role .. '","content":"' .. content .. '"}'
end

local function chat(msgs)
    return '{"model":"m","messages":[' .. table.concat(msgs, ",") .. ']}'
end

-- the hostile variants: name and body, built once a thread
local function build_hostile()
    local ok = chat({ msg("user", "hostile " .. tag .. " " .. text(7, 400)) })
    local h = {}
    local function add(name, body)
        h[#h + 1] = { name, body }
    end
    add("notjson", "this is not JSON, only text: " .. text(11, 600))
    add("truncated", ok:sub(1, math.floor(#ok * 0.6)))
    add("trailing-comma", ok:sub(1, -3) .. ",]}")
    add("single-quotes", (ok:gsub('"', "'")))
    add("deep-arrays", '{"model":"m","messages":[{"role":"user","content":"x"},'
        .. string.rep("[", 100000) .. string.rep("]", 100000) .. "]}")
    add("deep-objects", '{"model":"m","messages":[{"role":"user","content":'
        .. string.rep('{"a":', 20000) .. '"x"' .. string.rep("}", 20000)
        .. "}]}")
    add("deep-content", chat({ '{"role":"user","content":'
        .. string.rep("[", 2000) .. string.rep("]", 2000) .. "}" }))
    add("huge-content", chat({ msg("user", "huge " .. tag .. " "
        .. text(13, 400 * 1024)) }))
    add("huge-model", '{"model":"' .. string.rep("m", 200 * 1024)
        .. '","messages":[' .. msg("user", "short") .. "]}")
    add("many-messages", '{"model":"m","messages":['
        .. string.rep(msg("user", "again") .. ",", 15000)
        .. msg("user", "last") .. "]}")
    add("messages-string", '{"model":"m","messages":"' .. text(17, 300) .. '"}')
    add("messages-null", '{"model":"m","messages":null}')
    add("content-number", '{"model":"m","messages":[{"role":"user","content":12345}]}')
    add("role-number", '{"model":"m","messages":[{"role":42,"content":"'
        .. text(19, 300) .. '"}]}')
    add("parts-wrong", '{"model":"m","messages":[{"role":"user","content":'
        .. '[{"type":"text","text":5},{"type":"image_url"},null,true,[1,2]]}]}')
    add("message-not-object", '{"model":"m","messages":[1,"two",null,{}]}')
    add("top-array", "[" .. ok .. "," .. ok .. "]")
    add("top-number", "42")
    add("empty-object", "{}")
    add("empty", "")
    add("bad-utf8", chat({ msg("user", "caf\xe9 \xc0\xaf \xed\xa0\x80 \xff "
        .. text(23, 200)) }))
    add("nul-byte", chat({ msg("user", "nul\0byte " .. text(29, 200)) }))
    add("big-number", '{"model":"m","max_tokens":1e400,"messages":['
        .. msg("user", text(31, 200)) .. "]}")
    add("prompt-tokens", '{"model":"m","prompt":[[1,2,3],[4,5,6],"text",7]}')
    add("input-number", '{"model":"m","input":3.5}')
    add("bom", "\xef\xbb\xbf" .. ok)
    return h
end

local now_ts
local function now_ms()
    ffi.C.clock_gettime(1, now_ts)      -- CLOCK_MONOTONIC
    return tonumber(now_ts.tv_sec) * 1000 + tonumber(now_ts.tv_nsec) / 1e6
end

local interval, next_t

function init(args)
    sent, got, not200 = 0, 0, 0
    gen = { hot = 0, conv = 0, distinct = 0, hostile = 0 }
    gen_hot, gen_conv, gen_distinct, gen_hostile = 0, 0, 0, 0
    for k = 1, 4 do
        systems[k] = "You are assistant " .. k .. " of the soak. "
            .. text(1000 + k, 2000 + k * 1000)
    end
    for c = 1, nconv do
        convs[c] = { id = c, gen = 0, msgs = nil }
    end
    hostile = build_hostile()
    if rate > 0 then
        ffi.cdef[[
            typedef struct { long tv_sec; long tv_nsec; } soak_timespec;
            int clock_gettime(int clk, soak_timespec *ts);
        ]]
        now_ts = ffi.new("soak_timespec")
        interval = 1000 * nthreads / rate
    end
end

if rate > 0 then
    -- ms to wait before this connection's next request: the next slot
    function delay()
        local n = now_ms()
        if next_t == nil or next_t < n - 1000 then
            next_t = n
        end
        local s = next_t
        next_t = next_t + interval
        return s - n
    end
end

local function hot_body()
    local k = sent % 4 + 1
    local question = string.format("question %s %d-%d: ", tag, tid, sent)
        .. text(sent, 200)
    local shape = sent % 3
    if shape == 0 then
        return chat({ msg("system", systems[k]), msg("user", question) })
    elseif shape == 1 then
        return '{"model":"m","max_tokens":64,"system":"' .. systems[k]
            .. '","messages":[' .. msg("user", question) .. "]}"
    end
    return '{"model":"m","instructions":"' .. systems[k] .. '","input":"'
        .. question .. '"}'
end

local conv_next = 0

local function conv_body()
    conv_next = conv_next % nconv + 1
    local c = convs[conv_next]
    if c.msgs == nil or #c.msgs >= 2 * turns then
        c.gen = c.gen + 1
        c.msgs = {}
        c.seed = (tid * 1000 + c.id) * 1000 + c.gen
        if c.id % 2 == 0 then
            c.msgs[1] = msg("system", systems[c.id % 4 + 1])
        end
        c.msgs[#c.msgs + 1] = msg("user", string.format(
            "conversation %s %d-%d-%d: ", tag, tid, c.id, c.gen)
            .. text(c.seed, 300))
    else
        -- the answer to the last turn, then one more question
        local n = #c.msgs
        c.msgs[n + 1] = msg("assistant", text(c.seed + n, 150 + n * 20))
        c.msgs[n + 2] = msg("user", "and then " .. text(c.seed + n + 1, 120))
    end
    return chat(c.msgs)
end

local function distinct_body()
    local head = string.format("request %s %d-%d: ", tag, tid, sent)
    if sent % 4 == 0 then
        return '{"model":"m","prompt":"' .. head .. text(sent * 3, 1400)
            .. '"}'
    end
    return chat({ msg("user", head .. text(sent * 3, 1400)) })
end

local hostile_next = 0

function request()
    sent = sent + 1
    local kind = slots[sent % #slots + 1]
    if kind == "hostile" and not hostile_on then
        kind = "distinct"
    end
    local body
    gen[kind] = gen[kind] + 1
    if kind == "hot" then
        body = hot_body()
        headers["X-Soak"] = "hot"
    elseif kind == "conv" then
        body = conv_body()
        headers["X-Soak"] = "conv"
    elseif kind == "distinct" then
        body = distinct_body()
        headers["X-Soak"] = "distinct"
    else
        hostile_next = hostile_next % #hostile + 1
        local h = hostile[hostile_next]
        body = h[2]
        headers["X-Soak"] = "h-" .. h[1]
    end
    gen_hot, gen_conv, gen_distinct, gen_hostile =
        gen.hot, gen.conv, gen.distinct, gen.hostile
    return wrk.format("POST", nil, headers, body)
end

function response(status, headers, body)
    got = got + 1
    if status ~= 200 then
        not200 = not200 + 1
    end
end

function done(summary, latency, requests)
    local s = { generated = 0, not200 = 0, hot = 0, conv = 0, distinct = 0,
                hostile = 0 }
    for _, t in ipairs(threads) do
        s.generated = s.generated + (t:get("sent") or 0)
        s.not200 = s.not200 + (t:get("not200") or 0)
        s.hot = s.hot + (t:get("gen_hot") or 0)
        s.conv = s.conv + (t:get("gen_conv") or 0)
        s.distinct = s.distinct + (t:get("gen_distinct") or 0)
        s.hostile = s.hostile + (t:get("gen_hostile") or 0)
    end
    local e = summary.errors
    io.write(string.format(
        "SOAKSTAT requests=%d generated=%d duration_us=%d connect=%d read=%d "
        .. "write=%d timeout=%d status=%d not200=%d p50_us=%d p99_us=%d "
        .. "max_us=%d gen_hot=%d gen_conv=%d gen_distinct=%d gen_hostile=%d\n",
        summary.requests, s.generated, summary.duration, e.connect, e.read,
        e.write, e.timeout, e.status, s.not200, latency:percentile(50),
        latency:percentile(99), latency.max, s.hot, s.conv, s.distinct,
        s.hostile))
end
