// The official OpenAI JS SDK against ds-server: every request goes through the SDK's own request
// building, response parsing and SSE stream assembly, as an agent framework's would.
// The model has random weights, so it never "wants" a tool call or JSON: each property below holds
// only because the server constrains, parses and reports what it should.
// Usage: node openai_sdk_test.mjs --server DS_SERVER --model GGUF --sdk DIR_WITH_NODE_MODULES --log FILE
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const args = {};
for (let i = 2; i + 1 < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['server', 'model', 'sdk', 'log']) {
  if (!args[k]) throw new Error(`missing --${k}`);
}

const require = createRequire(path.join(args.sdk, 'package.json'));
const sdk = require('openai');
const OpenAI = sdk.OpenAI ?? sdk.default ?? sdk;
const sdkVersion = JSON.parse(readFileSync(path.join(args.sdk, 'node_modules', 'openai', 'package.json'))).version;

// --- a JSON Schema validator for the keywords used here (independent of the server's) ---
function validate(schema, value, where = '$') {
  const errors = [];
  const typeOf = (v) => (v === null ? 'null' : Array.isArray(v) ? 'array'
    : Number.isInteger(v) ? 'integer' : typeof v);
  if (schema.type) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    const t = typeOf(value);
    if (!types.some((want) => want === t || (want === 'number' && t === 'integer'))) {
      return [`${where}: ${JSON.stringify(value)} is ${t}, not ${types.join('|')}`];
    }
  }
  if (schema.enum && !schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    errors.push(`${where}: ${JSON.stringify(value)} not in enum`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && value < schema.minimum) errors.push(`${where}: ${value} < minimum`);
    if (schema.maximum !== undefined && value > schema.maximum) errors.push(`${where}: ${value} > maximum`);
  }
  if (typeof value === 'string') {
    const n = [...value].length;
    if (schema.minLength !== undefined && n < schema.minLength) errors.push(`${where}: shorter than minLength`);
    if (schema.maxLength !== undefined && n > schema.maxLength) errors.push(`${where}: longer than maxLength`);
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) errors.push(`${where}: fewer than minItems`);
    if (schema.maxItems !== undefined && value.length > schema.maxItems) errors.push(`${where}: more than maxItems`);
    if (schema.items) value.forEach((v, i) => errors.push(...validate(schema.items, v, `${where}[${i}]`)));
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const props = schema.properties ?? {};
    for (const r of schema.required ?? []) if (!(r in value)) errors.push(`${where}: missing required "${r}"`);
    for (const [k, v] of Object.entries(value)) {
      if (k in props) errors.push(...validate(props[k], v, `${where}.${k}`));
      else if (schema.additionalProperties === false) errors.push(`${where}: unexpected property "${k}"`);
    }
  }
  return errors;
}

