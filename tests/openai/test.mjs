// test.mjs — the official `openai` npm package against a running `promptscore serve`.
// Reads PS_BASE_URL (http://127.0.0.1:PORT/v1) and PS_MODEL (the served name). Prints one line
// "openai: N passed, N failed, N skipped" (tests/run.sh adds it up) and exits 1 on failure.
import OpenAI from 'openai';

let passed = 0, failed = 0;
const check = (cond, what) => {
  if (cond) passed++;
  else { failed++; console.error(`FAIL ${what}`); }
};

const client = new OpenAI({ baseURL: process.env.PS_BASE_URL, apiKey: 'none', maxRetries: 0 });
const model = process.env.PS_MODEL;

try {
  // The scoring call every SDK user makes: echo the prompt with 5 alternatives, generate nothing.
  const c = await client.completions.create({
    model, prompt: 'Once upon a time, there was a little girl', echo: true, logprobs: 5,
    max_tokens: 0,
  });
  check(c.object === 'text_completion', 'object');
  check(Array.isArray(c.choices) && c.choices.length === 1, 'one choice');
  const ch = c.choices[0];
  const lp = ch.logprobs;
  const n = lp.tokens.length;
  check(n > 5, `tokens (${n})`);
  check(lp.token_logprobs.length === n && lp.top_logprobs.length === n &&
        lp.text_offset.length === n, 'arrays of the same length');
  check(lp.token_logprobs[0] === null && lp.top_logprobs[0] === null, 'entry 0 is null');
  let ok = true;
  for (let i = 1; i < n; i++) {
    const v = lp.token_logprobs[i];
    const top = lp.top_logprobs[i];
    const keys = Object.keys(top);
    if (typeof v !== 'number' || !(v <= 0) || keys.length < 1 || keys.length > 6) ok = false;
    if (top[lp.tokens[i]] !== undefined && top[lp.tokens[i]] !== v) ok = false;
    if (ch.text.slice(lp.text_offset[i], lp.text_offset[i] + lp.tokens[i].length) !== lp.tokens[i]) ok = false;
  }
  check(ok, 'token_logprobs / top_logprobs / text_offset agree');
  check(ch.text === lp.tokens.join(''), 'text is the concatenation of tokens');
  check(c.usage.prompt_tokens === n && c.usage.completion_tokens === 0, 'usage');

  // lm-eval's shape through the SDK: token-id lists, max_tokens 1 -> n + 1 entries each.
  const ids = lp.token_ids;
  const c2 = await client.completions.create({
    model, prompt: [ids, ids.slice(0, 4)], echo: true, logprobs: 1, max_tokens: 1,
    temperature: 0, seed: 1234,
  });
  check(c2.choices.length === 2 && c2.choices[0].index === 0 && c2.choices[1].index === 1,
        'two choices in order');
  check(c2.choices[0].logprobs.token_logprobs.length === ids.length + 1 &&
        c2.choices[1].logprobs.token_logprobs.length === 5, 'n + 1 entries');
  let same = true;
  for (let i = 1; i < n; i++) if (c2.choices[0].logprobs.token_logprobs[i] !== lp.token_logprobs[i]) same = false;
  check(same, 'same logprobs for K = 1 and K = 5');

  // Errors come back as the SDK's typed errors.
  try {
    await client.completions.create({ model, prompt: 'x', logprobs: true });
    check(false, 'logprobs true must fail');
  } catch (e) {
    check(e instanceof OpenAI.BadRequestError && e.status === 400, `400 for logprobs true (${e})`);
    check(e.param === 'logprobs' || e.error?.param === 'logprobs', 'param logprobs');
  }
  try {
    await client.completions.create({ model: 'no-such-model', prompt: 'x' });
    check(false, 'unknown model must fail');
  } catch (e) {
    check(e instanceof OpenAI.NotFoundError && e.status === 404, `404 for an unknown model (${e})`);
  }
  const models = await client.models.list();
  check(models.data.length === 1 && models.data[0].id === model, 'models.list');
} catch (e) {
  failed++;
  console.error(`FAIL unexpected error: ${e?.stack ?? e}`);
}
console.log(`openai: ${passed} passed, ${failed} failed, 0 skipped`);
process.exit(failed ? 1 : 0);
