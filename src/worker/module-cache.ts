/**
 * A worker's shipped modules (docs/code-shipping.md): written to `modules/` inside the
 * worker's own folder (removed with it) and imported from there. Their package imports
 * resolve in the installation the worker runs from: `modules/node_modules/spillway` links to
 * this Spillway, and `<folder>/node_modules` to the node_modules folder it is installed in.
 */
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ForgetModuleParams, FunctionRef, ShipModuleParams } from '../cluster/protocol.js';
import { isAllowedModule } from '../cluster/security.js';
import { errorMessage } from '../errors.js';
import { TaskImportError } from './errors.js';
import { addressDigest, isShippedModule, shortAddress } from '../shipping/address.js';
import { ModuleRefusedError } from '../shipping/errors.js';

/** Where a task's function is imported from, and the name to give in errors. */
export interface ResolvedModule {
  /** What the thread imports. */
  module: string;
  /** The URL the module was shipped from (for messages); absent for a module imported as named. */
  origin?: string;
}

interface Cached {
  url: string;
  /** The file URL once written; rejects with why it could not be. */
  file: Promise<string>;
}

export class ModuleCache {
  readonly #directory: string;
  readonly #allowed: readonly string[] | undefined;
  readonly #modules = new Map<string, Cached>();

  private constructor(directory: string, allowed: readonly string[] | undefined) {
    this.#directory = directory;
    this.#allowed = allowed;
  }

  /** Makes `<folder>/modules` and the links its modules' package imports resolve through. */
  static async create(folder: string, allowModules: readonly string[] | undefined): Promise<ModuleCache> {
    const directory = path.join(folder, 'modules');
    await fsp.mkdir(path.join(directory, 'node_modules'), { recursive: true });
    const root = spillwayRoot();
    await fsp.symlink(root, path.join(directory, 'node_modules', 'spillway'), 'dir');
    await fsp.symlink(packagesFolder(root), path.join(folder, 'node_modules'), 'dir');
    return new ModuleCache(directory, allowModules);
  }

  /** Keeps a module the scheduler shipped (written in the background; a task naming it waits). */
  add(params: ShipModuleParams): void {
    if (typeof params?.module !== 'string' || !isShippedModule(params.module) || typeof params.url !== 'string' || typeof params.source !== 'string') return;
    if (this.#modules.has(params.module)) return; // sent again at a new registration
    const file = this.#write(params);
    file.catch(() => undefined); // reported to the tasks that name it
    this.#modules.set(params.module, { url: params.url, file });
  }

  /** Drops a module the scheduler no longer keeps. */
  forget(params: ForgetModuleParams): void {
    const cached = this.#modules.get(params?.module);
    if (cached === undefined) return;
    this.#modules.delete(params.module);
    void cached.file.then((file) => fsp.rm(fileURLToPath(file), { force: true })).catch(() => undefined);
  }

  /** `fn` naming the URL its shipped module came from (for labels), else as it is. */
  named(fn: FunctionRef): FunctionRef {
    const url = this.#modules.get(fn.module)?.url;
    return url === undefined ? fn : { module: url, name: fn.name };
  }

  /**
   * What a thread imports for `fn`: a shipped module's cached file, any other module as
   * named. Throws ModuleRefusedError outside the worker's allow-list (a shipped module judged
   * by the URL it came from), TaskImportError for a shipped module not here.
   */
  async resolve(fn: FunctionRef): Promise<ResolvedModule> {
    if (!isShippedModule(fn.module)) {
      if (!isAllowedModule(fn.module, this.#allowed)) throw ModuleRefusedError.outside(fn.module, 'worker', this.#allowed ?? []);
      return { module: fn.module };
    }
    const cached = this.#modules.get(fn.module);
    if (cached === undefined) {
      throw new TaskImportError(fn.module, new Error('this worker was not sent that shipped module (the scheduler dropped it beyond its module cache limit?); upload it again'));
    }
    if (!isAllowedModule(cached.url, this.#allowed)) throw ModuleRefusedError.outside(cached.url, 'worker', this.#allowed ?? []);
    try {
      return { module: await cached.file, origin: cached.url };
    } catch (err) {
      throw new TaskImportError(`${cached.url} (shipped as ${shortAddress(fn.module)}…)`, err);
    }
  }

  async #write(params: ShipModuleParams): Promise<string> {
    const digest = createHash('sha256').update(params.source).digest('hex');
    if (digest !== addressDigest(params.module)) throw new Error(`its source does not hash to ${shortAddress(params.module)}…`);
    const file = path.join(this.#directory, `${digest}.mjs`);
    const partial = `${file}.${process.pid}.tmp`;
    try {
      await fsp.writeFile(partial, params.source);
      await fsp.rename(partial, file);
    } catch (err) {
      throw new Error(`cannot write it to ${this.#directory}: ${errorMessage(err)}`, { cause: err });
    }
    return pathToFileURL(file).href;
  }
}

/** The folder of the running Spillway package (the one holding its package.json). */
function spillwayRoot(): string {
  // This file is src/shipping/*.ts in development, dist/shipping/*.js installed.
  return fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');
}

/** The node_modules folder Spillway is installed in, else its own (a checkout of Spillway). */
function packagesFolder(root: string): string {
  const parent = path.dirname(root);
  if (path.basename(parent) === 'node_modules') return parent;
  if (path.basename(path.dirname(parent)) === 'node_modules' && path.basename(parent).startsWith('@')) return path.dirname(parent);
  return path.join(root, 'node_modules');
}
