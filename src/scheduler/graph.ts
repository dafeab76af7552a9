import { GraphError, describeKey, errorMessage } from '../errors.js';
import { type TaskSpec, dependencies } from '../cluster/protocol.js';
import { parseBytes } from '../units.js';

/** A task of a submission that the scheduler does not know yet. */
export interface NewTask {
  key: string;
  spec: TaskSpec;
  deps: string[];
}

export interface ValidSubmission {
  /** New tasks, every task after the new tasks it depends on (depth-first from the wanted keys). */
  order: NewTask[];
  /** Keys of the graph the scheduler already knew (their specs were not looked at). */
  known: string[];
  wanted: string[];
}

/** How many tasks are checked between two yields to the event loop. */
const CHUNK = 4096;
/** How many offending keys an error message names. */
const SHOWN = 5;

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Checks a `submit` payload before anything of it runs: shapes, references, cycles.
 * `isKnown(key)`: the scheduler already has this key (its spec is not looked at again).
 * Long graphs yield to the event loop every few thousand tasks; every walk is iterative.
 */
export async function validateSubmission(params: unknown, isKnown: (key: string) => boolean): Promise<ValidSubmission> {
  if (!isPlainObject(params)) throw new GraphError('submit needs { graph, wanted }');
  const { graph, wanted } = params;
  if (!isPlainObject(graph)) throw new GraphError('graph must be an object mapping keys to tasks');
  if (!Array.isArray(wanted) || !wanted.every((k): k is string => typeof k === 'string')) {
    throw new GraphError('wanted must be an array of key strings');
  }

  const tasks = new Map<string, NewTask>();
  const known: string[] = [];
  const malformed: string[] = [];
  const missing: string[] = [];
  // Keys only: Object.entries of a large object (a dictionary in V8) builds a pair per key
  // in one step, several times as long as listing the keys.
  const keys = Object.keys(graph);
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && i % CHUNK === 0) await turn();
    const key = keys[i];
    const spec = graph[key];
    if (isKnown(key)) {
      known.push(key);
      continue;
    }
    const problem = specProblem(spec);
    if (problem !== undefined) {
      malformed.push(`${describeKey(key)} (${problem})`);
      continue;
    }
    let deps: string[];
    try {
      deps = dependencies(spec as TaskSpec);
    } catch (err) {
      malformed.push(`${describeKey(key)} (its arguments cannot be walked: ${errorMessage(err)})`);
      continue;
    }
    for (const dep of deps) {
      if (!Object.hasOwn(graph, dep) && !isKnown(dep)) missing.push(`${describeKey(key)} → ${describeKey(dep)}`);
    }
    tasks.set(key, { key, spec: spec as TaskSpec, deps });
  }
  if (malformed.length > 0) throw new GraphError(`malformed task${plural(malformed)}: ${shown(malformed)}`);
  for (const key of wanted) {
    if (!Object.hasOwn(graph, key) && !isKnown(key)) missing.push(`wanted ${describeKey(key)}`);
  }
  if (missing.length > 0) {
    throw new GraphError(`reference${plural(missing)} to keys neither in the graph nor known to the scheduler: ${shown(missing)}`);
  }
  return { order: await topologicalOrder(tasks, wanted), known, wanted: [...new Set(wanted)] };
}

/** Post-order of an iterative depth-first walk (wanted keys first): dependencies before dependents. */
async function topologicalOrder(tasks: Map<string, NewTask>, wanted: string[]): Promise<NewTask[]> {
  const GRAY = 1;
  const BLACK = 2;
  const color = new Map<string, number>();
  const order: NewTask[] = [];
  const stack: Array<{ task: NewTask; next: number }> = [];
  let steps = 0;
  const roots = [...wanted, ...tasks.keys()];
  for (const root of roots) {
    const start = tasks.get(root);
    if (start === undefined || color.has(root)) continue;
    color.set(root, GRAY);
    stack.push({ task: start, next: 0 });
    while (stack.length > 0) {
      if (++steps % CHUNK === 0) await turn();
      const frame = stack[stack.length - 1];
      if (frame.next === frame.task.deps.length) {
        color.set(frame.task.key, BLACK);
        order.push(frame.task);
        stack.pop();
        continue;
      }
      const dep = frame.task.deps[frame.next++];
      const child = tasks.get(dep);
      if (child === undefined) continue; // known to the scheduler: not part of this walk
      const seen = color.get(dep);
      if (seen === GRAY) {
        const from = stack.findIndex((f) => f.task.key === dep);
        const path = [...stack.slice(from).map((f) => f.task.key), dep];
        throw new GraphError(`graph has a cycle: ${path.map(describeKey).join(' → ')}`);
      }
      if (seen === BLACK) continue;
      color.set(dep, GRAY);
      stack.push({ task: child, next: 0 });
    }
  }
  return order;
}

/** Why a value is not a task, or undefined when it is one. */
function specProblem(spec: unknown): string | undefined {
  if (!isPlainObject(spec)) return 'a task must be an object { fn, args }';
  const fn = spec.fn;
  if (!isPlainObject(fn)) return 'fn must be an object { module, name }';
  if (typeof fn.module !== 'string' || fn.module.length === 0) return 'fn.module must be a non-empty string';
  if (typeof fn.name !== 'string' || fn.name.length === 0) return 'fn.name must be a non-empty string';
  if (spec.args !== undefined && !Array.isArray(spec.args)) return 'args must be an array';
  if (spec.retries !== undefined && !(Number.isSafeInteger(spec.retries) && (spec.retries as number) >= 0)) return 'retries must be a whole number';
  if (spec.memory !== undefined && memoryHint(spec.memory) === undefined) return "memory must be a number of bytes or a size such as '2 GiB'";
  return undefined;
}

/** A task's memory hint in bytes (0: none), or undefined when it is not a size. */
export function memoryHint(value: unknown): number | undefined {
  if (value === undefined) return 0;
  if (typeof value !== 'number' && typeof value !== 'string') return undefined;
  try {
    return parseBytes(value, 'memory');
  } catch {
    return undefined;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function plural(items: unknown[]): string {
  return items.length === 1 ? '' : 's';
}

function shown(items: string[]): string {
  const head = items.slice(0, SHOWN).join(', ');
  return items.length > SHOWN ? `${head} and ${items.length - SHOWN} more` : head;
}
