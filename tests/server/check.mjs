// ok/FAIL lines for the server tests (tests/run.sh counts them).
let failed = 0;
export const check = (name, cond, why = '') => {
  if (cond) console.log(`ok ${name}`);
  else { console.log(`FAIL ${name}: ${why}`); failed++; }
};
// Runs a group of checks; a throw is one failure named after the group.
export const attempt = async (name, fn) => {
  try { await fn(); } catch (e) { check(name, false, `threw ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`); }
};
export const exitCode = () => (failed ? 1 : 0);
// An Anthropic usage's whole prompt: input_tokens leaves out the tokens read from the cache.
export const promptOf = (u) => u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens;
