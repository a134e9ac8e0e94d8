"""llmsim's HTTP/1.1 server (the OpenAI API, /health, /metrics) and its
command line."""


import argparse
import asyncio
import gc
import json
import signal
import sys
import time
from json.encoder import encode_basestring_ascii as _jstr
from sim_engine import METRIC_NAMES, Engine
from sim_template import (BYTES_PER_TOKEN, DEFAULT_MODEL, VERSION, BadRequest,
                          _dumps, parse_request)


# ---------------------------------------------------------------------------
# HTTP/1.1 with keep-alive, on asyncio.Protocol (no streams: they are slow).

REASONS = {100: "Continue", 200: "OK", 400: "Bad Request",
           404: "Not Found", 405: "Method Not Allowed",
           411: "Length Required", 413: "Payload Too Large",
           431: "Request Header Fields Too Large",
           500: "Internal Server Error", 501: "Not Implemented"}

MAX_HEAD = 64 * 1024
MAX_BODY = 256 * 1024 * 1024


class HTTP(asyncio.Protocol):
    def __init__(self, server):
        self.srv = server
        self.engine = server.engine
        self.buf = bytearray()
        self.transport = None
        self.head = None
        self.busy = False           # a response is being produced
        self.closed = False
        self.keep = True
        self.req = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        self.closed = True
        r = self.req
        if r is not None and not r.done:
            self.engine.abort(r)
        self.req = None

    def data_received(self, data):
        self.buf += data
        if not self.busy:
            self.process()

    # parsing
    def process(self):
        while not self.busy and not self.closed:
            msg = self.parse()
            if msg is None:
                return
            try:
                self.handle(*msg)
            except BadRequest as e:
                self.send_error(e.status, str(e), e.etype)
            except Exception as e:      # a bug: say so, keep serving
                self.send_error(500, "%s: %s" % (type(e).__name__, e),
                                "InternalServerError")

    def parse(self):
        buf = self.buf
        if self.head is None:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                if len(buf) > MAX_HEAD:
                    self.fail(431)
                return None
            lines = bytes(buf[:i]).decode("latin-1").split("\r\n")
            del buf[:i + 4]
            try:
                method, target, version = lines[0].split(" ")
            except ValueError:
                self.fail(400)
                return None
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            conn = headers.get("connection", "").lower()
            if version == "HTTP/1.1":
                keep = "close" not in conn
            else:
                keep = "keep-alive" in conn
            te = headers.get("transfer-encoding", "").lower()
            if "chunked" in te:
                length = -1
            else:
                try:
                    length = int(headers.get("content-length", "0"))
                except ValueError:
                    self.fail(400)
                    return None
                if length > MAX_BODY:
                    self.fail(413)
                    return None
            self.head = (method, target, version, headers, keep, length)
            if headers.get("expect", "").lower() == "100-continue":
                self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        method, target, version, headers, keep, length = self.head
        if length >= 0:
            if len(buf) < length:
                return None
            body = bytes(buf[:length])
            del buf[:length]
        else:
            body = self.dechunk()
            if body is None:
                return None
        self.head = None
        self.keep = keep
        return method, target, headers, body

    def dechunk(self):
        buf = self.buf
        pos = 0
        parts = []
        while True:
            i = buf.find(b"\r\n", pos)
            if i < 0:
                return None
            try:
                size = int(bytes(buf[pos:i]).split(b";")[0], 16)
            except ValueError:
                self.fail(400)
                return None
            if size == 0:
                j = buf.find(b"\r\n\r\n", i)
                if j < 0:
                    return None
                del buf[:j + 4]
                return b"".join(parts)
            if len(buf) < i + 2 + size + 2:
                return None
            parts.append(bytes(buf[i + 2:i + 2 + size]))
            pos = i + 2 + size + 2

    def fail(self, status):
        self.keep = False
        self.send_error(status, REASONS.get(status, "error"),
                        "BadRequestError")

    # responses
    def _head(self, status, ctype, extra=""):
        return ("HTTP/1.1 %d %s\r\ncontent-type: %s\r\nX-Backend: %s\r\n"
                "server: llmsim\r\n%s%s" % (
                    status, REASONS.get(status, ""), ctype, self.srv.name,
                    extra, "" if self.keep else "connection: close\r\n"))

    def send(self, status, body, ctype="application/json", extra=""):
        if self.closed:
            return
        if isinstance(body, str):
            body = body.encode()
        self.transport.write((self._head(status, ctype, extra)
                              + "content-length: %d\r\n\r\n" % len(body)
                              ).encode() + body)
        self.done()

    def done(self):
        self.busy = False
        self.req = None
        if not self.keep:
            self.closed = True
            self.transport.close()
        elif self.buf:
            self.srv.loop.call_soon(self.process)

    def send_error(self, status, message, etype):
        self.send(status, json.dumps({"error": {
            "message": message, "type": etype, "param": None,
            "code": status}}))

    # streaming (SSE over chunked transfer encoding)
    def stream_begin(self, r):
        self.transport.write((self._head(
            200, "text/event-stream; charset=utf-8",
            "x-request-id: %d\r\ncache-control: no-cache\r\n" % r.rid)
            + "transfer-encoding: chunked\r\n\r\n").encode())
        if r.kind == "chat":
            base = ('data: {"id":%s,"object":"chat.completion.chunk",'
                    '"created":%d,"model":%s,"choices":[{"index":0,' % (
                        _jstr("chatcmpl-%s-%d" % (self.srv.name, r.rid)),
                        r.created, _jstr(r.model)))
            r.prefix = base + '"delta":{"content":'
            r.suffix = '},"logprobs":null,"finish_reason":null}]}\n\n'
            r.last_suffix = ('},"logprobs":null,"finish_reason":"length",'
                             '"stop_reason":null}]')
        else:
            base = ('data: {"id":%s,"object":"text_completion",'
                    '"created":%d,"model":%s,"choices":[{"index":0,' % (
                        _jstr("cmpl-%s-%d" % (self.srv.name, r.rid)),
                        r.created, _jstr(r.model)))
            r.prefix = base + '"text":'
            r.suffix = ',"logprobs":null,"finish_reason":null,' \
                       '"stop_reason":null}]}\n\n'
            r.last_suffix = ',"logprobs":null,"finish_reason":"length",' \
                            '"stop_reason":null}]'

    def _chunk(self, text):
        if self.closed:
            return
        data = text.encode()
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def stream_first(self, r):
        out = []
        if r.kind == "chat":
            out.append(r.prefix[:-len('"delta":{"content":')]
                       + '"delta":{"role":"assistant","content":""},'
                         '"logprobs":null,"finish_reason":null}]}\n\n')
        if r.n_out > 1:
            out.append(r.prefix + _jstr(r.reply[0:BYTES_PER_TOKEN]) + r.suffix)
        if out:
            self._chunk("".join(out))

    def stream_tokens(self, r, a, b, last):
        reply = r.reply
        pre = r.prefix
        suf = r.suffix
        out = []
        end = b - 1 if last else b
        for i in range(a, end):
            out.append(pre + _jstr(reply[4 * i:4 * i + 4]) + suf)
        if last:
            i = b - 1
            out.append(pre + _jstr(reply[4 * i:4 * i + 4]) + r.last_suffix
                       + ',"sim":' + _dumps(self.srv.timing(r)) + "}\n\n")
            if r.include_usage and self.srv.args.usage != "none":
                out.append(
                    r.prefix[:r.prefix.index('"choices":')]
                    + '"choices":[],"usage":'
                    + _dumps(usage(r, self.srv.args.usage)) + "}\n\n")
            out.append("data: [DONE]\n\n")
        if out:
            self._chunk("".join(out))
        if last and not self.closed:
            self.transport.write(b"0\r\n\r\n")
            self.done()

    def send_completion(self, r):
        if r.kind == "chat":
            obj = {"id": "chatcmpl-%s-%d" % (self.srv.name, r.rid),
                   "object": "chat.completion", "created": r.created,
                   "model": r.model,
                   "choices": [{"index": 0,
                                "message": {"role": "assistant",
                                            "content": r.reply,
                                            "tool_calls": []},
                                "logprobs": None, "finish_reason": "length",
                                "stop_reason": None}],
                   "usage": usage(r, self.srv.args.usage),
                   "prompt_logprobs": None,
                   "sim": self.srv.timing(r)}
        else:
            obj = {"id": "cmpl-%s-%d" % (self.srv.name, r.rid),
                   "object": "text_completion", "created": r.created,
                   "model": r.model,
                   "choices": [{"index": 0, "text": r.reply,
                                "logprobs": None, "finish_reason": "length",
                                "stop_reason": None,
                                "prompt_logprobs": None}],
                   "usage": usage(r, self.srv.args.usage),
                   "sim": self.srv.timing(r)}
        self.send(200, _dumps(obj),
                  extra="x-request-id: %d\r\n" % r.rid)

    # routing
    def handle(self, method, target, headers, body):
        path = target.split("?", 1)[0]
        srv = self.srv
        if path in ("/v1/chat/completions", "/v1/completions"):
            if method != "POST":
                raise BadRequest("use POST", 405, "MethodNotAllowed")
            try:
                obj = json.loads(body)
            except ValueError as e:
                raise BadRequest("invalid JSON body: %s" % e)
            kind = "chat" if path == "/v1/chat/completions" else "completion"
            r = parse_request(kind, obj, srv.args)
            r.conn = self
            self.busy = True
            try:
                self.engine.submit(r)
            except BadRequest:
                self.busy = False
                raise
            self.req = r
            if r.stream:
                self.stream_begin(r)
            if srv.args.access_log:
                print("%s %s prompt=%d out=%d" % (srv.name, path, r.L,
                                                  r.n_out), file=sys.stderr)
            return
        if method not in ("GET", "HEAD") and path in (
                "/health", "/v1/models", "/metrics", "/sim/stats",
                "/version"):
            raise BadRequest("use GET", 405, "MethodNotAllowed")
        if path == "/health":
            self.send(200, b"")
        elif path == "/v1/models":
            now = int(srv.started)
            self.send(200, json.dumps({"object": "list", "data": [
                {"id": m, "object": "model", "created": now,
                 "owned_by": "vllm", "root": m, "parent": None,
                 "max_model_len": srv.args.max_model_len or None}
                for m in srv.args.served_model_name]}))
        elif path == "/metrics":
            self.send(200, self.engine.metrics(),
                      "text/plain; version=0.0.4; charset=utf-8")
        elif path == "/sim/stats":
            self.send(200, json.dumps(self.engine.stats()))
        elif path == "/version":
            self.send(200, json.dumps({"version": "llmsim-" + VERSION}))
        elif path == "/sim/restart":
            # a restarted engine: its prefix cache is empty and its
            # counters start again, the requests running go on (their
            # blocks are not found again)
            if method != "POST":
                raise BadRequest("use POST", 405, "MethodNotAllowed")
            self.send(200, json.dumps({"forgotten": self.engine.restart()}))
        elif path == "/reset_prefix_cache":
            if method != "POST":
                raise BadRequest("use POST", 405, "MethodNotAllowed")
            if not self.engine.reset_prefix_cache():
                raise BadRequest("requests are running; the prefix cache "
                                 "was not reset")
            self.send(200, b"")
        else:
            raise BadRequest("Not Found", 404, "NotFoundError")


