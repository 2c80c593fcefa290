// Structured output through the official openai client: response_format
// json_object / json_schema (and llama-server's json_schema / grammar) on
// /v1/chat/completions and /v1/completions. The test model has random
// weights, so its free text never parses: every reply here must parse and
// validate against its schema because of the grammar alone. Schemas come
// from a seeded random generator over the supported subset; a small
// validator below checks the replies. Prints ok/FAIL lines.
// Tool calls that tool_choice requires go through the same engine, on a
// second server whose chat template writes Hermes/Qwen <tool_call> blocks.
// usage: node test_structured.mjs PORT TOOLS_PORT
import OpenAI from 'openai';
import { check, attempt, exitCode } from './check.mjs';

const [port, toolsPort] = process.argv.slice(2);
const base = `http://127.0.0.1:${port}`;
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const raw = async (path, body) => {
  const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, text, json };
};
const msgs = (s) => [{ role: 'user', content: s }];
const modelId = (await client.models.list()).data[0].id;

// ---- a validator for the subset the server supports ----
const typeOf = (v) => v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
const deref = (root, ref) => ref.slice(2).split('/').reduce((o, k) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], root);
function validate(s, v, root = s, path = '') {
  if (s === true) return null;
  if (s.$ref) return validate(deref(root, s.$ref), v, root, path);
  if (s.anyOf) return s.anyOf.some(a => !validate(a, v, root, path)) ? null : `${path}: no anyOf branch matches`;
  if (s.enum && !s.enum.some(e => JSON.stringify(e) === JSON.stringify(v))) return `${path}: ${JSON.stringify(v)} not in enum`;
  if ('const' in s && JSON.stringify(s.const) !== JSON.stringify(v)) return `${path}: ${JSON.stringify(v)} is not the const`;
  if (s.type) {
    const types = [].concat(s.type), t = typeOf(v);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) return `${path}: type ${t}, want ${types}`;
  }
  const t = typeOf(v);
  if (t === 'object') {
    for (const k of s.required ?? []) if (!(k in v)) return `${path}: missing ${k}`;
    for (const [k, x] of Object.entries(v)) {
      const ps = s.properties?.[k];
      if (ps !== undefined) { const e = validate(ps, x, root, `${path}/${k}`); if (e) return e; }
      else if (s.additionalProperties === false) return `${path}: extra property ${k}`;
      else if (typeof s.additionalProperties === 'object') { const e = validate(s.additionalProperties, x, root, `${path}/${k}`); if (e) return e; }
    }
  }
  if (t === 'array') {
    if (s.minItems !== undefined && v.length < s.minItems) return `${path}: ${v.length} < minItems`;
    if (s.maxItems !== undefined && v.length > s.maxItems) return `${path}: ${v.length} > maxItems`;
    for (let i = 0; i < v.length; i++) {
      const is = s.prefixItems && i < s.prefixItems.length ? s.prefixItems[i] : s.items;
      if (is) { const e = validate(is, v[i], root, `${path}/${i}`); if (e) return e; }
    }
  }
  if (t === 'string') {
    const n = [...v].length;
    if (s.minLength !== undefined && n < s.minLength) return `${path}: length ${n} < minLength`;
    if (s.maxLength !== undefined && n > s.maxLength) return `${path}: length ${n} > maxLength`;
    if (s.pattern && !new RegExp(s.pattern, 'u').test(v)) return `${path}: ${JSON.stringify(v)} does not match ${s.pattern}`;
  }
  if (t === 'integer' || t === 'number') {
    if (s.minimum !== undefined && v < s.minimum) return `${path}: ${v} < minimum`;
    if (s.maximum !== undefined && v > s.maximum) return `${path}: ${v} > maximum`;
    if (s.exclusiveMinimum !== undefined && v <= s.exclusiveMinimum) return `${path}: ${v} <= exclusiveMinimum`;
    if (s.exclusiveMaximum !== undefined && v >= s.exclusiveMaximum) return `${path}: ${v} >= exclusiveMaximum`;
  }
  return null;
}

