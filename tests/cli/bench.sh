#!/usr/bin/env bash
# mlxcel bench: the JSON fields the issue names, sane values, the text table,
# and bad arguments (speeds themselves are not tested: shared machines).
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-$PWD/build/mlxcel}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }

python3 tests/cli/convert_mkmodel.py "$T/src" F32 || { fail bench_mkmodel "could not write the test model"; exit 0; }
"$MLXCEL" convert -m "$T/src" -o "$T/q4" -q --q-bits 4 --q-group-size 64 >/dev/null 2>"$T/err" || fail bench_convert "$(tail -1 "$T/err")"

# a model path with a quote and a backslash must still give valid JSON
ln -s "$T/q4" "$T/we\"ird\\dir"
for m in src q4 'we"ird\dir'; do
  label=bench_json_$m; [ "$m" = src ] || [ "$m" = q4 ] || label=bench_json_odd_path
  if "$MLXCEL" bench -m "$T/$m" -p 16 -n 32 -r 2 -t 2 --bw-mb 64 --json >"$T/out.json" 2>"$T/err"; then
    python3 - "$T/out.json" "$label" "$T/$m" <<'PY'
import json, sys
name = sys.argv[2]
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"FAIL {name}: not one JSON object ({e})"); sys.exit()
need = ["pp_tps", "tg_tps", "threads", "bytes_per_token", "mem_read_gbs", "tg_efficiency", "peak_rss_mb", "ttft_ms"]
miss = [k for k in need if k not in d]
bad = [k for k in need if k not in miss and not (isinstance(d[k], (int, float)) and d[k] > 0)]
if miss or bad:
    print(f"FAIL {name}: missing {miss}, not positive {bad}")
elif d["threads"] != 2 or d["n_prompt"] != 16 or d["n_gen"] != 32 or d["reps"] != 2:
    print(f"FAIL {name}: echoed settings {d['threads']} {d['n_prompt']} {d['n_gen']} {d['reps']}")
elif not (d["bytes_per_token"] >= d["checkpoint_bytes"] * 0.5 and d["tg_efficiency"] < 50):
    print(f"FAIL {name}: bytes/token {d['bytes_per_token']} vs checkpoint {d['checkpoint_bytes']}, efficiency {d['tg_efficiency']}")
elif not all(isinstance(d.get(k), list) and len(d[k]) == 2 for k in ("tg_efficiency_range", "mem_read_gbs_range")):
    print(f"FAIL {name}: no [min, max] tg_efficiency_range / mem_read_gbs_range")
elif not (d["tg_efficiency_range"][0] <= d["tg_efficiency"] <= d["tg_efficiency_range"][1]
          and d["mem_read_gbs_range"][0] <= d["mem_read_gbs"] <= d["mem_read_gbs_range"][1]):
    print(f"FAIL {name}: medians outside their ranges: {d['tg_efficiency_range']} {d['mem_read_gbs_range']}")
elif len(sys.argv) > 3 and d["model"] != sys.argv[3]:
    print(f"FAIL {name}: model {d['model']!r}, want {sys.argv[3]!r}")
else:
    print(f"ok {name}")
PY
  else
    fail "$label" "$(tail -1 "$T/err")"
  fi
done

# the activation path it reports: f32 for F32 weights; for BF16 weights bf16 hi + lo where the CPU has
# AVX-512 BF16 (and MLXCEL_CPU leaves AVX-512), else f32
"$MLXCEL" convert -m "$T/src" -o "$T/bf16" --dtype bf16 >/dev/null 2>"$T/err" || fail bench_convert_bf16 "$(tail -1 "$T/err")"
want_bf16=f32
grep -qw avx512_bf16 /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && [ -z "${MLXCEL_CPU:-}" ] && want_bf16="bf16x2 (vdpbf16ps)"
for m in src:f32 "bf16:$want_bf16"; do
  dir=${m%%:*} want=${m#*:}
  if "$MLXCEL" bench -m "$T/$dir" -p 8 -n 2 -r 1 -t 2 --bw-mb 32 --json >"$T/act.json" 2>"$T/err"; then
    got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["activations"])' "$T/act.json")
    [ "$got" = "$want" ] && ok "bench_activations_$dir" || fail "bench_activations_$dir" "got '$got', want '$want'"
  else
    fail "bench_activations_$dir" "$(tail -1 "$T/err")"
  fi
done

if "$MLXCEL" bench -m "$T/q4" -p 8 -n 8 -r 1 -t 1 --bw-mb 32 >"$T/out.txt" 2>"$T/err"; then
  grep -q '| pp8 |' "$T/out.txt" && grep -q '| tg8 |' "$T/out.txt" && grep -q 'decode efficiency' "$T/out.txt" && ok bench_table || fail bench_table "$(head -5 "$T/out.txt")"
else
  fail bench_table "$(tail -1 "$T/err")"
fi

