// Images through the server with the official openai client: an image_url
// part (data URL) gives the same greedy text as `mlxcel generate --image` on
// the same prompt, blocking and streaming; an image seen before comes from
// the cache; a local file works only under --allowed-image-dir; remote URLs,
// bad data and images for a text model are 400s. The same image through
// /v1/responses (input_image) and /v1/messages (@anthropic-ai/sdk, image
// blocks) gives chat's reply; text documents through /v1/messages. Prints
// ok/FAIL lines.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import fs from 'fs';
import { execFileSync } from 'child_process';

const [port, portText, mlxcel, model, tmpl, image, allowedDir] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none' });
const textClient = new OpenAI({ baseURL: `http://127.0.0.1:${portText}/v1`, apiKey: 'none' });
const ok = (n) => console.log(`ok server_vision/${n}`);
const fail = (n, m) => console.log(`FAIL server_vision/${n}: ${m}`);
const check = (n, cond, m) => (cond ? ok(n) : fail(n, m));
// an Anthropic usage's whole prompt: input_tokens leaves out the tokens read from the cache
const promptOf = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;

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

// the Responses route: an input_image part gives the same greedy reply and
// prompt tokens as chat; file_id, detail other than auto and remote URLs are 400s
try {
  const ref = await client.chat.completions.create({ model: 'gemma3', max_tokens: 16, temperature: 0, messages: msgs(dataUrl) });
  const input = [{ role: 'user', content: [{ type: 'input_image', image_url: dataUrl, detail: 'auto' }, { type: 'input_text', text: question }] }];
  const r = await client.responses.create({ model: 'gemma3', input, max_output_tokens: 16, temperature: 0, store: false });
  check('responses_image_equals_chat', r.output_text === ref.choices[0].message.content && r.usage.input_tokens === ref.usage.prompt_tokens,
    `${JSON.stringify(r.output_text)} ${r.usage.input_tokens} vs ${JSON.stringify(ref.choices[0].message.content)} ${ref.usage.prompt_tokens}`);
} catch (e) {
  fail('responses_image_equals_chat', `${e.status} ${e.message}`);
}
const rImg = (part) => client.responses.create({ model: 'gemma3', max_output_tokens: 4, store: false,
  input: [{ role: 'user', content: [{ type: 'input_image', ...part }, { type: 'input_text', text: question }] }] });
await expect400('responses_file_id_refused', rImg({ file_id: 'file-123' }), 'file_id');
await expect400('responses_detail_refused', rImg({ image_url: dataUrl, detail: 'high' }), 'detail');
await expect400('responses_remote_url_refused', rImg({ image_url: 'https://example.com/cat.png' }), 'not fetched');

// the Anthropic route (official @anthropic-ai/sdk): an image block gives the
// same greedy reply and prompt tokens as the same image through chat; URL
// sources, GIFs, PDFs and images for a text model are 400s; a text document
// is the documented text in the user's turn
const anth = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'none', maxRetries: 0 });
const anthText = new Anthropic({ baseURL: `http://127.0.0.1:${portText}`, apiKey: 'none', maxRetries: 0 });
const imgBlock = (media_type = 'image/png', data = png.toString('base64')) => ({ type: 'image', source: { type: 'base64', media_type, data } });
const aMsgs = (block) => [{ role: 'user', content: [block, { type: 'text', text: question }] }];
async function expect400a(name, p, sub) {
  try {
    await p;
    fail(name, 'succeeded');
  } catch (e) {
    const m = e.error?.error?.message ?? e.message;
    check(name, e.status === 400 && e.error?.error?.type === 'invalid_request_error' && String(m).includes(sub), `${e.status} ${m}`);
  }
}
try {
  const ref = await client.chat.completions.create({ model: 'gemma3', max_tokens: 16, temperature: 0, messages: msgs(dataUrl) });
  const r = await anth.messages.create({ model: 'gemma3', max_tokens: 16, temperature: 0, messages: aMsgs(imgBlock()) });
  check('messages_image_equals_chat', r.content[0]?.text === ref.choices[0].message.content && promptOf(r.usage) === ref.usage.prompt_tokens,
    `${JSON.stringify(r.content)} ${JSON.stringify(r.usage)} vs ${JSON.stringify(ref.choices[0].message.content)} ${ref.usage.prompt_tokens}`);
  let text = '';
  const st = await anth.messages.create({ model: 'gemma3', max_tokens: 16, temperature: 0, messages: aMsgs(imgBlock()), stream: true });
  for await (const ev of st) if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  check('messages_image_stream_equals_chat', text === ref.choices[0].message.content, `${JSON.stringify(text)}`);
  const c = await anth.messages.countTokens({ model: 'gemma3', messages: aMsgs(imgBlock()) });
  check('messages_image_count_tokens', c.input_tokens === ref.usage.prompt_tokens, `${c.input_tokens} vs ${ref.usage.prompt_tokens}`);
} catch (e) {
  fail('messages_image_equals_chat', `${e.status} ${e.message}`);
}
await expect400a('messages_image_url_refused', anth.messages.create({ model: 'gemma3', max_tokens: 4,
  messages: aMsgs({ type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } }) }), 'not fetched');
