/**
 * The bare exchange: the shuffle workload's own functions and one socket, without Spillway.
 * Two processes (the cluster's two workers) each generate every other input and split it
 * with the workload's `split` on a thread, which packs the peer's pieces into one buffer
 * per input; the main thread writes that buffer to a loopback socket, keeps the pieces of
 * its own outputs and reads its peer's. Once both have sent everything, each assembles and
 * summarizes its outputs with the workload's `summarize`, and the summaries are verified as
 * the cluster's are. There is no encoding, checksum, store or scheduler.
 *
 * It runs two ways. In memory, every piece stays in memory. Spilling, a process keeps up to
 * a budget of its outputs' pieces in memory and appends the rest to one file, straight from
 * the buffers they arrived in, then reads them back into each output (_bare-outputs.ts).
 * Either way glibc keeps the memory the processes free, unless they run in a worker's
 * environment (`asWorkerOf`), which gives back what a worker of that limit gives back.
 * The budget counts pieces, not the process: each process reports its peak RSS.
 *
 * Why: the cluster bench's speed target is a multiple of a disk write, but the shuffle also
 * has to compute. Timed on the same host in the same run, the in-memory exchange shows what
 * computing and moving the data take here, and the spilling one what that plus writing out
 * what does not fit and reading it back takes: the time a target leaves for Spillway's
 * own work is what is left over.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { on, once } from 'node:events';
import net from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { tunedEnvironment } from '../src/runtime/tuned-environment.js';
import type { Verification } from '../src/workloads/common.js';
import type { ShuffleSummary } from '../src/workloads/shuffle.js';
import { BareOutputs } from './_bare-outputs.js';

type ShuffleModule = typeof import('../src/workloads/shuffle.js');
type CommonModule = typeof import('../src/workloads/common.js');

const HERE = fileURLToPath(import.meta.url);
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CHILD_FLAG = '--bare-exchange-child';
const PROCESSES = 2;
/** The peer's pieces of one input: `[output j, byte length]` before each piece's bytes. */
const HEADER_BYTES = 8;
/** Bytes queued on the socket past which a process holds back its thread's next input. */
const BACKLOG_BYTES = 64 * 2 ** 20;
/** Inputs the thread may split ahead of the main thread's sending them. */
const SPLIT_AHEAD = 2;
/** An output index no shuffle has: the sender's last header. */
const END = 0xffffffff;

/** Seconds one process spent in each step, and the bytes it wrote to its file. */
export interface BarePhases {
  /** On the thread: generating, splitting, and copying the peer's pieces into the buffer sent. */
  generate: number;
  split: number;
  pack: number;
  /** On the main thread: writing to the socket and keeping or writing out its own pieces. */
  send: number;
  /** On the main thread: the peer's pieces out of the socket's reads. */
  receive: number;
  /** Wall time from the start until everything is sent, received and on file. */
  exchange: number;
  /** On the main thread: waiting for the file's reads while assembling. */
  read: number;
  /** On the main thread: assembling the outputs, their reads' waits aside. */
  assemble: number;
  summarize: number;
  /** The process's CPU time over the exchange, every thread's (V8's helpers included). */
  cpu: number;
  /** Bytes appended to the process's file. */
  written: number;
  /** The process's peak resident memory over its life, in bytes. */
  peakRss: number;
}

export interface BareExchange {
  seconds: number;
  /** Per process. */
  phases: BarePhases[];
  verification: Verification;
}

