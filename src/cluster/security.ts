import { isLoopback } from './address.js';
import type { TaskSpec } from './protocol.js';
import { BUILTINS_MODULE, type FunctionRef } from './protocol.js';
import { GraphError, InvalidArgumentError, SpillwayError, describeKey } from '../errors.js';
import type { TlsConfig } from '../transfer/tls.js';

/** A scheduler or worker would listen beyond loopback with nothing to authenticate its peers. */
export class InsecureBindError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_INSECURE', message);
  }
}

/**
 * A scheduler or worker listening beyond loopback lets anyone who reaches the port run code
 * (any module a task names). That needs a token, or TLS with a CA (peers with a certificate
 * the CA signed), unless the operator says `insecure` on purpose.
 */
export function checkExposure(what: string, host: string, options: { token?: string; tls?: TlsConfig; insecure?: boolean }): void {
  if (options.insecure === true || isLoopback(host)) return;
  if (options.token !== undefined && options.token !== '') return;
  if (options.tls?.ca !== undefined) return;
  throw new InsecureBindError(
    `refusing to listen on ${host} without a token or TLS with a CA: anyone who can reach the ${what} could run any code on the cluster. ` +
      'Set SPILLWAY_TOKEN (or --token) and/or --tls-ca-file/--tls-cert/--tls-key, bind 127.0.0.1, or pass --insecure if the network is trusted',
  );
}

/** Normalised allow-list entries: file URLs resolved (no `..` escapes), everything else as given. */
export function parseAllowModules(entries: readonly string[] | string | undefined): string[] | undefined {
  if (entries === undefined) return undefined;
  const list = (typeof entries === 'string' ? entries.split(',') : [...entries]).map((e) => e.trim()).filter((e) => e !== '');
  if (list.length === 0) throw new InvalidArgumentError('allowModules must name at least one module prefix (e.g. file:///srv/jobs/,node:)');
  return list.map(normalize);
}

function normalize(module: string): string {
  if (!module.startsWith('file:')) return module;
  try {
    return new URL(module).href;
  } catch {
    return module;
  }
}

/** True when `module` starts with an entry of the allow-list (or there is none). */
export function isAllowedModule(module: string, allowed: readonly string[] | undefined): boolean {
  if (allowed === undefined || module === BUILTINS_MODULE) return true;
  const normalized = normalize(module);
  return allowed.some((prefix) => normalized.startsWith(prefix));
}

/**
 * Throws a GraphError naming every task whose module is outside the allow-list; built-ins
 * are always allowed. `functionsOf` says which functions a task runs (a shuffle's are the
 * user's split or combine); a shipped module is judged by the URL it was uploaded from (`origin`).
 */
export function checkAllowedModules(
  tasks: Iterable<{ key: string; spec: TaskSpec }>,
  allowed: readonly string[] | undefined,
  origin: (module: string) => string | undefined = () => undefined,
  functionsOf: (spec: TaskSpec) => readonly FunctionRef[] = (spec) => [spec.fn],
): void {
  if (allowed === undefined) return;
  const refused: string[] = [];
  for (const { key, spec } of tasks) {
    for (const fn of functionsOf(spec)) {
      const module = origin(fn.module) ?? fn.module;
      if (!isAllowedModule(module, allowed)) refused.push(`${describeKey(key)} (${module})`);
    }
  }
  if (refused.length > 0) {
    const shown = refused.slice(0, 5).join(', ') + (refused.length > 5 ? `, and ${refused.length - 5} more` : '');
    throw new GraphError(`module${refused.length === 1 ? '' : 's'} not in the scheduler's allow-list (${allowed.join(', ')}): ${shown}; nothing of this graph ran`);
  }
}
