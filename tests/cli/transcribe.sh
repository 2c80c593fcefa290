#!/usr/bin/env bash
# Speech to text on the whisper fixture: the parity contract of
# `generate --audio` (prompt logits, step logits and greedy ids against the
# Hugging Face reference, whole prompt and --prefill-chunk 1), `transcribe`
# in every output format and from every container, the long form (the WAV
# repeated past 30 s) on a copy of the fixture given timestamp tokens, and
# clean errors for hostile or missing input.
set -u
cd "$(dirname "$0")/../.."
MLXCEL=${MLXCEL:-build/mlxcel}
F=tests/fixtures/whisper
WAV=$F/inputs/speech.wav
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok $1"; }
fail() { echo "FAIL $1: $2"; }

# got.safetensors vs the reference: logits (all rows) and step_logits vs greedy_logits; tolerance 1e-4 * max(1, max|ref|)
cmp_logits() { # got
  python3 - "$1" "$F/reference.safetensors" <<'EOF'
import json, struct, sys
def load(p):
    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])
    def get(k):
        s, e = h[k]['data_offsets']; return struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return get
got, ref = load(sys.argv[1]), load(sys.argv[2])
for g, r in (('logits', 'logits'), ('step_logits', 'greedy_logits')):
    a, b = got(g), ref(r)
    tol = 1e-4 * max(1.0, max(abs(x) for x in b))
    d = max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else float('inf')
    if d > tol: print('%s: max diff %g > %g (%d vs %d values)' % (g, d, tol, len(a), len(b))); sys.exit(1)
EOF
}
ref_greedy=$(python3 - "$F/reference.safetensors" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); s, e = h['greedy_ids']['data_offsets']
print(','.join(str(v) for v in struct.unpack('<%dq' % ((e - s) // 8), b[8 + n + s:8 + n + e])))
EOF
)

# ---- the parity contract ----
for chunk in 512 1; do
  out=$("$MLXCEL" generate -m $F --audio $WAV --prompt-ids 317,318,322,326 -n 16 --temp 0 --ignore-eos --prefill-chunk $chunk \
        --logits-out $tmp/l$chunk.safetensors --output-format json -t 2 2>$tmp/err)
  ids=$(printf '%s' "$out" | python3 -c 'import json,sys; print(",".join(map(str, json.load(sys.stdin)["generated_ids"])))' 2>/dev/null)
  if [ "$ids" = "$ref_greedy" ]; then ok "generate --audio greedy ids (chunk $chunk)"; else fail "generate --audio greedy ids (chunk $chunk)" "$ids vs $ref_greedy $(cat $tmp/err)"; fi
  if why=$(cmp_logits $tmp/l$chunk.safetensors); then ok "generate --audio logits (chunk $chunk)"; else fail "generate --audio logits (chunk $chunk)" "$why"; fi
done

# ---- transcribe: formats ----
"$MLXCEL" transcribe -m $F $WAV --language en -t 2 >$tmp/text 2>$tmp/err && [ -s $tmp/text ] && ok "transcribe text" || fail "transcribe text" "$(cat $tmp/err)"
for fmt in json verbose_json srt vtt; do
  if ! "$MLXCEL" transcribe -m $F $WAV --language en -f $fmt -t 2 >$tmp/$fmt 2>$tmp/err; then fail "transcribe $fmt" "$(cat $tmp/err)"; continue; fi
  case $fmt in
    json) python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert set(d)=={"text"}' $tmp/json ;;
    verbose_json) python3 - $tmp/verbose_json <<'EOF' ;;
import json, sys
d = json.load(open(sys.argv[1]))
assert d["task"] == "transcribe" and d["language"] == "english" and abs(d["duration"] - 58520 / 16000) < 1e-6, d
s = d["segments"]; assert len(s) == 1 and s[0]["start"] == 0 and s[0]["tokens"] and "avg_logprob" in s[0], s
EOF
    srt) head -2 $tmp/srt | tr '\n' '|' | grep -q '^1|00:00:00,000 --> 00:00:03,658|$' ;;
    vtt) head -3 $tmp/vtt | tr '\n' '|' | grep -q '^WEBVTT||00:00:00.000 --> 00:00:03.658|$' ;;
  esac && ok "transcribe $fmt" || fail "transcribe $fmt" "$(head -c 300 $tmp/$fmt)"
