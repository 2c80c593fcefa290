#!/usr/bin/env python3
"""Checks a `mlxcel convert` output against its source in mlx-lm's layout.
Usage: SRC OUT MODE BITS GROUP DTYPE(F32|BF16|F16|keep) QUANTIZED(0|1).
Prints ok/FAIL lines."""
import json, os, struct, sys, math

src, out, mode, bits, group, dtype, quant = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7] == "1"
tag = os.path.basename(out)
fails = 0
def check(name, cond, why=""):
    global fails
    if cond: print("ok convert_%s_%s" % (tag, name))
    else:
        fails += 1
        print("FAIL convert_%s_%s: %s" % (tag, name, why))

def header(p):
    b = open(p, "rb").read(1 << 24)
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n])

def tensors(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else \
        sorted(f for f in os.listdir(d) if f.endswith(".safetensors") and not f.startswith("reference"))
    t = {}
    meta = []
    for f in files:
        h = header(os.path.join(d, f))
        meta.append(h.get("__metadata__", {}))
        for k, v in h.items():
            if k != "__metadata__": t[k] = (v["dtype"], v["shape"], f)
    return t, meta

st, _ = tensors(src)
ot, ometa = tensors(out)
check("metadata_mlx", all(m.get("format") == "mlx" for m in ometa), str(ometa))
idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
wm = idx["weight_map"]
check("index_covers_all", set(wm) == set(ot) and all(wm[k] == ot[k][2] for k in ot), "weight_map differs from the files")
check("index_sorted", list(wm) == sorted(wm), "weight_map keys not sorted")
check("index_total_size", idx["metadata"]["total_size"] == sum(
    math.prod(s) * {"F32": 4, "F16": 2, "BF16": 2, "U32": 4, "U8": 1, "I64": 8}.get(d, 1) for d, s, _ in ot.values()),
    "total_size %s" % idx["metadata"].get("total_size"))
scfg = json.load(open(os.path.join(src, "config.json")))
tied = scfg.get("tie_word_embeddings") is True
expect = {}
# "keep": what convert keeps without --dtype, the config's torch_dtype (as mlx-lm), else each tensor's own
fdt = {"keep": {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}.get(scfg.get("torch_dtype"))}.get(dtype, dtype)
for k, (d, s, _) in st.items():
    if k.endswith("rotary_emb.inv_freq") or (tied and k == "lm_head.weight"): continue
    isf = d in ("F32", "F16", "BF16")
    nd = (fdt or d) if isf else d
    if quant and isf and len(s) == 2 and k.endswith(".weight") and s[1] % group == 0:
        p = k[:-len(".weight")]
        expect[p + ".weight"] = ("U32", [s[0], s[1] * bits // 32])
        if mode == "affine":
            expect[p + ".scales"] = (nd, [s[0], s[1] // group])
            expect[p + ".biases"] = (nd, [s[0], s[1] // group])
        else:
            expect[p + ".scales"] = ("U8", [s[0], s[1] // group])
    else:
        expect[k] = (nd, s)
got = {k: (d, s) for k, (d, s, _) in ot.items()}
missing = sorted(set(expect) - set(got))
extra = sorted(set(got) - set(expect))
check("tensor_names", not missing and not extra, "missing %s extra %s" % (missing[:3], extra[:3]))
bad = [k for k in expect if k in got and got[k] != expect[k]]
check("tensor_dtypes_shapes", not bad, "; ".join("%s: %s, expected %s" % (k, got[k], expect[k]) for k in bad[:3]))
ctext = open(os.path.join(out, "config.json")).read()
cfg = json.loads(ctext)
check("config_sorted", list(cfg) == sorted(cfg), "top-level keys not sorted")
check("config_indent4", ctext.startswith("{\n    \""), "not indented by 4")
check("config_no_name_or_path", "_name_or_path" not in cfg, "_name_or_path kept")
if quant:
    q = cfg.get("quantization")
    check("config_quantization", q == {"group_size": group, "bits": bits, "mode": mode} and list(q) == ["group_size", "bits", "mode"],
          "quantization = %s" % q)
    check("config_quantization_config", cfg.get("quantization_config") == q, "quantization_config = %s" % cfg.get("quantization_config"))
else:
    check("config_not_quantized", "quantization" not in cfg and "quantization_config" not in cfg, "has a quantization block")
if fdt:
    check("config_torch_dtype", cfg.get("torch_dtype") == {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[fdt], str(cfg.get("torch_dtype")))
for f in os.listdir(src):
    if f.endswith(".json") and f not in ("config.json", "model.safetensors.index.json") and not f.startswith("reference"):
        check("copied_" + f, os.path.exists(os.path.join(out, f)) and open(os.path.join(out, f), "rb").read() == open(os.path.join(src, f), "rb").read(), "not copied")
sys.exit(1 if fails else 0)
