# Writes a copy of a fixture checkpoint that holds a next-n (MTP) module in
# DeepSeek V3's layout, as DeepSeek V3 / GLM-4.5 checkpoints store it: config
# num_nextn_predict_layers 1, and model.layers.<N>.* = the last layer's tensors
# plus enorm, hnorm, eh_proj (random, seeded) and shared_head.norm. For
# tests/cli/spec.sh (split-mtp, generate --draft-model with the module).
# With "qwen", Qwen3-Next's layout instead: mtp.layers.0.* (the last layer's,
# a full-attention one in the fixtures), mtp.pre_fc_norm_embedding,
# mtp.pre_fc_norm_hidden, mtp.fc, mtp.norm, and no count in the config.
# usage: python3 add_mtp.py FIXTURE OUT [qwen]
import json, os, random, struct, sys
src, out = sys.argv[1], sys.argv[2]
qwen = len(sys.argv) > 3 and sys.argv[3] == "qwen"
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
    if k.startswith(pre): ts[("mtp.layers.0.%s" if qwen else "model.layers.%d.%%s" % L) % k[len(pre):]] = ts[k]
rnd = random.Random(5)
f32 = lambda vals: struct.pack("<%df" % len(vals), *vals)
names = ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm", "fc") if qwen else ("enorm", "hnorm", "shared_head.norm", "eh_proj")
for name, shape, vals in ((names[0], [H], [1.0] * H), (names[1], [H], [1.0] * H), (names[2], [H], [1.0] * H),
                          (names[3], [H, 2 * H], [rnd.uniform(-0.2, 0.2) for _ in range(2 * H * H)])):
    ts[("mtp.%s.weight" if qwen else "model.layers.%d.%%s.weight" % L) % name] = ("F32", shape, f32(vals))
os.makedirs(out)
if not qwen: cfg["num_nextn_predict_layers"] = 1
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