export interface BareOptions {
  /** Bytes of its outputs' pieces each process keeps in memory; `Infinity` writes nothing. */
  memoryBytes: number;
  /** Where the spilling processes' files go (unlinked as soon as they are open). */
  dir: string;
  /**
   * Runs the processes in the environment a supervisor gives a worker with this memory limit
   * (runtime/tuned-environment.ts: malloc's thresholds by the limit, so that under 1 GiB
   * every large buffer freed goes back to the kernel and the next one is fresh memory, and
   * V8's young generation and helper threads as a worker's), instead of `MALLOC_REUSE`.
   */
  asWorkerOf?: number;
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
export async function bareExchange(bytes: number, partitions: number, options: BareOptions): Promise<BareExchange> {
  const { DEFAULT_SEED, elementsPerPartition } = await built<CommonModule>('common');
  const { verifyShuffle } = await built<ShuffleModule>('shuffle');
  const count = elementsPerPartition(bytes, partitions);
  const children: ChildProcess[] = [];
  try {
    const start = (rank: number, port: number): ChildProcess => {
      const args = [CHILD_FLAG, String(rank), String(partitions), String(count), String(port), String(options.memoryBytes), options.dir];
      const env = options.asWorkerOf === undefined ? { ...process.env, ...MALLOC_REUSE } : tunedEnvironment(process.env, process.platform, { workers: PROCESSES, taskThreads: 1, memoryLimit: options.asWorkerOf });
      const child = fork(HERE, args, { execArgv: ['--import', 'tsx'], env, stdio: 'inherit' });
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

/**
 * The thread's code: generates and splits the process's inputs, at most `SPLIT_AHEAD` ahead
 * of the main thread's credits, and posts for each the peer's pieces packed behind their
 * headers and its own pieces as `[output, piece, ...]`, every buffer transferred.
 */
const THREAD = `
const { parentPort, workerData: w } = require('node:worker_threads');
const { performance } = require('node:perf_hooks');
(async () => {
  const { generate, split } = await import(w.shuffle);
  let credits = ${SPLIT_AHEAD};
  let wake = () => {};
  parentPort.on('message', () => { credits++; wake(); });
  const since = (t0) => (performance.now() - t0) / 1000;
  for (let i = w.rank; i < w.partitions; i += w.processes) {
    while (credits === 0) await new Promise((resolve) => (wake = resolve));
    credits--;
    let t0 = performance.now();
    const input = generate(w.seed, i, w.count);
    const generated = since(t0);
    t0 = performance.now();
    const pieces = split(input, w.partitions);
    const splitting = since(t0);
    t0 = performance.now();
    let total = 0;
    pieces.forEach((p, j) => { if (j % w.processes !== w.rank) total += ${HEADER_BYTES} + p.byteLength; });
    const packed = new Uint8Array(total);
    const headers = new DataView(packed.buffer);
    const own = [];
    const transfer = [packed.buffer];
    let at = 0;
    pieces.forEach((p, j) => {
      if (j % w.processes === w.rank) return void (own.push(j, p), transfer.push(p.buffer));
      headers.setUint32(at, j, true);
      headers.setUint32(at + 4, p.byteLength, true);
      packed.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), at + ${HEADER_BYTES});
      at += ${HEADER_BYTES} + p.byteLength;
    });
    parentPort.postMessage({ packed, own, times: [generated, splitting, since(t0)] }, transfer);
  }
  parentPort.postMessage({ done: true });
})().catch((e) => parentPort.postMessage({ error: String((e && e.stack) || e) }));
`;

type FromThread = { packed: Uint8Array; own: Array<number | Float64Array>; times: [number, number, number] } | { done: true } | { error: string };

async function child(rank: number, P: number, count: number, port: number, memoryBytes: number, dir: string): Promise<void> {
  const send = (m: FromChild): void => void process.send?.(m);
  const { DEFAULT_SEED } = await built<CommonModule>('common');
  const { summarize } = await built<ShuffleModule>('shuffle');
  const phases: BarePhases = { generate: 0, split: 0, pack: 0, send: 0, receive: 0, exchange: 0, read: 0, assemble: 0, summarize: 0, cpu: 0, written: 0, peakRss: 0 };
  const since = (t0: number): number => (performance.now() - t0) / 1000;
  const socket = rank === 0 ? await accept(send) : net.connect(port, '127.0.0.1');
  if (rank !== 0) await once(socket, 'connect');
  socket.setNoDelay(true);
  const owned: number[] = [];
  for (let j = rank; j < P; j += PROCESSES) owned.push(j);
  const outputs = await BareOutputs.open(owned, memoryBytes, dir, `bare-exchange-${process.pid}`);
  try {
    const peerDone = receive(socket, outputs, (seconds) => (phases.receive += seconds));
    const shuffle = pathToFileURL(path.join(ROOT, 'dist', 'workloads', 'shuffle.js')).href;
    const workerData = { shuffle, rank, partitions: P, processes: PROCESSES, seed: DEFAULT_SEED, count };
    send({ ready: true });
    await once(process, 'message');
    const t0 = performance.now();
    const cpuAtStart = process.cpuUsage();
    const thread = new Worker(THREAD, { eval: true, workerData });
    try {
      for await (const [m] of on(thread, 'message') as AsyncIterableIterator<[FromThread]>) {
        if ('error' in m) throw new Error(`bare exchange thread: ${m.error}`);
        if ('done' in m) break;
        const t1 = performance.now();
        socket.write(Buffer.from(m.packed.buffer, m.packed.byteOffset, m.packed.byteLength));
        for (let k = 0; k < m.own.length; k += 2) {
          const piece = m.own[k + 1] as Float64Array;
          const bytes = new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength);
          if (outputs.keeps(bytes.byteLength)) outputs.keep(m.own[k] as number, bytes);
          else outputs.spillPiece(m.own[k] as number, [bytes]);
        }
        outputs.flush();
        phases.send += since(t1);
        phases.generate += m.times[0];
        phases.split += m.times[1];
        phases.pack += m.times[2];
        if (socket.writableLength > BACKLOG_BYTES) await once(socket, 'drain');
        await outputs.room();
        thread.postMessage(0);
      }
    } finally {
      await thread.terminate();
    }
    const end = Buffer.alloc(HEADER_BYTES);
    end.writeUInt32LE(END, 0);
    if (!socket.write(end)) await once(socket, 'drain');
    await peerDone;
    await outputs.settled();
    phases.exchange = since(t0);
    const summaries: Array<[number, ShuffleSummary]> = [];
    const t2 = performance.now();
    await outputs.assemble((j, values) => {
      const t3 = performance.now();
      summaries.push([j, summarize(values, j, P)]);
      phases.summarize += since(t3);
    });
    phases.read = outputs.readWait;
    phases.assemble = since(t2) - phases.read - phases.summarize;
    phases.written = outputs.written;
    const cpu = process.cpuUsage(cpuAtStart);
    phases.cpu = (cpu.user + cpu.system) / 1e6;
    phases.peakRss = process.resourceUsage().maxRSS * 1024;
    send({ summaries, phases });
    socket.end();
  } finally {
    await outputs.close();
  }
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

/**
 * Reads the peer's pieces into `outputs`: a piece kept in memory is copied into its own
 * array; a spilled one is handed over in the socket's reads themselves once it is whole,
 * so that its parts lie together in the file, with nothing of the process's own pieces
 * between them. Resolves at the peer's end header.
 */
function receive(socket: net.Socket, outputs: BareOutputs, took: (seconds: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const header = Buffer.alloc(HEADER_BYTES);
    let headerAt = 0;
    /** The piece being received: its output, its bytes left, its array if kept, else its parts so far. */
    let output = -1;
    let left = 0;
    let kept: Uint8Array | undefined;
    let parts: Uint8Array[] = [];
    socket.on('error', reject);
    socket.on('data', (data: Buffer) => {
      const t0 = performance.now();
      try {
        read(data);
        outputs.flush();
        if (outputs.full()) {
          socket.pause();
          void outputs.room().then(() => socket.resume());
        }
      } catch (error) {
        reject(error as Error);
      } finally {
        took((performance.now() - t0) / 1000);
      }
    });
    function read(data: Buffer): void {
      let at = 0;
      while (at < data.length) {
        if (output < 0) {
          const n = Math.min(HEADER_BYTES - headerAt, data.length - at);
          data.copy(header, headerAt, at, at + n);
          headerAt += n;
          at += n;
          if (headerAt < HEADER_BYTES) return;
          headerAt = 0;
          const j = header.readUInt32LE(0);
          if (j === END) return resolve();
          if (!outputs.has(j)) throw new Error(`piece of output ${j} sent to the wrong process`);
          left = header.readUInt32LE(4);
          output = j;
          if (outputs.keeps(left)) {
            kept = new Uint8Array(left);
            outputs.keep(j, kept);
          }
        }
        const n = Math.min(left, data.length - at);
        if (kept === undefined) parts.push(data.subarray(at, at + n));
        else kept.set(data.subarray(at, at + n), kept.length - left);
        left -= n;
        at += n;
        if (left > 0) continue;
        if (kept === undefined) outputs.spillPiece(output, parts);
        [output, kept, parts] = [-1, undefined, []];
      }
    }
  });
}

if (process.argv[2] === CHILD_FLAG) {
  const [rank, P, count, port, memoryBytes] = process.argv.slice(3, 8).map(Number);
  child(rank, P, count, port, memoryBytes, process.argv[8]).catch((error: unknown) => {
    process.send?.({ error: error instanceof Error ? error.message : String(error) } satisfies FromChild);
    process.exitCode = 1;
  });
}
