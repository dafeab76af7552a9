import assert from 'node:assert/strict';

export interface IdentityOptions {
  /** Every decoded object keeps its original's prototype (a registered class included). */
  prototypes?: boolean;
  /** Arrays are walked by their own keys, named properties too (the v8 path keeps them), not by index. */
  arrayKeys?: boolean;
}

/**
 * Walks `original` and `decoded` side by side and checks that object identity is mirrored:
 * an object met twice in the original (shared or cyclic) is the same decoded object both
 * times, and two distinct original objects never decode to one. deepStrictEqual alone
 * accepts a shared reference decoded as two equal copies.
 */
export function assertSameIdentities(original: unknown, decoded: unknown, options: IdentityOptions = {}): void {
  const forward = new Map<object, object>();
  const backward = new Map<object, object>();
  const visit = (a: unknown, b: unknown): void => {
    if (typeof a !== 'object' || a === null) return;
    assert.ok(typeof b === 'object' && b !== null, 'an object decoded as a primitive');
    const seen = forward.get(a);
    if (seen !== undefined) {
      assert.equal(b, seen, 'a shared or cyclic reference was decoded as a copy');
      return;
    }
    assert.equal(backward.get(b), undefined, 'two distinct objects decoded as one');
    if (options.prototypes === true) assert.equal(Object.getPrototypeOf(b), Object.getPrototypeOf(a), 'another prototype');
    forward.set(a, b);
    backward.set(b, a);
    if (Array.isArray(a) && options.arrayKeys !== true) {
      for (let i = 0; i < a.length; i++) visit(a[i], (b as unknown[])[i]);
    } else if (a instanceof Map) {
      const bEntries = [...(b as Map<unknown, unknown>)];
      [...a].forEach(([k, v], i) => {
        visit(k, bEntries[i][0]);
        visit(v, bEntries[i][1]);
      });
    } else if (a instanceof Set) {
      const bItems = [...(b as Set<unknown>)];
      [...a].forEach((item, i) => visit(item, bItems[i]));
    } else if (!ArrayBuffer.isView(a) && !(a instanceof ArrayBuffer) && !(a instanceof SharedArrayBuffer) && !(a instanceof Date)) {
      for (const key of Object.keys(a)) visit((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]);
    }
  };
  visit(original, decoded);
}
