// Drives a running `mlxcel serve` with the official openai client and raw
// HTTP. Prints "ok NAME" / "FAIL NAME: why" lines (tests/run.sh counts them).
// usage: node test_server.mjs PORT KEYED_PORT EMBED_PORT RERANK_PORT MLXCEL EMBED_DIR RERANK_DIR
import OpenAI from 'openai';
import net from 'node:net';
import { execFileSync } from 'node:child_process';

const [port, keyedPort, embedPort, rerankPort, mlxcel, embedDir, rerankDir] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
let failed = 0;
const check = (name, cond, why = '') => {
  if (cond) console.log(`ok ${name}`);
  else { console.log(`FAIL ${name}: ${why}`); failed++; }
};
const attempt = async (name, fn) => {
  try { await fn(); } catch (e) { check(name, false, `threw ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`); }
};
const raw = async (path, body, headers = {}, method = 'POST') => {
  const r = await fetch(base + path, { method, headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, text, json };
};
const msgs = (s) => [{ role: 'user', content: s }];
const greedy = { temperature: 0, max_tokens: 12 };

const models = await client.models.list();
const modelId = models.data[0]?.id;
check('models/list', models.data.length === 1 && typeof modelId === 'string', JSON.stringify(models.data));

await attempt('chat/blocking', async () => {
  const r = await client.chat.completions.create({ model: modelId, messages: msgs('Hello there'), ...greedy });
  const c = r.choices[0];
  check('chat/blocking', r.object === 'chat.completion' && r.id && c.message.role === 'assistant' &&
        typeof c.message.content === 'string' && ['stop', 'length'].includes(c.finish_reason) &&
        r.usage.prompt_tokens > 0 && r.usage.completion_tokens > 0 &&
        r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, JSON.stringify(r));
});

let aloneText = null;
await attempt('chat/stream', async () => {
  const stream = await client.chat.completions.create({ model: modelId, messages: msgs('Hello there'), ...greedy, stream: true,
                                                        stream_options: { include_usage: true } });
  let text = '', role = null, finish = null, usage = null, n = 0;
  for await (const ch of stream) {
    n++;
    if (ch.usage) usage = ch.usage;
    const c = ch.choices[0];
    if (!c) continue;
    if (c.delta.role) role = c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
  const blocking = await client.chat.completions.create({ model: modelId, messages: msgs('Hello there'), ...greedy });
  aloneText = blocking.choices[0].message.content;
  check('chat/stream', role === 'assistant' && finish && usage && usage.completion_tokens > 0 && n > 2, `role=${role} finish=${finish} usage=${JSON.stringify(usage)}`);
  check('chat/stream_equals_blocking', text === aloneText, `${JSON.stringify(text)} vs ${JSON.stringify(aloneText)}`);
});

await attempt('completions', async () => {
  const r = await client.completions.create({ model: modelId, prompt: 'The weather is', ...greedy });
  check('completions/blocking', r.object === 'text_completion' && typeof r.choices[0].text === 'string' && r.usage.completion_tokens > 0, JSON.stringify(r));
  const s = await client.completions.create({ model: modelId, prompt: 'The weather is', ...greedy, stream: true });
  let t = '';
  for await (const ch of s) t += ch.choices[0]?.text ?? '';
  check('completions/stream', t === r.choices[0].text, `${JSON.stringify(t)} vs ${JSON.stringify(r.choices[0].text)}`);
  const ids = await client.completions.create({ model: modelId, prompt: [1, 2, 3, 4], ...greedy });
  check('completions/token_ids', typeof ids.choices[0].text === 'string' && ids.usage.prompt_tokens === 4, JSON.stringify(ids));
});

await attempt('sampling/seed', async () => {
  const req = { model: modelId, messages: msgs('Pick words'), temperature: 1.2, top_p: 0.9, top_k: 40, seed: 1234, max_tokens: 16 };
  const a = await client.chat.completions.create(req), b = await client.chat.completions.create(req);
  check('sampling/seed', a.choices[0].message.content === b.choices[0].message.content, 'same seed gave different text');
});

await attempt('stop', async () => {
  const full = await client.chat.completions.create({ model: modelId, messages: msgs('stop test'), temperature: 0, max_tokens: 16 });
  const text = full.choices[0].message.content;
  const stop = text.length > 6 ? text.slice(3, 6) : null;
  if (!stop) { check('stop/string', true); return; }
  const r = await client.chat.completions.create({ model: modelId, messages: msgs('stop test'), temperature: 0, max_tokens: 16, stop: [stop] });
  const t = r.choices[0].message.content;
  check('stop/string', t === text.slice(0, text.indexOf(stop)) && r.choices[0].finish_reason === 'stop', `${JSON.stringify(t)} stop=${JSON.stringify(stop)} full=${JSON.stringify(text)}`);
});

await attempt('logprobs', async () => {
  const r = await client.chat.completions.create({ model: modelId, messages: msgs('Hi'), ...greedy, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs?.content;
  check('logprobs/chat', Array.isArray(lp) && lp.length === r.usage.completion_tokens && lp.every(e => e.top_logprobs.length === 3 && e.logprob <= 0 &&
        e.top_logprobs[0].logprob >= e.logprob - 1e-4), JSON.stringify(r.choices[0].logprobs)?.slice(0, 300));
  const b = await client.chat.completions.create({ model: modelId, messages: msgs('Hi'), ...greedy, logit_bias: { '100': 100 } });
  check('logit_bias', b.choices[0].message.content.length > 0, JSON.stringify(b.choices[0]));
});

await attempt('prompt_cache', async () => {
  const first = msgs('Tell me about the sea and the sky and the long road home');
  const a = await client.chat.completions.create({ model: modelId, messages: first, ...greedy });
  const turn2 = [...first, { role: 'assistant', content: a.choices[0].message.content }, { role: 'user', content: 'And then?' }];
  const b = await client.chat.completions.create({ model: modelId, messages: turn2, ...greedy });
  const cached = b.usage.prompt_tokens_details?.cached_tokens ?? 0;
  check('prompt_cache/hit', cached >= a.usage.prompt_tokens - 1, `cached=${cached} first prompt=${a.usage.prompt_tokens}`);
  const c = await client.chat.completions.create({ model: modelId, messages: turn2, ...greedy });
  check('prompt_cache/same_output', c.choices[0].message.content === b.choices[0].message.content, 'cached prefill changed the output');
});

await attempt('concurrency', async () => {
  const prompts = Array.from({ length: 16 }, (_, i) => msgs(`Request number ${i}: tell me something`));
  const alone = [];
  for (const m of prompts) alone.push((await client.chat.completions.create({ model: modelId, messages: m, temperature: 0, max_tokens: 24 })).choices[0].message.content);
  const together = await Promise.all(prompts.map(async (m) => {
    const s = await client.chat.completions.create({ model: modelId, messages: m, temperature: 0, max_tokens: 24, stream: true });
    let t = '';
    for await (const ch of s) t += ch.choices[0]?.delta?.content ?? '';
    return t;
  }));
  const bad = together.map((t, i) => t === alone[i] ? -1 : i).filter(i => i >= 0);
  check('concurrency/16_streams_equal_alone', bad.length === 0, `differ: ${bad.join(',')}: ${JSON.stringify(together[bad[0]])} vs ${JSON.stringify(alone[bad[0]])}`);
});

await attempt('tokenize', async () => {
  const t = await raw('/tokenize', JSON.stringify({ content: 'Hello world!' }));
  const d = await raw('/detokenize', JSON.stringify({ tokens: t.json.tokens }));
  check('tokenize/roundtrip', t.status === 200 && d.status === 200 && d.json.content === 'Hello world!', `${t.text} ${d.text}`);
});

// errors: OpenAI-style error objects
const errCases = [
  ['errors/malformed_json', '/v1/chat/completions', '{"model": ', 400],
  ['errors/wrong_type', '/v1/chat/completions', JSON.stringify({ messages: msgs('x'), max_tokens: 'ten' }), 400, 'max_tokens'],
  ['errors/model_not_string', '/v1/chat/completions', JSON.stringify({ model: 17, messages: msgs('x') }), 400, "'model'"],
  ['errors/empty_messages', '/v1/chat/completions', JSON.stringify({ messages: [] }), 400, 'messages'],
  ['errors/n_above_slots', '/v1/chat/completions', JSON.stringify({ messages: msgs('x'), n: 17 }), 400, "'n' must be at most 16"],
  ['errors/too_long', '/v1/completions', JSON.stringify({ prompt: 'word '.repeat(3000), max_tokens: 4 }), 400, 'context'],
  ['errors/bad_prompt', '/v1/completions', JSON.stringify({ prompt: [1, 'x'] }), 400, 'prompt'],
  ['errors/not_object', '/v1/completions', '[1,2]', 400],
  ['errors/bad_logit_bias', '/v1/chat/completions', JSON.stringify({ messages: msgs('x'), logit_bias: { '99999': 1 } }), 400, 'logit_bias'],
  ['errors/unknown_route', '/v1/nothing', '{}', 404],
];
for (const [name, path, body, code, needle] of errCases) {
  await attempt(name, async () => {
    const r = await raw(path, body);
    check(name, r.status === code && r.json?.error?.message && typeof r.json.error.type === 'string' && (!needle || r.json.error.message.includes(needle)),
          `status ${r.status} body ${r.text.slice(0, 200)}`);
  });
}
// one model is served: any name means it (agents send their own)
await attempt('model/any_name', async () => {
  const r = await raw('/v1/chat/completions', JSON.stringify({ model: 'gpt-17', messages: msgs('x'), max_tokens: 2 }));
  check('model/any_name', r.status === 200 && r.json?.model === modelId, `status ${r.status} body ${r.text.slice(0, 200)}`);
});
await attempt('errors/oversized_body', async () => {
  const r = await raw('/v1/chat/completions', JSON.stringify({ messages: msgs('x'.repeat(9 << 20)) }));
  check('errors/oversized_body', r.status === 413 && r.json?.error, `status ${r.status}`);
});

// faults: disconnect mid-stream, garbage, slow reader; then the server still works
await attempt('faults', async () => {
  const ac = new AbortController();
  try {
    const s = await client.chat.completions.create({ model: modelId, messages: msgs('a long answer please'), temperature: 0, max_tokens: 200, stream: true },
                                                   { signal: ac.signal });
    let n = 0;
    for await (const ch of s) { if (++n === 3) ac.abort(); }
  } catch {}
  await new Promise((res) => {
    const sock = net.connect(Number(port), '127.0.0.1', () => { sock.write('\x00\xff garbage \r\n\r\n not http at all'); setTimeout(() => { sock.destroy(); res(); }, 200); });
    sock.on('error', () => res());
  });
  await new Promise((res) => {
    const body = JSON.stringify({ messages: msgs('slow'), temperature: 0, max_tokens: 20, stream: true });
    const sock = net.connect(Number(port), '127.0.0.1', () => {
      sock.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
      let i = 0;
      const tick = setInterval(() => { sock.write(body.slice(i, i + 16)); i += 16; if (i >= body.length) { clearInterval(tick); sock.pause(); setTimeout(() => { sock.destroy(); res(); }, 500); } }, 5);
    });
    sock.on('error', () => res());
  });
  await new Promise(r => setTimeout(r, 300));
  const h = await raw('/health', undefined, {}, 'GET');
  check('faults/health_after', h.status === 200 && h.json?.status === 'ok', h.text);
  const again = await client.chat.completions.create({ model: modelId, messages: msgs('Hello there'), ...greedy });
  check('faults/output_unchanged', again.choices[0].message.content === aloneText, `${JSON.stringify(again.choices[0].message.content)} vs ${JSON.stringify(aloneText)}`);
  let active = -1;
  for (let i = 0; i < 50 && active !== 0; i++) {
    const m = await raw('/metrics', undefined, {}, 'GET');
    active = Number((m.text.match(/^mlxcel_requests_active (\d+)/m) || [])[1]);
    if (active !== 0) await new Promise(r => setTimeout(r, 100));
  }
  check('faults/slots_freed', active === 0, `active=${active}`);
  const m = await raw('/metrics', undefined, {}, 'GET');
  check('metrics/prometheus', m.status === 200 && /# TYPE mlxcel_generation_tokens_total counter/.test(m.text) && /mlxcel_queue_depth \d/.test(m.text), m.text.slice(0, 200));
});

if (keyedPort) {
  await attempt('auth', async () => {
    const u = `http://127.0.0.1:${keyedPort}/v1/models`;
    const none = await fetch(u), wrong = await fetch(u, { headers: { authorization: 'Bearer nope' } });
    const good = await fetch(u, { headers: { authorization: 'Bearer s3cret' } });
    const [b1, b2] = [await none.text(), await wrong.text()];
    check('auth/missing_401', none.status === 401, `${none.status}`);
    check('auth/wrong_401_same_body', wrong.status === 401 && b1 === b2, `${wrong.status} ${b1} vs ${b2}`);
    check('auth/good_200', good.status === 200, `${good.status}`);
    const kc = new OpenAI({ baseURL: `http://127.0.0.1:${keyedPort}/v1`, apiKey: 's3cret', maxRetries: 0 });
    const r = await kc.chat.completions.create({ model: modelId, messages: msgs('Hello there'), ...greedy });
    check('auth/client_with_key', typeof r.choices[0].message.content === 'string');
  });
}
if (embedPort) {
  await attempt('embeddings', async () => {
    const ec = new OpenAI({ baseURL: `http://127.0.0.1:${embedPort}/v1`, apiKey: 'unused', maxRetries: 0 });
    const id = (await ec.models.list()).data[0].id;
    const one = await ec.embeddings.create({ model: id, input: 'hello world', encoding_format: 'float' });
    const many = await ec.embeddings.create({ model: id, input: ['the cat sat', 'hello world', 'dog runs fast'], encoding_format: 'float' });
    const v = one.data[0].embedding, w = many.data[1].embedding;
    check('embeddings/shape', v.length === 64 && many.data.length === 3 && many.data.every((d, i) => d.index === i && d.object === 'embedding') &&
          one.usage.prompt_tokens === 4, JSON.stringify(one).slice(0, 200));
    check('embeddings/batch_equals_alone', v.every((x, i) => x === w[i]), 'vector changed when batched with others');
    const cli = JSON.parse(execFileSync(mlxcel, ['embed', '-m', embedDir, '-p', 'hello world', '--output-format', 'json']).toString());
    const cv = cli.embeddings ? cli.embeddings[0] : cli.data?.[0]?.embedding;
    check('embeddings/equal_cli', Array.isArray(cv) && cv.length === v.length && cv.every((x, i) => Math.abs(x - v[i]) <= 1e-6 * Math.max(1, Math.abs(x))),
          JSON.stringify(cli).slice(0, 200));
    const r = await fetch(`http://127.0.0.1:${embedPort}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' },
                          body: JSON.stringify({ input: 'hello world', encoding_format: 'base64', dimensions: 16 }) });
    const j = await r.json();
    const f = new Float32Array(Uint8Array.from(Buffer.from(j.data[0].embedding, 'base64')).buffer);
    check('embeddings/base64_dimensions', f.length === 16 && Array.from(f).every((x, i) => x === Math.fround(v[i])), JSON.stringify(j).slice(0, 200));
    const ids = await ec.embeddings.create({ model: id, input: [[2, 5, 6, 3]], encoding_format: 'float' });
    check('embeddings/token_ids', ids.data[0].embedding.every((x, i) => x === v[i]), 'token-id input differs from the same text');
    const bad = await fetch(`http://127.0.0.1:${embedPort}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ input: [] }) });
    check('embeddings/empty_input_400', bad.status === 400, `${bad.status}`);
    const chat = await fetch(`http://127.0.0.1:${embedPort}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: msgs('x') }) });
    check('embeddings/chat_refused_400', chat.status === 400, `${chat.status}`);
    const conc = await Promise.all(Array.from({ length: 8 }, () => ec.embeddings.create({ model: id, input: 'hello world', encoding_format: 'float' })));
    check('embeddings/concurrent_equal', conc.every(c => c.data[0].embedding.every((x, i) => x === v[i])), 'concurrent requests gave other vectors');
  });
}
if (rerankPort) {
  await attempt('rerank', async () => {
    const docs = ['sat on the mat', 'dog runs fast', { text: 'hello world' }];
    for (const path of ['/v1/rerank', '/rerank', '/v2/rerank']) {
      const r = await fetch(`http://127.0.0.1:${rerankPort}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' },
                            body: JSON.stringify({ query: 'the cat', documents: docs, top_n: 2, return_documents: true }) });
      const j = await r.json();
      const res = j.results || [];
      check(`rerank${path.replace(/\//g, '_')}`, r.status === 200 && res.length === 2 && res[0].relevance_score >= res[1].relevance_score &&
            res.every(x => x.relevance_score > 0 && x.relevance_score < 1 && typeof x.document.text === 'string'), JSON.stringify(j).slice(0, 300));
    }
    const all = await (await fetch(`http://127.0.0.1:${rerankPort}/v1/rerank`, { method: 'POST',
                       body: JSON.stringify({ query: 'the cat', documents: ['sat on the mat', 'dog runs fast'] }) })).json();
    const cli = JSON.parse(execFileSync(mlxcel, ['rerank', '-m', rerankDir, '-q', 'the cat', '-d', 'sat on the mat', '-d', 'dog runs fast', '--output-format', 'json']).toString());
    const cs = cli.scores || cli.results?.map(x => x.score);
    const byIndex = [0, 1].map(i => all.results.find(x => x.index === i).relevance_score);
    check('rerank/equal_cli', Array.isArray(cs) && cs.every((x, i) => Math.abs(x - byIndex[i]) <= 1e-6), `${JSON.stringify(cs)} vs ${JSON.stringify(byIndex)}`);
    const bad = await fetch(`http://127.0.0.1:${rerankPort}/v1/rerank`, { method: 'POST', body: JSON.stringify({ query: 'x', documents: 'nope' }) });
    check('rerank/bad_documents_400', bad.status === 400, `${bad.status}`);
  });
}
process.exit(failed ? 1 : 0);
