#!/usr/bin/python3
"""e2e/model.py: a small random-weight Llama model as GGUF, for make e2e.

    e2e/model.py VOCAB.gguf OUT.gguf [--layers 8] [--embd 512] [--seed 1]

VOCAB.gguf is a vocab-only GGUF of llama.cpp's source tree
(models/ggml-vocab-llama-bpe.gguf: Llama 3's tokenizer); its tokenizer.*
metadata is copied.  The weights are random Q8_0 (norms 1.0 in F32), so
the model writes gibberish, but its prefill compute and KV cache are those
of a real 8-layer, 512-wide Llama: what prefix caching saves is real.
Tokens whose bytes are not valid UTF-8 on their own are marked as control
tokens, which llama-server does not print: random sampling would otherwise
emit broken UTF-8 and the server answers 500.

GGUF (v3) layout from ggml's docs/gguf.md: header, metadata key/values,
tensor infos, data aligned to 32 bytes.  Standard library only.
"""

import argparse
import random
import struct
import sys

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
          F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
GGML_F32, GGML_Q8_0 = 0, 8
ALIGN = 32


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n]
        self.p += n
        return s.decode("utf-8", "surrogateescape")

    def value(self, t):
        if t == STR:
            return self.string()
        if t == ARR:
            it = self.take("<I")
            n = self.take("<Q")
            return (it, [self.value(it) for _ in range(n)])
        return self.take(SCALAR[t])


def read_metadata(path):
    with open(path, "rb") as f:
        r = Reader(f.read())
    if r.take("<I") != 0x46554747:
        raise SystemExit("%s: not a GGUF file" % path)
    r.take("<I")
    r.take("<Q")                    # tensors: none in a vocab file
    kv = {}
    for _ in range(r.take("<Q")):
        k = r.string()
        t = r.take("<I")
        kv[k] = (t, r.value(t))
    return kv


def put_string(out, s):
    b = s.encode("utf-8", "surrogateescape")
    out += struct.pack("<Q", len(b)) + b


def put_value(out, t, v):
    if t == STR:
        put_string(out, v)
    elif t == ARR:
        it, items = v
        out += struct.pack("<IQ", it, len(items))
        if it in SCALAR:
            out += struct.pack("<%d%s" % (len(items), SCALAR[it][1]), *items)
        else:
            for x in items:
                put_value(out, it, x)
    else:
        out += struct.pack(SCALAR[t], v)


def byte_decoder():
    """GPT-2's bytes_to_unicode, inverted: a BPE token's characters to
    its bytes."""
    bs = (list(range(ord("!"), ord("~") + 1))
          + list(range(ord("\xa1"), ord("\xac") + 1))
          + list(range(ord("\xae"), ord("\xff") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def q8_0(rng, n):
    """n random weights as Q8_0 blocks of 32: an f16 scale, 32 int8."""
    nb = n // 32
    buf = bytearray(rng.randbytes(nb * 34))
    scale = struct.pack("<e", 0.02 / 127)
    buf[0::34] = scale[0:1] * nb
    buf[1::34] = scale[1:2] * nb
    return bytes(buf)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("vocab")
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--embd", type=int, default=512)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--ff", type=int, default=1536)
    p.add_argument("--ctx", type=int, default=8192)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()

    src = read_metadata(a.vocab)
    tokens = src["tokenizer.ggml.tokens"][1][1]
    types = list(src["tokenizer.ggml.token_type"][1][1])
    dec = byte_decoder()
    for i, tok in enumerate(tokens):
        if types[i] != 1:
            continue
        try:
            bytes(dec[c] for c in tok).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            types[i] = 3            # control: never printed
    n_vocab = len(tokens)
    E, H, F = a.embd, a.heads, a.ff

    kv = [("general.architecture", STR, "llama"),
          ("general.name", STR, "prefix-route e2e random llama"),
          ("general.alignment", U32, ALIGN),
          ("llama.context_length", U32, a.ctx),
          ("llama.embedding_length", U32, E),
          ("llama.block_count", U32, a.layers),
          ("llama.feed_forward_length", U32, F),
          ("llama.attention.head_count", U32, H),
          ("llama.attention.head_count_kv", U32, H),
          ("llama.rope.dimension_count", U32, E // H),
          ("llama.rope.freq_base", F32, 500000.0),
          ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
          ("llama.vocab_size", U32, n_vocab),
          ("general.file_type", U32, 7)]             # mostly Q8_0
    for k, (t, v) in src.items():
        if not k.startswith("tokenizer."):
            continue
        if k == "tokenizer.ggml.token_type":
            v = (v[0], types)
        kv.append((k, t, v))

    tensors = [("token_embd.weight", [E, n_vocab], GGML_Q8_0),
               ("output_norm.weight", [E], GGML_F32)]
    for i in range(a.layers):
        b = "blk.%d." % i
        tensors += [(b + "attn_norm.weight", [E], GGML_F32),
                    (b + "attn_q.weight", [E, E], GGML_Q8_0),
                    (b + "attn_k.weight", [E, E], GGML_Q8_0),
                    (b + "attn_v.weight", [E, E], GGML_Q8_0),
                    (b + "attn_output.weight", [E, E], GGML_Q8_0),
                    (b + "ffn_norm.weight", [E], GGML_F32),
                    (b + "ffn_gate.weight", [E, F], GGML_Q8_0),
                    (b + "ffn_up.weight", [E, F], GGML_Q8_0),
                    (b + "ffn_down.weight", [F, E], GGML_Q8_0)]

    rng = random.Random(a.seed)
    head = bytearray(struct.pack("<IIQQ", 0x46554747, 3, len(tensors),
                                 len(kv)))
    for k, t, v in kv:
        put_string(head, k)
        head += struct.pack("<I", t)
        put_value(head, t, v)
    blobs = []
    offset = 0
    for name, dims, t in tensors:
        n = 1
        for d in dims:
            n *= d
        data = q8_0(rng, n) if t == GGML_Q8_0 \
            else struct.pack("<%df" % n, *([1.0] * n))
        put_string(head, name)
        head += struct.pack("<I", len(dims))
        head += struct.pack("<%dQ" % len(dims), *dims)
        head += struct.pack("<IQ", t, offset)
        pad = -len(data) % ALIGN
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    head += b"\0" * (-len(head) % ALIGN)
    with open(a.out + ".tmp", "wb") as f:
        f.write(head)
        for b in blobs:
            f.write(b)
    import os
    os.replace(a.out + ".tmp", a.out)
    print("%s: %d layers x %d, vocab %d, %.1f MB" % (
        a.out, a.layers, E, n_vocab,
        (len(head) + offset) / 1e6), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
