/**
 * The client's side of code shipping (docs/code-shipping.md): bundles the modules a graph
 * names, uploads each version once, and rewrites the graph to name their addresses.
 */
import { constants as fsConstants } from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { FunctionRef, Graph, TaskSpec, UploadModuleParams, UploadModuleResult } from '../cluster/protocol.js';
import { GraphError, InvalidArgumentError, describeKey } from '../errors.js';
import { ShuffleFunctions, type TransferMeta, type UnpackMeta, shuffleMetaOf } from '../shuffle/protocol.js';
import { type Bundle, bundleModule, isCurrent } from '../shipping/bundle.js';

/** What `client.uploadModule` answers. */
export interface ShippedModule {
  /** The file URL the module was bundled from. */
  url: string;
  /** Its content address, `spillway:module/<sha256>`: what tasks name on the workers. */
  module: string;
  /** Bytes of the bundle. */
  bytes: number;
}

/** Folder of the running Spillway package: its own modules are on every worker already. */
const SPILLWAY_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export class ModuleShipper {
  readonly #upload: (params: UploadModuleParams) => Promise<UploadModuleResult>;
  readonly #auto: boolean;
  /** Each module's latest bundle (or the build in progress), by URL. */
  readonly #bundles = new Map<string, Promise<Bundle>>();
  /** Modules `uploadModule` was asked for: shipped even when automatic shipping is off. */
  readonly #explicit = new Set<string>();
  /** The latest bundle of each module, by address (to upload again). */
  readonly #byAddress = new Map<string, Bundle>();
  /** Addresses the scheduler has taken (or is being sent). */
  readonly #uploaded = new Map<string, Promise<void>>();

  constructor(upload: (params: UploadModuleParams) => Promise<UploadModuleResult>, options: { auto: boolean }) {
    this.#upload = upload;
    this.#auto = options.auto;
  }

  /** Bundles and uploads the module at `url` (a file URL or path); graphs naming it run this version or a later one. */
  async uploadModule(url: string | URL): Promise<ShippedModule> {
    const href = fileHref(url);
    this.#explicit.add(href);
    const bundle = await this.#bundle(href);
    await this.#send(bundle);
    return { url: href, module: bundle.address, bytes: Buffer.byteLength(bundle.source) };
  }

  /**
   * The graph with every shipped module (named by a task, or by a shuffle's split/combine)
   * replaced by its current address, uploaded first. A function the bundle does not export
   * is a GraphError naming the module. The graph given is left as it is.
   */
  async prepare(graph: Graph): Promise<Graph> {
    // validateGraph says what is wrong with these.
    if (typeof graph !== 'object' || graph === null || Array.isArray(graph) || Object.hasOwn(graph, '__proto__')) return graph;
    const named = new Map<string, Set<string>>();
    for (const [key, spec] of Object.entries(graph)) {
      for (const fn of functionsOf(spec)) {
        if (!this.#ships(fn.module)) continue;
        if (typeof fn.name !== 'string') throw new GraphError(`task ${describeKey(key)}: fn must be { module, name } (non-empty strings)`);
        let names = named.get(fn.module);
        if (names === undefined) named.set(fn.module, (names = new Set()));
        names.add(fn.name);
      }
    }
    // A module the client cannot read is left for the workers to import as named.
    const readable = await Promise.all([...named.keys()].map(async (url) => this.#explicit.has(url) || (await canRead(url))));
    [...named.keys()].forEach((url, i) => readable[i] || named.delete(url));
    if (named.size === 0) return graph;
    const addresses = new Map<string, string>();
    await Promise.all(
      [...named].map(async ([url, names]) => {
        const bundle = await this.#bundle(url);
        for (const name of names) {
          if (!bundle.exports.includes(name)) throw new GraphError(`module ${url} has no exported function "${name}" (it exports ${bundle.exports.join(', ') || 'nothing'})`);
        }
        await this.#send(bundle);
        addresses.set(url, bundle.address);
      }),
    );
    return rewrite(graph, addresses);
  }

  /**
   * The scheduler no longer holds some module of `graph` (dropped beyond its limit): forgets
   * what was uploaded and uploads the graph's modules again.
   */
  async uploadAgain(graph: Graph): Promise<void> {
    this.#uploaded.clear();
    const addresses = new Set<string>();
    for (const spec of Object.values(graph)) for (const fn of functionsOf(spec)) if (typeof fn.module === 'string') addresses.add(fn.module);
    await Promise.all([...addresses].map((address) => this.#byAddress.get(address)).map((bundle) => (bundle === undefined ? undefined : this.#send(bundle))));
  }

  /** True for a module this client ships: asked for, or (automatic shipping) a local file outside any installed package (prepare checks it can be read). */
  #ships(module: unknown): module is string {
    if (typeof module !== 'string') return false;
    if (this.#explicit.has(module)) return true;
    if (!this.#auto || !module.startsWith('file:')) return false;
    let file: string;
    try {
      file = fileURLToPath(module);
    } catch {
      return false;
    }
    return !file.split(path.sep).includes('node_modules') && !file.startsWith(SPILLWAY_ROOT);
  }

  /** The module's bundle: the last one while none of its files changed, else a new one. */
  async #bundle(url: string): Promise<Bundle> {
    const last = this.#bundles.get(url);
    if (last !== undefined) {
      const bundle = await last.catch(() => undefined);
      if (bundle !== undefined && (await isCurrent(bundle))) return bundle;
      if (this.#bundles.get(url) !== last) return this.#bundle(url); // another call is building it
    }
    const next = bundleModule(url);
    this.#bundles.set(url, next);
    next.then(
      (bundle) => {
        for (const [address, old] of this.#byAddress) if (old.url === url) this.#byAddress.delete(address);
        this.#byAddress.set(bundle.address, bundle);
      },
      () => {
        if (this.#bundles.get(url) === next) this.#bundles.delete(url);
      },
    );
    return next;
  }

  #send(bundle: Bundle): Promise<void> {
    let sent = this.#uploaded.get(bundle.address);
    if (sent === undefined) {
      sent = this.#upload({ url: bundle.url, module: bundle.address, source: bundle.source }).then(() => undefined);
      this.#uploaded.set(bundle.address, sent);
      sent.catch(() => this.#uploaded.delete(bundle.address));
    }
    return sent;
  }
}

async function canRead(url: string): Promise<boolean> {
  try {
    await fsp.access(fileURLToPath(url), fsConstants.R_OK);
    return true;
  } catch {
    return false;
  }
}

function fileHref(url: string | URL): string {
  const text = url instanceof URL ? url.href : url;
  if (typeof text !== 'string' || text === '') throw new InvalidArgumentError('uploadModule needs a file: URL or an absolute path');
  if (text.startsWith('file:')) return new URL(text).href;
  if (path.isAbsolute(text)) return pathToFileURL(text).href;
  throw new InvalidArgumentError(`uploadModule ships local files only: give a file: URL or an absolute path, got ${JSON.stringify(text)}`);
}

/** The functions a task names: its own, and a shuffle task's split or combine. */
function functionsOf(spec: TaskSpec): Partial<FunctionRef>[] {
  if (typeof spec !== 'object' || spec === null || typeof spec.fn !== 'object' || spec.fn === null) return [];
  const found: Partial<FunctionRef>[] = [spec.fn];
  const shuffle = shuffleMetaOf(spec);
  if (shuffle !== undefined) {
    const meta = shuffle.meta as Partial<TransferMeta & UnpackMeta>;
    if (shuffle.name === ShuffleFunctions.transfer && meta.split != null) found.push(meta.split);
    if (shuffle.name === ShuffleFunctions.unpack && meta.combine != null) found.push(meta.combine);
  }
  return found;
}

/** A copy of `graph` naming addresses instead of URLs (tasks that name none are shared, not copied). */
function rewrite(graph: Graph, addresses: ReadonlyMap<string, string>): Graph {
  const swap = (fn: FunctionRef): FunctionRef => {
    const address = addresses.get(fn.module);
    return address === undefined ? fn : { ...fn, module: address };
  };
  const out: Graph = {};
  for (const [key, spec] of Object.entries(graph)) {
    if (typeof spec !== 'object' || spec === null || typeof spec.fn !== 'object' || spec.fn === null) {
      out[key] = spec;
      continue;
    }
    let copy: TaskSpec = addresses.has(spec.fn.module) ? { ...spec, fn: swap(spec.fn) } : spec;
    const shuffle = shuffleMetaOf(spec);
    if (shuffle !== undefined && spec.args !== undefined) {
      const meta = shuffle.meta as Partial<TransferMeta & UnpackMeta>;
      const split = meta.split != null && addresses.has(meta.split.module) ? { split: swap(meta.split) } : {};
      const combine = meta.combine != null && addresses.has(meta.combine.module) ? { combine: swap(meta.combine) } : {};
      if (Object.keys(split).length + Object.keys(combine).length > 0) {
        const args = [...spec.args];
        args[1] = { ...meta, ...split, ...combine };
        copy = { ...copy, args };
      }
    }
    out[key] = copy;
  }
  return out;
}
