"""Checks of the vision-language parity contract, shared by the tests/cli
vision scripts. Usage:
  vlm_check.py ids REF                   print the reference input_ids, comma separated
  vlm_check.py parity REF LOGITS JSON    logits / step_logits within 1e-4 * max(1, max|ref|), greedy and prompt ids exact
  vlm_check.py ids_match REF JSON        prompt_ids == input_ids and generated_ids == greedy_ids
Prints nothing and exits 0 when the check holds, else the differences and 1."""
import json, struct, sys


def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        fmt = {"F32": "f", "I64": "q", "U8": "B"}[v["dtype"]]
        out[k] = struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw)
    return out


def last_json(p):
    return json.loads(open(p).read().strip().splitlines()[-1])


def close(a, b):
    tol = 1e-4 * max(1.0, max(abs(x) for x in b))
    if len(a) != len(b):
        return False, float("inf"), tol
    d = max(abs(x - y) for x, y in zip(a, b))
    return d <= tol, d, tol


def main():
    cmd, ref = sys.argv[1], load(sys.argv[2])
    if cmd == "ids":
        print(",".join(map(str, ref["input_ids"])))
        return 0
    msgs = []
    if cmd == "parity":
        got, js = load(sys.argv[3]), last_json(sys.argv[4])
        for mine, theirs in (("logits", "logits"), ("step_logits", "greedy_logits")):
            good, d, tol = close(got[mine], ref[theirs])
            if not good:
                msgs.append("%s max diff %g > %g" % (mine, d, tol))
    else:
        js = last_json(sys.argv[3])
    if list(js["generated_ids"]) != list(ref["greedy_ids"]):
        msgs.append("generated_ids %s != %s" % (js["generated_ids"], list(ref["greedy_ids"])))
    if list(js["prompt_ids"]) != list(ref["input_ids"]):
        msgs.append("prompt_ids %s != input_ids %s" % (js["prompt_ids"], list(ref["input_ids"])))
    print("; ".join(msgs)[:600])
    return 1 if msgs else 0


sys.exit(main())
