#!/usr/bin/env bash
# mlxcel convert: mlx-lm layout for every mode, dtype casting, bad arguments,
# and the round trip (a converted model runs and agrees with the float one).
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-$PWD/build/mlxcel}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
here=tests/cli
# fixture[:tensors the family must ignore]
CONVERT_FAMILIES="qwen3_5_text:mtp.fc.weight,mtp.layers.0.mlp.up_proj.weight qwen3_5_moe_text:mtp.fc.weight lfm2_moe minimax llama4_text gemma4_text"
CONVERT_FAMILIES="$CONVERT_FAMILIES seed_oss apertus bitnet hunyuan_v1_dense hunyuan_v1_moe ministral3 glm4_moe dots1"
CONVERT_FAMILIES="$CONVERT_FAMILIES ernie4_5_moe:model.mtp_block.0.input_layernorm.weight deepseek_v2 deepseek olmoe-clip longcat_flash:model.mtp.layers.0.eh_proj.weight"
CONVERT_FAMILIES="$CONVERT_FAMILIES nanochat mellum solar_open exaone_moe afmoe laguna cohere2_moe gemma3n_text"
CONVERT_FAMILIES="$CONVERT_FAMILIES youtu minicpm3 glm4_moe_lite mistral4 minimax_m2 mimo_v2_flash:model.mtp.layers.0.eh_proj.weight deepseek_v32"
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }

python3 $here/convert_mkmodel.py "$T/src" F32 || { fail convert_mkmodel "could not write the test model"; exit 0; }
ids=$(python3 -c "import random; r=random.Random(3); print(','.join(str(r.randrange(3,512)) for _ in range(100)))")
if ! "$MLXCEL" generate -m "$T/src" --prompt-ids "$ids" -n 0 --logits-out "$T/float.st" >/dev/null 2>"$T/err"; then
  fail convert_float_run "$(tail -1 "$T/err")"
fi

# mode bits group dtype-flag
while read -r name mode bits group dt; do
  args=(-q --q-mode "$mode" --q-bits "$bits" --q-group-size "$group")
  dflag=(); [ "$dt" != keep ] && dflag=(--dtype "$dt")
  out="$T/$name"
  if ! "$MLXCEL" convert -m "$T/src" -o "$out" "${args[@]}" "${dflag[@]}" >/dev/null 2>"$T/err"; then
    fail "convert_$name" "$(tail -1 "$T/err")"; continue
  fi
  ok "convert_$name"
  DT=$(case $dt in bf16) echo BF16;; f16) echo F16;; f32) echo F32;; *) echo keep;; esac)
  python3 $here/convert_check.py "$T/src" "$out" "$mode" "$bits" "$group" "$DT" 1
  if [ -f "$T/float.st" ]; then
    if "$MLXCEL" generate -m "$out" --prompt-ids "$ids" -n 0 --logits-out "$T/q.st" >/dev/null 2>"$T/err"; then
      python3 $here/convert_top1.py "$T/float.st" "$T/q.st" "convert_${name}_top1" 0.95
    else
      fail "convert_${name}_runs" "$(tail -1 "$T/err")"
    fi
  fi
done <<'LIST'
affine_b4_g64 affine 4 64 keep
affine_b8_g32 affine 8 32 keep
affine_b2_g128_bf16 affine 2 128 bf16
affine_b3_g32_f16 affine 3 32 f16
affine_b5_g64 affine 5 64 keep
affine_b6_g64 affine 6 64 keep
mxfp4 mxfp4 4 32 bf16
nvfp4 nvfp4 4 16 bf16
mxfp8 mxfp8 8 32 bf16
LIST

# float -> bf16 without quantization
if "$MLXCEL" convert -m "$T/src" -o "$T/bf16" --dtype bf16 >/dev/null 2>"$T/err"; then
  ok convert_bf16
  python3 $here/convert_check.py "$T/src" "$T/bf16" none 0 1 BF16 0
else fail convert_bf16 "$(tail -1 "$T/err")"; fi

# a real float fixture (HF layout, F32) converts with the default mode
if [ -d tests/fixtures/llama ]; then
  if "$MLXCEL" convert -m tests/fixtures/llama -o "$T/fx_llama_q4" -q >/dev/null 2>"$T/err"; then
    python3 $here/convert_check.py tests/fixtures/llama "$T/fx_llama_q4" affine 4 64 keep 1
    # the closing summary: size, parameters, bits per parameter (4-bit codes + a scale and bias per 64), time
    if grep -Eq "^mlxcel convert: wrote .*: [0-9.]+ [kKMG]?B, [0-9.]+( [KMB])? parameters, [4-7]\.[0-9]+ bits per parameter, in [0-9.]+ s$" "$T/err"; then
      ok convert_summary; else fail convert_summary "$(tail -1 "$T/err")"; fi
  else fail convert_fixture_llama "$(tail -1 "$T/err")"; fi
