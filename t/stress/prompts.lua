-- wrk script of the stress checks (t/stress/): POSTs Chat Completions
-- bodies of about PR_SIZE bytes whose prompts differ from their first
-- bytes on, as set by the environment:
--
--   PR_MODE  distinct  every request a new prompt (default)
--            fixed     the PR_SET prompts "conv TAG k" in turn
--            mix       fixed and distinct prompts alternately
--            twice     every prompt new, each sent twice in a row
--   PR_SIZE  body bytes (1500)
--   PR_SET   prompts of the fixed set (64)
--   PR_MAX   a thread stops after this many responses (0: no limit; the
--            requests then in flight on its connections are abandoned),
--            and appends a line to the file PR_DONE: wrk itself runs
--            for its -d duration unless sent SIGINT (lib.sh does)
--   PR_TAG   a word in every prompt, so that two runs differ ("run")
--   PR_SALT  the body's cache_salt, a tenant of its own (none)
--   PR_SYSTEM  bytes of a system message every prompt shares, before
--            the user's and beyond PR_SIZE ("rule rule ...", as lib.sh's
--            probe_system) (0)
--   PR_CLOSE 1: "Connection: close", a connection a request (wrk opens
--            the next one at once)
--
-- done() prints one line for lib.sh: "PRSTAT requests=N generated=N ..."
-- (generated: bodies built, abandoned ones included).  No prompt text is
-- printed.

local mode = os.getenv("PR_MODE") or "distinct"
local size = tonumber(os.getenv("PR_SIZE") or "1500")
local set = tonumber(os.getenv("PR_SET") or "64")
local max = tonumber(os.getenv("PR_MAX") or "0")
local tag = os.getenv("PR_TAG") or "run"
local done_file = os.getenv("PR_DONE")
local salt = os.getenv("PR_SALT")
local system = tonumber(os.getenv("PR_SYSTEM") or "0")
local head_json = '{"model":"m",'
    .. (salt and ('"cache_salt":"' .. salt .. '",') or "")
    .. '"messages":['
    .. (system > 0 and ('{"role":"system","content":"'
                        .. string.rep("rule ", math.floor(system / 5))
                        .. '"},') or "")
    .. '{"role":"user","content":"'

local words = {
    "the", "model", "reads", "a", "prompt", "and", "answers", "with",
    "tokens", "from", "its", "cache", "when", "prefix", "is", "known",
    "server", "queue", "block", "hash", "chain", "of", "bytes", "index",
    "route", "balance", "load", "request", "reply", "stream", "batch",
}

local threads = {}

function setup(thread)
    table.insert(threads, thread)
    thread:set("tid", #threads)
end

local headers = { ["Content-Type"] = "application/json" }
if os.getenv("PR_CLOSE") == "1" then
    headers["Connection"] = "close"
end
local filler

function init(args)
    sent, got = 0, 0
    local t, len, i = {}, 0, 0
    -- the JSON around the content and the prompt's head take ~90 bytes
    while len < size - 90 do
        i = i + 1
        local w = words[(i * 7 + i % 5) % #words + 1]
        t[#t + 1] = w
        len = len + #w + 1
    end
    filler = table.concat(t, " ")
end

function request()
    sent = sent + 1
    local head
    if mode == "fixed" then
        head = string.format("conv %s %d: ", tag, sent % set)
    elseif mode == "mix" and sent % 2 == 0 then
        head = string.format("conv %s %d: ", tag, math.floor(sent / 2) % set)
    elseif mode == "twice" then
        head = string.format("req %s %d-%d: ", tag, tid, math.floor(sent / 2))
    else
        head = string.format("req %s %d-%d: ", tag, tid, sent)
    end
    return wrk.format("POST", nil, headers,
        head_json .. head .. filler .. '"}]}')
end

function response(status, headers, body)
    got = got + 1
    if max > 0 and got == max then
        if done_file then
            local f = io.open(done_file, "a")
            f:write("done\n")
            f:close()
        end
        wrk.thread:stop()
    end
end

function done(summary, latency, requests)
    local generated = 0
    for _, t in ipairs(threads) do
        generated = generated + (t:get("sent") or 0)
    end
    local e = summary.errors
    io.write(string.format(
        "PRSTAT requests=%d generated=%d duration_us=%d connect=%d read=%d "
        .. "write=%d timeout=%d status=%d p50_us=%d p99_us=%d max_us=%d\n",
        summary.requests, generated, summary.duration, e.connect, e.read,
        e.write, e.timeout, e.status, latency:percentile(50),
        latency:percentile(99), latency.max))
end
