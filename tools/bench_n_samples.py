#!/usr/bin/env python3
# BENCHMARKS.md "Several samples of one prompt": usage: tools/bench_n_samples.py PORT [ROUNDS]
# n=4 in one request vs 4 concurrent n=1 requests with the same prompt (token ids), 4 new tokens each.
import json, sys, time, threading, urllib.request
port = sys.argv[1]
U = f"http://127.0.0.1:{port}/v1/completions"
def post(body):
    r = urllib.request.urlopen(urllib.request.Request(U, json.dumps(body).encode(), {"content-type": "application/json"}))
    return json.load(r)
def run(kind, k):
    prompt = [(7 * i + k * 131) % 4000 + 3 for i in range(512)]  # a new prompt each round: no cached prefix
    body = {"prompt": prompt, "max_tokens": 4, "temperature": 1, "seed": k, "ignore_eos": True}
    t0 = time.time()
    if kind == "n4":
        post({**body, "n": 4})
    else:
        ts = [threading.Thread(target=post, args=({**body, "seed": k + i},)) for i in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
    return time.time() - t0
res = {"n4": [], "4x1": []}
for k in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    for kind in ("n4", "4x1"):
        res[kind].append(run(kind, 100 * k + (kind == "4x1")))
for kind, v in res.items():
    v.sort(); print(kind, "median %.2f s" % v[len(v) // 2], ["%.2f" % x for x in v])
