import { createHash, randomUUID } from 'node:crypto';
import type { Packr } from 'msgpackr';
import { type FunctionRef, type Graph, type TaskSpec, isLiteral, isRef, literal } from '../cluster/protocol.js';
import { msgpackr } from '../codec/msgpackr.js';
import { GraphError, InvalidArgumentError } from '../errors.js';
import { parseBytes } from '../units.js';
import { Future } from './futures.js';
import { unsendable } from './validate.js';

/** How a task runs on the cluster (`task.with(options)`). */
export interface TaskOptions {
  /** Times the task runs again when its function throws. Default 0. */
  retries?: number;
  /**
   * Memory the task needs while it runs, as bytes or a size such as `'2 GiB'`: the scheduler
   * places it only on a worker whose memory limit, less what the tasks running there asked
   * for, can take it (docs/graphs.md#memory-hints).
   */
  memory?: number | string;
  /**
   * False: every call is a new task with a key of its own (for functions that are not pure,
   * such as ones that read a clock or draw random numbers). Default true: calls with equal
   * arguments share one key, so a result already on the cluster is not computed again.
   */
  pure?: boolean;
}

/**
 * A value a task may be given for a parameter of type `P`: the value, a lazy task or a
 * future of it, or an array or plain object holding those in place of its elements.
 */
export type TaskArg<P> =
  | P
  | Delayed<P>
  | Future<P>
  | (P extends readonly unknown[] ? { [K in keyof P]: TaskArg<P[K]> } : P extends OpaqueValue ? never : P extends object ? { [K in keyof P]: TaskArg<P[K]> } : never);

/** Objects passed as they are (never searched for futures): binary data and the like. */
export type OpaqueValue = ArrayBufferLike | ArrayBufferView | Date | RegExp | Error | ReadonlyMap<unknown, unknown> | ReadonlySet<unknown> | ((...args: never[]) => unknown);

/** The arguments of a task whose function takes `A`. */
export type TaskArgs<A extends readonly unknown[]> = { [K in keyof A]: TaskArg<A[K]> };

/**
 * A function of a task module, typed by it: calling it builds a lazy task (`Delayed`) of
 * the function's awaited result; `client.submit(task, ...args)` runs it at once.
 */
export interface Task<A extends readonly unknown[], R> {
  (...args: TaskArgs<A>): Delayed<R>;
  /** The module and export name workers import. */
  readonly fn: FunctionRef;
  readonly options: Readonly<TaskOptions>;
  /** The same function with other options (merged over this task's). */
  with(options: TaskOptions): Task<A, R>;
}

/** Any function: the shape `defineTasks` accepts (parameters are checked where tasks are called). */
export type TaskFunction = (...args: never[]) => unknown;

/** The tasks `defineTasks` returns for an object of functions. */
export type Tasks<F extends Record<string, TaskFunction>> = { readonly [K in keyof F]: Task<Parameters<F[K]>, Awaited<ReturnType<F[K]>>> };

/** The result type of a lazy task or a future. */
export type ResultOf<N> = N extends Delayed<infer T> ? T : N extends Future<infer T> ? T : never;

/** The results of lazy tasks or futures, in their order. */
export type ResultsOf<N extends readonly unknown[]> = { -readonly [K in keyof N]: ResultOf<N[K]> };

/** Futures of lazy tasks, in their order. */
export type FuturesOf<N extends readonly unknown[]> = { -readonly [K in keyof N]: Future<ResultOf<N[K]>> };

/**
 * A task not run yet: its function, its arguments (values, other lazy tasks, futures) and
 * a key derived from them. Give it to `client.compute`, `client.persist` or to other tasks.
 */
export class Delayed<T> {
  /** The key its result is stored under: `<function name>-<hash of module, name and arguments>`. */
  readonly key: string;
  readonly spec: TaskSpec;
  /** Lazy tasks its arguments name (part of its graph). */
  readonly inputs: readonly Delayed<unknown>[];
  /** Futures its arguments name (already on the cluster). */
  readonly futures: readonly Future<unknown>[];
  // Never set: it makes a Delayed<string> different from a Delayed<number> to the compiler.
  declare readonly __result?: T;

