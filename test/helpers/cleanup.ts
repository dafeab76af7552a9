import type { TestContext } from 'node:test';

const cleanups = new WeakMap<TestContext, (() => unknown)[]>();

/**
 * Runs `fn` when the test ends, in reverse order of registration: what was opened last
 * closes first (a store before the folder it writes into is removed). `t.after` hooks run
 * in registration order, so a folder removed by its own hook would go first and race the
 * store's last background writes.
 */
export function onCleanup(t: TestContext, fn: () => unknown): void {
  let stack = cleanups.get(t);
  if (!stack) {
    const created: (() => unknown)[] = [];
    cleanups.set(t, created);
    stack = created;
    t.after(async () => {
      for (let next = created.pop(); next; next = created.pop()) await next();
    });
  }
  stack.push(fn);
}
