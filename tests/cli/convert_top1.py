#!/usr/bin/env python3
"""Top-1 agreement of two --logits-out files: A B NAME MIN_FRACTION."""
import json, struct, array, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    v = h["logits"]; a = array.array("f"); a.frombytes(d[v["data_offsets"][0]:v["data_offsets"][1]]); return a, v["shape"]
a, (T, V) = load(sys.argv[1]); b, sb = load(sys.argv[2])
if list(sb) != [T, V]: print("FAIL %s: logits shape %s vs %s" % (sys.argv[3], sb, [T, V])); sys.exit(1)
am = lambda x, t: max(range(V), key=lambda i: x[t * V + i])
frac = sum(am(a, t) == am(b, t) for t in range(T)) / T
if frac >= float(sys.argv[4]): print("ok %s (%.3f)" % (sys.argv[3], frac))
else: print("FAIL %s: top-1 agreement %.3f < %s" % (sys.argv[3], frac, sys.argv[4]))