// ---- random schemas (seeded), small enough that a random model finishes them ----
let seed = 20261202;
const rnd = () => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed / 0x80000000; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const int = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
function genSchema(depth, defs) {
  const kinds = ['string', 'integer', 'number', 'boolean', 'null', 'enum', 'const', 'pattern'];
  if (depth > 0) kinds.push('object', 'object', 'array', 'anyOf');
  if (defs.length) kinds.push('ref');
  switch (pick(kinds)) {
    case 'string': { const mn = int(0, 2); return { type: 'string', minLength: mn, maxLength: mn + int(0, 5) }; }
    case 'integer': { const lo = int(-50, 50); return { type: 'integer', minimum: lo, maximum: lo + int(0, 1000) }; }
    case 'number': { const lo = int(-10, 10); return rnd() < 0.5 ? { type: 'number', minimum: lo, maximum: lo + int(1, 100) }
                                                         : { type: 'number', exclusiveMinimum: lo, exclusiveMaximum: lo + int(1, 100) }; }
    case 'boolean': return { type: 'boolean' };
    case 'null': return { type: 'null' };
    case 'enum': return { enum: [pick(['red', 'green', 'blue']), int(0, 9), pick([true, null, 'a b'])] };
    case 'const': return { const: pick(['fixed', 42, false, 'x"y']) };
    case 'pattern': return { type: 'string', pattern: pick(['^[a-c]{1,3}$', '^[0-9]{3}-[A-Z]{2}$', '^(yes|no)$']) };
    case 'object': {
      const n = int(1, 3), props = {}, req = [];
      for (let i = 0; i < n; i++) { const k = pick(['id', 'name', 'value', 'tags', 'ok', 'count', 'note']) + i; props[k] = genSchema(depth - 1, defs); if (rnd() < 0.7) req.push(k); }
      const o = { type: 'object', properties: props, required: req };
      if (rnd() < 0.7) o.additionalProperties = false;
      return o;
    }
    case 'array': { const mn = int(0, 2); return { type: 'array', items: genSchema(depth - 1, defs), minItems: mn, maxItems: mn + int(0, 2) }; }
    case 'anyOf': return { anyOf: [genSchema(depth - 1, defs), genSchema(depth - 1, defs)] };
    case 'ref': return { $ref: `#/$defs/${pick(defs)}` };
  }
}
function genRoot() {
  const defs = rnd() < 0.4 ? ['Item'] : [];
  const props = {}, req = [];
  const n = int(1, 3);
  for (let i = 0; i < n; i++) { const k = `f${i}`; props[k] = genSchema(2, defs); req.push(k); }
  const s = { type: 'object', properties: props, required: req, additionalProperties: false };
  if (defs.length) s.$defs = { Item: { type: 'object', properties: { id: { type: 'integer', minimum: 0, maximum: 9 }, label: { type: 'string', maxLength: 4 } }, required: ['id'], additionalProperties: false } };
  return s;
}

const rf = (schema, name = 'reply') => ({ type: 'json_schema', json_schema: { name, strict: true, schema } });
const parseOk = (text, schema) => {
  let v;
  try { v = JSON.parse(text); } catch (e) { return `does not parse: ${e.message}: ${JSON.stringify(text)}`; }
  const e = schema ? validate(schema, v) : (typeOf(v) === 'object' ? null : `not an object: ${text}`);
  return e ? `${e}: ${JSON.stringify(text)}` : null;
};

// the premise: without a constraint the model's text is not JSON
await attempt('structured/premise', async () => {
  let parsed = 0;
  for (let i = 0; i < 4; i++) {
    const r = await client.chat.completions.create({ messages: msgs(`Reply in JSON ${i}`), model: modelId, temperature: 0.8, seed: i, max_tokens: 60 });
    try { JSON.parse(r.choices[0].message.content); parsed++; } catch {}
  }
  check('structured/premise_free_text_does_not_parse', parsed === 0, `${parsed} of 4 unconstrained replies parsed`);
});

