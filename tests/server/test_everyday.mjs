// Everyday server behaviour through the official openai client: n > 1
// (greedy choices identical, seeded ones reproducible and each equal to a
// single request with seed + i, streamed per-choice indices, usage counting
// the prompt once, n above the slots refused), logprobs bytes of tokens that
// split a UTF-8 character, CORS (--cors) and sampling defaults from
// generation_config.json. Prints ok/FAIL lines.
// usage: node test_everyday.mjs PORT GENCFG_PORT
//   PORT: the tiny chat model, --parallel 16, no CORS;
//   GENCFG_PORT: its copy whose generation_config.json says do_sample false,
//   --parallel 2, --cors https://app.example
import OpenAI from 'openai';
import { check, attempt, exitCode } from './check.mjs';

const [port, gport] = process.argv.slice(2);
const mk = (p) => new OpenAI({ baseURL: `http://127.0.0.1:${p}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const client = mk(port), gclient = mk(gport);
const model = (await client.models.list()).data[0].id, gmodel = (await gclient.models.list()).data[0].id;
const msgs = [{ role: 'user', content: 'Tell me a story' }];

await attempt('n/greedy', async () => {
  const one = await client.chat.completions.create({ model, messages: msgs, max_tokens: 8, temperature: 0 });
  const r = await client.chat.completions.create({ model, messages: msgs, max_tokens: 8, temperature: 0, n: 3 });
  const texts = r.choices.map((c) => c.message.content);
  check('n/greedy_identical_choices', r.choices.length === 3 && r.choices.every((c, i) => c.index === i) && texts.every((t) => t === one.choices[0].message.content),
        JSON.stringify(r.choices));
  check('n/usage_prompt_once', r.usage.prompt_tokens === one.usage.prompt_tokens && r.usage.completion_tokens === 3 * one.usage.completion_tokens &&
        r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, `${JSON.stringify(r.usage)} vs ${JSON.stringify(one.usage)}`);
});

await attempt('n/seeded', async () => {
  const req = { model, prompt: 'Once upon a time', max_tokens: 10, temperature: 1, seed: 7, n: 3 };
  const a = await client.completions.create(req), b = await client.completions.create(req);
  const ta = a.choices.map((c) => c.text), tb = b.choices.map((c) => c.text);
  check('n/seeded_reproducible', JSON.stringify(ta) === JSON.stringify(tb) && a.choices.every((c, i) => c.index === i), `${JSON.stringify(ta)} vs ${JSON.stringify(tb)}`);
  check('n/seeded_choices_differ', new Set(ta).size > 1, JSON.stringify(ta));
  // choice i is what one request with seed + i gives: the shared prompt cache changes nothing
  const singles = [];
  for (let i = 0; i < 3; i++) singles.push((await client.completions.create({ ...req, n: 1, seed: 7 + i })).choices[0].text);
  check('n/choice_equals_single_with_seed_plus_i', JSON.stringify(singles) === JSON.stringify(ta), `${JSON.stringify(singles)} vs ${JSON.stringify(ta)}`);
});

await attempt('n/stream', async () => {
  const req = { model, messages: msgs, max_tokens: 8, temperature: 1, seed: 3, n: 2 };
  const blocking = await client.chat.completions.create(req);
  const st = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  const text = ['', ''], finish = [null, null];
  let usage = null, bad = false;
  for await (const ch of st) {
    if (ch.usage) usage = ch.usage;
    for (const c of ch.choices) {
      if (c.index !== 0 && c.index !== 1) bad = true;
      else {
        text[c.index] += c.delta?.content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
  }
  check('n/stream_per_choice', !bad && text[0] === blocking.choices[0].message.content && text[1] === blocking.choices[1].message.content &&
        finish.every((f, i) => f === blocking.choices[i].finish_reason), `${JSON.stringify(text)} ${JSON.stringify(finish)} vs ${JSON.stringify(blocking.choices)}`);
  check('n/stream_usage', usage && usage.prompt_tokens === blocking.usage.prompt_tokens && usage.completion_tokens === blocking.usage.completion_tokens, JSON.stringify(usage));
});

await attempt('n/bounded', async () => {
  let status = 0, msg = '';
  try { await gclient.chat.completions.create({ model: gmodel, messages: msgs, max_tokens: 2, n: 3 }); } catch (e) { status = e.status; msg = e.error?.message ?? e.message; }
  check('n/above_slots_400', status === 400 && /'n' must be at most 2/.test(msg), `status ${status}: ${msg}`);
});

await attempt('logprobs/bytes', async () => {
  const r = await client.chat.completions.create({ model, messages: msgs, max_tokens: 24, temperature: 0, logprobs: true, top_logprobs: 3 });
  const lp = r.choices[0].logprobs.content;
  const isBytes = (b) => Array.isArray(b) && b.every((v) => Number.isInteger(v) && v >= 0 && v < 256);
  const entries = lp.flatMap((e) => [e, ...e.top_logprobs]);
  check('logprobs/bytes_shape', entries.every((e) => isBytes(e.bytes) && typeof e.token === 'string' && typeof e.logprob === 'number') &&
        lp.every((e) => e.top_logprobs.length === 3), JSON.stringify(lp.slice(0, 2)));
  // a whole-character token: its bytes are its text's; a split character: its own bytes, not U+FFFD's
  const whole = entries.filter((e) => !e.token.includes('\ufffd')), split = entries.filter((e) => e.token.includes('\ufffd'));
  check('logprobs/bytes_whole_tokens', whole.length > 0 && whole.every((e) => Buffer.from(e.bytes).toString('utf8') === e.token), JSON.stringify(whole.slice(0, 3)));
  check('logprobs/bytes_split_character', split.length > 0 && split.every((e) => JSON.stringify(e.bytes) !== '[239,191,189]' && Buffer.from(e.bytes).toString('utf8').includes('\ufffd')),
        JSON.stringify(split.slice(0, 3)));
  // the chosen tokens' bytes, joined, are the reply (the end-of-turn token that stopped it aside)
  const shown = r.choices[0].finish_reason === 'stop' ? lp.slice(0, -1) : lp;
  const joined = Buffer.concat(shown.map((e) => Buffer.from(e.bytes))).toString('utf8');
  check('logprobs/bytes_join_to_content', joined === r.choices[0].message.content, `${JSON.stringify(joined)} vs ${JSON.stringify(r.choices[0].message.content)}`);
});

await attempt('logprobs/completions', async () => {
  const prompt = 'Once upon a time';
  const r = await client.completions.create({ model, prompt, max_tokens: 12, temperature: 0, logprobs: 2 });
  const lp = r.choices[0].logprobs;
  // text_offset: each token's first character, counted from the prompt's start
  let at = [...prompt].length, ok = lp.tokens.length === 12 && lp.text_offset.length === 12 && lp.token_logprobs.length === 12 && lp.top_logprobs.length === 12;
  for (let i = 0; ok && i < lp.tokens.length; i++) { ok = lp.text_offset[i] === at; at += [...lp.tokens[i]].length; }
  check('logprobs/completions_text_offset', ok, JSON.stringify(lp).slice(0, 300));
});

await attempt('cors', async () => {
  const pre = await fetch(`http://127.0.0.1:${gport}/v1/chat/completions`, { method: 'OPTIONS', headers: { Origin: 'https://app.example',
    'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization,content-type' } });
  check('cors/preflight', pre.status === 204 && pre.headers.get('access-control-allow-origin') === 'https://app.example' &&
        /POST/.test(pre.headers.get('access-control-allow-methods')) && pre.headers.get('access-control-allow-headers') === 'authorization,content-type',
        `${pre.status} ${JSON.stringify([...pre.headers])}`);
  const g = await fetch(`http://127.0.0.1:${gport}/v1/models`), e = await fetch(`http://127.0.0.1:${gport}/v1/nothing`);
  check('cors/on_replies', g.headers.get('access-control-allow-origin') === 'https://app.example' && e.status === 404 &&
        e.headers.get('access-control-allow-origin') === 'https://app.example', JSON.stringify([...g.headers]));
  const off = await fetch(`http://127.0.0.1:${port}/v1/models`);
  const offPre = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'OPTIONS' });
  check('cors/off_by_default', off.headers.get('access-control-allow-origin') === null && offPre.status !== 204 &&
        offPre.headers.get('access-control-allow-origin') === null, `${offPre.status}`);
});

await attempt('gencfg', async () => {
  // the same weights and template; GENCFG_PORT's folder says do_sample false
  const req = { messages: msgs, max_tokens: 10, seed: 11 };
  const greedy = (await client.chat.completions.create({ model, ...req, temperature: 0 })).choices[0].message.content;
  const dflt = (await gclient.chat.completions.create({ model: gmodel, ...req })).choices[0].message.content;
  check('gencfg/do_sample_false_is_greedy', dflt === greedy, `${JSON.stringify(dflt)} vs ${JSON.stringify(greedy)}`);
  const hot = { ...req, temperature: 3 };
  const a = (await gclient.chat.completions.create({ model: gmodel, ...hot })).choices[0].message.content;
  const b = (await client.chat.completions.create({ model, ...hot })).choices[0].message.content;
  check('gencfg/request_field_wins', a === b && a !== greedy, `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
});

process.exit(exitCode());
