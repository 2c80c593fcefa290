// The Anthropic Messages API (/v1/messages, /v1/messages/count_tokens)
// through the official @anthropic-ai/sdk client: blocking and streamed
// replies (the event sequence the SDK assembles), stop sequences, tools
// (tool_choice any / tool hold the reply to a valid tool_use block),
// tool_use / tool_result turns, x-api-key auth, and 400s for what is not
// supported. Prints ok/FAIL lines.
// Extended thinking on THINK_PORT (a template that opens <think>, an EOS the
// model never samples): the budget forces </think> after exactly
// budget_tokens reasoning tokens and the reply goes on as text.
// usage: node test_messages.mjs PORT KEYED_PORT TOOLS_PORT THINK_PORT   (KEYED_PORT's key: s3cret)
import Anthropic from '@anthropic-ai/sdk';
import { check, attempt, exitCode, promptOf } from './check.mjs';

const [port, keyedPort, toolsPort, thinkPort] = process.argv.slice(2);
const mk = (p, key = 'unused') => new Anthropic({ baseURL: `http://127.0.0.1:${p}`, apiKey: key, maxRetries: 0, timeout: 120000 });
const client = mk(port), tclient = mk(toolsPort);
const modelOf = async (p) => (await (await fetch(`http://127.0.0.1:${p}/v1/models`)).json()).data[0].id;
const model = await modelOf(port), tmodel = await modelOf(toolsPort);
const user = (s) => [{ role: 'user', content: s }];
const greedy = { max_tokens: 16, temperature: 0 };

let blockingText = null;
await attempt('messages/blocking', async () => {
  const r = await client.messages.create({ model, system: 'Be brief.', messages: user('Hello there'), ...greedy });
  blockingText = r.content[0]?.text;
  check('messages/blocking', r.type === 'message' && r.role === 'assistant' && r.content.length === 1 && r.content[0].type === 'text' &&
        typeof blockingText === 'string' && ['end_turn', 'max_tokens'].includes(r.stop_reason) && r.usage.input_tokens > 0 &&
        r.usage.output_tokens > 0, JSON.stringify(r));
});

await attempt('messages/stream', async () => {
  const events = [];
  const st = await client.messages.create({ model, system: 'Be brief.', messages: user('Hello there'), ...greedy, stream: true });
  let text = '';
  for await (const ev of st) {
    events.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  const seq = events.filter(t => t !== 'ping' && t !== 'content_block_delta').join(',');
  check('messages/stream_event_sequence', events[0] === 'message_start' && seq === 'message_start,content_block_start,content_block_stop,message_delta,message_stop' &&
        events.includes('content_block_delta'), events.join(','));
  check('messages/stream_equals_blocking', text === blockingText, `${JSON.stringify(text)} vs ${JSON.stringify(blockingText)}`);
  // the SDK's own assembly of the events
  const fin = await client.messages.stream({ model, system: 'Be brief.', messages: user('Hello there'), ...greedy }).finalMessage();
  check('messages/stream_final_message', fin.content[0]?.text === blockingText && fin.usage.output_tokens > 0 && fin.stop_reason, JSON.stringify(fin));
});

await attempt('messages/stop_sequences', async () => {
  const full = await client.messages.create({ model, messages: user('stop test'), max_tokens: 16, temperature: 0 });
  const text = full.content[0]?.text ?? '';
  if (text.length <= 6) { check('messages/stop_sequences', true); return; }
  const stop = text.slice(3, 6);
  const r = await client.messages.create({ model, messages: user('stop test'), max_tokens: 16, temperature: 0, stop_sequences: [stop] });
  check('messages/stop_sequences', r.stop_reason === 'stop_sequence' && r.stop_sequence === stop && r.content[0]?.text === text.slice(0, text.indexOf(stop)),
        JSON.stringify(r));
});

await attempt('messages/count_tokens', async () => {
  const req = { model, system: 'Be brief.', messages: user('Count me') };
  const c = await client.messages.countTokens(req);
  const r = await client.messages.create({ ...req, max_tokens: 1 });
  check('messages/count_tokens', c.input_tokens > 0 && c.input_tokens === promptOf(r.usage), `${c.input_tokens} vs ${JSON.stringify(r.usage)}`);
});

await attempt('messages/auth', async () => {
  const ok = await mk(keyedPort, 's3cret').messages.create({ model, messages: user('hi'), max_tokens: 2 });
  let status = 0;
  try { await mk(keyedPort, 'wrong').messages.create({ model, messages: user('hi'), max_tokens: 2 }); } catch (e) { status = e.status; }
  check('messages/x_api_key', ok.type === 'message' && status === 401, `status ${status}`);
});

const weather = { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 8 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
                  required: ['city', 'days'], additionalProperties: false };
const tools = [{ name: 'get_weather', description: 'the forecast', input_schema: weather }, { name: 'now', input_schema: { type: 'object', properties: {} } }];
await attempt('messages/tools', async () => {
  const bad = [];
  for (let i = 0; i < 6; i++) {
    const tool_choice = i % 2 ? { type: 'any' } : { type: 'tool', name: 'get_weather' };
    const r = await tclient.messages.create({ model: tmodel, messages: user(`Weather ${i}?`), tools, tool_choice, max_tokens: 300, temperature: 0.8 });
    const tu = r.content.filter(b => b.type === 'tool_use');
    const okCall = r.stop_reason === 'tool_use' && tu.length === 1 && tu[0].id && (tool_choice.name ? tu[0].name === 'get_weather' : true) &&
      (tu[0].name !== 'get_weather' || (typeof tu[0].input.city === 'string' && Number.isInteger(tu[0].input.days) && tu[0].input.days >= 1 && tu[0].input.days <= 7 &&
                                        Object.keys(tu[0].input).length === 2));
    if (!okCall) bad.push(JSON.stringify(r));
  }
  check('messages/tool_choice_calls_validate', bad.length === 0, `${bad.length} bad; first ${bad[0]}`);
  // streamed: the tool_use block arrives as input_json_delta, assembled by the SDK
  const fin = await tclient.messages.stream({ model: tmodel, messages: user('Stream it'), tools, tool_choice: { type: 'tool', name: 'get_weather' }, max_tokens: 300, temperature: 0.5 }).finalMessage();
  const tu = fin.content.find(b => b.type === 'tool_use');
  check('messages/tool_use_stream', fin.stop_reason === 'tool_use' && tu && tu.name === 'get_weather' && Number.isInteger(tu.input.days), JSON.stringify(fin));
  // the next turn: the call and its result go back through the template
  const r2 = await tclient.messages.create({ model: tmodel, tools, max_tokens: 8, temperature: 0, messages: [
    ...user('Weather?'), { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, tu] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: [{ type: 'text', text: 'Sunny, 21 C' }] }, { type: 'text', text: 'Thanks' }] }] });
  check('messages/tool_result_turn', r2.type === 'message' && promptOf(r2.usage) > promptOf(fin.usage), JSON.stringify(r2));
});

