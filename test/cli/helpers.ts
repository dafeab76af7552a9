/** Running the CLI from source in the CLI tests: one process per command, real signals. */
import { type ChildProcess, type StdioOptions, execFile, spawn } from 'node:child_process';
import type { TestContext } from 'node:test';
import { CliProcess } from '../../src/client/processes.js';
import { nodeImports, repoRoot, suiteModule } from '../helpers/suite.js';

export const main = suiteModule('src/cli/main');

/** Runs `spillway <args>` to its end; `env` is the whole environment (default: this one). */
export function cli(args: string[], options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [...nodeImports, main, ...args], { cwd: repoRoot, timeout: options.timeoutMs ?? 60_000, env: options.env ?? process.env }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

/** Starts `spillway <args>` (stdout piped, for its JSON lines); the caller stops it. */
export function spawnCli(args: string[], options: { env?: NodeJS.ProcessEnv; stdio?: StdioOptions; detached?: boolean } = {}): ChildProcess {
  return spawn(process.execPath, [...nodeImports, main, ...args], { cwd: repoRoot, env: options.env ?? process.env, stdio: options.stdio ?? ['ignore', 'pipe', 'inherit'], detached: options.detached });
}

/** The first JSON line a command prints (commands announce themselves that way). */
export function firstJsonLine(child: ChildProcess): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    let text = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
      const first = text.split('\n').find((l) => l.startsWith('{'));
      if (first !== undefined && text.includes('\n')) resolve(JSON.parse(first) as Record<string, unknown>);
    });
  });
}

/** Resolves the first stdout line matching `pattern` (read alongside firstJsonLine). */
export function stdoutLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      text += chunk;
      const found = text.split('\n').find((l, i, all) => i < all.length - 1 && pattern.test(l));
      if (found !== undefined) resolve(found);
    });
  });
}

/** A `spillway scheduler` for workers to register with (token `test-token`), stopped when the test ends; its address. */
export async function scheduler(t: TestContext): Promise<string> {
  const p = new CliProcess('scheduler', ['scheduler', '--port', '0'], { SPILLWAY_TOKEN: 'test-token' }, 'pipe');
  t.after(() => p.stop(5_000));
  const { address } = (await p.waitForEvent('listening', 30_000)) as { address: { host: string; port: number } };
  return `${address.host}:${address.port}`;
}

/** The JSON log lines of a command's stderr. */
export function logLines(stderr: string): Record<string, unknown>[] {
  return stderr.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}