await attempt('structured/json_object', async () => {
  // any object: strings are unbounded, so a random model may run to the limit;
  // every reply the model ended must parse, and most must end
  const rs = await Promise.all(Array.from({ length: 8 }, (_, i) => client.chat.completions.create({
    model: modelId, messages: msgs(`Give me an object ${i}`), temperature: 1.0, seed: 100 + i, max_tokens: 400, response_format: { type: 'json_object' } })));
  const ended = rs.filter(r => r.choices[0].finish_reason === 'stop');
  const bad = ended.map(r => parseOk(r.choices[0].message.content, null)).filter(Boolean);
  check('structured/json_object', ended.length >= 4 && bad.length === 0, `${ended.length} of 8 ended; ${bad[0]}`);
});

// many random schemas, chat and completions, blocking and streaming, 8 at a time (continuous batching)
await attempt('structured/random_schemas', async () => {
  const N = 48, schemas = Array.from({ length: N }, genRoot);
  const run = async (s, i) => {
    const common = { model: modelId, temperature: 0.9, seed: 1000 + i, max_tokens: 400 };
    let text, finish;
    if (i % 4 === 3) {
      const r = await client.completions.create({ ...common, prompt: `Record ${i}:`, response_format: rf(s) });
      text = r.choices[0].text; finish = r.choices[0].finish_reason;
    } else if (i % 4 === 2) {
      const st = await client.chat.completions.create({ ...common, messages: msgs(`Record ${i}`), response_format: rf(s), stream: true });
      text = '';
      for await (const ch of st) { text += ch.choices[0]?.delta?.content ?? ''; finish = ch.choices[0]?.finish_reason ?? finish; }
    } else {
      const r = await client.chat.completions.create({ ...common, messages: msgs(`Record ${i}`), response_format: rf(s) });
      text = r.choices[0].message.content; finish = r.choices[0].finish_reason;
    }
    if (finish !== 'stop') return `schema ${i}: finish_reason ${finish}: ${JSON.stringify(text).slice(0, 200)} schema ${JSON.stringify(s)}`;
    const e = parseOk(text, s);
    return e ? `schema ${i}: ${e} schema ${JSON.stringify(s)}` : null;
  };
  const errs = [];
  for (let k = 0; k < N; k += 8) errs.push(...(await Promise.all(schemas.slice(k, k + 8).map((s, j) => run(s, k + j)))).filter(Boolean));
  check(`structured/random_schemas_parse_and_validate (${N})`, errs.length === 0, `${errs.length} bad; first: ${errs[0]}`);
});

await attempt('structured/llama_server_fields', async () => {
  const s = { type: 'object', properties: { n: { type: 'integer', minimum: 1, maximum: 5 } }, required: ['n'], additionalProperties: false };
  const a = await raw('/v1/completions', { prompt: 'x', max_tokens: 200, temperature: 0.7, seed: 5, json_schema: s });
  check('structured/json_schema_field', a.status === 200 && !parseOk(a.json.choices[0].text, s), a.text.slice(0, 300));
  const g = await raw('/v1/chat/completions', { messages: msgs('yes or no?'), max_tokens: 20, temperature: 1, seed: 9, grammar: 'root ::= ("yes" | "no") "!"' });
  check('structured/gbnf_grammar', g.status === 200 && /^(yes|no)!$/.test(g.json.choices[0].message.content) && g.json.choices[0].finish_reason === 'stop', g.text.slice(0, 300));
  const same = await raw('/v1/chat/completions', { messages: msgs('Record 0'), max_tokens: 200, temperature: 0, response_format: rf(s) });
  const again = await raw('/v1/chat/completions', { messages: msgs('Record 0'), max_tokens: 200, temperature: 0, response_format: rf(s) });
  check('structured/cached_grammar_same_output', same.status === 200 && same.json.choices[0].message.content === again.json.choices[0].message.content, same.text.slice(0, 200));
});

