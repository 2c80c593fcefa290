#!/usr/bin/env bash
# Image encode time (tower + projector) and time to first token with an image
# for random-weight vision-language models of real shapes (tools/configs:
# qwen2-vl-2b.json, gemma-3-4b.json, qwen2.5-vl-3b.json, qwen3-vl-8b.json, mistral-small-3.1-2l.json
# (the whole Pixtral tower, 2 of the 40 text layers), mistral-small-3.1.json (all 40); bf16, or with
# BITS=4 the language model written as MLX affine 4-bit by mkmodel --bits, in DIR/MODEL-q4), through `mlxcel generate --image
# --prompt-ids ... -n 1 --output-format json` (timings: image_ms = decode +
# preprocess + tower + projector, prefill_ms = the text model over the prompt
# with the image rows). Runs each model REPS times (default 3), interleaved,
# and prints the medians. MODELS (the 4th argument or the environment; default
# "qwen2-vl-2b gemma-3-4b") picks among those.
# Usage: [BITS=4] [MODELS=...] tools/vision_bench.sh DIR [THREADS] [REPS] [MODELS]   (DIR receives the models)
set -eu
cd "$(dirname "$0")/.."
D=$1; T=${2:-$(nproc)}; R=${3:-3}
M=build/mlxcel
mkdir -p "$D"
MODELS=${4:-${MODELS:-qwen2-vl-2b gemma-3-4b}}
BITS=${BITS:-}
sfx=${BITS:+-q$BITS}
for c in $MODELS; do
  [ -f "tools/configs/$c.json" ] || { echo "vision_bench: unknown model $c" >&2; exit 2; }
  m=$c$sfx
  [ -f "$D/$m/model.safetensors" ] || build/mkmodel --config "tools/configs/$c.json" -o "$D/$m" --dtype bf16 --seed 1 ${BITS:+--bits $BITS}
  # the published processors' settings
  case $m in
  qwen3*) cat >"$D/$m/preprocessor_config.json" <<'J'
{"image_processor_type": "Qwen2VLImageProcessorFast", "processor_class": "Qwen3VLProcessor", "min_pixels": 65536,
 "max_pixels": 16777216, "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
 "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "resample": 3}
J
  ;;
  qwen*) cat >"$D/$m/preprocessor_config.json" <<'J'
{"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14,
 "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
 "image_std": [0.26862954, 0.26130258, 0.27577711], "resample": 3}
J
  ;;
  gemma*) cat >"$D/$m/preprocessor_config.json" <<'J'
{"image_processor_type": "Gemma3ImageProcessor", "size": {"height": 896, "width": 896}, "resample": 2,
 "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5], "do_pan_and_scan": null}
J
    echo '{"image_seq_length": 256}' >"$D/$m/processor_config.json" ;;
  mistral*) cat >"$D/$m/preprocessor_config.json" <<'J'
{"image_processor_type": "PixtralImageProcessor", "size": {"longest_edge": 1540}, "patch_size": {"height": 14, "width": 14},
 "resample": 3, "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
J
    echo '{"processor_class": "PixtralProcessor", "patch_size": 14, "spatial_merge_size": 2, "image_token": "[IMG]",
 "image_break_token": "[IMG_BREAK]", "image_end_token": "[IMG_END]"}' >"$D/$m/processor_config.json" ;;
  esac
done
# a 448x448 photo-like PNG (gradients and noise; Qwen2-VL: 1024 patches -> 256 tokens, Gemma 3: resized
# to 896x896, 4096 patches -> 256 tokens), and prompts with the image tokens expanded
python3 - "$D" <<'PY'
import random, struct, sys, zlib
d = sys.argv[1]; w, h = 448, 448; rnd = random.Random(7); rows = []
for y in range(h):
    r = bytearray(b"\0")
    for x in range(w):
        n = rnd.randint(-20, 20)
        r += bytes(max(0, min(255, v + n)) for v in (x * 255 // w, y * 255 // h, 128))
    rows.append(bytes(r))
def chunk(t, b): return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b) & 0xffffffff)
open(f"{d}/photo.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                                   chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
text = [1000 + i for i in range(16)]
# Qwen2-VL: smart resize to multiples of 28 -> (h/28)*(w/28) merged tokens
hq, wq = round(h / 28) * 28, round(w / 28) * 28
q = [151644] + text + [151652] + [151655] * (hq // 28 * wq // 28) + [151653] + text + [151645]
g = [2] + text + [255999] + [262144] * 256 + [256000] + text
open(f"{d}/qwen.ids", "w").write(",".join(map(str, q)))
# Qwen3-VL: patch 16, so multiples of 32 -> 14 x 14 = 196 merged tokens
q3 = [151644] + text + [151652] + [151655] * (round(h / 32) * round(w / 32)) + [151653] + text + [151645]
open(f"{d}/qwen3.ids", "w").write(",".join(map(str, q3)))
open(f"{d}/gemma.ids", "w").write(",".join(map(str, g)))
# Mistral 3: 448 fits longest_edge 1540; 448 / 28 = 16 merged rows of 16 [IMG] (10) + [IMG_BREAK] (12),
# the last [IMG_END] (13); <s> [INST] text image text [/INST]
rows = [[10] * 16 + [12] for _ in range(16)]; rows[-1][-1] = 13
m = [1, 3] + text + [t for r in rows for t in r] + text + [4]
open(f"{d}/mistral.ids", "w").write(",".join(map(str, m)))
PY
for r in $(seq 1 "$R"); do
  for c in $MODELS; do
    m=$c$sfx
    ids=$D/qwen.ids; case $m in qwen3*) ids=$D/qwen3.ids ;; gemma*) ids=$D/gemma.ids ;; mistral*) ids=$D/mistral.ids ;; esac
    "$M" generate -m "$D/$m" --image "$D/photo.png" --prompt-ids "$(cat "$ids")" -n 1 -t "$T" \
      --output-format json 2>/dev/null | tail -1 | python3 -c "
import json, sys; j = json.loads(sys.stdin.read()); t = j['timings']
print('$m', len(j['prompt_ids']), round(t['image_ms']), round(t['prefill_ms']), round(t['image_ms'] + t['prefill_ms']))"
  done
done | python3 -c "
import statistics, sys
runs = {}
for line in sys.stdin:
    name, n, img, pre, ttft = line.split(); runs.setdefault(name, []).append((int(n), int(img), int(pre), int(ttft)))
print('| model | prompt tokens | image encode ms | text prefill ms | time to first token ms | runs |')
print('|---|---|---|---|---|---|')
for name, v in runs.items():
    med = lambda k: statistics.median(x[k] for x in v)
    print(f'| {name} | {v[0][0]} | {med(1):.0f} | {med(2):.0f} | {med(3):.0f} | {len(v)} |')
"