await expect400a('messages_gif_refused', anth.messages.create({ model: 'gemma3', max_tokens: 4, messages: aMsgs(imgBlock('image/gif', 'R0lGODlhAQABAAAAACw=')) }), 'GIF');
await expect400a('messages_bad_media_type_refused', anth.messages.create({ model: 'gemma3', max_tokens: 4, messages: aMsgs(imgBlock('image/bmp')) }), 'media_type');
await expect400a('messages_not_an_image_refused', anth.messages.create({ model: 'gemma3', max_tokens: 4, messages: aMsgs(imgBlock('image/png', 'aGVsbG8gd29ybGQ=')) }),
  'is not image/png');
await expect400a('messages_media_type_mismatch_refused', anth.messages.create({ model: 'gemma3', max_tokens: 4, messages: aMsgs(imgBlock('image/jpeg')) }),
  'is not image/jpeg');
await expect400a('messages_truncated_image_refused', anth.messages.create({ model: 'gemma3', max_tokens: 4,
  messages: aMsgs(imgBlock('image/png', png.subarray(0, 500).toString('base64'))) }), 'truncated');
await expect400a('messages_text_model_refuses_images', anthText.messages.create({ model: 'tinychat', max_tokens: 4, messages: aMsgs(imgBlock()) }),
  'does not take images');
await expect400a('messages_pdf_refused', anthText.messages.create({ model: 'tinychat', max_tokens: 4,
  messages: aMsgs({ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }) }), 'PDF documents are not supported');
await expect400a('messages_citations_refused', anthText.messages.create({ model: 'tinychat', max_tokens: 4,
  messages: aMsgs({ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'x' }, citations: { enabled: true } }) }), 'citations');
try {
  const doc = { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'The sky is green.' }, title: 'Notes', context: 'from a test' };
  const docc = { type: 'document', source: { type: 'content', content: [{ type: 'text', text: 'The sky ' }, { type: 'text', text: 'is green.' }] }, title: 'Notes', context: 'from a test' };
  const want = '<document>\n<title>Notes</title>\n<context>from a test</context>\n<content>\nThe sky is green.\n</content>\n</document>\n' + question;
  const ref = await textClient.chat.completions.create({ model: 'tinychat', max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: want }] });
  const r1 = await anthText.messages.create({ model: 'tinychat', max_tokens: 8, temperature: 0, messages: aMsgs(doc) });
  const r2 = await anthText.messages.create({ model: 'tinychat', max_tokens: 8, temperature: 0, messages: aMsgs(docc) });
  const t = ref.choices[0].message.content;
  check('messages_document_as_documented_text', r1.content[0]?.text === t && r2.content[0]?.text === t && promptOf(r1.usage) === ref.usage.prompt_tokens,
    `${JSON.stringify(r1.content)} ${JSON.stringify(r2.content)} vs ${JSON.stringify(t)}`);
} catch (e) {
  fail('messages_document_as_documented_text', `${e.status} ${e.message}`);
}
