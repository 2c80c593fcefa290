#!/usr/bin/env python3
"""usage: whisper_ts_model.py FIXTURE OUT_DIR WAV LONG_WAV
Copies the whisper fixture into OUT_DIR with 1501 timestamp tokens added
(<|0.00|> .. <|30.00|>: vocab_size, the tokenizer's added tokens, random rows
of the tied embedding, no_timestamps_token_id, max_length 40) and writes
LONG_WAV: WAV repeated 19 times (69.5 s), for the long-form tests."""
import json, os, random, shutil, struct, sys, wave
src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst)
for f in os.listdir(src):
    if os.path.isfile(os.path.join(src, f)) and f != 'reference.safetensors': shutil.copy(os.path.join(src, f), dst)
cfg = json.load(open(dst + '/config.json')); V0 = cfg['vocab_size']; NT = 1501; cfg['vocab_size'] = V0 + NT
json.dump(cfg, open(dst + '/config.json', 'w'))
tc = json.load(open(dst + '/tokenizer_config.json'))
for i in range(NT):
    tc['added_tokens_decoder'][str(V0 + i)] = {'content': '<|%.2f|>' % (i * 0.02), 'lstrip': False, 'normalized': False, 'rstrip': False, 'single_word': False, 'special': False}
json.dump(tc, open(dst + '/tokenizer_config.json', 'w'))
# the embedding (tied output) grows by NT random rows
b = open(dst + '/model.safetensors', 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n]); data = b[8 + n:]
rnd = random.Random(7); out = {}; blobs = []; off = 0
for k in sorted(x for x in h if x != '__metadata__'):
    s, e = h[k]['data_offsets']; raw = data[s:e]; shape = h[k]['shape']
    if k == 'model.decoder.embed_tokens.weight':
        raw += struct.pack('<%df' % (NT * shape[1]), *[rnd.gauss(0, 0.15) for _ in range(NT * shape[1])]); shape = [shape[0] + NT, shape[1]]
    out[k] = {'dtype': 'F32', 'shape': shape, 'data_offsets': [off, off + len(raw)]}; blobs.append(raw); off += len(raw)
hj = json.dumps(out).encode(); hj += b' ' * ((8 - len(hj) % 8) % 8)
open(dst + '/model.safetensors', 'wb').write(struct.pack('<Q', len(hj)) + hj + b''.join(blobs))
gc = json.load(open(dst + '/generation_config.json')); gc.update({'no_timestamps_token_id': V0 - 1, 'max_length': 40, 'max_initial_timestamp_index': 50})
json.dump(gc, open(dst + '/generation_config.json', 'w'))
w = wave.open(sys.argv[3]); fr = w.readframes(w.getnframes()); o = wave.open(sys.argv[4], 'wb')
o.setnchannels(1); o.setsampwidth(2); o.setframerate(16000); o.writeframes(fr * 19); o.close()   # 69.5 s
