/**
 * The task threads' slots. A task holds one while it works towards a thread or runs on one.
 * Most tasks take theirs when they start and keep it to the end. A task that also waits on
 * peers or on the disk (a shuffle transfer pushing its pieces, an unpack reading its chunks
 * back) holds one for its thread work only, so another task uses the thread meanwhile.
 *
 * Tasks beyond the slots are bounded (`extra`): each holds memory while it waits (its
 * input, the frames it pushes, the chunks it read). Who gets a free slot is the pump's
 * choice (task-pump.ts): `serveWaiting` gives them to the tasks waiting for one.
 */
export class ThreadSlots {
  readonly size: number;
  readonly extra: number;
  /** Slots held: by running tasks, or given to a task that waited for one. */
  #held = 0;
  /** Tasks waiting for a slot, first come first served. */
  readonly #waiting: (() => void)[] = [];
  readonly #onChange: () => void;

  /** `onChange` is told when a running task gives its slot up or waits for one: the pump decides who goes next. */
  constructor(size: number, extra: number, onChange: () => void) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`thread slots: size must be a positive integer, got ${size}`);
    if (!Number.isInteger(extra) || extra < 0) throw new RangeError(`thread slots: extra must be a non-negative integer, got ${extra}`);
    this.size = size;
    this.extra = extra;
    this.#onChange = onChange;
  }

  /** Slots held now. */
  get held(): number {
    return this.#held;
  }

  /** Tasks waiting for a slot now. */
  get waiting(): number {
    return this.#waiting.length;
  }

  get free(): boolean {
    return this.#held < this.size;
  }

  /** Whether a task may start, `running` running now: within `size + extra` tasks, and with a free slot if it takes one. */
  canStart(running: number, withSlot: boolean): boolean {
    return running < this.size + this.extra && (!withSlot || this.free);
  }

  /** The slot of a task starting now (after canStart): held, or to be entered when the task needs a thread. */
  start(withSlot: boolean): ThreadSlot {
    if (withSlot) this.#held++;
    return new ThreadSlot(this, withSlot);
  }

  /** Gives the free slots to the tasks waiting for one, in the order they asked. */
  serveWaiting(): void {
    while (this.free && this.#waiting.length > 0) {
      this.#held++;
      (this.#waiting.shift() as () => void)();
    }
  }

  /** @internal ThreadSlot's: waits until the pump gives it a slot. */
  acquire(): Promise<void> {
    const given = new Promise<void>((resolve) => this.#waiting.push(resolve));
    this.#onChange();
    return given;
  }

  /** @internal ThreadSlot's: gives a slot back. */
  release(leaving: boolean): void {
    this.#held--;
    if (leaving) this.#onChange();
  }
}

/** One running task's hold on a thread slot. */
export class ThreadSlot {
  readonly #slots: ThreadSlots;
  #held: boolean;

  constructor(slots: ThreadSlots, held: boolean) {
    this.#slots = slots;
    this.#held = held;
  }

  get held(): boolean {
    return this.#held;
  }

  /** The task needs a thread: waits for a slot (at once if it holds one). */
  async enter(): Promise<void> {
    if (this.#held) return;
    await this.#slots.acquire();
    this.#held = true;
  }

  /** The task waits on something other than a thread for a while: the slot goes to another task. */
  leave(): void {
    if (!this.#held) return;
    this.#held = false;
    this.#slots.release(true);
  }

  /** The task has ended: its slot, if it holds one, goes back (the runner starts what can start next). */
  end(): void {
    if (!this.#held) return;
    this.#held = false;
    this.#slots.release(false);
  }
}

/** The slot of a task run outside any pump (the service called directly): nothing to wait for or give up. */
export const UNCOUNTED_SLOT: Pick<ThreadSlot, 'enter' | 'leave'> = { enter: () => Promise.resolve(), leave: () => undefined };
