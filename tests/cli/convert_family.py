#!/usr/bin/env python3
"""Writes a purpose-built float model of a family from its fixture (same
config, tensor names and shapes) whose next-token choices have clear margins,
so that a 4-bit conversion can be held to the float run's greedy ids: the
embedding is N(0, 1), the untied head equals it, every other matrix (and
fused expert tensor) is the fixture's scaled by SCALE (smaller residual
updates; with sandwich norms the post norms too), vectors and buffers are
kept (in their dtype), a final logit soft-cap is set to 30,
Gemma 3n's AltUp stream projections are identities. EXTRA names tensors to add ([4, 64]
zeros) that the family must ignore (multi-token-prediction layers real
checkpoints carry). Usage: FIXTURE_DIR OUT_DIR [SCALE [EXTRA,...]]."""
import array, json, os, random, struct, sys

src, out = sys.argv[1], sys.argv[2]
scale = float(sys.argv[3]) if len(sys.argv) > 3 else 0.3
os.makedirs(out, exist_ok=True)
b = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
data = b[8 + n:]
rng = random.Random(11)
t, emb_name, raw = {}, None, {}
for name, v in hdr.items():
    if name == "__metadata__": continue
    if v["dtype"] != "F32":  # vectors and scalars of other dtypes (Apertus' BF16 xIELU scalars) are copied as they are
        if len(v["shape"]) >= 2: sys.exit("%s: %s is %s, expected F32" % (src, name, v["dtype"]))
        raw[name] = (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
        continue
    a = array.array("f"); a.frombytes(data[v["data_offsets"][0]:v["data_offsets"][1]])
    t[name] = (v["shape"], a)
    if name.endswith("embed_tokens.weight"): emb_name = name
emb = array.array("f", [rng.gauss(0, 1) for _ in range(len(t[emb_name][1]))])
# sandwich-normed models (Gemma): the post norms set each sublayer's output size, so scale them too
sandwich = any("post_feedforward_layernorm" in n for n in t)
post_norms = ("post_attention_layernorm.weight", "post_feedforward_layernorm.weight", "post_per_layer_input_norm.weight")
for name, (shape, a) in t.items():
    if name == emb_name: t[name] = (shape, emb)
    elif sandwich and name.endswith(post_norms): t[name] = (shape, array.array("f", [x * scale for x in a]))
    elif name == "lm_head.weight": t[name] = (shape, array.array("f", emb))
    elif ".altup_projections." in name or ".altup_unembed_projections." in name:  # Gemma 3n: streams start and end as copies
        t[name] = (shape, array.array("f", [float(i // shape[1] == i % shape[1]) for i in range(shape[0] * shape[1])]))
    elif len(shape) >= 2 and (name.endswith(".weight") or name.endswith("_proj")):  # matrices and fused experts, not buffers
        t[name] = (shape, array.array("f", [x * scale for x in a]))
for name in (sys.argv[4].split(",") if len(sys.argv) > 4 and sys.argv[4] else []):
    t[name] = ([4, 64], array.array("f", [0.0] * 256))
out_hdr, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for name in sorted(list(t) + list(raw)):
    dt, shape, b = raw[name] if name in raw else ("F32", t[name][0], t[name][1].tobytes())
    out_hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
    blobs.append(b); off += len(b)
h = json.dumps(out_hdr, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
cfg = json.load(open(os.path.join(src, "config.json")))
if cfg.get("final_logit_softcapping"): cfg["final_logit_softcapping"] = 30.0  # the fixture's tiny cap leaves no margins
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
