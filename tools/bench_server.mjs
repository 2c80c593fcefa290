// Server benchmark: drives a running `mlxcel serve` with the official openai
// npm client and measures
//   (a) aggregate generation tokens/s with C concurrent streaming requests
//       (C in --concurrency, default 1,4,16), each generating exactly
//       --max-tokens tokens (ignore_eos, greedy), over --rounds rounds;
//   (b) time to first token of a long prompt (~--long-tokens tokens) sent
//       cold, then the same conversation plus a short new user turn, which
//       the server's prompt cache should serve from the cached prefix.
// Prints a markdown table and one JSON line (prefixed "JSON ").
//
// usage: node tools/bench_server.mjs --url http://127.0.0.1:PORT [--model ID]
//          [--concurrency 1,4,16] [--max-tokens 64] [--rounds 3]
//          [--long-tokens 1000] [--ttft-tries 5] [--api chat|completions]
//          [--skip-throughput] [--skip-ttft]
// The openai package is resolved from tests/cache/node (install it there with
// `npm install --prefix tests/cache/node openai@4`) or from NODE_PATH.
import { createRequire } from 'node:module';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
let OpenAI;
try {
  const req = createRequire(path.join(here, '..', 'tests', 'cache', 'node', 'package.json'));
  OpenAI = req('openai').default ?? req('openai');
} catch {
  OpenAI = (await import('openai')).default;
}

const opts = {
  url: 'http://127.0.0.1:8080', model: null, concurrency: '1,4,16', 'max-tokens': '64', rounds: '3',
  'long-tokens': '1000', 'ttft-tries': '5', api: 'chat', 'skip-throughput': false, 'skip-ttft': false, timeout: '600',
};
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (!a.startsWith('--') || !(a.slice(2) in opts)) { console.error(`bench_server: unknown argument ${a}`); process.exit(2); }
  const k = a.slice(2);
  if (typeof opts[k] === 'boolean') opts[k] = true;
  else opts[k] = process.argv[++i];
}
const url = opts.url.replace(/\/+$/, '');
if (!/^https?:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?$/.test(url)) {
  console.error(`bench_server: --url must be a local address (got ${url})`);
  process.exit(2);
}
const levels = opts.concurrency.split(',').map(Number).filter((n) => n > 0);
const maxTokens = Number(opts['max-tokens']), rounds = Number(opts.rounds);
const longTokens = Number(opts['long-tokens']), ttftTries = Number(opts['ttft-tries']);
const chat = opts.api === 'chat';
// a new connection per request: llama-server closes idle kept-alive sockets, which the client would
// reuse and see reset (the connection's cost is nothing beside a generation)
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.OPENAI_API_KEY || 'unused', maxRetries: 0,
                            timeout: Number(opts.timeout) * 1000, httpAgent: new http.Agent({ keepAlive: false }) });

const now = () => performance.now() / 1000;
const median = (xs) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b), m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const r2 = (x) => Math.round(x * 100) / 100;
const r3 = (x) => Math.round(x * 1000) / 1000;

const model = opts.model ?? (await client.models.list()).data[0].id;
const t_begin = now();

// A few thousand distinct English-ish words; a nonce keeps prompts apart so a
// "cold" request never finds its text in another slot's cache.
const WORDS = ('the of and to in is was for on that with as by at from his her an which or were are this be had it not '
  + 'but have they their one all been has more can its also when who new there other into after first two time over only '
  + 'some would these like than many most such them then years may made about out during people between three city world '
  + 'river mountain garden kitchen letter window market station harbour library engine forest village winter summer').split(' ');
const textOf = (nonce, n) => {
  let x = nonce * 2654435761 >>> 0, out = [];
  for (let i = 0; i < n; i++) { x = (x * 1103515245 + 12345) >>> 0; out.push(WORDS[(x >>> 8) % WORDS.length]); }
  return out.join(' ');
};
const tokenCount = async (text) => {
  const r = await fetch(`${url}/tokenize`, { method: 'POST', headers: { 'content-type': 'application/json' },
                                             body: JSON.stringify({ content: text }) });
  const j = await r.json();
  return j.tokens ? j.tokens.length : NaN;
};

// One streaming request; returns timings and usage.
async function streamOne(messagesOrPrompt, max) {
  const body = { model, temperature: 0, max_tokens: max, ignore_eos: true, stream: true, stream_options: { include_usage: true } };
  if (chat) body.messages = messagesOrPrompt;
  else body.prompt = messagesOrPrompt;
  const t0 = now();
  const stream = chat ? await client.chat.completions.create(body) : await client.completions.create(body);
  let tFirst = null, usage = null, text = '';
  for await (const ch of stream) {
    if (ch.usage) usage = ch.usage;
    const c = ch.choices?.[0];
    if (c && tFirst === null) tFirst = now();
    if (c) text += (chat ? c.delta?.content : c.text) ?? '';
  }
  const t1 = now();
  return { t0, tFirst: tFirst ?? t1, t1, usage, text };
}
const userMsg = (s) => (chat ? [{ role: 'user', content: s }] : s);

const results = { model, api: opts.api, max_tokens: maxTokens, rounds, throughput: [], ttft: null };

