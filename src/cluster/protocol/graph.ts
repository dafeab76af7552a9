/** Task graphs as the protocol carries them: tasks, function references, `$ref` arguments, built-ins. */

/** Where a worker serves its data (a DataServer). */
export interface DataAddress {
  host: string;
  port: number;
}

/**
 * A function every worker can import: `(await import(module))[name]`. `module` is an absolute
 * file URL, a package name, or a shipped module's address (`spillway:module/<sha256>`).
 */
export interface FunctionRef {
  module: string;
  name: string;
}

/**
 * One task of a graph. Arguments are plain data (msgpack-able). A reference to another
 * key is `{ $ref: 'key' }` anywhere inside an argument (arrays and plain objects are
 * searched); the worker replaces it with that key's value. A literal object that
 * happens to look like a reference is written `{ $literal: value }`.
 */
export interface TaskSpec {
  fn: FunctionRef;
  args?: unknown[];
  /** Times the task is run again when its function throws (default 0). Worker deaths are counted apart (allowedFailures). */
  retries?: number;
  /**
   * Memory the task needs while it runs (bytes, or a size such as '2 GiB'): the scheduler
   * places it only on a worker whose memory limit, less the hints of the tasks it already
   * runs, can take it; a task no connected worker could ever take fails with
   * SPW_ERR_MEMORY_HINT.
   */
  memory?: number | string;
}

/** Module specifier of the built-in functions, which workers run without a thread (docs/graphs.md). */
export const BUILTINS_MODULE = 'spillway:builtins';

/**
 * Built-in task functions. `getitem`: `{ fn: builtins.getitem, args: [ref('parts'), 3] }`
 * is element 3 of the value of `parts` (an array, Map or plain object), taken without
 * copying the whole value into a thread.
 */
export const builtins = {
  getitem: { module: BUILTINS_MODULE, name: 'getitem' },
} as const satisfies Record<string, FunctionRef>;

/** A graph maps keys to tasks. */
export type Graph = Record<string, TaskSpec>;

export interface TaskErrorInfo {
  /** The error's class name, message and stack as the worker saw them. */
  name: string;
  message: string;
  stack?: string;
  /** SpillwayError code when there is one. */
  code?: string;
  /** SPW_ERR_KILLED_WORKER: the name of the last worker that died running the task. */
  worker?: string;
}

/** A `{ $ref: key }` marker. */
export function ref(key: string): { $ref: string } {
  return { $ref: key };
}

/** Escapes a literal that would otherwise read as a reference. */
export function literal(value: unknown): { $literal: unknown } {
  return { $literal: value };
}

/** True for `{ $ref: string }` (exactly that one property). */
export function isRef(value: unknown): value is { $ref: string } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === '$ref' && typeof (value as { $ref: unknown }).$ref === 'string';
}

/** True for `{ $literal: value }` (exactly that one property). */
export function isLiteral(value: unknown): value is { $literal: unknown } {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === '$literal';
}

/** Every key referenced by a task's arguments, in order, without duplicates. */
export function dependencies(spec: TaskSpec): string[] {
  const found = new Set<string>();
  const visit = (value: unknown): void => {
    if (isRef(value)) found.add(value.$ref);
    else if (isLiteral(value)) return;
    else if (Array.isArray(value)) value.forEach(visit);
    else if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
      for (const item of Object.values(value)) visit(item);
    }
  };
  (spec.args ?? []).forEach(visit);
  return [...found];
}

/** Replaces references by values (`resolve(key)`) and unwraps literals. */
export function substitute(args: readonly unknown[], resolve: (key: string) => unknown): unknown[] {
  const visit = (value: unknown): unknown => {
    if (isRef(value)) return resolve(value.$ref);
    if (isLiteral(value)) return value.$literal;
    if (Array.isArray(value)) return value.map(visit);
    if (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = visit(v);
      return out;
    }
    return value;
  };
  return args.map(visit);
}
