/**
 * The bare exchange: the shuffle workload's own functions and one socket, without Spillway.
 * Two processes (the cluster's two workers) each generate every other input, split it with
 * the workload's `split`, keep the pieces of their own outputs and write the peer's to a
 * loopback socket in one buffer per input; once both have sent everything, each
 * concatenates and summarizes its outputs, and the summaries are verified as the
 * cluster's are. Everything stays in memory, on each process's main thread, with no
 * encoding, checksums, store, scheduler or task threads.
 *
 * Why: the cluster bench's speed target is a multiple of a disk write, but the shuffle also
 * has to compute. Timed on the same host in the same run, the bare exchange's steps show
 * what computing and moving the data take here, so what a target leaves for spilling and
 * for Spillway's own work. It is not the least possible time: computing on its loop, a
 * process reads its peer's pieces only between two inputs.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Verification } from '../src/workloads/common.js';
import type { ShuffleSummary } from '../src/workloads/shuffle.js';

type ShuffleModule = typeof import('../src/workloads/shuffle.js');
type CommonModule = typeof import('../src/workloads/common.js');

const HERE = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CHILD_FLAG = '--bare-exchange-child';
const PROCESSES = 2;
/** The peer's pieces of one input: `[output j, byte length]` before each piece's bytes. */
const HEADER_BYTES = 8;
/** Bytes written and not yet taken by the socket past which a process waits before its next input. */
const BACKLOG_BYTES = 256 * 2 ** 20;
/** An output index no shuffle has: the sender's last header. */
const END = 0xffffffff;

/** Seconds one process spent in each step (its main thread's wall time). */
export interface BarePhases {
  generate: number;
  split: number;
  /** Copying the peer's pieces into the buffer sent, and writing it. */
  send: number;
  /** Copying the peer's pieces out of the socket's reads. */
  receive: number;
  /** Waiting for the socket to drain, and for the peer's last pieces once its own were sent. */
  wait: number;
  concat: number;
  summarize: number;
  /** The process's CPU time over the exchange, every thread's (V8's helpers included). */
  cpu: number;
}

export interface BareExchange {
  seconds: number;
  /** Per process. */
  phases: BarePhases[];
  verification: Verification;
}

type ToChild = { go: true };
type Done = { summaries: Array<[number, ShuffleSummary]>; phases: BarePhases };
type FromChild = { port: number } | { ready: true } | Done | { error: string };

/**
 * glibc keeps all freed memory for reuse (no mmap, no trim; huge pages where it can), more
 * than a worker with a memory limit can: on a host where fresh memory costs a page fault
 * of microseconds per 4 KiB page, the exchange's time is then its computing and moving.
 */
const MALLOC_REUSE = { MALLOC_MMAP_MAX_: '0', MALLOC_TRIM_THRESHOLD_: String(2 ** 40), GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1' };

/** Runs the bare exchange of `bytes` in `partitions` (the workload built in `dist/`), timed from both processes being connected to both having summarized. */
export async function bareExchange(bytes: number, partitions: number): Promise<BareExchange> {
  const { DEFAULT_SEED, elementsPerPartition } = await built<CommonModule>('common');
  const { verifyShuffle } = await built<ShuffleModule>('shuffle');
  const count = elementsPerPartition(bytes, partitions);
  const children: ChildProcess[] = [];
  try {
    const start = (rank: number, port: number): ChildProcess => {
      const child = fork(HERE, [CHILD_FLAG, String(rank), String(partitions), String(count), String(port)], {
        execArgv: ['--import', 'tsx'],
        env: { ...process.env, ...MALLOC_REUSE },
        stdio: 'inherit',
      });
      children.push(child);
      return child;
    };
    const first = start(0, 0);
    const { port } = (await message(first)) as { port: number };
    start(1, port);
    await Promise.all(children.map(async (c) => message(c)));
    const results = children.map(async (c) => message(c));
    const t0 = performance.now();
    for (const c of children) c.send({ go: true } satisfies ToChild);
    const done = (await Promise.all(results)) as Done[];
    const seconds = (performance.now() - t0) / 1000;
    const summaries = new Array<ShuffleSummary | null>(partitions).fill(null);
    for (const r of done) for (const [j, s] of r.summaries) summaries[j] = s;
    return { seconds, phases: done.map((r) => r.phases), verification: await verifyShuffle([null, ...summaries], DEFAULT_SEED, partitions, count, false) };
  } finally {
    for (const c of children) c.kill();
  }
}

/** A module of the workloads as built in `dist/`, which the cluster's workers run. */
async function built<T>(name: string): Promise<T> {
  return (await import(pathToFileURL(path.join(ROOT, 'dist', 'workloads', `${name}.js`)).href)) as T;
}

/** The child's next message; its error or early exit as an Error. */
function message(child: ChildProcess): Promise<FromChild> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: FromChild): void => {
      stop();
      if ('error' in m) reject(new Error(`bare exchange: ${m.error}`));
      else resolve(m);
    };
    const onExit = (code: number | null): void => {
      stop();
      reject(new Error(`bare exchange process exited with ${String(code)}`));
    };
    const stop = (): void => {
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    child.on('message', onMessage);
    child.on('exit', onExit);
  });
}

// ---- the child ---------------------------------------------------------------------