let failures = 0;
let passed = 0;
function check(cond, what) {
  if (!cond) {
    failures++;
    console.log(`  FAIL: ${what}`);
  }
}
async function testCase(name, fn) {
  const before = failures;
  const t0 = Date.now();
  try {
    await fn();
  } catch (e) {
    failures++;
    console.log(`  FAIL: ${name} threw ${e?.constructor?.name}: ${e?.status ?? ''} ${e?.message}`);
  }
  const ok = failures === before;
  if (ok) passed++;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${name} (${Date.now() - t0} ms)`);
}

// --- ds-server on 127.0.0.1 in a given chat format, port picked by the server ---
class Server {
  constructor(template) {
    this.template = template;
    this.log = '';
    this.exited = null;
    this.proc = spawn(args.server, ['--model', args.model, '--host', '127.0.0.1', '--port', '0',
      '--chat-template', template, '--ctx-per-seq', '2048', '--parallel', '4'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc.stdout.on('data', (d) => { this.log += d; });
    this.proc.stderr.on('data', (d) => { this.log += d; });
    this.done = new Promise((r) => this.proc.once('exit', (code, signal) => { this.exited = { code, signal }; r(); }));
  }

  async ready(timeoutMs) {
    const end = Date.now() + timeoutMs;
    let port = null;
    while (Date.now() < end) {
      if (this.exited) throw new Error(`ds-server exited (${JSON.stringify(this.exited)}):\n${this.log}`);
      port ??= this.log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/)?.[1];
      if (port) {
        try {
          if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return Number(port);
        } catch { /* not accepting yet */ }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`ds-server not ready within ${timeoutMs} ms:\n${this.log}`);
  }

  async stop() {
    if (!this.exited) {
      this.proc.kill('SIGTERM');
      const timer = setTimeout(() => this.proc.kill('SIGKILL'), 20000);
      await this.done;
      clearTimeout(timer);
    }
    return this.exited;
  }
}

async function connect(server) {
  const port = await server.ready(30000);
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
  const model = (await client.models.list()).data[0].id;
  console.log(`openai ${sdkVersion}, node ${process.version}: ds-server --chat-template ${server.template} on port ${port}, model ${model}`);
  return { port, client, model };
}

const weatherSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', enum: ['Paris', 'Oslo', 'Lima'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
    unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
  },
  required: ['city', 'days'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather forecast for a city', parameters: weatherSchema } },
  { type: 'function', function: { name: 'get_time', description: 'Local time in a city', parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Oslo'] } }, required: ['city'], additionalProperties: false } } },
];
const question = [{ role: 'user', content: 'What will the weather be in Paris for the next three days?' }];

function checkToolCall(call, what, allowed) {
  check(typeof call.id === 'string' && call.id.startsWith('call_'), `${what}: id ${call.id} starts with call_`);
  check(call.type === 'function', `${what}: type ${call.type} is function`);
  const tool = tools.find((t) => t.function.name === call.function?.name);
  check(tool && allowed.includes(call.function.name), `${what}: name ${call.function?.name} is one of ${allowed}`);
  if (!tool) return undefined;
  const schema = tool.function.parameters;
  check(typeof call.function?.arguments === 'string', `${what}: arguments is a JSON string`);
  let parsed;
  try {
    parsed = JSON.parse(call.function.arguments);
  } catch (e) {
    check(false, `${what}: arguments ${call.function?.arguments} parse as JSON (${e.message})`);
    return undefined;
  }
  const errs = validate(schema, parsed);
  check(errs.length === 0, `${what}: arguments ${call.function.arguments} validate: ${errs.join('; ')}`);
  return parsed;
}

// A forced call (tool_choice named or required) through the SDK, then the same request streamed.
async function toolCallCases(client, model, label, toolChoice, allowed) {
  let forced = null;
  await testCase(`forced tool call (${label})`, async () => {
    const r = await client.chat.completions.create({
      model, messages: question, tools, seed: 7, max_tokens: 1000,
      tool_choice: toolChoice,
    });
    const c = r.choices[0];
    check(c.finish_reason === 'tool_calls', `finish_reason ${c.finish_reason} is tool_calls`);
    check(c.message.role === 'assistant', 'role is assistant');
    check(Array.isArray(c.message.tool_calls) && c.message.tool_calls.length >= 1, 'tool_calls has a call');
    for (const [i, call] of (c.message.tool_calls ?? []).entries()) {
      checkToolCall(call, `tool_calls[${i}]`, allowed);
    }
    check(r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0, 'usage counts tokens');
    console.log(`  calls: ${JSON.stringify((c.message.tool_calls ?? []).map((x) => x.function))}`);
    forced = r;
  });

  await testCase(`streamed tool call (${label})`, async () => {
    const stream = await client.chat.completions.create({
      model, messages: question, tools, seed: 7, max_tokens: 1000, stream: true,
      tool_choice: toolChoice,
    });
    const calls = [];
    let finish = null;
    let chunks = 0;
    let argumentChunks = 0;
    for await (const chunk of stream) {
      chunks++;
      for (const choice of chunk.choices) {
        for (const d of choice.delta?.tool_calls ?? []) {
          check(Number.isInteger(d.index), 'every tool_calls delta has an index');
          if (!calls[d.index]) {
            check(typeof d.id === 'string' && d.function?.name !== undefined, `first delta of call ${d.index} has id and name`);
            calls[d.index] = { id: d.id, type: d.type, function: { name: d.function?.name ?? '', arguments: '' } };
          } else {
            check(d.id === undefined || d.id === calls[d.index].id, 'a later delta does not change the id');
          }
          if (d.function?.arguments) {
            calls[d.index].function.arguments += d.function.arguments;
            argumentChunks++;
          }
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    check(finish === 'tool_calls', `finish_reason ${finish} is tool_calls`);
    check(calls.length >= 1, 'the stream carried a call');
    check(chunks > 2 && argumentChunks >= 1, `arguments arrive as fragments (${argumentChunks} in ${chunks} chunks)`);
    calls.forEach((call, i) => checkToolCall(call, `streamed call ${i}`, allowed));
    // Same request and seed: the assembled stream equals the non-streamed message.
    if (forced) {
      check(JSON.stringify(calls.map((x) => x.function)) === JSON.stringify(forced.choices[0].message.tool_calls.map((x) => x.function)),
        `streamed calls ${JSON.stringify(calls.map((x) => x.function))} equal the non-streamed ones`);
    }
  });
}

let exitCode = 1;
const servers = [];
try {
  // DSML V4: tools in the system prompt, parameters in DSML markup turned into JSON arguments.
  const v4 = new Server('deepseek-v4');
  servers.push(v4);
  const { port, client, model } = await connect(v4);
  await toolCallCases(client, model, 'DSML V4, tool_choice named', { type: 'function', function: { name: 'get_weather' } }, ['get_weather']);

  await testCase('tool-result round trip', async () => {
    // The conversation an agent sends after running the call: the assistant turn with its call,
    // then the tool's result.
    const call = { id: 'call_weather_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","days":3}' } };
    const assistant = { role: 'assistant', content: null, tool_calls: [call] };
    const result = { role: 'tool', tool_call_id: call.id, content: JSON.stringify({ forecast: ['sun', 'rain', 'sun'], unit: 'celsius' }) };
    const before = await client.chat.completions.create({ model, messages: question, tools, max_tokens: 1 });
    const r = await client.chat.completions.create({
      model, messages: [...question, assistant, result], tools, seed: 3, max_tokens: 12, tool_choice: 'none',
    });
    const c = r.choices[0];
    check(c.message.role === 'assistant', 'role is assistant');
    check(typeof c.message.content === 'string' && c.message.content.length > 0, 'the final answer is text');
    check(!c.message.tool_calls || c.message.tool_calls.length === 0, 'tool_choice none: no calls');
    check(c.finish_reason === 'stop' || c.finish_reason === 'length', `finish_reason ${c.finish_reason}`);
    // The call and its result are rendered into the prompt: it is longer than the question alone
    // (tool_choice none leaves the tools out, so compare with a request without tools).
    const bare = await client.chat.completions.create({ model, messages: question, max_tokens: 1 });
    check(r.usage.prompt_tokens > bare.usage.prompt_tokens + 10,
      `prompt with the call and result (${r.usage.prompt_tokens} tokens) is longer than the question (${bare.usage.prompt_tokens})`);
    check(before.usage.prompt_tokens > bare.usage.prompt_tokens, `tools are in the prompt (${before.usage.prompt_tokens} > ${bare.usage.prompt_tokens})`);
    // A result for a call that was never made is refused, naming the field.
    let err = null;
    try {
      await client.chat.completions.create({
        model, max_tokens: 4, messages: [...question, assistant, { ...result, tool_call_id: 'call_unknown' }],
      });
    } catch (e) {
      err = e;
    }
    check(err instanceof OpenAI.BadRequestError, `unknown tool_call_id: BadRequestError (got ${err?.constructor?.name})`);
    check(/tool_call_id/.test(err?.message ?? ''), `the error names tool_call_id: ${err?.message}`);
  });

  const answerSchema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 },
      age: { type: 'integer', minimum: 0, maximum: 120 },
      tags: { type: 'array', items: { type: 'string', enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 3 },
      kind: { type: 'string', enum: ['cat', 'dog'] },
    },
    required: ['name', 'age', 'tags', 'kind'],
    additionalProperties: false,
  };
  await testCase('response_format json_schema', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model, seed, max_tokens: 400, messages: [{ role: 'user', content: 'Describe a pet as JSON.' }],
        response_format: { type: 'json_schema', json_schema: { name: 'pet', schema: answerSchema, strict: true } },
      });
      const c = r.choices[0];
      check(c.finish_reason === 'stop', `seed ${seed}: finish_reason ${c.finish_reason} is stop`);
      let v;
      try {
        v = JSON.parse(c.message.content);
      } catch (e) {
        check(false, `seed ${seed}: content ${JSON.stringify(c.message.content)} parses (${e.message})`);
        continue;
      }
      const errs = validate(answerSchema, v);
      check(errs.length === 0, `seed ${seed}: ${c.message.content} validates: ${errs.join('; ')}`);
    }
    let err = null;
    try {
      await client.chat.completions.create({
        model, max_tokens: 4, messages: question,
        response_format: { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'object', properties: { x: { type: 'no-such-type' } } } } },
      });
    } catch (e) {
      err = e;
    }
    check(err instanceof OpenAI.BadRequestError, `an invalid schema is a BadRequestError (got ${err?.constructor?.name})`);
  });

  await testCase('response_format json_object', async () => {
    // Any string is allowed inside a JSON object, and random weights rarely close one; a
    // logit_bias towards '"' and '}' makes strings and the object end soon. The grammar still
    // decides: '}' is favoured everywhere but may not come first.
    const ids = async (text) => (await (await fetch(`http://127.0.0.1:${port}/tokenize`, {
      method: 'POST', body: JSON.stringify({ content: text }) })).json()).tokens;
    const [quote] = await ids('"');
    const [close] = await ids('}');
    for (const seed of [4, 5, 6]) {
      const r = await client.chat.completions.create({
        model, seed, max_tokens: 400, messages: [{ role: 'user', content: 'Answer in JSON.' }],
        response_format: { type: 'json_object' }, logit_bias: { [quote]: 3, [close]: 3 },
      });
      const c = r.choices[0];
      check(c.finish_reason === 'stop', `seed ${seed}: finish_reason ${c.finish_reason} is stop`);
      let v;
      try {
        v = JSON.parse(c.message.content);
      } catch (e) {
        check(false, `seed ${seed}: content ${JSON.stringify(c.message.content)} parses (${e.message})`);
        continue;
      }
      check(v !== null && typeof v === 'object' && !Array.isArray(v), `seed ${seed}: ${c.message.content} is an object`);
    }
  });

  await testCase('chat logprobs (top_logprobs 3)', async () => {
    const r = await client.chat.completions.create({
      model, messages: question, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 3,
    });
    const c = r.choices[0];
    const lp = c.logprobs?.content;
    check(Array.isArray(lp), 'choices[0].logprobs.content is an array');
    if (!Array.isArray(lp)) return;
    check(lp.length > 0 && lp.length === r.usage.completion_tokens, `one entry per token (${lp.length} vs ${r.usage.completion_tokens})`);
    const bytes = [];
    for (const [i, e] of lp.entries()) {
      check(typeof e.token === 'string', `[${i}] token is a string`);
      check(Number.isFinite(e.logprob) && e.logprob <= 0, `[${i}] logprob ${e.logprob} <= 0`);
      check(Array.isArray(e.bytes), `[${i}] bytes is an array`);
      bytes.push(...(e.bytes ?? []));
      check(e.top_logprobs?.length === 3, `[${i}] 3 top_logprobs (${e.top_logprobs?.length})`);
      const top = e.top_logprobs ?? [];
      for (let k = 1; k < top.length; k++) check(top[k - 1].logprob >= top[k].logprob, `[${i}] top_logprobs sorted`);
      check(top.reduce((s, t) => s + Math.exp(t.logprob), 0) <= 1 + 1e-4, `[${i}] top probabilities sum to at most 1`);
      // Greedy decoding picks the most probable token.
      check(top[0]?.token === e.token && Math.abs(top[0].logprob - e.logprob) < 1e-5,
        `[${i}] greedy token ${JSON.stringify(e.token)} is the top one ${JSON.stringify(top[0]?.token)}`);
    }
    check(Buffer.from(bytes).toString('utf8') === c.message.content,
      `the tokens' bytes spell the content ${JSON.stringify(c.message.content)}`);
  });

  await testCase('chat logprobs under response_format', async () => {
    // The values are taken after the constraint: a JSON object's first token is whitespace or
    // starts with '{', so every listed alternative is one of those.
    const r = await client.chat.completions.create({
      model, messages: question, max_tokens: 1, logprobs: true, top_logprobs: 5, response_format: { type: 'json_object' },
    });
    const first = r.choices[0].logprobs?.content?.[0];
    check(first && first.top_logprobs.length >= 1, 'the first token has top_logprobs');
    for (const t of first?.top_logprobs ?? []) {
      const text = Buffer.from(t.bytes).toString('utf8');
      check(/^\s*(\{[^]*)?$/.test(text) && text.length > 0, `alternative ${JSON.stringify(text)} may start a JSON object`);
    }
    // Fewer alternatives than asked for: the rest are excluded, and the listed ones hold it all.
    const listed = first?.top_logprobs ?? [];
    if (listed.length < 5) {
      const mass = listed.reduce((sum, t) => sum + Math.exp(t.logprob), 0);
      check(Math.abs(mass - 1) < 1e-3, `the ${listed.length} allowed alternatives hold all the probability (${mass})`);
    }
    console.log(`  first-token alternatives: ${JSON.stringify((first?.top_logprobs ?? []).map((t) => [t.token, t.logprob]))}`);
  });

  await testCase('completion logprobs 2', async () => {
    const prompt = 'The quick brown fox';
    const r = await client.completions.create({ model, prompt, max_tokens: 8, temperature: 0, logprobs: 2 });
    const c = r.choices[0];
    const lp = c.logprobs;
    check(lp && Array.isArray(lp.tokens), 'choices[0].logprobs.tokens is an array');
    if (!lp || !Array.isArray(lp.tokens)) return;
    const n = r.usage.completion_tokens;
    check(lp.tokens.length === n && lp.token_logprobs.length === n && lp.top_logprobs.length === n && lp.text_offset.length === n,
      `tokens, token_logprobs, top_logprobs, text_offset have one entry per token (${n})`);
    // Random weights favour single-byte tokens, which are not UTF-8 on their own: their text is
    // U+FFFD, so two of them can share a key in a top_logprobs object. Where the two keys are
    // distinct, the greedy token is the more probable one.
    check(lp.text_offset[0] === 0, `text_offset starts at 0 (${lp.text_offset[0]})`);
    let distinct = 0;
    for (let i = 0; i < lp.tokens.length; i++) {
      check(lp.token_logprobs[i] <= 0, `[${i}] token_logprob ${lp.token_logprobs[i]} <= 0`);
      const top = Object.entries(lp.top_logprobs[i] ?? {});
      check(top.length >= 1 && top.length <= 2, `[${i}] 1 or 2 top_logprobs (${top.length})`);
      check(lp.tokens[i] in (lp.top_logprobs[i] ?? {}), `[${i}] the greedy token ${JSON.stringify(lp.tokens[i])} is among the top ones`);
      if (top.length === 2) {
        distinct++;
        check(Math.abs(Math.max(...top.map(([, v]) => v)) - lp.token_logprobs[i]) < 1e-5, `[${i}] greedy token is the most probable`);
      }
      if (i > 0) check(lp.text_offset[i] > lp.text_offset[i - 1], `[${i}] text_offset increases`);
    }
    check(distinct > 0, 'some position has two distinct top tokens');
  });

  await testCase('n = 2, also streamed', async () => {
    const r = await client.chat.completions.create({ model, messages: question, max_tokens: 16, seed: 11, temperature: 1, n: 2 });
    check(r.choices.length === 2, `two choices (${r.choices.length})`);
    check(r.choices.map((c) => c.index).join(',') === '0,1', 'indices 0 and 1');
    for (const c of r.choices) {
      check(typeof c.message.content === 'string' && c.message.content.length > 0, `choice ${c.index} has text`);
      check(c.finish_reason === 'stop' || c.finish_reason === 'length', `choice ${c.index} finish_reason ${c.finish_reason}`);
    }
    // Each choice samples with its own seed (seed + index).
    check(r.choices[0]?.message.content !== r.choices[1]?.message.content, 'the two choices differ');
    let tokens = 0;
    for (const i of [0, 1]) {
      const one = await client.chat.completions.create({ model, messages: question, max_tokens: 16, seed: 11 + i, temperature: 1 });
      check(one.choices[0].message.content === r.choices[i]?.message.content, `choice ${i} equals the n = 1 answer with seed ${11 + i}`);
      tokens += one.usage.completion_tokens;
    }
    check(r.usage.completion_tokens === tokens, `usage counts both choices' tokens (${r.usage.completion_tokens} vs ${tokens})`);
    // Streamed: the choices' chunks interleave, each with its index; per index they add up
    // to the non-streamed choice.
    const stream = await client.chat.completions.create({ model, messages: question, max_tokens: 16, seed: 11, temperature: 1, n: 2, stream: true });
    const text = ['', ''];
    const finish = [null, null];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text[c.index] += c.delta?.content ?? '';
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    for (const i of [0, 1]) {
      check(text[i] === r.choices[i]?.message.content, `streamed choice ${i} equals the non-streamed one`);
      check(finish[i] === r.choices[i]?.finish_reason, `streamed choice ${i} finish_reason ${finish[i]}`);
    }
  });

  const v4exit = await v4.stop();
  check(v4exit?.code === 0, `ds-server exits 0 on SIGTERM (${JSON.stringify(v4exit)})`);

  // V3.1: JSON arguments between the tool-call markers; required lets the model pick the tool.
  const v31 = new Server('deepseek-v3.1');
  servers.push(v31);
  const s31 = await connect(v31);
  await toolCallCases(s31.client, s31.model, 'V3.1, tool_choice required', 'required', ['get_weather', 'get_time']);
  const v31exit = await v31.stop();
  check(v31exit?.code === 0, `ds-server exits 0 on SIGTERM (${JSON.stringify(v31exit)})`);

  console.log(`${passed} cases passed, ${failures} failed checks`);
  exitCode = failures === 0 ? 0 : 1;
} catch (e) {
  console.log(`FAIL: ${e?.stack ?? e}`);
} finally {
  for (const server of servers) await server.stop();
  writeFileSync(args.log, servers.map((x) => `--- ds-server --chat-template ${x.template}\n${x.log}`).join('\n'));
  if (exitCode !== 0) console.log(`ds-server log: ${args.log}`);
}
process.exit(exitCode);