def usage(r, mode="full"):
    """The usage object of --usage: "full" with the cached tokens,
    "tokens" without (vLLM without --enable-prompt-tokens-details), "none":
    None (no usage reported)."""
    if mode == "none":
        return None
    return {"prompt_tokens": r.L, "total_tokens": r.L + r.n_out,
            "completion_tokens": r.n_out,
            "prompt_tokens_details": {"cached_tokens": r.hit}
            if mode == "full" else None}


class Server:
    def __init__(self, args, loop):
        self.args = args
        self.loop = loop
        self.engine = Engine(args, loop)
        self.started = time.time()
        self.name = args.name

    def timing(self, r):
        """Model-time latencies of a finished request (vendor extension
        'sim' in the last chunk or the response): free of event-loop lag
        and of the time-scale's magnification of real network time."""
        return {"backend": self.name,
                "arrival_s": round(r.arrival, 6),
                "queue_ms": round(1e3 * (r.t_admit - r.arrival), 3),
                "ttft_ms": round(1e3 * (r.t_first - r.arrival), 3),
                "e2e_ms": round(1e3 * (r.t_end - r.arrival), 3),
                "cached_tokens": r.hit, "prompt_tokens": r.L}


# ---------------------------------------------------------------------------
# Command line.

def positive(conv):
    def f(s):
        v = conv(s)
        if v <= 0:
            raise argparse.ArgumentTypeError("must be > 0")
        return v
    return f


