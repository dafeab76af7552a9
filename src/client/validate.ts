import { BUILTINS_MODULE, dependencies, type FunctionRef, type Graph } from '../cluster/protocol.js';
import { GraphError, describeKey, errorMessage } from '../errors.js';
import { builtinFunction, builtinNames } from '../worker/builtins.js';

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
    if (typeof spec !== 'object' || spec === null) throw new GraphError(`task ${describeKey(key)} is not an object`);
    const fn = spec.fn as Partial<FunctionRef> | undefined;
    if (typeof fn?.module !== 'string' || typeof fn.name !== 'string' || fn.module === '' || fn.name === '') {
      throw new GraphError(`task ${describeKey(key)}: fn must be { module, name } (non-empty strings)`);
    }
    if (spec.args !== undefined && !Array.isArray(spec.args)) throw new GraphError(`task ${describeKey(key)}: args must be an array`);
    dependencies(spec);
    refs.set(`${fn.module}\0${fn.name}`, { module: fn.module, name: fn.name });
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

async function checkFunction(fn: FunctionRef): Promise<string | undefined> {
  if (fn.module === BUILTINS_MODULE) {
    return builtinFunction(fn) === undefined ? `${BUILTINS_MODULE} has no function "${fn.name}" (it has ${builtinNames().join(', ')})` : undefined;
  }
  let mod: Record<string, unknown>;
  try {
    mod = (await import(fn.module)) as Record<string, unknown>;
  } catch (err) {
    return `cannot import module ${fn.module}: ${errorMessage(err)}`;
  }
  if (typeof mod[fn.name] !== 'function') return `module ${fn.module} has no exported function "${fn.name}"`;
  return undefined;
}