# --profile: each op's share of a prefill and a decode step; the shares (with the rest) sum to 100 %,
# every projection role the model has is timed, and the decode ids are the same with the timer off and on
# (q4: dense llama; mixtral fixture: the MoE roles)
for m in "$T/q4:attn q/k/v proj,attn o proj,mlp gate/up,mlp down,lm head" "tests/fixtures/mixtral:attn q/k/v proj,moe router,moe experts,lm head"; do
  dir=${m%%:*} roles=${m#*:} name=bench_profile_json_$(basename "$dir")
  if "$MLXCEL" bench -m "$dir" -p 12 -n 6 -r 1 -t 2 --bw-mb 32 --json --profile >"$T/p.json" 2>"$T/err"; then
    python3 - "$T/p.json" "$name" "$roles" <<'PY'
import json, sys
name, roles = sys.argv[2], sys.argv[3].split(",")
try:
    pr = json.load(open(sys.argv[1]))["profile"]
except Exception as e:
    print(f"FAIL {name}: no profile object ({e})"); sys.exit()
why = []
if pr.get("ids_identical") is not True: why.append("decode ids differ with the timer on")
for ph, steps, tok in (("pp", 1, 12), ("tg", 6, 1)):
    p = pr.get(ph)
    if not p: why.append(f"no {ph}"); continue
    ops = {o["op"]: o for o in p["ops"]}
    tot = sum(o["share_pct"] for o in p["ops"])
    if abs(tot - 100) > 0.1: why.append(f"{ph} shares sum to {tot}")
    ms = sum(o["ms_per_token"] for o in p["ops"])
    if abs(ms - p["ms_per_token"]) > 1e-6 * max(1, ms): why.append(f"{ph} ms/token {ms} vs {p['ms_per_token']}")
    if p["steps"] != steps or p["tokens_per_step"] != tok: why.append(f"{ph} steps {p['steps']} x {p['tokens_per_step']}")
    if ops.get("rest", {}).get("share_pct", -1) < 0: why.append(f"{ph} rest below 0")
    for r in roles + ["attention core", "norms", "embedding"]:
        o = ops.get(r)
        if not o or o["calls_per_step"] <= 0 or o["ms_per_token"] <= 0: why.append(f"{ph} {r} not timed")
        elif r in roles and not (o["gbs"] > 0 and o["gflops"] > 0): why.append(f"{ph} {r} without GB/s, GFLOP/s")
    if ph == "tg" and ops["sampling"]["calls_per_step"] != 1: why.append("tg sampling not once a step")
print(f"FAIL {name}: {'; '.join(why)}" if why else f"ok {name}")
PY
  else
    fail "$name" "$(tail -1 "$T/err")"
  fi
done
if "$MLXCEL" bench -m "$T/q4" -p 8 -n 4 -r 1 -t 1 --bw-mb 32 --profile >"$T/out.txt" 2>"$T/err"; then
  grep -q '^profile of one pp8 (prefill)' "$T/out.txt" && grep -q '^profile of tg4 ' "$T/out.txt" && [ "$(grep -c '^| mlp down |' "$T/out.txt")" = 2 ] &&
    [ "$(grep -c '^| rest (scheduler/overhead) |' "$T/out.txt")" = 2 ] && grep -q 'decode ids with the timer on: identical' "$T/out.txt" &&
    ok bench_profile_table || fail bench_profile_table "$(grep -A3 '^profile' "$T/out.txt" | head -8)"
else
  fail bench_profile_table "$(tail -1 "$T/err")"
fi

# --batch: B sequences decoded together (a server's step with B streams): the aggregate and per-stream rates,
# the prompt default (16) and -p, and a profile whose steps hold B tokens each
if "$MLXCEL" bench -m "$T/q4" -b 4 -n 6 -r 2 -t 2 --json --profile >"$T/b.json" 2>"$T/err" &&
   "$MLXCEL" bench -m "$T/q4" -b 3 -p 5 -n 2 -r 1 -t 1 >"$T/b.txt" 2>>"$T/err"; then
  python3 - "$T/b.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
why = []
for k, v in (("batch", 4), ("n_prompt", 16), ("n_gen", 6), ("reps", 2), ("threads", 2)):
    if d.get(k) != v: why.append(f"{k} {d.get(k)} (want {v})")
lo, hi = d.get("batch_tps_range", [0, 0])
if not (0 < lo <= d.get("batch_tps", 0) <= hi): why.append(f"batch_tps {d.get('batch_tps')} outside its range {lo}-{hi}")
if abs(d.get("per_stream_tps", 0) * 4 - d.get("batch_tps", 1)) > 2e-5 * d.get("batch_tps", 1): why.append("per_stream_tps is not batch_tps / 4")  # both printed to 6 digits
p = d.get("profile") or {}
if p.get("steps") != 6 or p.get("tokens_per_step") != 4: why.append(f"profile steps {p.get('steps')} x {p.get('tokens_per_step')}")
ops = {o["op"]: o for o in p.get("ops", [])}
tot = sum(o["share_pct"] for o in p.get("ops", []))
if abs(tot - 100) > 0.1: why.append(f"shares sum to {tot}")
for r in ("attn q/k/v proj", "mlp gate/up", "mlp down", "lm head", "attention core"):
    if ops.get(r, {}).get("ms_per_token", 0) <= 0: why.append(f"{r} not timed")
if ops.get("sampling", {}).get("calls_per_step") != 1: why.append("sampling not once a step")
print(f"FAIL bench_batch_json: {'; '.join(why)}" if why else "ok bench_batch_json")
PY
  grep -q '| tg2 x 3 streams (prompts of 5) |' "$T/b.txt" && ok bench_batch_table || fail bench_batch_table "$(grep '^| ' "$T/b.txt" | tr '\n' ' ')"
else
  fail bench_batch "$(tail -1 "$T/err")"
fi

# -d: the depth filled once (its own row) and the tests after it; --depth-random fills it without a prefill
for mode in prefill random; do
  extra=""; [ $mode = random ] && extra=--depth-random
  if "$MLXCEL" bench -m "$T/q4" -d 24 $extra -p 8 -n 4 -r 2 -t 1 --bw-mb 32 >"$T/out.txt" 2>"$T/err" &&
     "$MLXCEL" bench -m "$T/q4" -d 24 $extra -p 8 -n 4 -r 1 -t 1 --bw-mb 32 --json >"$T/d.json" 2>>"$T/err"; then
    rows=$(grep -c '| pp24 (the depth, once) |' "$T/out.txt"); want_rows=1; [ $mode = random ] && want_rows=0
    nd=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["n_depth"])' "$T/d.json")
    grep -q '| pp8 @ d24 |' "$T/out.txt" && grep -q '| tg4 @ d24 |' "$T/out.txt" && [ "$rows" = $want_rows ] && [ "$nd" = 24 ] &&
      ok bench_depth_$mode || fail bench_depth_$mode "n_depth $nd, table: $(grep '^| ' "$T/out.txt" | tr '\n' ' ')"
  else
    fail bench_depth_$mode "$(tail -1 "$T/err")"
  fi
