"""llmsim's chat template, tokens, block hashes and requests: what a
request body becomes in the engine."""


import hashlib
import json
import struct

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

VERSION = "1"

BYTES_PER_TOKEN = 4             # token i = bytes [4i, 4i+4) of the prompt
BLOCK_TOKENS = 16               # vLLM's default KV block size (--block-size)
BLOCK_BYTES = BYTES_PER_TOKEN * BLOCK_TOKENS

DEFAULT_MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"


# ---------------------------------------------------------------------------
# Chat template, tokens and block hashes.

class BadRequest(Exception):
    def __init__(self, message, status=400, etype="BadRequestError"):
        super().__init__(message)
        self.status = status
        self.etype = etype


def _hdr(role):
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n"


_EOT = "<|eot_id|>"


def _content_text(content):
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in (
                    "text", "input_text", "output_text") \
                    and isinstance(part.get("text"), str):
                out.append(part["text"])
            else:
                # images, audio, files: a placeholder and the part itself, so
                # that different parts never share a block (vLLM hashes
                # multimodal inputs into the block keys)
                out.append("<|part|>" + json.dumps(
                    part, sort_keys=True, ensure_ascii=False,
                    separators=(",", ":")))
        return "".join(out)
    raise BadRequest("message content must be a string, an array or null")


def render_chat(body):
    """The prompt text of a chat request, in a Llama-3-like template.

    <|begin_of_text|> then, for each message,
    <|start_header_id|>ROLE<|end_header_id|>\\n\\nCONTENT<|eot_id|>,
    then the generation prompt
    <|start_header_id|>assistant<|end_header_id|>\\n\\n.
    Tools (or the deprecated functions) are rendered as sorted JSON at the
    start of the system part; an assistant's tool_calls as sorted JSON after
    its content.  Other members of a message (name, ...) are ignored.
    """
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty array")
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest("each message must be an object with a 'role'")
    tools = body.get("tools") or body.get("functions")
    out = ["<|begin_of_text|>"]
    system = []
    if tools:
        system.append("Environment: tools\nAvailable functions:\n"
                      + json.dumps(tools, sort_keys=True, ensure_ascii=False))
    first = 0
    if msgs[0]["role"] == "system":
        system.append(_content_text(msgs[0].get("content")))
        first = 1
    if system:
        out.append(_hdr("system") + "\n\n".join(system) + _EOT)
    for m in msgs[first:]:
        text = _content_text(m.get("content"))
        calls = m.get("tool_calls")
        if calls:
            text += "<|python_tag|>" + json.dumps(
                calls, sort_keys=True, ensure_ascii=False)
        out.append(_hdr(m["role"]) + text + _EOT)
    if body.get("continue_final_message"):
        out[-1] = out[-1][:-len(_EOT)]
    elif body.get("add_generation_prompt", True):
        out.append(_hdr("assistant"))
    return "".join(out)


def completion_prompt_bytes(body):
    """Prompt bytes of a legacy completions request (token ids: 4 bytes)."""
    p = body.get("prompt")
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
        p = p[0]
    if isinstance(p, str):
        return ("<|begin_of_text|>" + p).encode()
    if isinstance(p, list) and p and all(
            isinstance(t, int) and 0 <= t < 2 ** 32 for t in p):
        return struct.pack("<%dI" % len(p), *p)
    if isinstance(p, list) and len(p) > 1:
        raise BadRequest("batched prompts are not supported by the simulator")
    raise BadRequest("'prompt' must be a string or a list of token ids")


ROOT_HASH = b"\0" * 16


def block_hashes(data, nblocks, salt=None, parent=ROOT_HASH, start=0):
    """Chained BLAKE2b-128 hashes of the 64-byte blocks start..nblocks-1.

    h[j] = BLAKE2b(h[j-1] || bytes of block j); the first block's input also
    holds the cache_salt, as in vLLM.
    """
    blake = hashlib.blake2b
    mv = memoryview(data)
    out = []
    h = parent
    for j in range(start, nblocks):
        if j == 0 and salt is not None:
            h = blake(h + b"salt:" + salt + b"\0"
                      + mv[0:BLOCK_BYTES], digest_size=16).digest()
        else:
            h = blake(h + mv[j * BLOCK_BYTES:(j + 1) * BLOCK_BYTES],
                      digest_size=16).digest()
        out.append(h)
    return out


# ---------------------------------------------------------------------------
# Requests.

class Request:
    __slots__ = (
        "rid", "kind", "model", "stream", "include_usage", "data", "P", "L",
        "hashes", "salt", "n_out", "seed", "reply", "arrival", "conn",
        "computed", "hit", "blocks", "registered", "t_first", "t_end",
        "emitted", "flush_handle", "aborted", "admitted", "done", "created",
        "prefix", "suffix", "last_suffix", "t_admit")

    def __init__(self):
        self.aborted = False
        self.admitted = False
        self.done = False
        self.flush_handle = None
        self.emitted = 0
        self.computed = 0
        self.hit = 0
        self.registered = 0
        self.blocks = None
        self.t_first = None


def parse_request(kind, body, args):
    """Validate an OpenAI request body and build a Request."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    model = body.get("model")
    if model is None:
        model = args.served_model_name[0]
    elif model not in args.served_model_name:
        raise BadRequest("The model `%s` does not exist." % model,
                         404, "NotFoundError")
    if body.get("n", 1) != 1:
        raise BadRequest("n > 1 is not supported by the simulator")
    r = Request()
    r.kind = kind
    r.model = model
    if kind == "chat":
        data = render_chat(body).encode()
        n = body.get("max_completion_tokens")
        if n is None:
            n = body.get("max_tokens")
        if n is None:
            n = args.default_max_tokens
    else:
        data = completion_prompt_bytes(body)
        n = body.get("max_tokens", 16)      # the OpenAI/vLLM default
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise BadRequest("max_tokens must be a positive integer")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be a boolean")
    so = body.get("stream_options") or {}
    if not isinstance(so, dict):
        raise BadRequest("'stream_options' must be an object")
    salt = body.get("cache_salt")
    if salt is not None:
        if not isinstance(salt, str) or not salt:
            raise BadRequest("'cache_salt' must be a non-empty string")
        salt = salt.encode()
    r.stream = stream
    r.include_usage = bool(so.get("include_usage")) and stream
    r.data = data
    r.P = len(data)
    r.L = -(-len(data) // BYTES_PER_TOKEN)
    if args.max_model_len and r.L + n > args.max_model_len:
        raise BadRequest(
            "This model's maximum context length is %d tokens. However, you "
            "requested %d tokens (%d in the messages, %d in the completion)."
            % (args.max_model_len, r.L + n, r.L, n))
    r.salt = salt
    r.hashes = block_hashes(data, len(data) // BLOCK_BYTES, salt)
    r.n_out = n
    seed = body.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        seed = int.from_bytes(hashlib.blake2b(
            data, digest_size=4).digest(), "little")
    r.seed = seed
    return r
