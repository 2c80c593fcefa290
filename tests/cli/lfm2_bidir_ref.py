#!/usr/bin/env python3
"""Reference last_hidden_state of a bidirectional LFM2 encoder (transformers'
Lfm2BidirectionalModel, modular_lfm2_bidirectional.py) in plain Python, for a
model folder with float32 weights: embeddings; per layer h += op(operator_norm(h))
where op is attention over every position (q/k RMSNorm per head, rotate-half
rope, GQA, scale head_dim^-0.5) or the gated short conv with a centered
depthwise conv1d (padding conv_L_cache // 2 on both sides, zeros outside the
sequence), then h += w2(silu(w1 x) * w3 x) of ffn_norm(h); embedding_norm.
Writes the [T, H] states as a safetensors tensor `last_hidden_state`.
Usage: MODEL_DIR IDS(comma-separated) OUT.st"""
import array, json, math, os, struct, sys

d, ids, out = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3]
cfg = json.load(open(os.path.join(d, "config.json")))
b = open(os.path.join(d, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
W = {}
for k, v in hdr.items():
    if k == "__metadata__": continue
    a = array.array("f"); a.frombytes(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
    W[k] = (v["shape"], a)

def mat(name):  # rows of a [out, in] matrix
    (r, c), a = W[name + ".weight"]
    return [a[i * c:(i + 1) * c] for i in range(r)]
def vec(name): return W[name][1]
def lin(m, x): return [sum(w * v for w, v in zip(row, x)) for row in m]
def rms(x, w, eps):
    s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * s * g for v, g in zip(x, w)]

H, L, nh = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["num_attention_heads"]
nkv, eps, K = cfg.get("num_key_value_heads", nh), cfg.get("norm_eps", 1e-5), cfg.get("conv_L_cache", 3)
hd, T = H // nh, len(ids)
theta = cfg.get("rope_theta", cfg.get("rope_parameters", {}).get("rope_theta", 1e6))
inv = [1.0 / theta ** (2 * i / hd) for i in range(hd // 2)]
def rope(x, p):
    h2, o = hd // 2, list(x)
    for i in range(h2):
        c, s = math.cos(p * inv[i]), math.sin(p * inv[i])
        o[i], o[h2 + i] = x[i] * c - x[h2 + i] * s, x[h2 + i] * c + x[i] * s
    return o

emb = W["model.embed_tokens.weight"][1]
h = [list(emb[t * H:(t + 1) * H]) for t in ids]
for l in range(L):
    P = "model.layers.%d." % l
    xn = [rms(r, vec(P + "operator_norm.weight"), eps) for r in h]
    if P + "self_attn.q_proj.weight" in W:
        q = [lin(mat(P + "self_attn.q_proj"), r) for r in xn]
        k = [lin(mat(P + "self_attn.k_proj"), r) for r in xn]
        v = [lin(mat(P + "self_attn.v_proj"), r) for r in xn]
        qn, kn = vec(P + "self_attn.q_layernorm.weight"), vec(P + "self_attn.k_layernorm.weight")
        q = [[x for j in range(nh) for x in rope(rms(r[j * hd:(j + 1) * hd], qn, eps), t)] for t, r in enumerate(q)]
        k = [[x for j in range(nkv) for x in rope(rms(r[j * hd:(j + 1) * hd], kn, eps), t)] for t, r in enumerate(k)]
        o = []
        for t in range(T):
            row = []
            for j in range(nh):
                g = j // (nh // nkv)
                sc = [sum(a * c for a, c in zip(q[t][j * hd:(j + 1) * hd], k[u][g * hd:(g + 1) * hd])) / math.sqrt(hd) for u in range(T)]
                m = max(sc); e = [math.exp(s - m) for s in sc]; z = sum(e)
                row += [sum(e[u] / z * v[u][g * hd + i] for u in range(T)) for i in range(hd)]
            o.append(row)
        y = [lin(mat(P + "self_attn.out_proj"), r) for r in o]
    else:
        bcx = [lin(mat(P + "conv.in_proj"), r) for r in xn]
        bx = [[r[i] * r[2 * H + i] for i in range(H)] for r in bcx]
        cw, pad = vec(P + "conv.conv.weight"), K // 2
        conv = [[sum(cw[i * K + kk] * bx[t - pad + kk][i] for kk in range(K) if 0 <= t - pad + kk < T) for i in range(H)] for t in range(T)]
        y = [lin(mat(P + "conv.out_proj"), [bcx[t][H + i] * conv[t][i] for i in range(H)]) for t in range(T)]
    h = [[a + c for a, c in zip(r, s)] for r, s in zip(h, y)]
    fn = [rms(r, vec(P + "ffn_norm.weight"), eps) for r in h]
    w1, w3, w2 = mat(P + "feed_forward.w1"), mat(P + "feed_forward.w3"), mat(P + "feed_forward.w2")
    for t in range(T):
        g, u = lin(w1, fn[t]), lin(w3, fn[t])
        f = lin(w2, [a / (1 + math.exp(-a)) * c for a, c in zip(g, u)])
        h[t] = [a + c for a, c in zip(h[t], f)]
h = [rms(r, vec("model.embedding_norm.weight"), eps) for r in h]
data = array.array("f", [x for r in h for x in r]).tobytes()
head = json.dumps({"last_hidden_state": {"dtype": "F32", "shape": [T, H], "data_offsets": [0, len(data)]}}).encode()
head += b" " * ((8 - len(head) % 8) % 8)
open(out, "wb").write(struct.pack("<Q", len(head)) + head + data)
