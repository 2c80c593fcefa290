#!/usr/bin/env python3
"""hf_to_gguf: a Llama-family Hugging Face folder (bf16/f16/f32 safetensors) as
a GGUF file for llama.cpp and ik_llama.cpp, so the peers run the same shape
as mlxcel in benchmarks. Standard library only (this machine has no numpy,
so llama.cpp's convert_hf_to_gguf.py cannot run); quantize the result with
the peer's own llama-quantize (Q4_0, Q8_0, Q4_0_R8, ...).

    tools/hf_to_gguf.py MODEL_DIR TOKENIZER_DIR OUT.gguf

What it writes follows convert_hf_to_gguf.py's LlamaModel: q/k rows permuted
to llama.cpp's interleaved rotary layout, 1-D tensors (norms) as F32, the
llama3 rope-scaling factors as rope_freqs.weight, the byte-level BPE vocabulary
and merges of TOKENIZER_DIR/tokenizer.json with pre-tokenizer "llama-bpe"
(added tokens as control tokens), no output.weight when embeddings are tied.
"""
import json, math, mmap, struct, sys

T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9
G_F32, G_F16, G_BF16 = 0, 1, 30
ST_TYPES = {"F32": (G_F32, 4), "F16": (G_F16, 2), "BF16": (G_BF16, 2)}
ALIGN = 32


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = gstr(key) + struct.pack("<I", typ)
    if typ == T_STR:
        return out + gstr(val)
    if typ == T_ARR:
        et, items = val
        out += struct.pack("<IQ", et, len(items))
        if et == T_STR:
            return out + b"".join(gstr(x) for x in items)
        return out + struct.pack("<%d%s" % (len(items), {T_I32: "i", T_F32: "f", T_U32: "I"}[et]), *items)
    return out + struct.pack({T_U32: "<I", T_I32: "<i", T_F32: "<f", T_BOOL: "<?"}[typ], val)


def load_safetensors(folder):
    import glob, os
    tensors = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        f = open(path, "rb")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        n = struct.unpack("<Q", mm[:8])[0]
        hdr = json.loads(mm[8:8 + n])
        for name, t in hdr.items():
            if name == "__metadata__":
                continue
            if t["dtype"] not in ST_TYPES:
                sys.exit("%s: %s is %s; this tool takes bf16/f16/f32 checkpoints" % (path, name, t["dtype"]))
            a, b = t["data_offsets"]
            tensors[name] = (t["dtype"], t["shape"], mm, 8 + n + a, 8 + n + b)
    return tensors


def permuted_rows(buf, rows, row_bytes, n_head):
    # convert_hf_to_gguf's permute: row (h, s, j) -> (h, j, s), s in {0, 1}
    half = rows // n_head // 2
    out = bytearray(len(buf))
    for h in range(n_head):
        for s in range(2):
            for j in range(half):
                src = (h * 2 * half + s * half + j) * row_bytes
                dst = (h * 2 * half + j * 2 + s) * row_bytes
                out[dst:dst + row_bytes] = buf[src:src + row_bytes]
    return bytes(out)


