# Writes a copy of a fixture checkpoint that holds a next-n (MTP) module in
# DeepSeek V3's layout, as DeepSeek V3 / GLM-4.5 checkpoints store it: config
# num_nextn_predict_layers 1, and model.layers.<N>.* = the last layer's tensors
# plus enorm, hnorm, eh_proj (random, seeded) and shared_head.norm. For
# tests/cli/spec.sh (split-mtp, generate --draft-model with the module).
# With "qwen", Qwen3-Next's layout instead: mtp.layers.0.* (the last layer's,
# a full-attention one in the fixtures), mtp.pre_fc_norm_embedding,
# mtp.pre_fc_norm_hidden, mtp.fc, mtp.norm, and no count in the config.
# With "hidden" (after the layout: deepseek or qwen), a module whose drafts are
# known: eh_proj = [0 | I] and the layer's attention output and MLP down
# projections zeroed, so its logits are the target's head on a positive
# multiple of the target's hidden state: every draft is the pending token.
# With "token" (DeepSeek's layout), the same through the token: eh_proj =
# [I | 0] and the module's own table and head of +-1 rows, each row's product
# with itself (H) above any other's (checked here).
# usage: python3 add_mtp.py FIXTURE OUT [deepseek|qwen [hidden|token]]
import json, os, random, struct, sys
src, out = sys.argv[1], sys.argv[2]
qwen = len(sys.argv) > 3 and sys.argv[3] == "qwen"
mode = sys.argv[4] if len(sys.argv) > 4 else ""
hidden = mode in ("hidden", "token")  # the layer passes its input on
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
    if k.startswith(pre):
        dt, shape, raw = ts[k]
        if hidden and (k.endswith("o_proj.weight") or k.endswith("down_proj.weight")): raw = bytes(len(raw))
        ts[("mtp.layers.0.%s" if qwen else "model.layers.%d.%%s" % L) % k[len(pre):]] = (dt, shape, raw)
rnd = random.Random(5)
f32 = lambda vals: struct.pack("<%df" % len(vals), *vals)
names = ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm", "fc") if qwen else ("enorm", "hnorm", "shared_head.norm", "eh_proj")
for name, shape, vals in ((names[0], [H], [1.0] * H), (names[1], [H], [1.0] * H), (names[2], [H], [1.0] * H),
                          (names[3], [H, 2 * H], [float(j == (i if mode == "token" else H + i)) if hidden else rnd.uniform(-0.2, 0.2)
                                                  for i in range(H) for j in range(2 * H)])):
    ts[("mtp.%s.weight" if qwen else "model.layers.%d.%%s.weight" % L) % name] = ("F32", shape, f32(vals))
if mode == "token":
    V = cfg["vocab_size"]
    pm = [[rnd.choice((-1.0, 1.0)) for _ in range(H)] for _ in range(V)]
    worst = max(abs(sum(a * b for a, b in zip(pm[x], pm[y]))) for x in range(V) for y in range(V) if x != y)
    assert worst < H, "a +-1 row is not its own best match"
    flat = [v for r in pm for v in r]
    for name in ("embed_tokens", "shared_head.head"):
        ts["model.layers.%d.%s.weight" % (L, name)] = ("F32", [V, H], f32(flat))
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