// what is not supported is refused, naming it
await attempt('structured/refused', async () => {
  const cases = [
    ['uniqueItems', rf({ type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }), /'uniqueItems' is not supported/],
    ['patternProperties', rf({ type: 'object', patternProperties: { '^x': { type: 'string' } } }), /'patternProperties' is not supported/],
    ['multipleOf', rf({ type: 'object', properties: { a: { type: 'integer', multipleOf: 3 } } }), /'multipleOf' is not supported/],
    ['remote_ref', rf({ $ref: 'https://example.com/s.json' }), /\$ref/],
    ['lookahead', rf({ type: 'object', properties: { a: { type: 'string', pattern: '^(?=a)a$' } } }), /lookaround/],
    ['type_regex', { type: 'regex' }, /'response_format.type' "regex" is not supported/],
    ['unknown_field', { type: 'json_schema', json_schema: { name: 'x', schema: {}, mode: 'fast' } }, /'response_format.json_schema.mode' is not supported/],
    ['no_name', { type: 'json_schema', json_schema: { schema: {} } }, /name/],
  ];
  for (const [name, format, re] of cases) {
    let status = 0, msg = '';
    try { await client.chat.completions.create({ model: modelId, messages: msgs('x'), max_tokens: 4, response_format: format }); }
    catch (e) { status = e.status; msg = e.error?.message ?? e.message; }
    check(`structured/refused_${name}`, status === 400 && re.test(msg), `status ${status}: ${msg}`);
  }
  const both = await raw('/v1/completions', { prompt: 'x', grammar: 'root ::= "a"', response_format: { type: 'json_object' } });
  check('structured/refused_two_constraints', both.status === 400 && /one of/.test(both.json?.error?.message), both.text);
  const badg = await raw('/v1/completions', { prompt: 'x', grammar: 'root ::= missing' });
  check('structured/refused_bad_gbnf', badg.status === 400 && /undefined rule 'missing'/.test(badg.json?.error?.message), badg.text);
  // pathological grammars: refused at compile (left recursion) or when the matcher starts (too many stacks)
  const leftg = await raw('/v1/completions', { prompt: 'x', grammar: 'root ::= ("a" | "")*' });
  check('structured/refused_left_recursive_gbnf', leftg.status === 400 && /left-recursive through a repetition/.test(leftg.json?.error?.message), leftg.text);
  const ambg = await raw('/v1/completions', { prompt: 'x', grammar: 'root ::= ("a"{0,2}){0,5000}' });
  check('structured/refused_ambiguous_gbnf', ambg.status === 400 && /too ambiguous/.test(ambg.json?.error?.message), ambg.text);
});

