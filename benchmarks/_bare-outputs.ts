/**
 * A bare exchange process's outputs: the pieces of its own outputs, kept in memory up to a
 * budget and appended to one file past it, then read back into each output when the
 * exchange is over. Nothing is encoded or checksummed. A spilled piece of `STAGE_BYTES` or
 * more goes to the file straight from the buffers it arrived in (a socket's reads, or the
 * piece the thread split), so the only copy is the kernel's; smaller pieces are gathered
 * per output first, so that reading an output back takes a few reads, not one per piece.
 */
import fsp, { type FileHandle } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';

/** Bytes gathered before one `writev`: few enough calls that their cost is the kernel's copy. */
const WRITE_BYTES = 4 * 2 ** 20;
/** Bytes of writes in flight past which the exchange waits: the budget does not count them. */
const IN_FLIGHT_BYTES = 64 * 2 ** 20;
/** Each output's buffer for its small spilled pieces; set aside in the budget for every output. */
const STAGE_BYTES = 64 * 2 ** 10;

/** Bytes of one output: in memory, or `length` bytes at `at` in the file. */
type Segment = Uint8Array | { at: number; length: number };

export class BareOutputs {
  /** Bytes of pieces kept in memory. */
  held = 0;
  /** Bytes appended to the file. */
  written = 0;
  /** Seconds the main thread waited for the file's reads while assembling. */
  readWait = 0;
  private readonly segments = new Map<number, Segment[]>();
  /** Each output's small spilled pieces not yet written: a buffer and the bytes used. */
  private readonly staged = new Map<number, { bytes: Uint8Array; used: number }>();
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private inFlight = 0;
  private readonly writes = new Set<Promise<void>>();
  private roomWaiters: Array<() => void> = [];
  private failure: unknown;

  private constructor(
    private readonly file: FileHandle | undefined,
    private readonly memoryBytes: number,
  ) {}

  /**
   * Outputs `owned` (their indices), holding up to `memoryBytes` in memory; past it, pieces
   * go to a file in `dir`, unlinked as soon as it is open so that it never outlives the
   * process.
   */
  static async open(owned: Iterable<number>, memoryBytes: number, dir: string, name: string): Promise<BareOutputs> {
    let file: FileHandle | undefined;
    if (Number.isFinite(memoryBytes)) {
      const at = `${dir}/${name}`;
      file = await fsp.open(at, 'w+');
      await fsp.unlink(at);
    }
    const outputs = new BareOutputs(file, memoryBytes);
    for (const j of owned) outputs.segments.set(j, []);
    return outputs;
  }

  has(output: number): boolean {
    return this.segments.has(output);
  }

  /** Whether a piece of `bytes` arriving now stays in memory, the stage buffers' room set aside. */
  keeps(bytes: number): boolean {
    return this.held + bytes <= this.memoryBytes - this.segments.size * STAGE_BYTES;
  }

  /** Keeps `bytes`, a whole piece or part of one, in memory: the caller hands it over. */
  keep(output: number, bytes: Uint8Array): void {
    this.list(output).push(bytes);
    this.held += bytes.byteLength;
  }

  /**
   * Sends a piece of `output`, in `parts` in order, to the file: written from `parts`
   * themselves, which must then stay unchanged until `settled`, or gathered in the output's
   * stage buffer when it is small. A piece lies whole in one segment either way.
   */
  spillPiece(output: number, parts: Uint8Array[]): void {
    const bytes = parts.reduce((n, p) => n + p.byteLength, 0);
    if (bytes >= STAGE_BYTES) {
      for (const part of parts) this.append(output, part);
      return;
    }
    let stage = this.staged.get(output);
    if (stage !== undefined && stage.used + bytes > STAGE_BYTES) {
      this.append(output, stage.bytes.subarray(0, stage.used));
      stage = undefined;
    }
    if (stage === undefined) {
      stage = { bytes: new Uint8Array(STAGE_BYTES), used: 0 };
      this.staged.set(output, stage);
    }
    for (const part of parts) {
      stage.bytes.set(part, stage.used);
      stage.used += part.byteLength;
    }
  }

