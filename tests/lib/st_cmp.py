# Compares the logits and step_logits F32 tensors of two safetensors files (spec.sh, mpi.sh)
# (generate --logits-out) within 1e-4 * max(1, max|ref|), without numpy.
# usage: python3 st_cmp.py REF.st OTHER.st [A.st B.st]
# With A and B the bound is instead A's and B's own largest difference (at
# least the 1e-4 one): how far a lossy coding (12-bit activations) moves the
# logits, for a comparison whose rounding may land on the coding's other side.
import json, struct, sys
def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__": continue
        s, e = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
bound = (load(sys.argv[3]), load(sys.argv[4])) if len(sys.argv) == 5 else None
for k in ("logits", "step_logits"):
    x, y = a[k], b[k]
    if len(x) != len(y): print(f"{k}: {len(x)} vs {len(y)} values"); sys.exit(1)
    tol = 1e-4 * max(1.0, max(abs(v) for v in x))
    if bound: tol = max(tol, max(abs(u - v) for u, v in zip(bound[0][k], bound[1][k])))
    d = max(abs(u - v) for u, v in zip(x, y))
    if d > tol: print(f"{k}: max diff {d} > {tol}"); sys.exit(1)