  /** @internal Made by calling a `Task`. */
  constructor(key: string, spec: TaskSpec, inputs: readonly Delayed<unknown>[], futures: readonly Future<unknown>[]) {
    this.key = key;
    this.spec = spec;
    this.inputs = inputs;
    this.futures = futures;
  }
}

/**
 * Typed tasks from the functions of a module: `defineTasks(import.meta.url, { load, merge })`
 * in the module that exports `load` and `merge`. Each property's name must be the name it
 * is exported under (checked against the module before a graph is sent). The tasks take
 * what their functions take, where any argument may also be a lazy task or a future of
 * that type, and produce the functions' awaited results.
 */
export function defineTasks<const F extends Record<string, TaskFunction>>(module: string | URL, functions: F): Tasks<F> {
  const url = module instanceof URL ? module.href : module;
  if (typeof url !== 'string' || url === '') throw new InvalidArgumentError('defineTasks: module must be the URL of the module that exports the functions (import.meta.url)');
  if (typeof functions !== 'object' || functions === null) throw new InvalidArgumentError('defineTasks: functions must be an object of exported functions');
  const out: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(functions)) {
    if (typeof fn !== 'function') throw new InvalidArgumentError(`defineTasks: ${JSON.stringify(name)} is not a function`);
    out[name] = makeTask({ module: url, name }, fn, {});
  }
  return out as Tasks<F>;
}

/** The function each task was defined with, by task: checked against the module's export before a graph is sent. */
export const definedFunctions = new WeakMap<FunctionRef, TaskFunction>();

function makeTask(fn: FunctionRef, impl: TaskFunction, options: TaskOptions): Task<unknown[], unknown> {
  const checked = checkOptions(options);
  const ref: FunctionRef = Object.freeze({ module: fn.module, name: fn.name });
  definedFunctions.set(ref, impl);
  const task = (...args: unknown[]): Delayed<unknown> => delayed(ref, args, checked);
  Object.defineProperty(task, 'name', { value: fn.name });
  return Object.assign(task, {
    fn: ref,
    options: Object.freeze({ ...options }),
    with: (more: TaskOptions) => makeTask(ref, impl, { ...options, ...more }),
  });
}

interface CheckedOptions {
  retries: number | undefined;
  memory: number | undefined;
  pure: boolean;
}

function checkOptions(options: TaskOptions): CheckedOptions {
  if (typeof options !== 'object' || options === null) throw new InvalidArgumentError('task options must be an object { retries?, memory?, pure? }');
  const { retries, memory, pure } = options;
  if (retries !== undefined && !(Number.isSafeInteger(retries) && retries >= 0)) throw new InvalidArgumentError(`retries must be a whole number, got ${String(retries)}`);
  if (pure !== undefined && typeof pure !== 'boolean') throw new InvalidArgumentError(`pure must be a boolean, got ${String(pure)}`);
  return { retries, memory: memory === undefined ? undefined : parseBytes(memory, 'memory'), pure: pure ?? true };
}

let hashPackr: Packr | undefined;

function delayed(fn: FunctionRef, args: readonly unknown[], options: CheckedOptions): Delayed<unknown> {
  const inputs = new Map<string, Delayed<unknown>>();
  const futures = new Set<Future<unknown>>();
  const wire = args.map((arg) => toWire(arg, inputs, futures, new Set()));
  const problem = unsendable(wire);
  if (problem !== undefined) throw new GraphError(`task ${fn.name}: its arguments hold ${problem}, which cannot be sent to a worker (plain data only)`);
  const spec: TaskSpec = { fn, args: wire };
  if (options.retries !== undefined) spec.retries = options.retries;
  if (options.memory !== undefined) spec.memory = options.memory;
  return new Delayed(`${fn.name}-${options.pure ? token(fn, wire) : randomUUID().replaceAll('-', '')}`, spec, [...inputs.values()], [...futures]);
}

/**
 * 128 bits of SHA-256 over the function and the arguments as sent (references as their keys).
 * node:crypto keeps the client free of native bindings at import.
 */
function token(fn: FunctionRef, wire: readonly unknown[]): string {
  hashPackr ??= new (msgpackr().Packr)({ useRecords: false, moreTypes: true, variableMapSize: true });
  return createHash('sha256').update(hashPackr.pack([fn.module, fn.name, wire])).digest('hex').slice(0, 32);
}

