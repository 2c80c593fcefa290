#!/usr/bin/env python3
"""pyref: an independent pure-Python (double precision) forward pass for the
MoE decoder families whose Hugging Face reference cannot be used as it is,
to write a parity fixture's reference.safetensors:

  * dots1: transformers at the fixture's commit (def9a7ef) weighted the chosen
    experts with the bias-corrected scores, a regression fixed upstream by
    transformers PR #41663 (the model's own code, vLLM and transformers since
    use the plain sigmoid scores). `--bias-in-weights` reproduces the upstream
    numbers, to show this port is faithful; without it the port gives the
    model's math.
  * deepseek (DeepSeek-MoE, modeling_deepseek.py of the deepseek-ai hub
    repos): Llama attention; layer i is a MoE when n_routed_experts is set,
    i >= first_k_dense_replace and i % moe_layer_freq == 0: softmax router,
    greedy top-k, renormalised (+1e-20) iff top_k > 1 and norm_topk_prob,
    SwiGLU experts of moe_intermediate_size plus shared experts of
    moe_intermediate_size * n_shared_experts; other layers a dense SwiGLU.
  * olmoe (transformers' OlmoeForCausalLM): RMSNorm over the whole q and k
    projections, then clip_qkv clamps q, k and v, then rope; softmax router,
    top-k renormalised iff norm_topk_prob; experts of intermediate_size. The
    shared olmoe fixture has clip_qkv null; the port reproduces its reference
    and then gives the clamped model's.

Usage:
  pyref.py check  DIR [--ref FILE]          compare with DIR/reference.safetensors (or FILE)
  pyref.py write  DIR [--ids 1,2,3] [-n N]  write DIR/reference.safetensors
  (--bias-in-weights: dots1's upstream regression)

Float32 tensors only (the tiny checkpoints of tests/fixtures). Rope inverse
frequencies and angles are rounded to float32 as transformers computes them;
everything else is double. Greedy decoding feeds one token at a time through
a K/V cache."""
import array, json, math, os, struct, sys


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def load_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    d = b[8 + n:]
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, e = v["data_offsets"]
        if v["dtype"] == "F32":
            x = array.array("f")
            x.frombytes(d[a:e])
            out[k] = (list(x), v["shape"])
        elif v["dtype"] == "I64":
            out[k] = (list(struct.unpack("<%dq" % ((e - a) // 8), d[a:e])), v["shape"])
        else:
            raise SystemExit("pyref: %s: dtype %s is not supported (F32 checkpoints only)" % (k, v["dtype"]))
    return out


def write_st(path, tensors):
    hdr, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, vals = tensors[name]
        raw = array.array("f", vals).tobytes() if dtype == "F32" else struct.pack("<%dq" % len(vals), *vals)
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


class Lin:
    def __init__(self, w, shape, b=None):
        self.rows, self.cols = shape
        self.w = [w[r * self.cols:(r + 1) * self.cols] for r in range(self.rows)]
        self.b = b

    def __call__(self, x):
        y = [sum(wi * xi for wi, xi in zip(row, x)) for row in self.w]
        if self.b:
            y = [a + c for a, c in zip(y, self.b)]
        return y


def rmsnorm(x, w, eps):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + eps)
    return [v * r * g for v, g in zip(x, w)]


def silu(v):
    return v / (1.0 + math.exp(-v)) if v > -700 else 0.0


def sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0


def softmax(x):
    m = max(x)
    e = [math.exp(v - m) for v in x]
    s = sum(e)
    return [v / s for v in e]


def topk(vals, k):
    """indices of the k largest, ties to the lower index"""
    return sorted(range(len(vals)), key=lambda i: (-vals[i], i))[:k]


class Model:
    def __init__(self, d, bias_in_weights):
        self.c = c = json.load(open(os.path.join(d, "config.json")))
        self.t = t = load_st(os.path.join(d, "model.safetensors"))
        self.mt = c["model_type"]
        if self.mt not in ("dots1", "deepseek", "olmoe"):
            raise SystemExit("pyref: model_type %s is not one this port knows (dots1, deepseek, olmoe)" % self.mt)
        self.biw = bias_in_weights
        self.H, self.L, self.V = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"]
        self.nh = c["num_attention_heads"]
        self.nkv = c.get("num_key_value_heads") or self.nh
        self.hd = c.get("head_dim") or self.H // self.nh
        self.eps = c.get("rms_norm_eps", 1e-6)
        theta = c.get("rope_theta", 10000.0)
        if c.get("rope_scaling") or c.get("hidden_act", "silu") != "silu":
            raise SystemExit("pyref: rope scaling / activations other than silu are not ported")
        self.inv = [f32(1.0 / f32(f32(theta) ** f32(2 * i / self.hd))) for i in range(self.hd // 2)]
        self.qk_norm = {"dots1": "head", "olmoe": "full"}.get(self.mt)
        self.clip = c.get("clip_qkv") if self.mt == "olmoe" else None
        g = lambda n: t[n][0]
        lin = lambda p, bias=False: Lin(t[p + ".weight"][0], t[p + ".weight"][1], t[p + ".bias"][0] if bias else None)
        ab = c.get("attention_bias", False)
        self.embed = [g("model.embed_tokens.weight")[i * self.H:(i + 1) * self.H] for i in range(self.V)]
        self.head = lin("lm_head") if not c.get("tie_word_embeddings") else Lin(g("model.embed_tokens.weight"), [self.V, self.H])
        self.norm = g("model.norm.weight")
        E = c.get("num_experts") if self.mt == "olmoe" else c.get("n_routed_experts")
        freq, dense = c.get("moe_layer_freq", 1), c.get("first_k_dense_replace", 0)
        self.layers = []
        for i in range(self.L):
            p = "model.layers.%d." % i
            ly = {"in": g(p + "input_layernorm.weight"), "post": g(p + "post_attention_layernorm.weight"),
                  "q": lin(p + "self_attn.q_proj", ab), "k": lin(p + "self_attn.k_proj", ab),
                  "v": lin(p + "self_attn.v_proj", ab), "o": lin(p + "self_attn.o_proj", ab)}
            if self.qk_norm:
                ly["qn"], ly["kn"] = g(p + "self_attn.q_norm.weight"), g(p + "self_attn.k_norm.weight")
            if E and i >= dense and i % freq == 0:
                ly["router"] = lin(p + "mlp.gate")
                ly["bias"] = g(p + "mlp.gate.e_score_correction_bias") if self.mt == "dots1" else None
                ly["experts"] = [self.mlp(p + "mlp.experts.%d." % e) for e in range(E)]
                ly["shared"] = self.mlp(p + "mlp.shared_experts.") if c.get("n_shared_experts") else None
            else:
                ly["mlp"] = self.mlp(p + "mlp.")
            self.layers.append(ly)

    def mlp(self, p):
        t = self.t
        return tuple(Lin(t[p + n + ".weight"][0], t[p + n + ".weight"][1]) for n in ("gate_proj", "up_proj", "down_proj"))

    @staticmethod
    def swiglu(m, x):
        g, u, d = m
        return d([silu(a) * b for a, b in zip(g(x), u(x))])

    def route(self, ly, x):
        c, logits = self.c, ly["router"](x)
        K = c["num_experts_per_tok"]
        if self.mt == "olmoe":
            s = softmax(logits)
            idx = topk(s, K)
            w = [s[i] for i in idx]
            if c.get("norm_topk_prob", False):
                d = sum(w)
                w = [v / d for v in w]
            return idx, w
        if self.mt == "deepseek":
            s = softmax(logits)
            idx = topk(s, K)
            w = [s[i] for i in idx]
            if K > 1 and c.get("norm_topk_prob", False):
                d = sum(w) + 1e-20
                w = [v / d for v in w]
            return idx, w
        s = [sigmoid(v) for v in logits]
        ch = [a + b for a, b in zip(s, ly["bias"])]
        G, TG, E = c.get("n_group", 1), c.get("topk_group", 1), len(s)
        if G > 1:
            gs = E // G
            score = [sum(sorted(ch[g * gs:(g + 1) * gs], reverse=True)[:2]) for g in range(G)]
            keep = set(topk(score, TG))
            ch = [v if i // gs in keep else 0.0 for i, v in enumerate(ch)]
        idx = topk(ch, K)
        w = [(s[i] + ly["bias"][i]) if self.biw else s[i] for i in idx]
        if c.get("norm_topk_prob", False):
            d = sum(w) + 1e-20
            w = [v / d for v in w]
        return idx, [v * c.get("routed_scaling_factor", 1.0) for v in w]

    def rope(self, x, pos):
        h = self.hd // 2
        out = list(x)
        for i in range(h):
            a = f32(pos * self.inv[i])
            cs, sn = math.cos(a), math.sin(a)
            out[i] = x[i] * cs - x[i + h] * sn
            out[i + h] = x[i + h] * cs + x[i] * sn
        return out

    def step(self, tok, pos, cache):
        """one token through every layer; cache[l] = (keys, values) per kv head"""
        x = list(self.embed[tok])
        hd, g = self.hd, self.nh // self.nkv
        for l, ly in enumerate(self.layers):
            xn = rmsnorm(x, ly["in"], self.eps)
            q, k, v = ly["q"](xn), ly["k"](xn), ly["v"](xn)
            if self.qk_norm == "full":
                q, k = rmsnorm(q, ly["qn"], self.eps), rmsnorm(k, ly["kn"], self.eps)
            if self.clip is not None:
                cl = self.clip
                q, k, v = ([min(cl, max(-cl, e)) for e in t] for t in (q, k, v))
            qs = [q[h * hd:(h + 1) * hd] for h in range(self.nh)]
            ks = [k[h * hd:(h + 1) * hd] for h in range(self.nkv)]
            vs = [v[h * hd:(h + 1) * hd] for h in range(self.nkv)]
            if self.qk_norm == "head":
                qs = [rmsnorm(a, ly["qn"], self.eps) for a in qs]
                ks = [rmsnorm(a, ly["kn"], self.eps) for a in ks]
            qs = [self.rope(a, pos) for a in qs]
            ks = [self.rope(a, pos) for a in ks]
            K, Vc = cache[l]
            for h in range(self.nkv):
                K[h].append(ks[h])
                Vc[h].append(vs[h])
            att = []
            for h in range(self.nh):
                kh = h // g
                sc = softmax([sum(a * b for a, b in zip(qs[h], kk)) / math.sqrt(hd) for kk in K[kh]])
                att += [sum(p * vv[d] for p, vv in zip(sc, Vc[kh])) for d in range(hd)]
            x = [a + b for a, b in zip(x, ly["o"](att))]
            xn = rmsnorm(x, ly["post"], self.eps)
            if "mlp" in ly:
                y = self.swiglu(ly["mlp"], xn)
            else:
                idx, w = self.route(ly, xn)
                y = [0.0] * self.H
                for e, we in zip(idx, w):
                    o = self.swiglu(ly["experts"][e], xn)
                    y = [a + we * b for a, b in zip(y, o)]
                if ly["shared"]:
                    y = [a + b for a, b in zip(y, self.swiglu(ly["shared"], xn))]
            x = [a + b for a, b in zip(x, y)]
        return self.head(rmsnorm(x, self.norm, self.eps))

    def run(self, ids, n):
        cache = [([[] for _ in range(self.nkv)], [[] for _ in range(self.nkv)]) for _ in range(self.L)]
        logits = [self.step(t, p, cache) for p, t in enumerate(ids)]
        gids, glog, last = [], [], logits[-1]
        for i in range(n):
            glog.append(last)
            gids.append(max(range(self.V), key=lambda j: (last[j], -j)))
            if i + 1 < n:
                last = self.step(gids[-1], len(ids) + i, cache)
        return logits, gids, glog


def margin(rows):
    m = float("inf")
    for r in rows:
        a = sorted(r, reverse=True)
        m = min(m, a[0] - a[1])
    return m


def main():
    a = sys.argv[1:]
    if len(a) < 2 or a[0] not in ("check", "write"):
        raise SystemExit(__doc__)
    cmd, d = a[0], a[1]
    biw = "--bias-in-weights" in a
    m = Model(d, biw)
    if cmd == "check":
        rp = a[a.index("--ref") + 1] if "--ref" in a else os.path.join(d, "reference.safetensors")
        ref = load_st(rp)
        ids, n = ref["input_ids"][0], len(ref["greedy_ids"][0])
        logits, gids, glog = m.run(ids, n)
        flat = [v for r in logits for v in r]
        md = max(abs(x - y) for x, y in zip(flat, ref["logits"][0]))
        gd = max(abs(x - y) for x, y in zip([v for r in glog for v in r], ref["greedy_logits"][0]))
        print("prompt logits max diff %.3g, greedy logits max diff %.3g, greedy ids %s" %
              (md, gd, "equal" if gids == ref["greedy_ids"][0] else "DIFFER"))
        return
    ids = None
    n = 16
    for i, x in enumerate(a):
        if x == "--ids":
            ids = [int(v) for v in a[i + 1].split(",")]
        if x == "-n":
            n = int(a[i + 1])
    if ids is None:
        ids = load_st(os.path.join(d, "reference.safetensors"))["input_ids"][0]
    logits, gids, glog = m.run(ids, n)
    write_st(os.path.join(d, "reference.safetensors"), {
        "input_ids": ("I64", [len(ids)], ids), "logits": ("F32", [len(ids), m.V], [v for r in logits for v in r]),
        "greedy_ids": ("I64", [n], gids), "greedy_logits": ("F32", [n, m.V], [v for r in glog for v in r])})
    print("wrote %s: %d prompt tokens, %d greedy; max |logit| %.4g; min top-1 margin prompt %.4g, decode %.4g" %
          (os.path.join(d, "reference.safetensors"), len(ids), n, max(abs(v) for r in logits for v in r), margin(logits), margin(glog)))


if __name__ == "__main__":
    main()
