#!/usr/bin/env node
/**
 * `spillway` command line. Exit codes: 0 success, 1 failure (verification or runtime),
 * 2 bad arguments or configuration (a wrong token, an unreachable scheduler...).
 * Every flag can also be set as `SPILLWAY_<FLAG>` (src/cli/env.ts).
 */
import { readFile } from 'node:fs/promises';
import { type CommanderError, InvalidArgumentError as BadOption, type Option } from 'commander';
import { AddressError, SchedulerUnreachableError } from '../control/errors.js';
import { InvalidArgumentError } from '../errors.js';
import { InsecureBindError } from '../cluster/security.js';
import { AuthError, TlsError } from '../transfer/errors.js';
import { DEFAULT_SEED, SHUFFLE_METHODS, WORKLOADS } from '../workloads/names.js';
import { EnvCommand, checkEnvironment, envOption } from './env.js';
import { addSecurityFlags } from './security-flags.js';
import {
  EXIT_FAILED,
  EXIT_USAGE,
  duration,
  fraction,
  hostPort,
  levelOrOff,
  logLevel,
  memoryLimit,
  niceIncrement,
  port,
  positive,
  positiveDuration,
  size,
  sizeOrOff,
  wholeNumber,
} from './options.js';
import type { CleanFlags } from './clean-command.js';
import type { DemoFlags } from './demo-command.js';
import type { LocalFlags } from './local-command.js';
import type { SchedulerFlags } from './scheduler-command.js';
import type { WorkerFlags } from './worker-command.js';

// Each command's module is loaded when it runs: `demo` does not pay for the scheduler, the
// worker or piscina, and they do not pay for the demo's progress bar.

/** Errors that restarting the same command will not fix: its arguments or configuration are wrong. */
const USAGE_ERRORS = [InvalidArgumentError, BadOption, AuthError, TlsError, InsecureBindError, AddressError, SchedulerUnreachableError];

