import { InvalidArgumentError, TierDuplicateIdError } from '../errors.js';

/** Rejects capacities, sizes and thresholds that are not positive numbers (NaN included). */
export function checkPositive(label: string, value: unknown, allowInfinity = false): asserts value is number {
  if (typeof value !== 'number' || Number.isNaN(value) || value <= 0 || (!allowInfinity && !Number.isFinite(value))) {
    throw new InvalidArgumentError(`${label} must be a positive number, got ${String(value)}`);
  }
}

/** Rejects negative, fractional or non-numeric sizes; zero is allowed. */
export function checkNonNegativeInteger(label: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidArgumentError(`${label} must be a non-negative integer, got ${String(value)}`);
  }
}

export function checkId(id: number, byteLength: number): void {
  checkNonNegativeInteger('id', id);
  checkNonNegativeInteger('byteLength', byteLength);
}

interface Job {
  cancelled: boolean;
  /** Callers of cancel() waiting for the write to end; most writes never get one. */
  waiters: (() => void)[] | undefined;
}

/** Writes in progress, so a delete (or close) can cancel one and wait until it has cleaned up. */
export class WriteTracker {
  private readonly jobs = new Map<number, Job>();

  get size(): number {
    return this.jobs.size;
  }

  has(id: number): boolean {
    return this.jobs.has(id);
  }

  begin(tier: string, id: number): { readonly cancelled: boolean } {
    if (this.jobs.has(id)) {
      throw new TierDuplicateIdError(tier, id, 'is already writing');
    }
    const job: Job = { cancelled: false, waiters: undefined };
    this.jobs.set(id, job);
    return job;
  }

  end(id: number): void {
    const job = this.jobs.get(id);
    this.jobs.delete(id);
    if (job?.waiters !== undefined) for (const wake of job.waiters) wake();
  }

  /** Marks the write cancelled and waits until it has removed what it wrote. */
  async cancel(id: number): Promise<void> {
    const job = this.jobs.get(id);
    if (job === undefined) return;
    job.cancelled = true;
    await new Promise<void>((resolve) => (job.waiters ??= []).push(resolve));
  }

  async cancelAll(): Promise<void> {
    await Promise.all([...this.jobs.keys()].map((id) => this.cancel(id)));
  }
}