if (!opts['skip-throughput']) {
  // warm-up: page the weights in, first-touch the buffers
  await streamOne(userMsg(`warm up ${textOf(7, 8)}`), 8);
  for (const C of levels) {
    const agg = [], perStream = [], ttfts = [], decode = [];
    let badCount = 0;
    for (let r = 0; r < rounds; r++) {
      const prompts = Array.from({ length: C }, (_, i) => userMsg(`Request ${r}-${i}: ${textOf(1000 * C + 100 * r + i, 8)}`));
      const t0 = now();
      const res = await Promise.all(prompts.map((p) => streamOne(p, maxTokens)));
      const wall = now() - t0;
      let total = 0;
      for (const x of res) {
        const n = x.usage?.completion_tokens ?? 0;
        if (n !== maxTokens) badCount++;
        total += n;
        perStream.push(n / (x.t1 - x.t0));
        ttfts.push(x.tFirst - x.t0);
        if (n > 1 && x.t1 > x.tFirst) decode.push((n - 1) / (x.t1 - x.tFirst));
      }
      agg.push(total / wall);
      console.error(`  C=${C} round ${r + 1}/${rounds}: ${total} tokens in ${wall.toFixed(2)} s = ${(total / wall).toFixed(2)} tok/s`);
    }
    results.throughput.push({
      concurrency: C, aggregate_tps: r2(median(agg)), aggregate_tps_rounds: agg.map(r2), per_stream_tps: r2(median(perStream)),
      per_stream_decode_tps: r2(median(decode)), ttft_s: r3(median(ttfts)), short_requests: badCount,
    });
  }
}

if (!opts['skip-ttft']) {
  // calibrate the long prompt's word count to ~longTokens tokens
  let words = Math.round(longTokens / 1.3);
  for (let i = 0; i < 4; i++) {
    const n = await tokenCount(textOf(1, words));
    if (!(n > 0)) break;
    words = Math.max(16, Math.round(words * longTokens / n));
  }
  const cold = [], hit = [], cachedFrac = [];
  let promptTokens = 0, hitPromptTokens = 0, cachedTokens = 0, coldCached = 0;
  for (let t = 0; t < ttftTries; t++) {
    const long = `Document ${t}-${Date.now() % 100000}: ${textOf(50 + t, words)}\n\nSummarise the document.`;
    const first = chat ? [{ role: 'user', content: long }] : long;
    const a = await streamOne(first, 8);
    const second = chat ? [...first, { role: 'assistant', content: a.text }, { role: 'user', content: 'Now say it in one sentence.' }]
                        : `${long}${a.text}\n\nNow say it in one sentence.`;
    const b = await streamOne(second, 8);
    cold.push(a.tFirst - a.t0);
    hit.push(b.tFirst - b.t0);
    const ct = b.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    cachedFrac.push(ct / (b.usage?.prompt_tokens || 1));
    promptTokens = a.usage?.prompt_tokens ?? 0;
    hitPromptTokens = b.usage?.prompt_tokens ?? 0;
    cachedTokens = ct;
    coldCached = a.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    console.error(`  ttft try ${t + 1}/${ttftTries}: cold ${(a.tFirst - a.t0).toFixed(3)} s (${promptTokens} prompt tokens, ` +
                  `${a.usage?.prompt_tokens_details?.cached_tokens ?? 0} cached), hit ${(b.tFirst - b.t0).toFixed(3)} s ` +
                  `(${hitPromptTokens} prompt tokens, ${ct} cached)`);
  }
  results.ttft = {
    prompt_tokens: promptTokens, cold_cached_tokens: coldCached, hit_prompt_tokens: hitPromptTokens, hit_cached_tokens: cachedTokens,
    cold_s: r3(median(cold)), hit_s: r3(median(hit)), cold_tries: cold.map(r3), hit_tries: hit.map(r3),
    hit_cached_fraction: r3(median(cachedFrac)), speedup: r2(median(cold) / median(hit)),
  };
}
results.wall_s = r2(now() - t_begin);

const out = [];
if (results.throughput.length) {
  out.push(`| concurrent streams | aggregate gen tok/s | per-stream tok/s | per-stream decode tok/s | median TTFT (s) |`);
  out.push(`|---:|---:|---:|---:|---:|`);
  for (const x of results.throughput)
    out.push(`| ${x.concurrency} | ${x.aggregate_tps} | ${x.per_stream_tps} | ${x.per_stream_decode_tps} | ${x.ttft_s} |`);
  out.push('');
}
if (results.ttft) {
  const t = results.ttft;
  out.push(`| long prompt | prompt tokens | cached tokens | median TTFT (s) |`);
  out.push(`|---|---:|---:|---:|`);
  out.push(`| cold | ${t.prompt_tokens} | ${t.cold_cached_tokens} | ${t.cold_s} |`);
  out.push(`| + new user turn (cache hit) | ${t.hit_prompt_tokens} | ${t.hit_cached_tokens} | ${t.hit_s} |`);
  out.push('');
}
console.log(out.join('\n'));
console.log('JSON ' + JSON.stringify(results));
const short = results.throughput.reduce((s, x) => s + x.short_requests, 0);
if (short) console.error(`bench_server: ${short} requests returned fewer than ${maxTokens} tokens`);
process.exit(0);