def serve_parser():
    p = argparse.ArgumentParser(
        prog="llmsim.py",
        description="Simulated vLLM server (OpenAI API, prefix cache, "
                    "model clock).  Defaults model Llama-3-8B-Instruct on "
                    "one H100 80GB; README.md beside this file gives the "
                    "sources.  'llmsim.py bound --help': the pooled-cache "
                    "bound of a workload.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000,
                   help="0 picks a free port (printed on stdout)")
    p.add_argument("--name", default=argparse.SUPPRESS,
                   help="backend name, sent as 'X-Backend: NAME' "
                        "(default: HOST:PORT)")
    p.add_argument("--served-model-name", nargs="+", default=[DEFAULT_MODEL],
                   help="model names accepted; others get 404 as in vLLM")
    p.add_argument("--time-scale", type=positive(float), default=1.0,
                   help="wall seconds per model second: 0.1 runs the clock "
                        "ten times faster; every latency on the wire shrinks "
                        "by this factor, every figure in /metrics stays in "
                        "model seconds")
    p.add_argument("--prefill-overhead-ms", type=float, default=20.0,
                   help="fixed cost of one prefill step, shared by the "
                        "requests in it (15-30 ms fixed TTFT cost of "
                        "Llama-3-8B on one H100)")
    p.add_argument("--prefill-us-per-token", type=float, default=35.0,
                   help="cost of one uncached prompt token (2 x 8.0e9 FLOP "
                        "at ~45%% of the H100's 989 TFLOPS BF16 = 36 us; "
                        "NVIDIA NIM's 5000-token TTFT for Llama-3.3-70B on "
                        "2 x H100 FP8 scales to 37 us)")
    p.add_argument("--itl-ms", type=float, default=13.0,
                   help="inter-token latency of decode ('Llama3 8B can "
                        "generate 1 token every 13 ms under light load' on "
                        "one H100, vLLM blog 2024-09-05)")
    p.add_argument("--max-num-batched-tokens", type=positive(int),
                   default=8192,
                   help="prefill token budget of one step (vLLM's default "
                        "for the OpenAI server on a >= 70 GiB GPU)")
    p.add_argument("--max-num-seqs", type=positive(int), default=1024,
                   help="cap on running requests, beyond which they wait "
                        "(vLLM's default on a >= 70 GiB GPU; 256 on others)")
    p.add_argument("--kv-blocks", type=positive(int), default=28672,
                   help="KV cache capacity in 16-token blocks: 56 GiB free "
                        "on an 80 GB H100 / 128 KiB of KV per Llama-3-8B "
                        "token = 458,752 tokens")
    p.add_argument("--max-model-len", type=int, default=0,
                   help="reject longer requests with 400 as vLLM does; "
                        "0: no limit")
    p.add_argument("--default-max-tokens", type=positive(int), default=128,
                   help="output length of a chat request without max_tokens "
                        "(vLLM would generate until EOS)")
    p.add_argument("--stream-tick-ms", type=float, default=5.0,
                   help="wall-clock floor between two writes of one stream: "
                        "tokens due within it go out in one write (the first "
                        "and the last token are always on time)")
    p.add_argument("--metrics-engine",
                   choices=("vllm",) + tuple(METRIC_NAMES), default="vllm",
                   help="whose metric names /metrics uses")
    p.add_argument("--usage", choices=("full", "tokens", "none"),
                   default="full",
                   help="the usage of responses: with cached tokens, "
                        "without them (vLLM without "
                        "--enable-prompt-tokens-details), or none")
    p.add_argument("--access-log", action="store_true",
                   help="one line per request on stderr")
    return p


def serve(argv):
    args = serve_parser().parse_args(argv)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    if getattr(args, "name", None) is None:
        args.name = "%s:%d" % (args.host, args.port)
    srv = Server(args, loop)
    server = loop.run_until_complete(loop.create_server(
        lambda: HTTP(srv), args.host, args.port, backlog=1024,
        reuse_address=True))
    port = server.sockets[0].getsockname()[1]
    if args.port == 0 and args.name == "%s:0" % args.host:
        args.name = srv.name = "%s:%d" % (args.host, port)
    print("llmsim %s listening on http://%s:%d (time-scale %g, kv-blocks %d)"
          % (args.name, args.host, port, args.time_scale, args.kv_blocks),
          flush=True)
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(1))
    gc.collect()
    gc.freeze()
    gc.set_threshold(100000, 50, 100)
    try:
        loop.run_until_complete(stop)
    finally:
        server.close()
        loop.close()
