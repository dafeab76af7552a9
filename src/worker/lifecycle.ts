/**
 * Where a worker is in its life: closing, or retiring. Its parts read it before each step
 * they take, since a task or a fetch that finishes after close must report nothing.
 */
export class WorkerLifecycle {
  /** Set once close() begins; settles when everything is stopped. */
  closing: Promise<void> | undefined;
  /** Set once retirement begins; true if the scheduler said it was done. */
  retiring: Promise<boolean> | undefined;

  get closed(): boolean {
    return this.closing !== undefined;
  }

  /** Retirement began: no new task starts. */
  get isRetiring(): boolean {
    return this.retiring !== undefined;
  }
}