fi

# the newer families: a purpose-built model from each fixture (margins that 4 bits keep), converted with
# the default mode; its greedy ids must equal the float run's and its prompt top-1 agree
fam_ids=$(python3 -c "import random; r=random.Random(5); print(','.join(str(r.randrange(3,300)) for _ in range(60)))")
gen_ids() { python3 -c "import json,sys; print(json.load(sys.stdin)['generated_ids'])"; }
family_check() { # fixture, tensors to ignore: prints its ok/FAIL lines
  local fx=$1 extra=$2 src="$T/fam_$1" fo qo
  python3 $here/convert_family.py tests/fixtures/$fx "$src" 0.3 "$extra" || { fail "convert_family_$fx" "could not write the model"; return; }
  if ! fo=$("$MLXCEL" generate -m "$src" --prompt-ids "$fam_ids" -n 16 --ignore-eos --output-format json \
            --logits-out "$src.f.st" 2>"$src.err" | gen_ids); then fail "convert_family_${fx}_float" "$(tail -1 "$src.err")"; return; fi
  if ! "$MLXCEL" convert -m "$src" -o "${src}_q4" -q >/dev/null 2>"$src.err"; then
    fail "convert_family_$fx" "$(tail -1 "$src.err")"; return
  fi
  python3 $here/convert_check.py "$src" "${src}_q4" affine 4 64 keep 1
  if ! qo=$("$MLXCEL" generate -m "${src}_q4" --prompt-ids "$fam_ids" -n 16 --ignore-eos --output-format json \
            --logits-out "$src.q.st" 2>"$src.err" | gen_ids); then fail "convert_family_${fx}_q4_runs" "$(tail -1 "$src.err")"; return; fi
  if [ "$fo" = "$qo" ]; then ok "convert_family_${fx}_greedy"; else fail "convert_family_${fx}_greedy" "float $fo vs 4-bit $qo"; fi
  python3 $here/convert_top1.py "$src.f.st" "$src.q.st" "convert_family_${fx}_top1" 0.95
  rm -rf "$src" "${src}_q4" "$src".*.st
}
# two families at a time (tiny models: process start-up and python dominate), reported in list order
fams=()
for entry in $CONVERT_FAMILIES; do
  fx=${entry%%:*}; extra=; [ "$fx" != "$entry" ] && extra=${entry#*:}
  [ -d tests/fixtures/$fx ] || { fail "convert_family_$fx" "no fixture"; continue; }
  while [ "$(jobs -rp | wc -l)" -ge "${MX_TEST_JOBS:-2}" ]; do wait -n; done
  family_check "$fx" "$extra" >"$T/fam_$fx.out" 2>&1 &
  fams+=("$fx")
done
wait
for fx in "${fams[@]}"; do cat "$T/fam_$fx.out"; done

# bad arguments: one-line errors, non-zero exit
expect_err() { # name, needle, args...
  local name=$1 needle=$2; shift 2
  if "$MLXCEL" convert "$@" >/dev/null 2>"$T/err"; then fail "$name" "succeeded"; 
  elif grep -q -- "$needle" "$T/err" && [ "$(wc -l <"$T/err")" -le 1 ]; then ok "$name"
  else fail "$name" "message: $(cat "$T/err")"; fi
}
expect_err convert_bad_mode "q-mode" -m "$T/src" -o "$T/bad1" -q --q-mode int3
expect_err convert_mxfp4_group "mxfp4 needs" -m "$T/src" -o "$T/bad2" -q --q-mode mxfp4 --q-group-size 64
expect_err convert_bits7 "7 is not supported" -m "$T/src" -o "$T/bad3" -q --q-bits 7
expect_err convert_out_exists "not empty" -m "$T/src" -o "$T/affine_b4_g64" -q
expect_err convert_already_quantized "already quantized" -m "$T/affine_b4_g64" -o "$T/bad4" -q
expect_err convert_bad_dtype "dtype" -m "$T/src" -o "$T/bad5" --dtype f8
expect_err convert_missing_src "no such directory" -m "$T/nonexistent" -o "$T/bad6"
exit 0
