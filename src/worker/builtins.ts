/**
 * Built-in task functions: so cheap (O(1), no loop over the data) that the worker runs
 * them on its event loop instead of posting them to a thread. Posting would copy the
 * task's inputs into the thread (structured clone): for `getitem` on a split partition,
 * that is the whole partition copied to hand back one piece of it. See docs/graphs.md.
 */
import { BUILTINS_MODULE, type FunctionRef } from '../cluster/protocol.js';
import { BuiltinArgumentError } from './errors.js';

export type BuiltinFunction = (...args: unknown[]) => unknown;

/**
 * `getitem(container, key)`: an element of an array (integer index, negative from the
 * end), a Map, or a plain object. A typed-array element that views a larger buffer is
 * copied: stored under its own key, a view would keep all of its parent's memory alive
 * while being counted at its own size (values read back from disk are such views).
 */
function getitem(container: unknown, key: unknown): unknown {
  let element: unknown;
  if (Array.isArray(container)) {
    if (!Number.isInteger(key)) throw new BuiltinArgumentError('getitem', `an array index must be an integer, got ${describe(key)}`);
    const index = (key as number) < 0 ? container.length + (key as number) : (key as number);
    if (index < 0 || index >= container.length) throw new BuiltinArgumentError('getitem', `index ${String(key)} is out of range for an array of ${container.length}`);
    element = container[index];
  } else if (container instanceof Map) {
    if (!container.has(key)) throw new BuiltinArgumentError('getitem', `the Map has no key ${describe(key)}`);
    element = container.get(key);
  } else if (typeof container === 'object' && container !== null && Object.getPrototypeOf(container) === Object.prototype) {
    if (typeof key !== 'string' || !Object.hasOwn(container, key)) throw new BuiltinArgumentError('getitem', `the object has no property ${describe(key)}`);
    element = (container as Record<string, unknown>)[key];
  } else {
    throw new BuiltinArgumentError('getitem', `expected an array, a Map or a plain object, got ${describe(container)}`);
  }
  return ownMemory(element);
}

function ownMemory(value: unknown): unknown {
  if (ArrayBuffer.isView(value) && !(value instanceof DataView) && value.byteLength < value.buffer.byteLength) {
    return (value as unknown as { slice(): unknown }).slice();
  }
  return value;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object') return value.constructor?.name ?? 'an object';
  return typeof value === 'string' ? JSON.stringify(value) : `${typeof value} ${String(value)}`;
}

const functions: ReadonlyMap<string, BuiltinFunction> = new Map([['getitem', getitem]]);

/** The built-in function `fn` names, or undefined if `fn` is not a built-in. */
export function builtinFunction(fn: FunctionRef): BuiltinFunction | undefined {
  return fn.module === BUILTINS_MODULE ? functions.get(fn.name) : undefined;
}

/** Names of the built-ins (for the client's graph check). */
export function builtinNames(): string[] {
  return [...functions.keys()];
}
