/**
 * The scheduler's shipped modules (docs/code-shipping.md): kept within a byte limit, least
 * recently used dropped first, and sent to every worker, now and as each registers.
 */
import type { ForgetModuleParams, FunctionRef, ShipModuleParams, TaskSpec, UploadModuleParams, UploadModuleResult } from '../cluster/protocol.js';
import { isAllowedModule } from '../cluster/security.js';
import { InvalidArgumentError, describeKey } from '../errors.js';
import { shuffleUserFunctions } from '../shuffle/protocol.js';
import { MAX_BUNDLE_BYTES, isShippedModule, moduleAddress, shortAddress } from '../shipping/address.js';
import { ModuleRefusedError, UnknownModuleError } from '../shipping/errors.js';

interface Held {
  url: string;
  source: string;
  bytes: number;
}

/** How the registry reaches the workers. */
export interface ModuleOutbox {
  /** Every registered worker (each gets each module once, in order with its tasks). */
  ship(params: ShipModuleParams): number;
  forget(params: ForgetModuleParams): void;
}

export class ModuleRegistry {
  /** Insertion order is recency: a use moves a module to the end. */
  readonly #modules = new Map<string, Held>();
  readonly #limitBytes: number;
  readonly #allowed: readonly string[] | undefined;
  readonly #outbox: ModuleOutbox;
  #bytes = 0;

  constructor(options: { limitBytes: number; allowModules: readonly string[] | undefined; outbox: ModuleOutbox }) {
    this.#limitBytes = options.limitBytes;
    this.#allowed = options.allowModules;
    this.#outbox = options.outbox;
  }

  /** Bytes of the modules held. */
  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#modules.size;
  }

  /** The URL a shipped module was uploaded from. */
  origin(module: string): string | undefined {
    return this.#modules.get(module)?.url;
  }

  /** `fn` naming the URL its shipped module came from (for labels), else as it is. */
  named(fn: FunctionRef): FunctionRef {
    const url = this.#modules.get(fn.module)?.url;
    return url === undefined ? fn : { module: url, name: fn.name };
  }

  /** Checks and keeps an uploaded module, sends it to every worker, and drops the least recently used beyond the limit. */
  upload(params: unknown): UploadModuleResult {
    const { url, module, source } = checkUpload(params);
    if (!isAllowedModule(url, this.#allowed)) throw ModuleRefusedError.outside(url, 'scheduler', this.#allowed ?? []);
    const bytes = Buffer.byteLength(source);
    if (bytes > this.#limitBytes) {
      throw new InvalidArgumentError(`module ${url} is ${bytes} bytes bundled, over the scheduler's module cache limit of ${this.#limitBytes} bytes`);
    }
    const held = this.#modules.get(module);
    if (held !== undefined) {
      this.#touch(module, held);
      return { module, workers: 0 };
    }
    if (moduleAddress(source) !== module) throw new InvalidArgumentError(`upload-module: ${shortAddress(module)}… is not the sha256 of the source sent`);
    this.#modules.set(module, { url, source, bytes });
    this.#bytes += bytes;
    const workers = this.#outbox.ship({ url, module, source });
    for (const [address, old] of this.#modules) {
      if (this.#bytes <= this.#limitBytes || address === module) break;
      this.#modules.delete(address);
      this.#bytes -= old.bytes;
      this.#outbox.forget({ module: address });
    }
    return { module, workers };
  }

  /** Every module held, oldest use first: what a worker that registers is sent. */
  *all(): IterableIterator<ShipModuleParams> {
    for (const [module, { url, source }] of this.#modules) yield { url, module, source };
  }

  /**
   * Throws UnknownModuleError when a task names a shipped module not held here (the client
   * uploads it again and resubmits); marks the others used.
   */
  checkGraph(tasks: Iterable<{ key: string; spec: TaskSpec }>): void {
    const missing: string[] = [];
    for (const { key, spec } of tasks) {
      for (const fn of [spec.fn, ...shuffleUserFunctions(spec)]) {
        if (!isShippedModule(fn.module)) continue;
        const held = this.#modules.get(fn.module);
        if (held === undefined) missing.push(`${describeKey(key)} (${fn.module})`);
        else this.#touch(fn.module, held);
      }
    }
    if (missing.length > 0) {
      const shown = missing.slice(0, 3).join(', ') + (missing.length > 3 ? `, and ${missing.length - 3} more` : '');
      throw new UnknownModuleError(`shipped module${missing.length === 1 ? '' : 's'} not held by the scheduler (never uploaded, or dropped beyond its module cache limit): ${shown}; upload again`);
    }
  }

  #touch(module: string, held: Held): void {
    this.#modules.delete(module);
    this.#modules.set(module, held);
  }
}

function checkUpload(params: unknown): UploadModuleParams {
  const p = (typeof params === 'object' && params !== null ? params : {}) as Record<string, unknown>;
  if (typeof p.url !== 'string' || !p.url.startsWith('file:')) throw new InvalidArgumentError('upload-module: url must be the file: URL the module was bundled from');
  if (typeof p.module !== 'string' || !isShippedModule(p.module)) throw new InvalidArgumentError('upload-module: module must be spillway:module/<64 hex digits>');
  if (typeof p.source !== 'string') throw new InvalidArgumentError('upload-module: source must be a string');
  if (Buffer.byteLength(p.source) > MAX_BUNDLE_BYTES) throw new InvalidArgumentError(`upload-module: a module is at most ${MAX_BUNDLE_BYTES} bytes`);
  return { url: p.url, module: p.module, source: p.source };
}
