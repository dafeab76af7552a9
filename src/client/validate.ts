import { BUILTINS_MODULE, dependencies, type FunctionRef, type Graph } from '../cluster/protocol.js';
import { GraphError, describeKey, errorMessage } from '../errors.js';
import { builtinFunction, builtinNames } from '../worker/builtins.js';
import { isShippedModule } from '../shipping/address.js';
import { SHUFFLE_MODULE, ShuffleFunctions, shuffleUserFunctions } from '../shuffle/protocol.js';
import { parseBytes } from '../units.js';
import { definedFunctions, type TaskFunction } from './tasks.js';

/**
 * Checks a graph on the client before anything is sent: every task is well formed and
 * names an exported function of a module this process can import (workers import the
 * same modules). Cycles and missing keys are the scheduler's to find: it also knows the
 * keys computed earlier. Throws GraphError.
 */
export async function validateGraph(graph: Graph, wanted: readonly string[], cache: Map<string, Promise<string | undefined>>): Promise<void> {
  if (typeof graph !== 'object' || graph === null || Array.isArray(graph)) throw new GraphError('a graph must be an object of key → task');
  if (!Array.isArray(wanted) || wanted.some((k) => typeof k !== 'string')) throw new GraphError('wanted must be an array of keys');
  const refs = new Map<string, FunctionRef>();
  for (const [key, spec] of Object.entries(graph)) {
    // msgpack renames an own "__proto__" property (to "__proto_"): the scheduler would see another key.
    if (key === '__proto__') throw new GraphError('"__proto__" cannot be a key');
    if (typeof spec !== 'object' || spec === null) throw new GraphError(`task ${describeKey(key)} is not an object`);
    const fn = spec.fn as Partial<FunctionRef> | undefined;
    if (typeof fn?.module !== 'string' || typeof fn.name !== 'string' || fn.module === '' || fn.name === '') {
      throw new GraphError(`task ${describeKey(key)}: fn must be { module, name } (non-empty strings)`);
    }
    if (spec.args !== undefined && !Array.isArray(spec.args)) throw new GraphError(`task ${describeKey(key)}: args must be an array`);
    const problem = unsendable(spec.args ?? []);
    if (problem !== undefined) throw new GraphError(`task ${describeKey(key)}: its arguments hold ${problem}, which cannot be sent to a worker (plain data only)`);
    if (spec.memory !== undefined) {
      try {
        parseBytes(spec.memory, 'memory');
      } catch (err) {
        throw new GraphError(`task ${describeKey(key)}: ${errorMessage(err)}`);
      }
    }
    dependencies(spec);
    refs.set(`${fn.module}\0${fn.name}`, { module: fn.module, name: fn.name });
    // A shuffle's split and combine are named in its tasks' arguments: checked the same way.
    for (const user of shuffleUserFunctions(spec)) refs.set(`${user.module}\0${user.name}`, user);
  }
  const problems = await Promise.all(
    [...refs].map(([id, fn]) => {
      let check = cache.get(id);
      if (check === undefined) {
        check = checkFunction(fn);
        cache.set(id, check);
      }
      return check;
    }),
  );
  // Only successes are remembered: a module fixed on disk is seen at the next compute.
  for (const [id] of refs) if (problems.some((p) => p !== undefined)) cache.delete(id);
  const first = problems.find((p) => p !== undefined);
  if (first !== undefined) throw new GraphError(first);
}

/**
 * Checks that every typed task of a graph names its own function: the export of its module
 * under the task's name is the very function given to defineTasks. Run on the graph as the
 * user made it (before its modules are shipped), with the modules this process loaded.
 */
export async function checkDefinedFunctions(graph: Graph): Promise<void> {
  if (typeof graph !== 'object' || graph === null) return;
  const defined = new Map<FunctionRef, TaskFunction>();
  for (const spec of Object.values(graph)) {
    const impl = typeof spec === 'object' && spec !== null && typeof spec.fn === 'object' && spec.fn !== null ? definedFunctions.get(spec.fn) : undefined;
    if (impl !== undefined) defined.set(spec.fn, impl);
  }
  for (const [fn, impl] of defined) {
    let mod: Record<string, unknown>;
    try {
      mod = (await import(fn.module)) as Record<string, unknown>;
    } catch (err) {
      throw new GraphError(`cannot import module ${fn.module}: ${errorMessage(err)}`);
    }
    if (mod[fn.name] !== impl) {
      throw new GraphError(`defineTasks named a task "${fn.name}" of ${fn.module}, but the module exports another function under that name: name each task after its export`);
    }
  }
}

async function checkFunction(fn: FunctionRef): Promise<string | undefined> {
  if (fn.module === BUILTINS_MODULE) {
    return builtinFunction(fn) === undefined ? `${BUILTINS_MODULE} has no function "${fn.name}" (it has ${builtinNames().join(', ')})` : undefined;
  }
  if (fn.module === SHUFFLE_MODULE) {
    const names: readonly string[] = Object.values(ShuffleFunctions);
    return names.includes(fn.name) ? undefined : `${SHUFFLE_MODULE} has no function "${fn.name}" (it has ${names.join(', ')})`;
  }
  // Checked against the bundle's exports when it was shipped (src/client/modules.ts).
  if (isShippedModule(fn.module)) return undefined;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(fn.module)) as Record<string, unknown>;
  } catch (err) {
    return `cannot import module ${fn.module}: ${errorMessage(err)}`;
  }
  if (typeof mod[fn.name] !== 'function') return `module ${fn.module} has no exported function "${fn.name}"`;
  return undefined;
}

/** Objects the control channel's msgpack carries as they are; a plain object or array is searched. */
const SENDABLE: readonly (abstract new (...args: never[]) => unknown)[] = [Date, RegExp, Error, Set, ArrayBuffer, DataView];

/**
 * The first value in task arguments that would not reach the worker as it is: msgpack
 * refuses a symbol (an untyped error), turns a function into `undefined`, and a Map or a
 * class instance into a plain object (a Map's keys into strings).
 */
export function unsendable(args: readonly unknown[]): string | undefined {
  const stack: unknown[] = [];
  for (const arg of args) stack.push(arg);
  const seen = new Set<object>();
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === 'function') return 'a function';
    if (typeof value === 'symbol') return 'a symbol';
    if (typeof value !== 'object' || value === null || seen.has(value)) continue;
    seen.add(value);
    // One push per element: a spread of a million elements overflows the call stack.
    if (Array.isArray(value) || value instanceof Set) for (const item of value) stack.push(item);
    else if (value instanceof Map) return 'a Map (it would arrive as a plain object)';
    else if (ArrayBuffer.isView(value) || SENDABLE.some((type) => value instanceof type)) continue;
    else if (Object.hasOwn(value, '__proto__')) return 'an object with an own "__proto__" property (it would arrive renamed)';
    else if (Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null) for (const item of Object.values(value)) stack.push(item);
    else return `an instance of ${value.constructor?.name ?? 'a class'} (it would arrive as a plain object)`;
  }
  return undefined;
}
