// Drives a speech-to-text `mlxcel serve` with the official openai client
// (audio.transcriptions.create / audio.translations.create, multipart
// upload, every response_format) and raw HTTP for the errors. Prints
// "ok NAME" / "FAIL NAME: why" lines.
// usage: node test_audio.mjs PORT TS_PORT WAV LONG_WAV
import OpenAI from 'openai';
import fs from 'node:fs';

const [port, tsPort, wav, longWav] = process.argv.slice(2);
const mk = (p) => new OpenAI({ baseURL: `http://127.0.0.1:${p}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const client = mk(port), tsClient = mk(tsPort);
let failed = 0;
const check = (name, cond, why = '') => {
  if (cond) console.log(`ok ${name}`);
  else { console.log(`FAIL ${name}: ${why}`); failed++; }
};
const attempt = async (name, fn) => {
  try { await fn(); } catch (e) { check(name, false, `threw ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`); }
};
const file = () => fs.createReadStream(wav);

let jsonText = null;
await attempt('audio/json', async () => {
  const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en' });
  jsonText = r.text;
  check('audio/json', typeof r.text === 'string' && r.text.length > 0 && Object.keys(r).length === 1, JSON.stringify(r));
});
await attempt('audio/text', async () => {
  const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en', response_format: 'text' });
  check('audio/text', typeof r === 'string' && r === jsonText + '\n', JSON.stringify(r));
});
await attempt('audio/verbose_json', async () => {
  const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en', response_format: 'verbose_json',
                                                       timestamp_granularities: ['segment'] });
  check('audio/verbose_json', r.task === 'transcribe' && r.language === 'english' && Math.abs(r.duration - 58520 / 16000) < 1e-6 &&
        r.text === jsonText && Array.isArray(r.segments) && r.segments.length === 1 && r.segments[0].id === 0 &&
        Array.isArray(r.segments[0].tokens) && typeof r.segments[0].avg_logprob === 'number', JSON.stringify(r).slice(0, 400));
});
for (const fmt of ['srt', 'vtt']) {
  await attempt(`audio/${fmt}`, async () => {
    const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en', response_format: fmt });
    const head = fmt === 'srt' ? '1\n00:00:00,000 --> 00:00:03,658\n' : 'WEBVTT\n\n00:00:00.000 --> 00:00:03.658\n';
    check(`audio/${fmt}`, typeof r === 'string' && r.startsWith(head), JSON.stringify(r));
  });
}
await attempt('audio/prompt and temperature', async () => {
  const r = await client.audio.transcriptions.create({ file: file(), model: 'whisper-1', prompt: 'The quick brown fox.', temperature: 0.4 });
  check('audio/prompt and temperature', typeof r.text === 'string', JSON.stringify(r));
});
await attempt('audio/translations', async () => {
  const r = await client.audio.translations.create({ file: file(), model: 'whisper-1', response_format: 'verbose_json' });
  check('audio/translations', r.task === 'translate' && typeof r.text === 'string', JSON.stringify(r).slice(0, 300));
});
// the long form, with timestamps, on the model given timestamp tokens
await attempt('audio/long form', async () => {
  const r = await tsClient.audio.transcriptions.create({ file: fs.createReadStream(longWav), model: 'whisper-1', language: 'en',
                                                         response_format: 'verbose_json' });
  const seeks = [...new Set(r.segments.map((s) => s.seek))];
  check('audio/long form', Math.abs(r.duration - 19 * 58520 / 16000) < 1e-6 && seeks.length >= 3 &&
        r.segments.every((s, i) => i === 0 || s.start >= r.segments[i - 1].start) && r.text === r.segments.map((s) => s.text).join(''),
        JSON.stringify(r).slice(0, 400));
});
await attempt('audio/srt with timestamps', async () => {
  const r = await tsClient.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en', response_format: 'srt' });
  check('audio/srt with timestamps', typeof r === 'string' && /^1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n/.test(r), JSON.stringify(r));
});

// errors over raw HTTP: one clear 400 each
const post = async (p, body, headers = {}) => {
  const r = await fetch(`http://127.0.0.1:${port}${p}`, { method: 'POST', body, headers });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, json, text };
};
const form = (fields) => {
  const f = new FormData();
  for (const [k, v, fn] of fields) fn ? f.append(k, v, fn) : f.append(k, v);
  return f;
};
const audioBlob = new Blob([fs.readFileSync(wav)]);
const errs = [
  ['no file', form([['model', 'whisper-1']]), "'file'"],
  ['unknown field', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['chunking_strategy', 'auto']]), "unsupported field 'chunking_strategy'"],
  ['word timestamps', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['timestamp_granularities[]', 'word']]), 'only segment'],
  ['bad format', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['response_format', 'xml']]), 'response_format'],
  ['bad temperature', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['temperature', 'hot']]), 'temperature'],
  ['twice', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['prompt', 'a'], ['prompt', 'b']]), 'twice'],
  ['garbage audio', form([['file', new Blob([Buffer.from('this is not audio at all')]), 'x.wav'], ['model', 'whisper-1']]), 'x.wav: not a WAV'],
  ['empty audio', form([['file', new Blob([]), 'e.wav'], ['model', 'whisper-1']]), 'e.wav: empty file'],
  ['stream', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['stream', 'true']]), 'not supported'],
  ['bad language', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['language', 'xx']]), 'unsupported language'],
];
for (const [name, body, want] of errs) {
  await attempt(`audio/error ${name}`, async () => {
    const r = await post('/v1/audio/transcriptions', body);
    check(`audio/error ${name}`, r.status === 400 && r.json && r.json.error && r.json.error.message.includes(want), `${r.status} ${r.text}`);
  });
}
await attempt('audio/error translations language', async () => {
  const r = await post('/v1/audio/translations', form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['language', 'en']]));
  check('audio/error translations language', r.status === 400 && r.text.includes("unsupported field 'language'"), `${r.status} ${r.text}`);
});
await attempt('audio/error not multipart', async () => {
  const r = await post('/v1/audio/transcriptions', '{"model":"whisper-1"}', { 'content-type': 'application/json' });
  check('audio/error not multipart', r.status === 400 && r.text.includes('multipart/form-data'), `${r.status} ${r.text}`);
});
await attempt('audio/error truncated multipart', async () => {
  const r = await post('/v1/audio/transcriptions', '--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\nRIFF',
                       { 'content-type': 'multipart/form-data; boundary=xyz' });
  check('audio/error truncated multipart', r.status === 400 && r.text.includes('truncated multipart'), `${r.status} ${r.text}`);
});
await attempt('audio/chat refused', async () => {
  const r = await post('/v1/chat/completions', JSON.stringify({ model: 'x', messages: [{ role: 'user', content: 'hi' }] }),
                       { 'content-type': 'application/json' });
  check('audio/chat refused', r.status === 400 && r.text.includes('speech-to-text'), `${r.status} ${r.text}`);
});
await attempt('audio/embeddings refused', async () => {
  const r = await post('/v1/embeddings', JSON.stringify({ input: 'hi' }), { 'content-type': 'application/json' });
  check('audio/embeddings refused', r.status === 400 && r.text.includes('speech-to-text'), `${r.status} ${r.text}`);
});
// concurrent uploads queue for the one runner: each gets its own, full answer
await attempt('audio/concurrent', async () => {
  const rs = await Promise.all(Array.from({ length: 4 }, () => client.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en' })));
  check('audio/concurrent', rs.every((r) => r.text === jsonText), JSON.stringify(rs.map((r) => r.text)));
});
// a client that leaves while its upload waits in the queue: the others are still answered
await attempt('audio/client_leaves', async () => {
  const ac = new AbortController();
  const gone = Array.from({ length: 2 }, () => fetch(`http://127.0.0.1:${port}/v1/audio/transcriptions`, {
    method: 'POST', signal: ac.signal, body: form([['file', audioBlob, 'a.wav'], ['model', 'whisper-1'], ['language', 'en']]) }).catch(() => null));
  const kept = client.audio.transcriptions.create({ file: file(), model: 'whisper-1', language: 'en' });
  setTimeout(() => ac.abort(), 20);
  await Promise.all(gone);
  const r = await kept;
  check('audio/client_leaves', r.text === jsonText, JSON.stringify(r));
});
process.exit(failed ? 1 : 0);