done

# bad arguments: usage errors exit 2, a bad model 1, each with one line naming the problem
# (a probe buffer over half the memory is refused; 64 GiB is the largest --bw-mb)
mem_mb=$(awk '/^MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
huge=""; [ "${mem_mb:-0}" -gt 0 ] && [ $((mem_mb / 2)) -lt 65536 ] && huge="huge_probe 2 -m $T/q4 --bw-mb 65536"
while read -r name want args; do
  [ -n "$name" ] || continue
  "$MLXCEL" bench $args >/dev/null 2>"$T/err"; rc=$?
  lines=$(wc -l <"$T/err")
  if [ "$rc" = "$want" ] && [ "$lines" -ge 1 ] && [ "$lines" -le 2 ]; then ok "bench_$name"; else fail "bench_$name" "rc $rc (want $want), stderr: $(head -3 "$T/err")"; fi
done <<LIST
no_model 2 -p 8
neg_prompt 2 -m $T/q4 -p -1
zero_reps 2 -m $T/q4 -r 0
small_probe 2 -m $T/q4 --bw-mb 1
unknown_flag 2 -m $T/q4 --frobnicate
random_no_depth 2 -m $T/q4 --depth-random
batch_one 2 -m $T/q4 -b 1
batch_depth 2 -m $T/q4 -b 4 -d 8
batch_drafter 2 -m $T/q4 -b 4 --lookup-ngram 2
batch_no_gen 2 -m $T/q4 -b 4 -n 0
missing_dir 1 -m $T/nope
$huge
LIST

# --fast (and MLXCEL_FAST=1): the JSON says so, and where the CPU has AVX-512 VNNI the 4-bit model's MLP takes
# the 8-bit codes; without it "fast" is false
fastj() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d['fast'], 'int8 (VNNI, --fast)' in d['activations'])"; }
a=$("$MLXCEL" bench -m "$T/q4" -p 32 -n 4 -r 1 -t 2 --bw-mb 16 --json 2>/dev/null | fastj)
b=$("$MLXCEL" bench -m "$T/q4" -p 32 -n 4 -r 1 -t 2 --bw-mb 16 --json --fast 2>/dev/null | fastj)
c=$(MLXCEL_FAST=1 "$MLXCEL" bench -m "$T/q4" -p 32 -n 4 -r 1 -t 2 --bw-mb 16 --json 2>/dev/null | fastj)
vnni=False; grep -qw avx512_vnni /proc/cpuinfo && vnni=True
[ "$a" = "False False" ] && [ "$b" = "True $vnni" ] && [ "$c" = "$b" ] && ok bench_fast || fail bench_fast "default '$a', --fast '$b', MLXCEL_FAST=1 '$c'"