def f32_of(dtype, raw):
    if dtype == "F32":
        return raw
    n = len(raw) // 2
    if dtype == "BF16":
        return struct.pack("<%dI" % n, *[v << 16 for v in struct.unpack("<%dH" % n, raw)])
    return struct.pack("<%df" % n, *struct.unpack("<%de" % n, raw))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model, tokdir, out = sys.argv[1:]
    cfg = json.load(open(model + "/config.json"))
    if cfg.get("model_type") not in ("llama", "mistral"):
        sys.exit("%s/config.json: model_type %r; this tool writes llama-family GGUF only" % (model, cfg.get("model_type")))
    if cfg.get("quantization") or cfg.get("quantization_config"):
        sys.exit("%s/config.json: a quantized checkpoint; give the bf16 one and quantize with llama-quantize" % model)
    nh, nkv, d = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"]), cfg["hidden_size"]
    hd = cfg.get("head_dim") or d // nh
    tok = json.load(open(tokdir + "/tokenizer.json"))
    vocab = tok["model"]["vocab"]
    added = {a["id"]: a["content"] for a in tok.get("added_tokens", [])}
    nv = cfg["vocab_size"]
    tokens, ttypes = [None] * nv, [1] * nv
    for s, i in vocab.items():
        if i < nv:
            tokens[i] = s
    for i, s in added.items():
        if i < nv:
            tokens[i], ttypes[i] = s, 3
    for i in range(nv):
        if tokens[i] is None:
            tokens[i], ttypes[i] = "[PAD%d]" % i, 5
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    meta = [
        kv("general.architecture", T_STR, "llama"),
        kv("general.name", T_STR, model.rstrip("/").split("/")[-1]),
        kv("general.file_type", T_U32, 32 if any(t[0] == "BF16" for t in load_safetensors(model).values()) else 0),
        kv("llama.vocab_size", T_U32, nv),
        kv("llama.context_length", T_U32, cfg.get("max_position_embeddings", 4096)),
        kv("llama.embedding_length", T_U32, d),
        kv("llama.block_count", T_U32, cfg["num_hidden_layers"]),
        kv("llama.feed_forward_length", T_U32, cfg["intermediate_size"]),
        kv("llama.rope.dimension_count", T_U32, hd),
        kv("llama.attention.head_count", T_U32, nh),
        kv("llama.attention.head_count_kv", T_U32, nkv),
        kv("llama.attention.key_length", T_U32, hd),
        kv("llama.attention.value_length", T_U32, hd),
        kv("llama.attention.layer_norm_rms_epsilon", T_F32, cfg.get("rms_norm_eps", 1e-5)),
        kv("llama.rope.freq_base", T_F32, cfg.get("rope_theta", 10000.0)),
        kv("tokenizer.ggml.model", T_STR, "gpt2"),
        kv("tokenizer.ggml.pre", T_STR, "llama-bpe"),
        kv("tokenizer.ggml.tokens", T_ARR, (T_STR, tokens)),
        kv("tokenizer.ggml.token_type", T_ARR, (T_I32, ttypes)),
        kv("tokenizer.ggml.merges", T_ARR, (T_STR, merges)),
        kv("tokenizer.ggml.bos_token_id", T_U32, cfg.get("bos_token_id", 1)),
        kv("tokenizer.ggml.eos_token_id", T_U32, cfg["eos_token_id"] if isinstance(cfg.get("eos_token_id"), int) else cfg["eos_token_id"][0]),
    ]

    st = load_safetensors(model)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    per = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
           "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
           "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for i in range(cfg["num_hidden_layers"]):
        for k, v in per.items():
            names["model.layers.%d.%s.weight" % (i, k)] = "blk.%d.%s.weight" % (i, v)
    todo = []  # (gguf name, ggml type, dims innermost first, producer)
    for hf, g in names.items():
        if hf not in st:
            if hf == "lm_head.weight":
                continue
            sys.exit("%s: no tensor %s" % (model, hf))
        dtype, shape, mm, a, b = st[hf]
        ggt, _ = ST_TYPES[dtype]

        def prod(hf=hf, dtype=dtype, shape=shape, mm=mm, a=a, b=b):
            raw = mm[a:b]
            if len(shape) == 1:
                return f32_of(dtype, raw)
            if hf.endswith("q_proj.weight"):
                return permuted_rows(raw, shape[0], len(raw) // shape[0], nh)
            if hf.endswith("k_proj.weight"):
                return permuted_rows(raw, shape[0], len(raw) // shape[0], nkv)
            return raw
        todo.append((g, G_F32 if len(shape) == 1 else ggt, list(reversed(shape)), prod))
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type") == "llama3":
        base, fac = cfg.get("rope_theta", 10000.0), rs["factor"]
        lo, hi, old = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0), rs["original_max_position_embeddings"]
        f = []
        for k in range(0, hd, 2):
            wl = 2 * math.pi * base ** (k / hd)
            if wl < old / hi:
                f.append(1.0)
            elif wl > old / lo:
                f.append(fac)
            else:
                sm = (old / wl - lo) / (hi - lo)
                f.append(1 / ((1 - sm) / fac + sm))
        todo.append(("rope_freqs.weight", G_F32, [hd // 2], lambda f=f: struct.pack("<%df" % len(f), *f)))

    size_of = {G_F32: 4, G_F16: 2, G_BF16: 2}
    with open(out, "wb") as o:
        o.write(b"GGUF" + struct.pack("<IQQ", 3, len(todo), len(meta)))
        for m in meta:
            o.write(m)
        off = 0
        for g, t, dims, _ in todo:
            o.write(gstr(g) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", t, off))
            off += -(-math.prod(dims) * size_of[t] // ALIGN) * ALIGN
        o.write(b"\0" * (-o.tell() % ALIGN))
        for g, t, dims, p in todo:
            data = p()
            if len(data) != math.prod(dims) * size_of[t]:
                sys.exit("%s: %d bytes, expected %d" % (g, len(data), math.prod(dims) * size_of[t]))
            o.write(data + b"\0" * (-len(data) % ALIGN))


if __name__ == "__main__":
    main()
