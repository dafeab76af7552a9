/**
 * The slots a worker inherits from a retiring one (docs/architecture.md, "Retiring a
 * participant"), whose pieces are on their way: the unpacks of their outputs wait until
 * the slot's pieces have all come, or until the run they belong to is over here.
 */

/** A slot this worker inherits: its unpacks wait for `done`. */
export interface Expectation {
  readonly id: string;
  readonly run: number;
  readonly slot: number;
  readonly outputs: ReadonlySet<number>;
  readonly done: Promise<void>;
  readonly settle: () => void;
}

export class Adoptions {
  readonly #expected: Expectation[] = [];

  /** The shuffle of each slot awaited (repeated for a shuffle with several). */
  shuffleIds(): string[] {
    return this.#expected.map((e) => e.id);
  }

  /** Awaits `slot` of run `run` of shuffle `id` with its `outputs`, in place of the slot awaited before. */
  expect(id: string, run: number, slot: number, outputs: readonly number[]): void {
    this.settle(id, (e) => e.slot === slot);
    let settle!: () => void;
    const done = new Promise<void>((resolve) => (settle = resolve));
    this.#expected.push({ id, run, slot, outputs: new Set(outputs), done, settle });
  }

  /** Stops awaiting the slots of shuffle `id` that `which` picks: their unpacks go on. */
  settle(id: string, which: (e: Expectation) => boolean): void {
    for (const e of this.#expected.filter((x) => x.id === id && which(x))) {
      e.settle();
      this.#expected.splice(this.#expected.indexOf(e), 1);
    }
  }

  /** Stops awaiting every slot. */
  settleAll(): void {
    for (const e of this.#expected.splice(0)) e.settle();
  }

  /** Resolves once no slot awaited holds output `output` of shuffle `id`, or after `timeoutMs`. */
  async whenSettled(id: string, output: number, timeoutMs: number): Promise<void> {
    const pending = this.#expected.filter((e) => e.id === id && e.outputs.has(output)).map((e) => e.done);
    if (pending.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(pending), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }
}
