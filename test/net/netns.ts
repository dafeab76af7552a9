/**
 * Network namespaces for the multi-host tests: one per host, each with its own address in a
 * private range that exists only inside the test, joined by a bridge in a "switch" namespace
 * (nothing is added to the machine's own network). Needs root and iproute2.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Why namespaces cannot be made here, or undefined when they can. */
export async function netnsUnavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return 'network namespaces need root (CI runs as root)';
  try {
    await run('ip', ['-V']);
  } catch {
    return 'the `ip` command (iproute2) is not installed (.ci/run installs it)';
  }
  const probe = `spwprobe${process.pid}`;
  try {
    await run('ip', ['netns', 'add', probe]);
    await run('ip', ['netns', 'del', probe]);
  } catch (err) {
    return `cannot create a network namespace here: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  }
  return undefined;
}

export async function hasCommand(command: string, args: string[] = ['--version']): Promise<boolean> {
  return run(command, args).then(
    () => true,
    () => false,
  );
}

export interface Host {
  /** Namespace name. */
  ns: string;
  address: string;
}

/** A bridge and one namespace per host name; `destroy` (also run at exit) removes every one. */
export class Topology {
  readonly hosts = new Map<string, Host>();
  readonly switchNs: string;
  readonly #namespaces: string[] = [];
  readonly #processes = new Set<ChildProcess>();
  #destroyed = false;

  private constructor(readonly prefix: string) {
    this.switchNs = `${prefix}sw`;
    process.once('exit', () => this.#destroySync());
  }

  /** Hosts get .1, .2... of 10.231.N.0/24, N from this process's id. */
  static async create(names: readonly string[]): Promise<Topology> {
    const topology = new Topology(`spw${process.pid % 100000}`);
    const subnet = `10.231.${process.pid % 250}`;
    try {
      await topology.#ip(['netns', 'add', topology.switchNs]);
      topology.#namespaces.push(topology.switchNs);
      await topology.#ip(['-n', topology.switchNs, 'link', 'add', 'br0', 'type', 'bridge']);
      await topology.#ip(['-n', topology.switchNs, 'link', 'set', 'br0', 'up']);
      let i = 0;
      for (const name of names) {
        i++;
        const ns = `${topology.prefix}${name}`;
        const address = `${subnet}.${i}`;
        await topology.#ip(['netns', 'add', ns]);
        topology.#namespaces.push(ns);
        await topology.#ip(['-n', ns, 'link', 'set', 'lo', 'up']);
        await topology.#ip(['-n', ns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', `p${i}`, 'netns', topology.switchNs]);
        await topology.#ip(['-n', topology.switchNs, 'link', 'set', `p${i}`, 'master', 'br0', 'up']);
        await topology.#ip(['-n', ns, 'addr', 'add', `${address}/24`, 'dev', 'eth0']);
        await topology.#ip(['-n', ns, 'link', 'set', 'eth0', 'up']);
        topology.hosts.set(name, { ns, address });
      }
    } catch (err) {
      await topology.destroy();
      throw err;
    }
    return topology;
  }

  host(name: string): Host {
    const host = this.hosts.get(name);
    if (host === undefined) throw new Error(`no host ${name}`);
    return host;
  }

  /** Runs a command inside a host's namespace (or the switch's); killed at destroy. */
  spawn(ns: string, command: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): ChildProcess {
    const child = spawn('ip', ['netns', 'exec', ns, command, ...args], { env: options.env ?? process.env, cwd: options.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    this.#processes.add(child);
    child.once('exit', () => this.#processes.delete(child));
    return child;
  }

  /** Takes a host off the network, as a pulled cable would. */
  async cut(name: string): Promise<void> {
    await this.#ip(['-n', this.host(name).ns, 'link', 'set', 'eth0', 'down']);
  }

  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const child of this.#processes) child.kill('SIGKILL');
    await Promise.all([...this.#processes].map((child) => new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(null) : child.once('exit', resolve)))));
    // Deleting a namespace deletes its end of each veth pair, and with it the other end.
    for (const ns of this.#namespaces.reverse()) await run('ip', ['netns', 'del', ns]).catch(() => undefined);
  }

  #destroySync(): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    for (const child of this.#processes) child.kill('SIGKILL');
    for (const ns of this.#namespaces) {
      try {
        execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
      } catch {
        // already gone
      }
    }
  }

  async #ip(args: string[]): Promise<void> {
    await run('ip', args);
  }
}

/** Collects a child's stdout JSON lines and stderr; waits for an event or its exit. */
export class Lines {
  readonly events: Record<string, unknown>[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  #waiters = new Set<() => void>();

  constructor(readonly child: ChildProcess) {
    let partial = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        try {
          this.events.push({ ...(JSON.parse(line) as Record<string, unknown>), at: Date.now() });
        } catch {
          continue;
        }
      }
      this.#notify();
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      this.stderr = (this.stderr + chunk).slice(-16_000);
      this.#notify();
    });
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    void this.exited.then(() => this.#notify());
  }

  /** The first line whose `event` (or `mode`) is `name`; rejects if the process exits first or time runs out. */
  waitFor(name: string, timeoutMs: number): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        const found = this.events.find((e) => e.event === name || e.mode === name);
        if (found !== undefined) {
          done();
          resolve(found);
        } else if (this.child.exitCode !== null || this.child.signalCode !== null) {
          done();
          reject(new Error(`exited (${this.child.exitCode ?? this.child.signalCode}) before "${name}"; stderr:\n${this.stderr.slice(-3000)}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no "${name}" within ${timeoutMs} ms; stderr:\n${this.stderr.slice(-3000)}`));
      }, timeoutMs);
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(check);
      };
      this.#waiters.add(check);
      check();
    });
  }

  #notify(): void {
    for (const waiter of [...this.#waiters]) waiter();
  }
}
