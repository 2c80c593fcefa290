// Images through the server with the official openai client: an image_url
// part (data URL) gives the same greedy text as `mlxcel generate --image` on
// the same prompt, blocking and streaming; an image seen before comes from
// the cache; a local file works only under --allowed-image-dir; remote URLs,
// bad data and images for a text model are 400s. Prints ok/FAIL lines.
import OpenAI from 'openai';
import fs from 'fs';
import { execFileSync } from 'child_process';

const [port, portText, mlxcel, model, tmpl, image, allowedDir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none' });
const textClient = new OpenAI({ baseURL: `http://127.0.0.1:${portText}/v1`, apiKey: 'none' });
const ok = (n) => console.log(`ok server_vision/${n}`);
const fail = (n, m) => console.log(`FAIL server_vision/${n}: ${m}`);
const check = (n, cond, m) => (cond ? ok(n) : fail(n, m));

const png = fs.readFileSync(image);
const dataUrl = 'data:image/png;base64,' + png.toString('base64');
const question = 'Describe this image.';
const msgs = (url) => [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }, { type: 'text', text: question }] }];
const params = { model: 'gemma3', max_tokens: 16, temperature: 0, ignore_eos: true };

let want = { text: null, prompt_ids: [], generated_ids: [] };
try {
  const out = execFileSync(mlxcel, ['generate', '-m', model, '--image', image, '--chat-template-file', tmpl, '-p', question,
    '-n', '16', '--temp', '0', '--ignore-eos', '--output-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  want = JSON.parse(out.toString().trim().split('\n').pop());
  check('generate_with_image_ran', want.generated_ids.length === 16, JSON.stringify(want));
} catch (e) {
  fail('generate_with_image_ran', String(e.stderr || e.message).trim());
}

async function metric(name) {
  const t = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = t.match(new RegExp(`^${name} (\\d+)`, 'm'));
  return m ? Number(m[1]) : -1;
}

async function expect400(name, p, sub) {
  try {
    await p;
    fail(name, 'succeeded');
  } catch (e) {
    check(name, e.status === 400 && String(e.message).includes(sub), `${e.status} ${e.message}`);
  }
}

try {
  const r = await client.chat.completions.create({ ...params, messages: msgs(dataUrl) });
  check('image_blocking_equals_generate', r.choices[0].message.content === want.text,
    `${JSON.stringify(r.choices[0].message.content)} vs ${JSON.stringify(want.text)}`);
  check('usage_counts_image_tokens', r.usage.prompt_tokens === want.prompt_ids.length, `${r.usage.prompt_tokens} vs ${want.prompt_ids.length}`);

  let text = '';
  const stream = await client.chat.completions.create({ ...params, messages: msgs(dataUrl), stream: true });
  for await (const ch of stream) text += ch.choices[0]?.delta?.content ?? '';
  check('image_streaming_equals_generate', text === want.text, `${JSON.stringify(text)} vs ${JSON.stringify(want.text)}`);
  check('image_seen_before_not_encoded_again', (await metric('mlxcel_images_cached_total')) >= 1 && (await metric('mlxcel_images_encoded_total')) === 1,
    `encoded ${await metric('mlxcel_images_encoded_total')}, cached ${await metric('mlxcel_images_cached_total')}`);

  const local = await client.chat.completions.create({ ...params, messages: msgs(`file://${allowedDir}/image.png`) });
  check('local_file_under_allowed_dir', local.choices[0].message.content === want.text, JSON.stringify(local.choices[0].message.content));

  const plain = await client.chat.completions.create({ ...params, messages: [{ role: 'user', content: 'Hello there' }] });
  check('same_model_text_only', typeof plain.choices[0].message.content === 'string' && plain.usage.completion_tokens === 16,
    JSON.stringify(plain.usage));
} catch (e) {
  fail('image_requests', `${e.status} ${e.message}`);
}

await expect400('remote_url_refused', client.chat.completions.create({ ...params, messages: msgs('https://example.com/cat.png') }), 'not fetched');
await expect400('file_outside_allowed_dir_refused', client.chat.completions.create({ ...params, messages: msgs(`file://${image}`) }), 'outside');
await expect400('bad_base64_refused', client.chat.completions.create({ ...params, messages: msgs('data:image/png;base64,@@@@') }), 'base64');
await expect400('not_an_image_refused', client.chat.completions.create({ ...params, messages: msgs('data:image/png;base64,aGVsbG8gd29ybGQ=') }),
  'not a PNG, JPEG or WebP');
await expect400('truncated_image_refused',
  client.chat.completions.create({ ...params, messages: msgs('data:image/png;base64,' + png.subarray(0, 500).toString('base64')) }), 'truncated');
await expect400('text_model_refuses_images', textClient.chat.completions.create({ ...params, model: 'tinychat', messages: msgs(dataUrl) }), 'does not take images');

// images and a grammar in one request: the same constrained greedy text as
// `generate --image --grammar`
try {
  const g = 'root ::= [0-9]+\n';
  const gfile = `${allowedDir}/../digits.gbnf`;
  fs.writeFileSync(gfile, g);
  const out = execFileSync(mlxcel, ['generate', '-m', model, '--image', image, '--chat-template-file', tmpl, '-p', question,
    '-n', '6', '--temp', '0', '--grammar', gfile, '--output-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const gw = JSON.parse(out.toString().trim().split('\n').pop());
  const r = await client.chat.completions.create({ model: 'gemma3', max_tokens: 6, temperature: 0, grammar: g, messages: msgs(dataUrl) });
  const c = r.choices[0].message.content;
  check('image_with_grammar_equals_generate', /^[0-9]+$/.test(c) && c === gw.text, `${JSON.stringify(c)} vs ${JSON.stringify(gw.text)}`);
} catch (e) {
  fail('image_with_grammar_equals_generate', `${e.status} ${String(e.stderr || e.message).trim()}`);
}

// the Anthropic route takes no image blocks (one 400 naming them)
{
  const r = await fetch(`http://127.0.0.1:${port}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gemma3', max_tokens: 4, messages: [{ role: 'user', content: [
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') } }, { type: 'text', text: question }] }] }),
  });
  const t = await r.text();
  check('messages_image_block_refused', r.status === 400 && t.includes('image'), `${r.status} ${t}`);
}
