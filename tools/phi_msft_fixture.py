#!/usr/bin/env python3
"""Writes tests/fixtures/phi-msft from tests/fixtures/phi: the same weights and
reference in the original Microsoft remote-code layout of phi-1/1.5/2
(model_type "phi-msft": msft config keys, transformer.* tensor names, one
fused Wqkv = [q | k | v] per layer), so the phi family's reading of that
layout is checked against transformers' Phi numbers. Usage: SRC DST."""
import json, os, shutil, struct, sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
c = json.load(open(os.path.join(src, "config.json")))
H, nh = c["hidden_size"], c["num_attention_heads"]
msft = {"architectures": ["PhiForCausalLM"], "model_type": "phi-msft", "n_embd": H, "n_layer": c["num_hidden_layers"],
        "n_head": nh, "n_head_kv": None, "n_inner": c["intermediate_size"], "n_positions": c["max_position_embeddings"],
        "rotary_dim": int(H // nh * c["partial_rotary_factor"]), "layer_norm_epsilon": c["layer_norm_eps"],
        "activation_function": c["hidden_act"], "vocab_size": c["vocab_size"], "tie_word_embeddings": False,
        "bos_token_id": c["bos_token_id"], "eos_token_id": c["eos_token_id"], "torch_dtype": "float32"}
json.dump(msft, open(os.path.join(dst, "config.json"), "w"), indent=2)
b = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
data = b[8 + n:]
get = lambda k: data[hdr[k]["data_offsets"][0]:hdr[k]["data_offsets"][1]]
out = {}
ren = {"model.embed_tokens.weight": "transformer.embd.wte.weight", "model.final_layernorm.weight": "lm_head.ln.weight",
       "model.final_layernorm.bias": "lm_head.ln.bias", "lm_head.weight": "lm_head.linear.weight", "lm_head.bias": "lm_head.linear.bias"}
for k, v in hdr.items():
    if k == "__metadata__":
        continue
    if k in ren:
        out[ren[k]] = (v["shape"], get(k))
        continue
    p = k.split(".")  # model.layers.I.<module>.<sub>.<param>
    i, rest = p[2], ".".join(p[3:])
    if rest.startswith("self_attn.q_proj."):
        par = p[-1]
        q, kk, vv = (get("model.layers.%s.self_attn.%s_proj.%s" % (i, x, par)) for x in "qkv")
        rows = sum(hdr["model.layers.%s.self_attn.%s_proj.%s" % (i, x, par)]["shape"][0] for x in "qkv")
        out["transformer.h.%s.mixer.Wqkv.%s" % (i, par)] = ([rows] + v["shape"][1:], q + kk + vv)
    elif rest.startswith(("self_attn.k_proj.", "self_attn.v_proj.")):
        continue
    elif rest.startswith("self_attn.dense."):
        out["transformer.h.%s.mixer.out_proj.%s" % (i, p[-1])] = (v["shape"], get(k))
    elif rest.startswith("input_layernorm."):
        out["transformer.h.%s.ln.%s" % (i, p[-1])] = (v["shape"], get(k))
    elif rest.startswith("mlp."):
        out["transformer.h.%s.%s" % (i, rest)] = (v["shape"], get(k))
    else:
        raise SystemExit("unexpected tensor " + k)
h, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for k in sorted(out):
    shape, raw = out[k]
    h[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
    blobs.append(raw)
    off += len(raw)
hb = json.dumps(h, separators=(",", ":")).encode()
hb += b" " * ((8 - len(hb) % 8) % 8)
open(os.path.join(dst, "model.safetensors"), "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
for f in ("generation_config.json", "reference.safetensors"):
    shutil.copy(os.path.join(src, f), os.path.join(dst, f))
r = json.load(open(os.path.join(src, "reference.json")))
r["model_type"] = "phi-msft"
r["mlxcel_provenance"] = ("tests/fixtures/phi in the original Microsoft phi-msft layout, written by "
                          "python3 tools/phi_msft_fixture.py tests/fixtures/phi tests/fixtures/phi-msft: the same weights "
                          "(q/k/v concatenated into mixer.Wqkv) and transformers' Phi reference unchanged")
json.dump(r, open(os.path.join(dst, "reference.json"), "w"), indent=2)
