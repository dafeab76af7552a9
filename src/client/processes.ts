import { type ChildProcess, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { SpillwayError } from '../errors.js';

/** A cluster process did not start, or died while it was needed. */
export class ClusterProcessError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_CLUSTER_PROCESS', message);
  }
}

/** How to run the `spillway` CLI: from source through tsx, or the built JavaScript. */
export function cliCommand(): { command: string; args: string[] } {
  const self = import.meta.url;
  if (self.endsWith('.ts')) {
    return { command: process.execPath, args: ['--import', import.meta.resolve('tsx'), fileURLToPath(new URL('../cli/main.ts', self))] };
  }
  return { command: process.execPath, args: [fileURLToPath(new URL('../cli/main.js', self))] };
}

const STDERR_TAIL = 8 * 1024;

/**
 * One child process running a `spillway` command. Its stdout is read as JSON lines (the
 * commands announce themselves that way); the end of its stderr is kept for error messages.
 * Its stdin stays open: the child exits when it closes, so it cannot outlive this process.
 */
export class CliProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #events: Record<string, unknown>[] = [];
  readonly #listeners = new Set<() => void>();
  /** Called with each JSON line the process prints on stdout. */
  onEvent: ((event: Record<string, unknown>) => void) | undefined;
  #stderr = '';
  #exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;

  constructor(
    readonly label: string,
    args: string[],
    env: NodeJS.ProcessEnv,
    stderr: 'pipe' | 'inherit',
    /** Options for node itself, before the script (V8 flags NODE_OPTIONS may not carry). */
    nodeArgs: readonly string[] = [],
  ) {
    const { command, args: prefix } = cliCommand();
    // The child stays in this process's session: Linux may share the cores between sessions
    // first (autogroup), and only within one session do the task threads' nice values put
    // them below every loop of the cluster.
    this.child = spawn(command, [...nodeArgs, ...prefix, ...args], {
      env: { ...process.env, ...env, SPILLWAY_EXIT_WITH_STDIN: '1' },
      stdio: ['pipe', 'pipe', stderr],
    });
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        this.#notify();
        resolve({ code, signal });
      });
    });
    this.child.once('error', (err) => {
      this.#stderr += `\n${err.message}`;
      this.#exit ??= { code: null, signal: null };
      this.#notify();
    });
    let partial = '';
    this.child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.#onLine(line);
    });
    this.child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.#stderr = (this.#stderr + chunk).slice(-STDERR_TAIL);
    });
    this.child.stdin?.on('error', () => undefined);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  get running(): boolean {
    return this.#exit === undefined;
  }

  get stderrTail(): string {
    return this.#stderr;
  }

  /** The first JSON line with `event` printed so far. */
  event(event: string): Record<string, unknown> | undefined {
    return this.#events.find((e) => e.event === event);
  }

  /** Waits for the first JSON line with `event` on stdout; fails if the process exits first or time runs out. */
  waitForEvent(event: string, timeoutMs: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done();
        reject(new ClusterProcessError(`${this.label} did not report "${event}" within ${timeoutMs} ms${this.#describeStderr()}`));
      }, timeoutMs);
      const check = (): void => {
        const found = this.#events.find((e) => e.event === event);
        if (found !== undefined) {
          done();
          resolve(found);
        } else if (this.#exit !== undefined) {
          done();
          const how = this.#exit.signal ?? `code ${this.#exit.code}`;
          reject(new ClusterProcessError(`${this.label} exited (${how}) before reporting "${event}"${this.#describeStderr()}`));
        }
      };
      const done = (): void => {
        clearTimeout(timer);
        this.#listeners.delete(check);
      };
      this.#listeners.add(check);
      check();
    });
  }

  /** SIGTERM, then SIGKILL if it is still running after `graceMs`. */
  async stop(graceMs: number): Promise<void> {
    if (!this.running) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Peak and current resident memory of the process from /proc (Linux), else undefined. */
  async memory(): Promise<{ peakRss: number; rss: number } | undefined> {
    try {
      const status = await readFile(`/proc/${this.pid}/status`, 'utf8');
      const kib = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) * 1024;
      const peakRss = kib('VmHWM');
      const rss = kib('VmRSS');
      return Number.isFinite(peakRss) && Number.isFinite(rss) ? { peakRss, rss } : undefined;
    } catch {
      return undefined;
    }
  }

  #onLine(line: string): void {
    const text = line.trim();
    if (!text.startsWith('{')) return;
    try {
      const parsed = JSON.parse(text) as unknown;
      if (typeof parsed !== 'object' || parsed === null) return;
      this.#events.push(parsed as Record<string, unknown>);
      this.onEvent?.(parsed as Record<string, unknown>);
    } catch {
      return;
    }
    this.#notify();
  }

  #notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }

  #describeStderr(): string {
    const tail = this.#stderr.trim();
    return tail === '' ? '' : `; its stderr ends with:\n${tail.split('\n').slice(-15).join('\n')}`;
  }
}
