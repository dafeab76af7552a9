/**
 * Transfer benchmark (issue 4). `npm run bench -- transfer [--mib 1024] [--shared-mib 256] [--clients 10]`
 *
 * The serving store runs in a child process (this file with --serve) so its RSS is measured
 * alone. Every figure is a ratio against a reference measured in the same run: a plain
 * fs.createReadStream (1 MiB highWaterMark) → socket copy of the same bytes, from the same child.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { SpillStore } from '../src/index.js';
import { DataClient, DataServer, type ReceivingStore } from '../src/transfer/index.js';

const MiB = 1024 * 1024;
const here = path.dirname(fileURLToPath(import.meta.url));

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

export default async function main(args: string[]): Promise<void> {
  if (args[0] === '--serve') return serve(Number(args[1]));
  const mib = option(args, '--mib', 1024);
  const sharedMib = option(args, '--shared-mib', 256);
  const clients = option(args, '--clients', 10);
  const work = await fs.mkdtemp(path.join(os.tmpdir(), 'spw-bench-transfer-'));
  try {
    await single(mib, work);
    await fanOut(sharedMib, clients, work);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------- parent side

interface Peer {
  proc: ChildProcess;
  ask(command: string): Promise<Record<string, number>>;
}

async function startPeer(mib: number): Promise<Peer & { port: number; refPort: number; byteLength: number }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', '--expose-gc', path.join(here, 'run.ts'), 'transfer', '--serve', String(mib)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  let buffered = '';
  proc.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      const w = waiting.shift();
      if (w !== undefined) w(line);
      else lines.push(line);
    }
  });
  const next = (): Promise<string> =>
    lines.length > 0 ? Promise.resolve(lines.shift() as string) : new Promise((resolve) => waiting.push(resolve));
  const ask = async (command: string): Promise<Record<string, number>> => {
    proc.stdin?.write(`${command}\n`);
    return JSON.parse(await next()) as Record<string, number>;
  };
  const ready = JSON.parse(await next()) as { port: number; refPort: number; byteLength: number };
  return { proc, ask, ...ready };
}

async function stopPeer(peer: Peer): Promise<void> {
  await peer.ask('exit');
  await new Promise((resolve) => peer.proc.once('exit', resolve));
}

/** Reference: the same bytes, fs.createReadStream → socket, drained by the client. */
async function referenceCopy(port: number): Promise<number> {
  const start = performance.now();
  await new Promise<void>((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.on('data', () => undefined);
    socket.on('end', resolve);
    socket.on('error', reject);
  });
  return (performance.now() - start) / 1000;
}

/** A receiving store that drains values it is given (measures the transfer layer alone). */
function nullStore(memoryLimit: number): ReceivingStore {
  return {
    memoryLimit,
    paused: false,
    isAboveTarget: () => false,
    has: () => false,
    set: () => undefined,
    delete: () => false,
    async putEncoded(_key, source, byteLength) {
      let got = 0;
      if (source instanceof Uint8Array) got = source.byteLength;
      else for await (const batch of source) for (const piece of batch) got += piece.byteLength;
      if (got !== byteLength) throw new Error(`short value: ${got} of ${byteLength}`);
    },
  };
}

const gbps = (bytes: number, s: number): string => `${(bytes / s / 1e9).toFixed(2)} GB/s`;
const mibOf = (bytes: number): string => `${(bytes / MiB).toFixed(1)} MiB`;

async function single(mib: number, work: string): Promise<void> {
  console.log(`\n== one ${mib} MiB spilled value, server store (child process) → client on loopback ==`);
  const peer = await startPeer(mib);
  try {
    const address = { host: '127.0.0.1', port: peer.port };
    const refs: number[] = [];
    const layer: number[] = [];
    for (let round = 0; round < 2; round++) {
      await peer.ask('start');
      refs.push(await referenceCopy(peer.refPort));
      const refRss = await peer.ask('stop');
      console.log(`  round ${round + 1}: reference copy peak RSS growth ${mibOf(refRss.peakGrowth)}`);
      await peer.ask('start');
      const t = performance.now();
      await new DataClient().fetch(address, ['big'], nullStore(4 * 1024 * MiB));
      layer.push((performance.now() - t) / 1000);
      const rss = await peer.ask('stop');
      console.log(`  round ${round + 1}: server peak RSS growth while sending ${mibOf(rss.peakGrowth)} (target ≤ 32 MiB)`);
    }
    const ref = Math.min(...refs);
    const bestLayer = Math.min(...layer);
    console.log(`  reference fs.createReadStream(1 MiB) → socket: ${gbps(peer.byteLength, ref)} (best of ${refs.map((s) => s.toFixed(2)).join(', ')} s)`);
    console.log(`  DataServer → DataClient, bytes drained:       ${gbps(peer.byteLength, bestLayer)}  ratio ${(ref / bestLayer).toFixed(2)} (target ≥ 0.8)`);
    for (const [label, options] of [
      ['into a client SpillStore, to disk (putEncoded)', {}],
      ['into a client SpillStore, decoded into memory', { diskThresholdBytes: 4 * 1024 * MiB, batchBytes: 4 * 1024 * MiB }],
    ] as const) {
      const store = await SpillStore.open({ memoryLimit: '8 GiB', target: 0.9, monitorIntervalMs: 0, directory: work });
      try {
        await peer.ask('start');
        const t = performance.now();
        await new DataClient({ ...options, maxBytesInFlight: 4 * 1024 * MiB }).fetch(address, ['big'], store);
        const s = (performance.now() - t) / 1000;
        const rss = await peer.ask('stop');
        console.log(`  ${label}: ${gbps(peer.byteLength, s)}  ratio ${(ref / s).toFixed(2)}; server RSS growth ${mibOf(rss.peakGrowth)}`);
      } finally {
        await store.close();
      }
    }
    const counters = await peer.ask('counters');
    console.log(`  server store disk reads (decodes): ${counters.diskReads}; served from disk ${mibOf(counters.servedFromDiskBytes)}`);
  } finally {
    await stopPeer(peer);
  }
}