async function child(rank: number, P: number, count: number, port: number): Promise<void> {
  const send = (m: FromChild): void => void process.send?.(m);
  const { DEFAULT_SEED } = await built<CommonModule>('common');
  const { generate, split, concat, summarize } = await built<ShuffleModule>('shuffle');
  const phases: BarePhases = { generate: 0, split: 0, send: 0, receive: 0, wait: 0, concat: 0, summarize: 0, cpu: 0 };
  const since = (t0: number): number => (performance.now() - t0) / 1000;
  const timed = <T>(phase: keyof BarePhases, f: () => T): T => {
    const t0 = performance.now();
    try {
      return f();
    } finally {
      phases[phase] += since(t0);
    }
  };
  const socket = rank === 0 ? await accept(send) : net.connect(port, '127.0.0.1');
  if (rank !== 0) await once(socket, 'connect');
  socket.setNoDelay(true);
  const outputs = new Map<number, Float64Array[]>();
  for (let j = rank; j < P; j += PROCESSES) outputs.set(j, []);
  const peerDone = receive(socket, outputs, (seconds) => (phases.receive += seconds));
  send({ ready: true });
  await once(process, 'message');
  const cpuAtStart = process.cpuUsage();

  for (let i = rank; i < P; i += PROCESSES) {
    const input = timed('generate', () => generate(DEFAULT_SEED, i, count));
    const pieces = timed('split', () => split(input, P));
    const t0 = performance.now();
    let total = 0;
    pieces.forEach((p, j) => {
      if (j % PROCESSES === rank) outputs.get(j)?.push(p);
      else total += HEADER_BYTES + p.byteLength;
    });
    const out = Buffer.allocUnsafe(total);
    let at = 0;
    pieces.forEach((p, j) => {
      if (j % PROCESSES === rank) return;
      out.writeUInt32LE(j, at);
      out.writeUInt32LE(p.byteLength, at + 4);
      out.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), at + HEADER_BYTES);
      at += HEADER_BYTES + p.byteLength;
    });
    socket.write(out);
    phases.send += since(t0);
    // The next input is split while this one is on its way: waiting for every write to
    // drain would stop both processes whenever the peer is between two reads.
    if (socket.writableLength > BACKLOG_BYTES) {
      const t1 = performance.now();
      await once(socket, 'drain');
      phases.wait += since(t1);
    }
    // Lets the peer's pieces in between inputs, as a worker's loop would.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const end = Buffer.alloc(HEADER_BYTES);
  end.writeUInt32LE(END, 0);
  const t0 = performance.now();
  // Flushed before the outputs are assembled: a write still queued here would only move
  // in this process's loop turns, which the assembly would hold up.
  if (!socket.write(end)) await once(socket, 'drain');
  await peerDone;
  phases.wait += since(t0);
  const summaries: Array<[number, ShuffleSummary]> = [];
  for (const [j, pieces] of outputs) {
    const output = timed('concat', () => concat(pieces));
    summaries.push([j, timed('summarize', () => summarize(output, j, P))]);
    outputs.delete(j);
  }
  const cpu = process.cpuUsage(cpuAtStart);
  phases.cpu = (cpu.user + cpu.system) / 1e6;
  send({ summaries, phases });
  socket.end();
}

async function accept(send: (m: FromChild) => void): Promise<net.Socket> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  send({ port: (server.address() as net.AddressInfo).port });
  const [socket] = (await once(server, 'connection')) as [net.Socket];
  server.close();
  return socket;
}

/** Reads the peer's pieces into `outputs` (each into its own aligned array); resolves at the peer's end header. */
function receive(socket: net.Socket, outputs: Map<number, Float64Array[]>, took: (seconds: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const header = Buffer.alloc(HEADER_BYTES);
    let headerAt = 0;
    /** The piece being filled, and how many of its bytes have arrived. */
    let piece: Uint8Array | undefined;
    let pieceAt = 0;
    socket.on('error', reject);
    socket.on('data', (data: Buffer) => {
      const t0 = performance.now();
      try {
        read(data);
      } finally {
        took((performance.now() - t0) / 1000);
      }
    });
    function read(data: Buffer): void {
      let at = 0;
      while (at < data.length) {
        if (piece === undefined) {
          const n = Math.min(HEADER_BYTES - headerAt, data.length - at);
          data.copy(header, headerAt, at, at + n);
          headerAt += n;
          at += n;
          if (headerAt < HEADER_BYTES) return;
          headerAt = 0;
          const j = header.readUInt32LE(0);
          if (j === END) return resolve();
          const list = outputs.get(j);
          if (list === undefined) return reject(new Error(`piece of output ${j} sent to the wrong process`));
          const values = new Float64Array(header.readUInt32LE(4) / 8);
          list.push(values);
          piece = new Uint8Array(values.buffer);
          pieceAt = 0;
        }
        const n = Math.min(piece.length - pieceAt, data.length - at);
        piece.set(data.subarray(at, at + n), pieceAt);
        pieceAt += n;
        at += n;
        if (pieceAt === piece.length) piece = undefined;
      }
    }
  });
}

if (process.argv[2] === CHILD_FLAG) {
  const [rank, P, count, port] = process.argv.slice(3).map(Number);
  child(rank, P, count, port).catch((error: unknown) => {
    process.send?.({ error: error instanceof Error ? error.message : String(error) } satisfies FromChild);
    process.exitCode = 1;
  });
}
