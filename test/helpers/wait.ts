/**
 * Polls `check` (it may be async) every few milliseconds until it holds; fails, naming
 * `what`, once `timeoutMs` have passed. The limit is generous on purpose: it bounds a
 * wait for something that must happen, it is not a speed requirement, and the machines
 * tests run on may be loaded.
 */
export async function waitFor(check: () => boolean | Promise<boolean>, what = 'a condition', timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