// ---- tool calls: tool_choice "required" / a named function ----
const tclient = new OpenAI({ baseURL: `http://127.0.0.1:${toolsPort}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const tmodel = (await tclient.models.list()).data[0].id;
const weather = { type: 'object', properties: { city: { type: 'string', minLength: 1, maxLength: 8 }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false };
const toolList = (params) => [{ type: 'function', function: { name: 'get_weather', description: 'the weather', parameters: weather } },
                              { type: 'function', function: { name: 'lookup', parameters: params } },
                              { type: 'function', function: { name: 'now' } }];
const checkCalls = (r, tools, want) => {
  const c = r.choices[0], calls = c.message.tool_calls;
  if (c.finish_reason !== 'tool_calls' || !Array.isArray(calls) || calls.length !== 1) return `finish ${c.finish_reason}, calls ${JSON.stringify(calls)}, content ${JSON.stringify(c.message.content)}`;
  const f = calls[0].function, t = tools.find(t => t.function.name === f.name);
  if (!t || (want && f.name !== want)) return `called ${f.name}`;
  return parseOk(f.arguments, t.function.parameters ?? { type: 'object', properties: {}, additionalProperties: false });
};

await attempt('tools/required', async () => {
  const errs = [];
  for (let k = 0; k < 16; k += 8) {
    const rs = await Promise.all(Array.from({ length: 8 }, async (_, j) => {
      const i = k + j, tools = toolList(genRoot());
      const choice = i % 3 === 0 ? 'required' : { type: 'function', function: { name: ['get_weather', 'lookup', 'now'][i % 3] } };
      const r = await tclient.chat.completions.create({ model: tmodel, messages: msgs(`Call a tool ${i}`), tools, tool_choice: choice, temperature: 0.9, seed: 500 + i, max_tokens: 400 });
      const e = checkCalls(r, tools, typeof choice === 'object' ? choice.function.name : null);
      return e ? `request ${i}: ${e}` : null;
    }));
    errs.push(...rs.filter(Boolean));
  }
  check('tools/required_and_named_calls_validate (16)', errs.length === 0, `${errs.length} bad; first: ${errs[0]}`);
});

await attempt('tools/stream', async () => {
  const tools = toolList({ type: 'object', properties: { q: { type: 'string', maxLength: 6 } }, required: ['q'] });
  const st = await tclient.chat.completions.create({ model: tmodel, messages: msgs('Stream a call'), tools, tool_choice: { type: 'function', function: { name: 'lookup' } },
                                                      temperature: 0.7, seed: 3, max_tokens: 300, stream: true });
  const calls = [];
  let finish = null;
  for await (const ch of st) {
    const d = ch.choices[0]?.delta;
    for (const tc of d?.tool_calls ?? []) {
      const c = calls[tc.index] ??= { name: '', arguments: '' };
      c.name += tc.function?.name ?? '';
      c.arguments += tc.function?.arguments ?? '';
    }
    finish = ch.choices[0]?.finish_reason ?? finish;
  }
  const e = calls.length === 1 && calls[0].name === 'lookup' ? parseOk(calls[0].arguments, tools[1].function.parameters) : `calls ${JSON.stringify(calls)}`;
  check('tools/stream_named_call', finish === 'tool_calls' && !e, `finish ${finish}: ${e}`);
});

await attempt('tools/refused', async () => {
  const tools = toolList({ type: 'object' });
  const cases = [
    ['unknown_function', tclient, { tools, tool_choice: { type: 'function', function: { name: 'nope' } } }, /'nope', which is not in 'tools'/],
    ['tool_type', tclient, { tools: [{ type: 'web_search' }], tool_choice: 'auto' }, /'tools\[0\].type' must be "function"/],
    ['required_without_tools', tclient, { tool_choice: 'required' }, /needs 'tools'/],
    ['choice_value', tclient, { tools, tool_choice: 'sometimes' }, /'tool_choice' "sometimes" is not supported/],
    ['function_field', tclient, { tools: [{ type: 'function', function: { name: 'f', returns: {} } }] }, /'tools\[0\].function.returns' is not supported/],
    ['bad_name', tclient, { tools: [{ type: 'function', function: { name: 'a b' } }] }, /name' must be 1 to 64/],
    ['with_response_format', tclient, { tools, tool_choice: 'required', response_format: { type: 'json_object' } }, /cannot go with 'response_format'/],
    ['unsupported_parameter_keyword', tclient, { tools: toolList({ type: 'object', properties: { a: { type: 'string', not: { const: 'x' } } } }), tool_choice: 'required' }, /tool 'lookup' parameters: .*'not' is not supported/],
    ['template_without_tool_format', client, { tools, tool_choice: 'required' }, /no known tool-call format/],
    ['parallel_tool_calls_type', tclient, { tools, parallel_tool_calls: 'yes' }, /'parallel_tool_calls' must be a boolean/],
  ];
  for (const [name, cl, extra, re] of cases) {
    let status = 0, msg = '';
    try { await cl.chat.completions.create({ model: cl === client ? modelId : tmodel, messages: msgs('x'), max_tokens: 4, ...extra }); }
    catch (e) { status = e.status; msg = e.error?.message ?? e.message; }
    check(`tools/refused_${name}`, status === 400 && re.test(msg), `status ${status}: ${msg}`);
  }
});

process.exit(exitCode());