await attempt('messages/refused', async () => {
  const cases = [
    ['image', { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }], max_tokens: 4 }, /the image data is not image\/png/],
    ['thinking_not_a_thinking_model', { messages: user('x'), max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1024 } }, /has no thinking/],
    ['thinking_small_budget', { messages: user('x'), max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1023 } }, /at least 1024/],
    ['thinking_budget_over_max_tokens', { messages: user('x'), max_tokens: 1024, thinking: { type: 'enabled', budget_tokens: 1024 } }, /less than 'max_tokens'/],
    ['thinking_type', { messages: user('x'), max_tokens: 4, thinking: { type: 'adaptive' } }, /'thinking.type'/],
    ['unknown_field', { messages: user('x'), max_tokens: 4, service_tier: 'auto' }, /'service_tier' is not supported/],
    ['max_tokens', { messages: user('x') }, /'max_tokens' is required/],
    ['server_tool', { messages: user('x'), max_tokens: 4, tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, /server tools are not/],
    ['role', { messages: [{ role: 'system', content: 'x' }], max_tokens: 4 }, /role must be "user" or "assistant"/],
  ];
  for (const [name, body, re] of cases) {
    let status = 0, msg = '', type = '';
    try { await client.messages.create({ model, ...body }); } catch (e) { status = e.status; msg = e.error?.error?.message ?? e.message; type = e.error?.error?.type; }
    check(`messages/refused_${name}`, status === 400 && type === 'invalid_request_error' && re.test(msg), `status ${status} ${type}: ${msg}`);
  }
});

// thinking with a budget: the reasoning is the first budget_tokens tokens the
// model writes unforced (chat's reasoning_content cut at that length), then
// </think> is forced and the text goes on to max_tokens
await attempt('messages/thinking_budget', async () => {
  const tk = mk(thinkPort), tmodel2 = await modelOf(thinkPort);
  const budget = 1024;
  const ref = await (await fetch(`http://127.0.0.1:${thinkPort}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: user('Hi'), max_tokens: budget, temperature: 0 }) })).json();
  const want = ref.choices?.[0]?.message?.reasoning_content;
  const req = { model: tmodel2, messages: user('Hi'), max_tokens: budget + 40, temperature: 0, thinking: { type: 'enabled', budget_tokens: budget } };
  const r = await tk.messages.create(req);
  const th = r.content.find(b => b.type === 'thinking'), tx = r.content.find(b => b.type === 'text');
  check('messages/thinking_budget_forces_end', ref.choices?.[0]?.finish_reason === 'length' && typeof want === 'string' && want.length > 0 &&
        r.content[0]?.type === 'thinking' && th.thinking === want && tx && tx.text.length > 0 && r.usage.output_tokens === budget + 40 &&
        r.stop_reason === 'max_tokens', `${JSON.stringify(ref.choices?.[0]?.finish_reason)} ${JSON.stringify(r).slice(0, 400)}`);
  let thinking = '', text = '';
  const events = [];
  const st = await tk.messages.create({ ...req, stream: true });
  for await (const ev of st) {
    if (ev.type === 'content_block_start') events.push(ev.content_block.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'thinking_delta') thinking += ev.delta.thinking;
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
  }
  check('messages/thinking_budget_stream', events.join(',') === 'thinking,text' && thinking === th.thinking && text === tx?.text,
        `${events} ${thinking.length} vs ${th?.thinking.length}, ${JSON.stringify(text.slice(0, 40))}`);
  const c = await tk.messages.countTokens({ model: tmodel2, messages: user('Hi'), thinking: { type: 'enabled', budget_tokens: budget } });
  check('messages/thinking_count_tokens', c.input_tokens === promptOf(r.usage), `${c.input_tokens} vs ${JSON.stringify(r.usage)}`);
  let status = 0, msg = '';
  try {
    await tk.messages.create({ ...req, tools, tool_choice: { type: 'any' } });
  } catch (e) { status = e.status; msg = e.error?.error?.message ?? e.message; }
  check('messages/thinking_refuses_forced_tool', status === 400 && /tool_choice/.test(msg), `${status} ${msg}`);
});

process.exit(exitCode());