/**
 * An argument as the worker gets it: lazy tasks and futures become references to their
 * keys, and data that would read as a reference or a literal is escaped, so a value is
 * always passed as it is.
 */
function toWire(value: unknown, inputs: Map<string, Delayed<unknown>>, futures: Set<Future<unknown>>, path: Set<object>): unknown {
  if (value instanceof Delayed) {
    inputs.set(value.key, value);
    return { $ref: value.key };
  }
  if (value instanceof Future) {
    futures.add(value);
    return { $ref: value.key };
  }
  if (typeof value !== 'object' || value === null) return value;
  if (isRef(value) || isLiteral(value)) return literal(value);
  const plain = Array.isArray(value) || Object.getPrototypeOf(value) === Object.prototype || Object.getPrototypeOf(value) === null;
  if (!plain) return value;
  if (path.has(value)) throw new GraphError('task arguments hold a cycle (an array or object that contains itself)');
  path.add(value);
  const out = Array.isArray(value)
    ? value.map((item) => toWire(item, inputs, futures, path))
    : Object.fromEntries(Object.entries(value).map(([k, v]) => [k, toWire(v, inputs, futures, path)]));
  path.delete(value);
  return out;
}

/** The graph of lazy tasks: every task reachable from `roots`, once; and the futures they name. */
export function graphOf(roots: Iterable<Delayed<unknown>>): { graph: Graph; futures: Set<Future<unknown>> } {
  const graph: Graph = {};
  const futures = new Set<Future<unknown>>();
  const stack = [...roots];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (Object.hasOwn(graph, node.key)) continue;
    graph[node.key] = node.spec;
    for (const future of node.futures) futures.add(future);
    for (const input of node.inputs) if (!Object.hasOwn(graph, input.key)) stack.push(input);
  }
  return { graph, futures };
}

/**
 * A graph dict whose task arguments may hold futures and lazy tasks: they become
 * references to their keys, and the lazy tasks' own graphs are added. Specs without any
 * are kept as they are; the caller's graph is not changed.
 */
export function resolveGraph(graph: Graph): { graph: Graph; futures: Set<Future<unknown>> } {
  const futures = new Set<Future<unknown>>();
  if (typeof graph !== 'object' || graph === null || Array.isArray(graph)) return { graph, futures };
  const nodes: Delayed<unknown>[] = [];
  let out: Graph | undefined;
  for (const key of Object.keys(graph)) {
    const spec = graph[key];
    if (typeof spec !== 'object' || spec === null || !Array.isArray(spec.args) || !holdsHandle(spec.args)) continue;
    const replace = (value: unknown): unknown => {
      if (value instanceof Future) {
        futures.add(value);
        return { $ref: value.key };
      }
      if (value instanceof Delayed) {
        nodes.push(value);
        return { $ref: value.key };
      }
      if (Array.isArray(value)) return value.map(replace);
      if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype && !isLiteral(value)) {
        return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v)]));
      }
      return value;
    };
    out ??= { ...graph };
    out[key] = { ...spec, args: spec.args.map(replace) };
  }
  if (out === undefined) return { graph, futures };
  const added = graphOf(nodes);
  for (const future of added.futures) futures.add(future);
  for (const [key, spec] of Object.entries(added.graph)) if (!Object.hasOwn(out, key)) out[key] = spec;
  return { graph: out, futures };
}

/** Whether task arguments hold a future or a lazy task anywhere (iterative; plain containers only). */
function holdsHandle(args: readonly unknown[]): boolean {
  const stack: unknown[] = [...args];
  const seen = new Set<object>();
  while (stack.length > 0) {
    const value = stack.pop();
    if (value instanceof Future || value instanceof Delayed) return true;
    if (typeof value !== 'object' || value === null || seen.has(value) || isLiteral(value)) continue;
    seen.add(value);
    if (Array.isArray(value)) for (const item of value) stack.push(item);
    else if (Object.getPrototypeOf(value) === Object.prototype) for (const item of Object.values(value)) stack.push(item);
  }
  return false;
}
