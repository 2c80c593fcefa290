// The OpenAI Responses API (/v1/responses) through the official
// openai client's responses.create: string and item input, instructions,
// streaming events (response.created ... response.completed, or
// response.incomplete when max_output_tokens cuts it), function tools with
// function_call / function_call_output items, text.format json_schema,
// stored responses (store, previous_response_id, GET and DELETE
// /v1/responses/{id}, 404 for an unknown id) and 400s for what is not
// supported. Prints ok/FAIL lines.
// usage: node test_responses.mjs PORT TOOLS_PORT
import OpenAI from 'openai';
import { check, attempt, exitCode } from './check.mjs';

const [port, toolsPort] = process.argv.slice(2);
const mk = (p) => new OpenAI({ baseURL: `http://127.0.0.1:${p}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const client = mk(port), tclient = mk(toolsPort);
const model = (await client.models.list()).data[0].id, tmodel = (await tclient.models.list()).data[0].id;
const base = { model, store: false, temperature: 0 };

let blocking = null;
await attempt('responses/blocking', async () => {
  const r = await client.responses.create({ ...base, instructions: 'Be brief.', input: 'Hello there', max_output_tokens: 12 });
  blocking = r.output_text;
  check('responses/blocking', r.object === 'response' && ['completed', 'incomplete'].includes(r.status) && r.output.length === 1 &&
        r.output[0].type === 'message' && typeof blocking === 'string' && blocking.length > 0 && r.usage.input_tokens > 0 && r.usage.output_tokens > 0, JSON.stringify(r));
  const items = await client.responses.create({ ...base, max_output_tokens: 12, input: [{ role: 'developer', content: 'Be brief.' },
                                                                                         { role: 'user', content: [{ type: 'input_text', text: 'Hello there' }] }] });
  check('responses/items_equal_string_input', items.output_text === blocking, `${JSON.stringify(items.output_text)} vs ${JSON.stringify(blocking)}`);
});

await attempt('responses/stream', async () => {
  const st = await client.responses.create({ ...base, instructions: 'Be brief.', input: 'Hello there', max_output_tokens: 12, stream: true });
  const types = [];
  let text = '', last = null, seqOk = true;
  for await (const ev of st) {
    if (ev.sequence_number !== types.length) seqOk = false;
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    last = ev;
  }
  const shape = types.filter(t => t !== 'response.output_text.delta').join(',');
  const end = last.response.status === 'incomplete' ? 'response.incomplete' : 'response.completed';
  check('responses/stream_events', seqOk && shape === `response.created,response.in_progress,response.output_item.added,response.content_part.added,` +
        `response.output_text.done,response.content_part.done,response.output_item.done,${end}` && last.type === end, types.join(','));
  check('responses/stream_equals_blocking', text === blocking, `${JSON.stringify(text)} vs ${JSON.stringify(blocking)}`);
  check('responses/incomplete_when_cut', last.response.status !== 'incomplete' || last.response.incomplete_details?.reason === 'max_output_tokens', JSON.stringify(last.response));
});

await attempt('responses/text_format', async () => {
  const schema = { type: 'object', properties: { answer: { type: 'string', maxLength: 6 }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['answer', 'n'], additionalProperties: false };
  const r = await client.responses.create({ ...base, temperature: 0.8, input: 'Answer in JSON', max_output_tokens: 200, text: { format: { type: 'json_schema', name: 'a', schema, strict: true } } });
  let v = null;
  try { v = JSON.parse(r.output_text); } catch {}
  check('responses/text_format_json_schema', r.status === 'completed' && v && typeof v.answer === 'string' && [...v.answer].length <= 6 && Number.isInteger(v.n) &&
        Object.keys(v).length === 2, r.output_text);
});

await attempt('responses/tools', async () => {
  const tools = [{ type: 'function', name: 'get_weather', description: 'the forecast', strict: true,
                   parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false } }];
  const r = await tclient.responses.create({ model: tmodel, store: false, input: 'Weather?', tools, tool_choice: 'required', max_output_tokens: 200, temperature: 0.7 });
  const fc = r.output.find(o => o.type === 'function_call');
  let args = null;
  try { args = JSON.parse(fc.arguments); } catch {}
  check('responses/function_call', r.status === 'completed' && fc && fc.name === 'get_weather' && fc.call_id && args && typeof args.city === 'string', JSON.stringify(r.output));
  const st = await tclient.responses.create({ model: tmodel, store: false, input: 'Weather?', tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 200,
                                             temperature: 0.7, stream: true });
  let argText = '', done = null;
  for await (const ev of st) {
    if (ev.type === 'response.function_call_arguments.delta') argText += ev.delta;
    if (ev.type === 'response.completed') done = ev.response;
  }
  check('responses/function_call_stream', done && done.output.some(o => o.type === 'function_call' && o.arguments === argText) && JSON.parse(argText).city !== undefined, argText);
  const r2 = await tclient.responses.create({ model: tmodel, store: false, tools, max_output_tokens: 6, temperature: 0, input: [
    { role: 'user', content: 'Weather?' }, { type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
    { type: 'function_call_output', call_id: fc.call_id, output: 'Sunny' }] });
  check('responses/function_call_output_turn', r2.object === 'response' && r2.usage.input_tokens > r.usage.input_tokens, JSON.stringify(r2));
});

await attempt('responses/store', async () => {
  // store defaults to true: the response can be read back and continued
  const r1 = await client.responses.create({ model, temperature: 0, input: 'Hello there', max_output_tokens: 8 });
  const got = await client.responses.retrieve(r1.id);
  check('responses/store_retrieve', r1.store === true && got.id === r1.id && got.output[0].content[0].text === r1.output_text, JSON.stringify(got));
  const r2 = await client.responses.create({ model, temperature: 0, previous_response_id: r1.id, input: 'And then?', max_output_tokens: 8 });
  // the same as sending the whole conversation statelessly
  const full = await client.responses.create({ ...base, max_output_tokens: 8, input: [{ role: 'user', content: 'Hello there' },
    { role: 'assistant', content: r1.output_text }, { role: 'user', content: 'And then?' }] });
  check('responses/previous_response_id', r2.previous_response_id === r1.id && r2.usage.input_tokens === full.usage.input_tokens &&
        r2.output_text === full.output_text && r2.usage.input_tokens > r1.usage.input_tokens, `${JSON.stringify(r2.usage)} vs ${JSON.stringify(full.usage)}`);
  // instructions are not carried over (as OpenAI's are not)
  const i1 = await client.responses.create({ model, temperature: 0, instructions: 'Be brief.', input: 'Hello there', max_output_tokens: 4 });
  const i2 = await client.responses.create({ model, temperature: 0, previous_response_id: i1.id, input: 'x', max_output_tokens: 4 });
  const i2full = await client.responses.create({ ...base, max_output_tokens: 4, input: [{ role: 'user', content: 'Hello there' },
    { role: 'assistant', content: i1.output_text }, { role: 'user', content: 'x' }] });
  check('responses/previous_drops_instructions', i2.usage.input_tokens === i2full.usage.input_tokens, `${i2.usage.input_tokens} vs ${i2full.usage.input_tokens}`);
  let st = 0;
  const nostore = await client.responses.create({ ...base, input: 'x', max_output_tokens: 2 });
  try { await client.responses.retrieve(nostore.id); } catch (e) { st = e.status; }
  check('responses/store_false_not_kept', nostore.store === false && st === 404, `status ${st}`);
  st = 0;
  let msg = '';
  try { await client.responses.create({ ...base, input: 'x', previous_response_id: 'resp-unknown', max_output_tokens: 2 }); } catch (e) { st = e.status; msg = e.error?.message ?? ''; }
  check('responses/unknown_previous_404', st === 404 && /resp-unknown/.test(msg), `status ${st}: ${msg}`);
  // a streamed response is stored too, and continues like a blocking one
  const sst = await client.responses.create({ model, temperature: 0, input: 'Hello there', max_output_tokens: 8, stream: true });
  let done = null;
  for await (const ev of sst) if (ev.type === 'response.completed' || ev.type === 'response.incomplete') done = ev.response;
  const sgot = done && await client.responses.retrieve(done.id);
  const s2 = done && await client.responses.create({ model, temperature: 0, previous_response_id: done.id, input: 'And then?', max_output_tokens: 8 });
  check('responses/stream_stored', sgot && sgot.id === done.id && s2.output_text === r2.output_text && s2.usage.input_tokens === r2.usage.input_tokens,
        `${JSON.stringify(sgot?.output)} ${s2?.output_text} vs ${r2.output_text}`);
  const del = await fetch(`http://127.0.0.1:${port}/v1/responses/${r1.id}`, { method: 'DELETE' });
  const dj = await del.json();
  st = 0;
  try { await client.responses.retrieve(r1.id); } catch (e) { st = e.status; }
  check('responses/delete', del.status === 200 && dj.deleted === true && dj.id === r1.id && st === 404, `${del.status} ${JSON.stringify(dj)} then ${st}`);
});

await attempt('responses/refused', async () => {
  const cases = [
    ['builtin_tool', { ...base, input: 'x', tools: [{ type: 'web_search' }] }, /built-in tools are not supported/],
    ['image', { ...base, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, /does not take images/],
    ['reasoning', { ...base, input: 'x', reasoning: { effort: 'high' } }, /'reasoning' is not supported/],
    ['unknown', { ...base, input: 'x', background: true }, /'background' is not supported/],
    ['bad_schema', { ...base, input: 'x', text: { format: { type: 'json_schema', name: 'a', schema: { type: 'object', properties: { a: { type: 'string', not: {} } } } } } }, /'not' is not supported/],
  ];
  for (const [name, body, re] of cases) {
    let status = 0, msg = '';
    try { await client.responses.create({ max_output_tokens: 4, ...body }); } catch (e) { status = e.status; msg = e.error?.message ?? e.message; }
    check(`responses/refused_${name}`, status === 400 && re.test(msg), `status ${status}: ${msg}`);
  }
});

process.exit(exitCode());
