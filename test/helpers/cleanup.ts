import type { TestContext } from 'node:test';

/**
 * What cleanups hang on: a test's context, or the scope `withCleanup` gives one run of a
 * property (many runs to one test, each of which must leave nothing behind).
 */
export type CleanupOwner = Pick<TestContext, 'after'> | CleanupScope;

/** A scope whose cleanups run when the `withCleanup` body that received it settles. */
export interface CleanupScope {
  after(fn: () => unknown): void;
}

const cleanups = new WeakMap<CleanupOwner, (() => unknown)[]>();

/**
 * Runs `fn` when the test (or scope) ends, in reverse order of registration: what was
 * opened last closes first (a store before the folder it writes into is removed). `t.after`
 * hooks run in registration order, so a folder removed by its own hook would go first and
 * race the store's last background writes.
 */
export function onCleanup(owner: CleanupOwner, fn: () => unknown): void {
  let stack = cleanups.get(owner);
  if (!stack) {
    const created: (() => unknown)[] = [];
    cleanups.set(owner, created);
    stack = created;
    owner.after(async () => {
      for (let next = created.pop(); next; next = created.pop()) await next();
    });
  }
  stack.push(fn);
}

/**
 * A scope for an owner that ends it itself (a tier contract harness's `cleanup`): `end()`
 * undoes what was registered on it.
 */
export function cleanupScope(): CleanupScope & { end(): Promise<void> } {
  const hooks: (() => unknown)[] = [];
  return {
    after: (fn) => void hooks.push(fn),
    end: async () => {
      for (let hook = hooks.shift(); hook; hook = hooks.shift()) await hook();
    },
  };
}

/** Runs `body` with a scope of its own: what it registers with `onCleanup(scope, ...)` is undone when it settles. */
export async function withCleanup<T>(body: (scope: CleanupScope) => Promise<T>): Promise<T> {
  const scope = cleanupScope();
  try {
    return await body(scope);
  } finally {
    await scope.end();
  }
}