  /** Appends `bytes` of `output` to the file. */
  private append(output: number, bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    const list = this.list(output);
    const at = this.written + this.pendingBytes;
    const last = list.at(-1);
    if (last !== undefined && !(last instanceof Uint8Array) && last.at + last.length === at) last.length += bytes.byteLength;
    else list.push({ at, length: bytes.byteLength });
    this.pending.push(bytes);
    this.pendingBytes += bytes.byteLength;
    if (this.pendingBytes >= WRITE_BYTES) this.flush();
  }

  /** Starts writing what `spill` has gathered. */
  flush(): void {
    if (this.file === undefined || this.pendingBytes === 0) return;
    const buffers = this.pending;
    const bytes = this.pendingBytes;
    const position = this.written;
    this.pending = [];
    this.pendingBytes = 0;
    this.written += bytes;
    this.inFlight += bytes;
    const write = this.file
      .writev(buffers, position)
      .then(
        (r) => {
          if (r.bytesWritten !== bytes) throw new Error(`short write: ${r.bytesWritten} of ${bytes} bytes`);
        },
        (error: unknown) => {
          this.failure ??= error;
        },
      )
      .finally(() => {
        this.inFlight -= bytes;
        this.writes.delete(write);
        if (this.inFlight < IN_FLIGHT_BYTES) for (const wake of this.roomWaiters.splice(0)) wake();
      });
    this.writes.add(write);
  }

  /** Whether the writes in flight are over their bound: then no bytes are taken in until `room`. */
  full(): boolean {
    return this.inFlight >= IN_FLIGHT_BYTES;
  }

  room(): Promise<void> {
    return this.full() ? new Promise((resolve) => this.roomWaiters.push(resolve)) : Promise.resolve();
  }

  /** Flushes, and resolves once every write has landed; rejects with the first write's failure. */
  async settled(): Promise<void> {
    this.flush();
    while (this.writes.size > 0) await Promise.all(this.writes);
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * Each output in turn, its segments in arrival order (the workload's summary is
   * order-free): the next output's reads are issued before the current one is handed to
   * `use`, so the disk (or page cache) works while the process computes.
   */
  async assemble(use: (output: number, values: Float64Array) => void): Promise<void> {
    for (const [output, stage] of this.staged) this.list(output).push(stage.bytes.subarray(0, stage.used));
    this.staged.clear();
    const order = [...this.segments.keys()];
    let next = order.length > 0 ? this.load(order[0]) : undefined;
    for (let k = 0; k < order.length; k++) {
      const t0 = performance.now();
      const values = await (next as Promise<Float64Array>);
      this.readWait += (performance.now() - t0) / 1000;
      next = k + 1 < order.length ? this.load(order[k + 1]) : undefined;
      this.segments.delete(order[k]);
      use(order[k], values);
    }
  }

  async close(): Promise<void> {
    await this.file?.close();
  }

  private list(output: number): Segment[] {
    const list = this.segments.get(output);
    if (list === undefined) throw new Error(`piece of output ${output} sent to the wrong process`);
    return list;
  }

  /** One output in one array: memory segments copied in, file segments read into place. */
  private async load(output: number): Promise<Float64Array> {
    const list = this.list(output);
    const total = list.reduce((n, s) => n + (s instanceof Uint8Array ? s.byteLength : s.length), 0);
    const values = new Float64Array(total / 8);
    const bytes = new Uint8Array(values.buffer);
    const reads: Array<Promise<unknown>> = [];
    let to = 0;
    for (const s of list) {
      if (s instanceof Uint8Array) {
        bytes.set(s, to);
        to += s.byteLength;
        this.held -= s.byteLength;
      } else {
        const at = to;
        reads.push(
          (this.file as FileHandle).read(bytes, at, s.length, s.at).then((r) => {
            if (r.bytesRead !== s.length) throw new Error(`short read: ${r.bytesRead} of ${s.length} bytes`);
          }),
        );
        to += s.length;
      }
    }
    await Promise.all(reads);
    return values;
  }
}