/** Runs a command's action; a bad argument found late (InvalidArgumentError, AuthError...) exits with 2, anything else with 1. */
function action<T>(name: string, run: (flags: T) => Promise<void>): (flags: T) => Promise<void> {
  return async (flags) => {
    try {
      await run(flags);
    } catch (err) {
      // A missing or wrong token is the command line's fault too: restarting will not fix it.
      const usage = USAGE_ERRORS.some((type) => err instanceof type);
      process.stderr.write(`spillway ${name}: ${usage ? 'error: ' : ''}${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = usage ? EXIT_USAGE : EXIT_FAILED;
    }
  };
}

/** `--log-level`, on every command (SPILLWAY_LOG_LEVEL; default info). */
function logLevelOption(): Option {
  return envOption('--log-level <level>', 'fatal, error, warn, info, debug, trace or silent (default info); JSON lines on stderr, readable ones on a terminal').argParser(logLevel);
}

const { version } = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

const program = new EnvCommand()
  .name('spillway')
  .description('Spillway: a memory-bounded, spill-to-disk object store for Node.js')
  .version(version, '-V, --version', 'print the version and exit')
  .showHelpAfterError('(run with --help for usage)')
  // Commander's own usage errors (unknown option, missing value, bad size) exit with 2.
  .exitOverride((err: CommanderError) => process.exit(err.exitCode === 0 ? 0 : EXIT_USAGE));

program
  .command('demo')
  .description('push a data set 4× larger than the memory limit through a SpillStore, read it back and verify every byte')
  .option('--memory-limit <size>', 'memory limit of the store', size, 256 * 2 ** 20)
  .option('--value-size <size>', 'size of each value', size, 8 * 2 ** 20)
  .option('--data <size>', 'bytes to push through (default: 4 × the memory limit)', size)
  .option('--directory <path>', 'parent directory for spill files (default: the OS temp directory)')
  .option('--monitor-interval <duration>', 'how often process RSS is read (100ms, 1s); 0 = off, pausing then follows the bytes the store holds', duration, 100)
  .option('--seed <n>', 'seed of the generated content', wholeNumber, 0x5eed)
  .option('--json', 'print a one-line JSON summary instead of text (no progress bar)', false)
  .addOption(logLevelOption())
  .action(action('demo', async (f: DemoFlags) => (await import('./demo-command.js')).demoCommand(f)));

program
  .command('scheduler')
  .description('run a scheduler until SIGINT/SIGTERM/SIGHUP; prints {"event":"listening",...} as its first line')
  .option('--host <host>', 'interface to listen on', '127.0.0.1')
  .option('--port <port>', 'control port (0: any free port)', port, 8786)
  .option('--http-port <port>', 'port of the dashboard (/status), GET /metrics and /api/state (0: any free port; default: no HTTP)', port)
  .option('--token <token>', 'shared secret of the cluster (prefer the variable: a flag shows in ps)')
  .option('--heartbeat-interval <duration>', 'how often workers send heartbeats (500ms, 2s)', positiveDuration)
  .option('--allowed-failures <n>', 'worker deaths a running task survives before it fails with SPW_ERR_KILLED_WORKER (default 3)', wholeNumber)
  .option('--without-workers-timeout <duration>', 'ready tasks with no worker for this long fail with SPW_ERR_NO_WORKERS (noWorkersTimeoutMs; default 2m; 0: wait forever)', duration)
  .option('--module-cache-limit <size>', 'bytes of shipped modules kept and sent to each worker that registers; the least recently used beyond it are dropped (default 64MiB)', size)
  .addOption(logLevelOption())
  .action(action('scheduler', async (f: SchedulerFlags) => (await import('./scheduler-command.js')).schedulerCommand(f)));

program
  .command('worker')
  .description('run a worker until SIGINT/SIGTERM/SIGHUP or until the scheduler is gone; prints {"event":"ready",...} once registered')
  .requiredOption('--scheduler <host:port>', 'the scheduler\'s control address', hostPort)
  .requiredOption('--memory-limit <size>', 'memory limit of the worker: a size (4Gi, 512MiB), auto (the container\'s limit, else the host\'s memory, divided among --nworkers) or a fraction of auto (0.5)', memoryLimit)
  .option('--target <fraction>', 'spill least-recently-used values above this share of the memory limit (0-1, or off)', levelOrOff)
  .option('--spill <fraction>', 'spill on process memory (RSS) above this share of the memory limit (0-1, or off)', levelOrOff)
  .option('--pause <fraction>', 'pause new work above this share of the memory limit (0-1, or off)', levelOrOff)
  .option('--max-spill <size>', 'most bytes spilled to disk (or off)', sizeOrOff)
  .option('--nthreads <n>', 'threads running tasks (default: number of cores)', positive)
  .option('--thread-nice <n>', 'how much lower the task threads\' CPU priority is than the event loop\'s, 0-19 (Linux; default 10)', niceIncrement)
  .option('--local-directory <dir>', 'parent directory of the spill folder (default: the OS temp directory)')
  .option('--direct-writes', 'write spilled values past the page cache (O_DIRECT), for a host whose memory is too short to cache them (default: through the page cache)')
  .option('--token <token>', 'shared secret of the cluster (prefer the variable: a flag shows in ps)')
  .option('--host <host>', 'interface the data server listens on (peers must reach it)', '127.0.0.1')
  .option('--port <port>', 'data server port (0: any free port)', port, 0)
  .option('--contact-address <host:port>', 'the data address peers are told, when not where the data server listens (default: --host, or this host\'s first non-loopback address for 0.0.0.0)', hostPort)
  .option('--name <name>', 'name shown by the scheduler (with --nworkers above 1: NAME-0, NAME-1...)')
  .option('--connect-timeout <duration>', 'how long to keep trying to reach the scheduler, at start and after losing it (120s, 2m, 500ms)', duration, 120_000)
  .option('--http-port <port>', 'serve GET /metrics and /health on this port (0: any free port; default: none)', port)
  .option('--nworkers <n>', 'worker processes the supervisor starts; they share the host\'s memory under --memory-limit auto (with --no-supervisor: how many workers share this host)', positive, 1)
  .option('--terminate <fraction>', 'kill (and restart) a worker whose RSS passes this fraction of its memory limit; 0 = never', fraction, 0.95)
  .option('--retire-timeout <duration>', 'on SIGTERM or SIGHUP, how long the worker may take to hand its data to other workers before it exits anyway (30s, 2m)', duration, 30_000)
  .option('--no-supervisor', 'run one worker in this process, without a supervisor (under systemd or Kubernetes, which restart it)')
  .addOption(logLevelOption())
  .action(action('worker', async (f: WorkerFlags) => (await import('./worker-command.js')).workerCommand(f)));

program
  .command('local')
  .description('start a local cluster, run a built-in workload larger than its memory, verify it, print a summary')
  .option('--workers <n>', 'worker processes', positive, 2)
  .option('--memory-limit <size>', 'memory limit of each worker', size, 256 * 2 ** 20)
  .addOption(envOption('--workload <name>', 'the job to run').choices(WORKLOADS).default('shuffle'))
  .option('--size <size>', 'bytes of data to generate (default: 3 × the cluster\'s memory)', size)
  .option('--partitions <n>', 'partitions of the data (default: each ≤ 1/20 of a worker\'s memory)', positive)
  .addOption(envOption('--method <method>', 'how the shuffle exchanges data: p2p (the shuffle primitive) or tasks (a task per piece)').choices(SHUFFLE_METHODS).default('p2p'))
  .option('--nthreads <n>', 'task threads per worker (default: cores / workers)', positive)
  .option('--local-directory <dir>', 'parent directory for spill files (default: the OS temp directory)')
  .option('--http-port <port>', 'port of the scheduler\'s dashboard, /metrics and /api/state (default: a free port, printed)', port)
  .option('--seed <n>', 'seed of the generated data', wholeNumber, DEFAULT_SEED)
  .option('--tls', 'mutual TLS between the scheduler, the workers and the client, with a throwaway CA', false)
  .option('--json', 'print a one-line JSON summary instead of text (no progress bar)', false)
  .addOption(logLevelOption())
  .action(action('local', async (f: LocalFlags) => (await import('./local-command.js')).localCommand(f)));

program
  .command('clean')
  .description('remove the spill folders left by Spillway processes that died (their owner is gone); never a live one, never anything else')
  .option('--local-directory <dir>', 'parent directory to clean (default: the OS temp directory)')
  .option('--dry-run', 'list what would be removed, remove nothing', false)
  .option('--json', 'print the report as one line of JSON', false)
  .addOption(logLevelOption())
  .action(action('clean', async (f: CleanFlags) => (await import('./clean-command.js')).cleanCommand(f)));

for (const command of program.commands) {
  if (command.name() === 'scheduler' || command.name() === 'worker') addSecurityFlags(command, command.name() as 'scheduler' | 'worker');
}

const environment = checkEnvironment(program);
for (const name of environment.unknown) process.stderr.write(`spillway: warning: ${name} matches no flag of any command; ignored\n`);
if (environment.errors.length > 0) {
  for (const error of environment.errors) process.stderr.write(`spillway: error: ${error}\n`);
  process.exit(EXIT_USAGE);
}
await program.parseAsync(process.argv);