done
# the same text from the same audio in every container (lossless ones: identical samples)
python3 - $WAV $tmp <<'EOF'
import struct, sys, wave
w = wave.open(sys.argv[1]); n = w.getnframes(); raw = w.readframes(n); s = struct.unpack('<%dh' % n, raw)
# stereo at 44.1 kHz? needs a resampler: keep 16 kHz; stereo L = R = x, 24-bit and float copies
def out(name, ch, width, fmt, conv):
    o = wave.open(sys.argv[2] + '/' + name, 'wb') if fmt is None else None
    if o:
        o.setnchannels(ch); o.setsampwidth(width); o.setframerate(16000)
        o.writeframes(b''.join(conv(v) * ch for v in s)); o.close()
out('stereo.wav', 2, 2, None, lambda v: struct.pack('<h', v))
out('pcm24.wav', 1, 3, None, lambda v: struct.pack('<i', v << 8)[:3])
EOF
for f in stereo pcm24; do
  "$MLXCEL" transcribe -m $F $tmp/$f.wav --language en -t 2 >$tmp/$f.out 2>$tmp/err && cmp -s $tmp/$f.out $tmp/text \
    && ok "transcribe $f.wav = the 16-bit mono text" || fail "transcribe $f.wav" "$(cat $tmp/err) $(head -c 200 $tmp/$f.out)"
done

# ---- hostile input: one line, exit 1, no crash ----
printf 'RIFF\x24\x00\x00\x00WAVEfmt ' >$tmp/trunc.wav
head -c 1000 /dev/urandom >$tmp/noise.bin
: >$tmp/empty.wav
for f in trunc.wav noise.bin empty.wav missing.wav; do
  "$MLXCEL" transcribe -m $F $tmp/$f >$tmp/o 2>$tmp/err; rc=$?
  [ $rc = 1 ] && [ "$(wc -l <$tmp/err)" = 1 ] && grep -q "$tmp/$f" $tmp/err && ok "transcribe hostile $f" || fail "transcribe hostile $f" "rc=$rc $(cat $tmp/err)"
done
"$MLXCEL" transcribe -m $F $WAV --language klingon >/dev/null 2>$tmp/err; [ $? = 1 ] && grep -q 'unsupported language "klingon"' $tmp/err \
  && ok "transcribe bad language" || fail "transcribe bad language" "$(cat $tmp/err)"
"$MLXCEL" transcribe -m $F $WAV -f xml >/dev/null 2>$tmp/err; [ $? = 2 ] && ok "transcribe bad format" || fail "transcribe bad format" "$(cat $tmp/err)"
"$MLXCEL" transcribe -m $F $WAV --timestamps >/dev/null 2>$tmp/err; [ $? = 1 ] && grep -q 'no timestamp tokens' $tmp/err \
  && ok "transcribe --timestamps on a model without them" || fail "transcribe --timestamps without tokens" "$(cat $tmp/err)"

# ---- the long form: 70 s (the WAV repeated) on the fixture given 1501 timestamp tokens ----
python3 tests/cli/whisper_ts_model.py $F $tmp/ts $WAV $tmp/long.wav
if "$MLXCEL" transcribe -m $tmp/ts $tmp/long.wav --language en -f verbose_json -t 2 >$tmp/long.json 2>$tmp/err; then
  python3 - $tmp/long.json <<'EOF' && ok "long form: windows, ordered segments" || fail "long form" "$(head -c 400 $tmp/long.json)"
import json, sys
d = json.load(open(sys.argv[1])); s = d["segments"]
assert abs(d["duration"] - 19 * 58520 / 16000) < 1e-6
seeks = sorted(set(x["seek"] for x in s))
assert len(seeks) >= 3 and seeks[0] == 0 and max(seeks) > 3000, seeks        # at least three windows, past 30 s
for a, b in zip(s, s[1:]):
    assert a["seek"] <= b["seek"] and a["start"] <= b["start"] + 1e-9, (a, b)  # in order
for x in s:
    assert x["start"] <= x["end"] + 1e-9 and x["seek"] * 0.01 <= x["start"] + 1e-9 <= x["seek"] * 0.01 + 30.0001, x
assert d["text"] == "".join(x["text"] for x in s)                            # the text is the segments' text, once each
EOF
else fail "long form" "$(cat $tmp/err)"; fi
"$MLXCEL" transcribe -m $F $tmp/long.wav >/dev/null 2>$tmp/err; [ $? = 1 ] && grep -q 'no timestamp tokens' $tmp/err \
  && ok "long form needs timestamp tokens" || fail "long form without timestamp tokens" "$(cat $tmp/err)"
"$MLXCEL" transcribe -m $tmp/ts $tmp/long.wav --max-seconds 60 >/dev/null 2>$tmp/err; [ $? = 1 ] && grep -q 'longer than the limit of 60 s' $tmp/err \
  && ok "transcribe --max-seconds" || fail "transcribe --max-seconds" "$(cat $tmp/err)"
