# Writes a copy of a fixture checkpoint that holds a next-n (MTP) module in
# DeepSeek V3's layout, as DeepSeek V3 / GLM-4.5 checkpoints store it: config
# num_nextn_predict_layers 1, and model.layers.<N>.* = the last layer's tensors
# plus enorm, hnorm, eh_proj (random, seeded) and shared_head.norm. For
# tests/cli/spec.sh (split-mtp, generate --draft-model with the module).
# usage: python3 add_mtp.py FIXTURE OUT
import json, os, random, struct, sys
src, out = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(src, "config.json")))
b = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
data = b[8 + n:]
L, H = cfg["num_hidden_layers"], cfg["hidden_size"]
ts = {}
for k, v in hdr.items():
    if k == "__metadata__": continue
    s, e = v["data_offsets"]
    ts[k] = (v["dtype"], v["shape"], data[s:e])
    pre = "model.layers.%d." % (L - 1)
    if k.startswith(pre): ts["model.layers.%d.%s" % (L, k[len(pre):])] = ts[k]
rnd = random.Random(5)
f32 = lambda vals: struct.pack("<%df" % len(vals), *vals)
for name, shape, vals in (("enorm.weight", [H], [1.0] * H), ("hnorm.weight", [H], [1.0] * H),
                          ("shared_head.norm.weight", [H], [1.0] * H),
                          ("eh_proj.weight", [H, 2 * H], [rnd.uniform(-0.2, 0.2) for _ in range(2 * H * H)])):
    ts["model.layers.%d.%s" % (L, name)] = ("F32", shape, f32(vals))
os.makedirs(out)
cfg["num_nextn_predict_layers"] = 1
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
h, off, blobs = {}, 0, []
for k in sorted(ts):
    dt, shape, raw = ts[k]
    h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
    off += len(raw)
    blobs.append(raw)
hb = json.dumps(h).encode()
hb += b" " * (-len(hb) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
