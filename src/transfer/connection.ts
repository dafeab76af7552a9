import type { Socket } from 'node:net';
import { InternalError, errorMessage } from '../errors.js';
import { TransferError, TransferTimeoutError } from './errors.js';
import type { ParsedEvent } from './messages.js';
import { Parser, type ParserOptions } from './parser.js';

/**
 * A socket with a parser on its input and backpressure-aware writes on its output. The
 * first error (protocol, socket, timeout) destroys the socket and is kept as `error`;
 * nothing else about the connection survives it.
 */
export class Connection {
  readonly socket: Socket;
  private readonly parser: Parser;
  private onEvent: (event: ParsedEvent) => void = () => undefined;
  private onBadInput: (err: Error) => void = (err) => this.fail(err);
  private failure: Error | undefined;
  private readonly closeListeners = new Set<(err: Error | undefined) => void>();
  private isClosed = false;
  private readonly idleTimeoutMs: number;
  private readonly stallTimeoutMs: number;
  private idleHolds = 0;

  /**
   * `idleTimeoutMs`: a connection silent both ways this long is closed. `stallTimeoutMs`: a
   * write that waits this long for the peer to read closes it, even while the peer keeps
   * sending (a slow reader must not hold what the send holds: budget, request slot).
   */
  constructor(socket: Socket, options: ParserOptions & { idleTimeoutMs?: number; stallTimeoutMs?: number } = {}) {
    this.socket = socket;
    this.parser = new Parser(options);
    socket.setNoDelay(true);
    this.idleTimeoutMs = options.idleTimeoutMs ?? 0;
    this.stallTimeoutMs = options.stallTimeoutMs ?? 0;
    if (this.idleTimeoutMs > 0) {
      const ms = this.idleTimeoutMs;
      socket.setTimeout(ms, () => this.fail(new TransferTimeoutError('connection idle', ms)));
    }
    socket.on('data', (chunk: Buffer) => {
      try {
        this.parser.parse(chunk, this.onEvent);
      } catch (err) {
        this.onBadInput(asError(err));
      }
    });
    socket.on('end', () => {
      try {
        this.parser.end();
      } catch (err) {
        this.fail(asError(err));
        return;
      }
      if (!socket.writableEnded) socket.end();
    });
    socket.on('error', (err) => this.fail(new TransferError(`connection error: ${err.message}`, { cause: err })));
    socket.on('close', () => {
      this.isClosed = true;
      if (this.failure === undefined && !this.parser.idle) {
        this.failure = new TransferError('connection closed mid-message');
      }
      for (const listener of this.closeListeners) listener(this.failure);
      this.closeListeners.clear();
    });
  }

  /** Where parsed events go; set once by the owner (server session or client). */
  listen(onEvent: (event: ParsedEvent) => void, onBadInput?: (err: Error) => void): void {
    this.onEvent = onEvent;
    if (onBadInput !== undefined) this.onBadInput = onBadInput;
  }

  /** Accept only these message types from now on (see Parser.allow). */
  allowMessages(types: ReadonlySet<number> | undefined): void {
    this.parser.allow(types);
  }

  get error(): Error | undefined {
    return this.failure;
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Calls `listener` once the socket is closed (at once if it already is). */
  onClose(listener: (err: Error | undefined) => void): () => void {
    if (this.isClosed) {
      listener(this.failure);
      return () => undefined;
    }
    this.closeListeners.add(listener);
    return () => this.closeListeners.delete(listener);
  }

  /** Closes the connection because of `err` (the first error wins). */
  fail(err: Error): void {
    this.failure ??= err;
    this.socket.destroy();
  }

  /** Records why the connection is going away without closing it yet (a goodbye may follow). */
  recordError(err: Error): void {
    this.failure ??= err;
  }

  /**
   * The connection waits on this side, not on the peer (e.g. for a byte budget): it is not
   * idle until the returned function is called.
   */
  holdIdle(): () => void {
    if (this.idleTimeoutMs <= 0) return () => undefined;
    if (this.idleHolds++ === 0) this.socket.setTimeout(0);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.idleHolds === 0 && !this.socket.destroyed) this.socket.setTimeout(this.idleTimeoutMs);
    };
  }

  /** Writes and waits for 'drain' when the socket's buffer is full. */
  async write(bytes: Uint8Array): Promise<void> {
    if (!this.socket.write(bytes)) await this.drained();
  }

  /** Writes `chunks` as one corked batch (one writev, no joining copy) and waits for 'drain' when the buffer is full. */
  async writeAll(chunks: readonly Uint8Array[]): Promise<void> {
    this.socket.cork();
    let room = true;
    for (const chunk of chunks) room = this.socket.write(chunk);
    this.socket.uncork();
    if (!room) await this.drained();
  }

  /** Resolves when the socket can take more; rejects if it closes first. */
  drained(): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.isClosed || this.socket.destroyed) {
        reject(this.failure ?? new TransferError('connection closed'));
        return;
      }
      if (!this.socket.writableNeedDrain) {
        resolve();
        return;
      }
      const ms = this.stallTimeoutMs;
      let timer: NodeJS.Timeout | undefined;
      // A peer that takes some of the buffer in each window is reading, however slowly; and a
      // timer that fires late means this process's own loop stood still, which says nothing
      // of the peer. Only a full window with the loop running and no byte taken is a stall.
      const arm = (pending: number, armedAt: number): void => {
        timer = setTimeout(() => {
          const now = performance.now();
          const left = this.socket.writableLength;
          if (left < pending || now - armedAt > ms * 1.5) arm(left, now);
          else this.fail(new TransferTimeoutError('peer not reading', ms));
        }, ms);
      };
      if (ms > 0) arm(this.socket.writableLength, performance.now());
      const onDrain = (): void => {
        clearTimeout(timer);
        off();
        resolve();
      };
      const off = this.onClose((err) => {
        clearTimeout(timer);
        this.socket.off('drain', onDrain);
        reject(err ?? new TransferError('connection closed'));
      });
      this.socket.once('drain', onDrain);
    });
  }

  /** Ends the connection after pending writes (a clean goodbye). */
  end(last?: Uint8Array): void {
    if (this.socket.destroyed) return;
    if (last !== undefined) this.socket.end(last);
    else this.socket.end();
  }
}

export function asError(err: unknown): Error {
  if (err instanceof Error) return err;
  return new InternalError(errorMessage(err));
}
