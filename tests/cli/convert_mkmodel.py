#!/usr/bin/env python3
"""Writes a small float Llama checkpoint whose next-token choices have clear
margins (small residual updates, lm_head = embeddings), so that a quantized
conversion can be compared with it by top-1 agreement. Usage: DIR [dtype]."""
import json, os, random, struct, sys, array

out = sys.argv[1]
dtype = sys.argv[2] if len(sys.argv) > 2 else "F32"
os.makedirs(out, exist_ok=True)
H, I, V, L, NH, NKV, HD = 128, 352, 512, 2, 4, 2, 32
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": H, "intermediate_size": I,
       "vocab_size": V, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": NKV, "head_dim": HD,
       "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
       "tie_word_embeddings": False, "torch_dtype": "float32" if dtype == "F32" else "bfloat16",
       "bos_token_id": 1, "eos_token_id": 2, "_name_or_path": "synthetic"}
rng = random.Random(7)
def mat(r, c, std):
    return [rng.gauss(0, std) for _ in range(r * c)]
t = {}
emb = mat(V, H, 1.0)
t["model.embed_tokens.weight"] = ([V, H], emb)
t["lm_head.weight"] = ([V, H], list(emb))
t["model.norm.weight"] = ([H], [1.0] * H)
for l in range(L):
    p = "model.layers.%d." % l
    t[p + "input_layernorm.weight"] = ([H], [1.0] * H)
    t[p + "post_attention_layernorm.weight"] = ([H], [1.0] * H)
    t[p + "self_attn.q_proj.weight"] = ([NH * HD, H], mat(NH * HD, H, 0.05))
    t[p + "self_attn.k_proj.weight"] = ([NKV * HD, H], mat(NKV * HD, H, 0.05))
    t[p + "self_attn.v_proj.weight"] = ([NKV * HD, H], mat(NKV * HD, H, 0.05))
    t[p + "self_attn.o_proj.weight"] = ([H, NH * HD], mat(H, NH * HD, 0.05))
    t[p + "mlp.gate_proj.weight"] = ([I, H], mat(I, H, 0.05))
    t[p + "mlp.up_proj.weight"] = ([I, H], mat(I, H, 0.05))
    t[p + "mlp.down_proj.weight"] = ([H, I], mat(H, I, 0.05))
hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for name in sorted(t):
    shape, vals = t[name]
    a = array.array("f", vals)
    if dtype == "BF16":
        raw = a.tobytes()
        b = bytearray()
        for i in range(0, len(raw), 4):
            u = struct.unpack("<I", raw[i:i + 4])[0]
            u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
            b += struct.pack("<H", u)
        data = bytes(b)
    else:
        data = a.tobytes()
    hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
    blobs.append(data)
    off += len(data)
h = json.dumps(hdr, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
with open(os.path.join(out, "generation_config.json"), "w") as f:
    json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}, f)
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"model_max_length": 256}, f)