async function fanOut(mib: number, clients: number, work: string): Promise<void> {
  console.log(`\n== ${clients} clients fetch the same spilled ${mib} MiB value at once ==`);
  const peer = await startPeer(mib);
  const stores: SpillStore[] = [];
  try {
    const address = { host: '127.0.0.1', port: peer.port };
    const ref = await referenceCopy(peer.refPort);
    for (let i = 0; i < clients; i++) {
      stores.push(await SpillStore.open({ memoryLimit: '1 GiB', target: 0.9, monitorIntervalMs: 0, directory: work }));
    }
    await peer.ask('start');
    const t = performance.now();
    // Decoded into memory on the client side so the clients' disks do not set the pace.
    await Promise.all(stores.map((store) => new DataClient({ diskThresholdBytes: 512 * MiB, batchBytes: 512 * MiB }).fetch(address, ['big'], store)));
    const s = (performance.now() - t) / 1000;
    const rss = await peer.ask('stop');
    const counters = await peer.ask('counters');
    console.log(`  reference (one copy): ${gbps(peer.byteLength, ref)}`);
    console.log(`  aggregate: ${gbps(clients * peer.byteLength, s)} (${s.toFixed(2)} s); ratio to one reference copy ×${clients}: ${((ref * clients) / s).toFixed(2)}`);
    console.log(`  server peak RSS growth: ${mibOf(rss.peakGrowth)} (target ≤ 64 MiB)`);
    console.log(`  server store disk reads (decodes): ${counters.diskReads}, unspilled bytes: ${counters.unspilledBytes}, decode seconds: ${counters.decodeSeconds}`);
    console.log(`  served from disk ${mibOf(counters.servedFromDiskBytes)}, from memory ${mibOf(counters.servedFromMemoryBytes)}, busy replies ${counters.busyReplies}`);
  } finally {
    for (const store of stores) await store.close();
    await stopPeer(peer);
  }
}

// ---------------------------------------------------------------- child (serving) side

async function serve(mib: number): Promise<void> {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'spw-bench-serve-'));
  const store = await SpillStore.open({ memoryLimit: '4 GiB', monitorIntervalMs: 0, directory });
  {
    const value = Buffer.allocUnsafeSlow(mib * MiB);
    for (let i = 0; i < value.byteLength; i += MiB) value.fill(i / MiB, i, i + MiB);
    store.set('big', value);
    await store.evict(Infinity);
  }
  // The reference file: the very same encoded bytes, copied out once.
  const refFile = path.join(directory, 'reference.bin');
  const encoded = store.createReadStream('big');
  const byteLength = encoded.byteLength;
  await pipeline(encoded, createWriteStream(refFile));
  const ref = net.createServer((socket) => {
    socket.on('error', () => undefined);
    createReadStream(refFile, { highWaterMark: MiB }).pipe(socket);
  });
  await new Promise<void>((resolve) => ref.listen(0, '127.0.0.1', resolve));
  const server = await DataServer.listen(store, { maxConcurrentRequests: 16 });
  const gc = (globalThis as { gc?: () => void }).gc;
  let baseline = 0;
  let peak = 0;
  let sampler: NodeJS.Timeout | undefined;
  const reply = (body: unknown): boolean => process.stdout.write(`${JSON.stringify(body)}\n`);
  reply({ port: server.address.port, refPort: (ref.address() as net.AddressInfo).port, byteLength });
  let input = '';
  process.stdin.on('data', (chunk: Buffer) => {
    input += chunk.toString();
    let nl;
    while ((nl = input.indexOf('\n')) >= 0) {
      const command = input.slice(0, nl);
      input = input.slice(nl + 1);
      if (command === 'start') {
        gc?.();
        baseline = peak = process.memoryUsage.rss();
        sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 5);
        reply({});
      } else if (command === 'stop') {
        clearInterval(sampler);
        peak = Math.max(peak, process.memoryUsage.rss());
        reply({ peakGrowth: peak - baseline, baseline });
      } else if (command === 'counters') {
        const c = store.stats().counters;
        const s = server.stats();
        reply({ diskReads: c.diskReads, unspilledBytes: c.unspilledBytes, decodeSeconds: c.decodeSeconds, ...s });
      } else if (command === 'exit') {
        void (async () => {
          await server.close();
          ref.close();
          await store.close();
          await fs.rm(directory, { recursive: true, force: true });
          reply({});
          process.exit(0);
        })();
      }
    }
  });
}
