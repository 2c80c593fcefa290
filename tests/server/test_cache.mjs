// Prompt tokens served from the slot's cached prefix, as each reply format
// reports them: OpenAI's prompt_tokens_details.cached_tokens (completions,
// chat, streamed final usage), Responses' input_tokens_details.cached_tokens,
// Anthropic's cache_read_input_tokens (input_tokens the rest, creation 0),
// llama-server's tokens_cached / timings.cache_n, and the /metrics counters.
// Run first on a fresh --parallel 1 server, alone: the expected numbers follow
// from the scheduler keeping the common prefix of the slot's tokens and the
// new prompt, at most all of it but one token (the step needs one to feed).
// usage: node test_cache.mjs PORT KEY
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { check, attempt, exitCode } from './check.mjs';

const [port, key] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, timeout: 120000 });
const anth = new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 120000 });
const model = (await client.models.list()).data[0].id;
const metric = async () => {
  const t = await (await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${key}` } })).text();
  const get = (n) => Number((t.match(new RegExp(`^${n} (\\d+)$`, 'm')) || [])[1]);
  return { prompt: get('mlxcel_prompt_tokens_total'), cached: get('mlxcel_prompt_tokens_cached_total') };
};
let sumPrompt = 0, sumCached = 0; // what the replies reported, for the counters
const note = (p, c) => { sumPrompt += p; sumCached += c; };

const m0 = await metric();
const a = Array.from({ length: 40 }, (_, i) => 50 + ((i * 37) % 200));
const b = [...a.slice(0, 25), ...Array.from({ length: 15 }, (_, i) => 260 + i)]; // shares 25 tokens with a, then differs

await attempt('cache/completions', async () => {
  const r1 = await client.completions.create({ model, prompt: a, max_tokens: 2, temperature: 0 });
  note(r1.usage.prompt_tokens, r1.usage.prompt_tokens_details?.cached_tokens);
  check('cache/first_request_zero', r1.usage.prompt_tokens === 40 && r1.usage.prompt_tokens_details?.cached_tokens === 0, JSON.stringify(r1.usage));
  const r2 = await client.completions.create({ model, prompt: b, max_tokens: 2, temperature: 0 });
  note(r2.usage.prompt_tokens, r2.usage.prompt_tokens_details?.cached_tokens);
  check('cache/shared_prefix_exact', r2.usage.prompt_tokens === 40 && r2.usage.prompt_tokens_details?.cached_tokens === 25, JSON.stringify(r2.usage));
  // the same prompt again, streamed: all of it but the one token fed
  const s = await client.completions.create({ model, prompt: b, max_tokens: 2, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let u = null;
  for await (const c of s) if (c.usage) u = c.usage;
  note(u?.prompt_tokens, u?.prompt_tokens_details?.cached_tokens);
  check('cache/stream_final_usage', u && u.prompt_tokens === 40 && u.prompt_tokens_details?.cached_tokens === 39, JSON.stringify(u));
});

const msgs = [{ role: 'user', content: 'Tell me a story about a cat' }];
let n = 0; // that conversation's prompt tokens
await attempt('cache/chat', async () => {
  const c1 = await client.chat.completions.create({ model, messages: msgs, max_tokens: 2, temperature: 0 });
  note(c1.usage.prompt_tokens, c1.usage.prompt_tokens_details?.cached_tokens);
  n = c1.usage.prompt_tokens;
  const c2 = await client.chat.completions.create({ model, messages: msgs, max_tokens: 2, temperature: 0 });
  note(c2.usage.prompt_tokens, c2.usage.prompt_tokens_details?.cached_tokens);
  check('cache/chat_repeat', c2.usage.prompt_tokens === n && c2.usage.prompt_tokens_details?.cached_tokens === n - 1, JSON.stringify(c2.usage));
});

await attempt('cache/messages', async () => {
  const r = await anth.messages.create({ model, messages: msgs, max_tokens: 2, temperature: 0 });
  const u = r.usage;
  note(u.input_tokens + u.cache_read_input_tokens, u.cache_read_input_tokens);
  check('cache/messages_cache_read', u.cache_read_input_tokens === n - 1 && u.input_tokens === 1 && u.cache_creation_input_tokens === 0, JSON.stringify(u));
  const fin = await anth.messages.stream({ model, messages: msgs, max_tokens: 2, temperature: 0 }).finalMessage();
  const f = fin.usage;
  note(f.input_tokens + f.cache_read_input_tokens, f.cache_read_input_tokens);
  check('cache/messages_stream_usage', f.cache_read_input_tokens === n - 1 && f.input_tokens === 1 && f.cache_creation_input_tokens === 0, JSON.stringify(f));
});

await attempt('cache/responses', async () => {
  const r = await client.responses.create({ model, input: msgs, max_output_tokens: 2, temperature: 0 });
  note(r.usage.input_tokens, r.usage.input_tokens_details?.cached_tokens);
  check('cache/responses_cached_tokens', r.usage.input_tokens === n && r.usage.input_tokens_details?.cached_tokens === n - 1, JSON.stringify(r.usage));
});

await attempt('cache/llama', async () => {
  const post = async (body) => (await fetch(`${base}/completion`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
                                                                   body: JSON.stringify(body) })).json();
  const l1 = await post({ prompt: a, n_predict: 2, temperature: 0 });
  note(l1.tokens_evaluated, l1.tokens_cached);
  const l2 = await post({ prompt: b, n_predict: 2, temperature: 0 });
  note(l2.tokens_evaluated, l2.tokens_cached);
  check('cache/llama_tokens_cached', l2.tokens_evaluated === 40 && l2.tokens_cached === 25 && l2.timings?.cache_n === 25 && l2.timings?.prompt_n === 15,
        JSON.stringify({ tokens_cached: l2.tokens_cached, timings: l2.timings }));
});

const m1 = await metric();
check('cache/metrics_counters', m1.prompt - m0.prompt === sumPrompt && m1.cached - m0.cached === sumCached && sumCached > 0,
      `prompt +${m1.prompt - m0.prompt} cached +${m1.cached - m0.cached}, replies said ${sumPrompt} / ${sumCached}`);
process.exit(exitCode());
