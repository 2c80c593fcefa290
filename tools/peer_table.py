#!/usr/bin/env python3
"""peer_table: the "RUN {...}" lines of tools/peer_bench.sh (stdin or files) as
a markdown table: per format and engine the median pp and tg t/s over the
rounds (with the range), then mlxcel's ratios to the peers (medians of the
per-round ratios, as the rounds were interleaved)."""
import fileinput, json, statistics
from collections import defaultdict

runs = [json.loads(l[4:]) for l in fileinput.input() if l.startswith("RUN ")]
by = defaultdict(list)
order = []
for r in runs:
    k = (r["format"], r["engine"])
    if k not in by:
        order.append(k)
    by[k].append(r)


def med(xs):
    xs = [x for x in xs if x]
    return statistics.median(xs) if xs else None


def rng(xs):
    xs = [x for x in xs if x]
    return "%.1f–%.1f" % (min(xs), max(xs)) if len(xs) > 1 else ""


print("| format | engine | pp t/s (median, range) | tg t/s (median, range) | rounds |")
print("|---|---|---|---|---|")
for k in order:
    rs = by[k]
    pp, tg = [r["pp"] for r in rs], [r["tg"] for r in rs]
    extra = ""
    if rs[0].get("bw_gbs") and med([r["tg_efficiency"] for r in rs]):
        extra = " (probe %.1f GB/s, tg at %.0f %% of it)" % (med([r["bw_gbs"] for r in rs]), 100 * med([r["tg_efficiency"] for r in rs]))
    tgs = "%.1f %s" % (med(tg), rng(tg)) if med(tg) else "–"
    print("| %s | %s | %.1f %s | %s%s | %d |" % (k[0], k[1], med(pp), rng(pp), tgs, extra, len(rs)))
print()
print("| format | ratio | pp | tg |")
print("|---|---|---|---|")
fmts = []
for f, _ in order:
    if f not in fmts:
        fmts.append(f)
for f in fmts:
    for ours, peer in ((o, p) for o in ("mlxcel", "mlxcel-kv16", "mlxcel-fast") for p in ("llama", "ik")):
        a, b = by.get((f, ours)), by.get((f, peer))
        if not a or not b:
            continue
        n = min(len(a), len(b))
        rp = med([a[i]["pp"] / b[i]["pp"] for i in range(n) if a[i]["pp"] and b[i]["pp"]])
        rt = med([a[i]["tg"] / b[i]["tg"] for i in range(n) if a[i]["tg"] and b[i]["tg"]])
        print("| %s | %s / %s | %s | %s |" % (f, ours, peer, "%.2f×" % rp if rp else "–", "%.2f×" % rt if rt else "–"))
for f in fmts:
    a, c = by.get((f, "mlxcel")), by.get((f, "ceiling"))
    if a and c:
        n = min(len(a), len(c))
        rs = [a[i]["pp"] / c[i]["pp"] for i in range(n) if a[i]["pp"] and c[i]["pp"]]
        if rs:
            print("| %s | mlxcel pp / the exact path's ceiling (per round: %s) | %.0f %% | |" % (f, " ".join("%.0f" % (100 * r) for r in rs), 100 * med(rs)))
