/**
 * Bundles a task module with its relative imports for the workers (esbuild). Imports of
 * packages (bare specifiers, `spillway` itself) and `node:` builtins stay imports: the
 * workers resolve them in their own installation. TypeScript is transpiled here, so the
 * workers need no TypeScript loader.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { errorMessage } from '../errors.js';
import { MAX_BUNDLE_BYTES, moduleAddress } from './address.js';
import { ModuleBundleError } from './errors.js';

/** A module bundled for shipping. */
export interface Bundle {
  /** The module's file URL, as the client names it. */
  url: string;
  /** `spillway:module/<sha256 of source>`. */
  address: string;
  /** The bundle: one ES module. */
  source: string;
  /** The names it exports. */
  exports: string[];
  /** The files it was built from, as they were: an edit to any of them makes the bundle stale. */
  inputs: InputStamp[];
  /** False when an input changed while it was built: it is built again at the next use. */
  settled: boolean;
}

interface InputStamp {
  path: string;
  mtimeMs: number;
  size: number;
}

import type { BuildResult } from 'esbuild';

type Esbuild = typeof import('esbuild');
let esbuild: Promise<Esbuild> | undefined;

/** Loaded on first use: a process that ships nothing never starts esbuild's service. */
function loadEsbuild(): Promise<Esbuild> {
  esbuild ??= import('esbuild');
  return esbuild;
}

/** An input edited within this margin before the build started may not be in it (file times can be this coarse). */
const SETTLE_MS = 2000;

/** Bundles the module at file URL `url`; throws ModuleBundleError naming it and the bundler's messages. */
export async function bundleModule(url: string): Promise<Bundle> {
  let file: string;
  try {
    file = fileURLToPath(url);
  } catch (err) {
    throw new ModuleBundleError(url, `not a local file URL (${errorMessage(err)})`);
  }
  try {
    await fsp.access(file);
  } catch (err) {
    throw new ModuleBundleError(url, `the file cannot be read (${errorMessage(err)})`);
  }
  const { build } = await loadEsbuild();
  const workingDirectory = path.dirname(file);
  const startedAt = Date.now();
  let result: BuildResult<{ write: false; metafile: true }>;
  try {
    result = await build({
      entryPoints: [file],
      absWorkingDir: workingDirectory,
      bundle: true,
      write: false,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      packages: 'external',
      metafile: true,
      logLevel: 'silent',
    });
  } catch (err) {
    throw new ModuleBundleError(url, bundlerMessage(err), { cause: err });
  }
  const source = result.outputFiles?.[0]?.text ?? '';
  const bytes = Buffer.byteLength(source);
  if (bytes > MAX_BUNDLE_BYTES) {
    throw new ModuleBundleError(url, `the bundle is ${bytes} bytes, over the ${MAX_BUNDLE_BYTES}-byte limit of one shipped module (move large data out of the module)`);
  }
  const output = Object.values(result.metafile.outputs)[0];
  const inputs = await Promise.all(Object.keys(result.metafile.inputs).map((input) => stamp(path.resolve(workingDirectory, input))));
  const settled = inputs.every((input) => input !== undefined && input.mtimeMs < startedAt - SETTLE_MS);
  return {
    url,
    address: moduleAddress(source),
    source,
    exports: output?.exports ?? [],
    inputs: inputs.filter((input): input is InputStamp => input !== undefined),
    settled,
  };
}

/** True when every file the bundle was built from is as it was. */
export async function isCurrent(bundle: Bundle): Promise<boolean> {
  if (!bundle.settled) return false;
  const now = await Promise.all(bundle.inputs.map((input) => stamp(input.path)));
  return now.every((current, i) => current !== undefined && current.mtimeMs === bundle.inputs[i].mtimeMs && current.size === bundle.inputs[i].size);
}

async function stamp(file: string): Promise<InputStamp | undefined> {
  try {
    const stat = await fsp.stat(file);
    return { path: file, mtimeMs: stat.mtimeMs, size: stat.size };
  } catch {
    return undefined;
  }
}

/** esbuild's messages as `file:line:column: text`, one per error (the first five). */
function bundlerMessage(err: unknown): string {
  const errors = (err as { errors?: { text: string; location: { file: string; line: number; column: number } | null }[] }).errors;
  if (!Array.isArray(errors) || errors.length === 0) return errorMessage(err);
  const lines = errors.slice(0, 5).map((e) => (e.location === null ? e.text : `${e.location.file}:${e.location.line}:${e.location.column}: ${e.text}`));
  if (errors.length > 5) lines.push(`and ${errors.length - 5} more`);
  return lines.join('; ');
}
