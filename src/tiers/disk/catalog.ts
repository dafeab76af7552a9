import type { StoredChunk } from '../chunks.js';
import { Placements, SlotState } from './placements.js';

/**
 * What a read needs to know of a value. Kept (in the catalog's `records`) only for values
 * with a file of their own or compressed chunks; a plain fused value is all in `Placements`.
 */
export class DiskRecord {
  constructor(
    readonly size: number,
    readonly stored: number,
    /** Chunk layout when at least one chunk is compressed; undefined: the bytes are stored as is. */
    readonly table: StoredChunk[] | undefined,
    /** The value's own file, or undefined when it lives in a segment. */
    readonly file: string | undefined,
  ) {}
}

/** A table is only needed when some chunk is compressed; otherwise the bytes are the value. */
export function compressedOnly(table: StoredChunk[]): StoredChunk[] | undefined {
  return table.some((c) => c.compressed) ? table : undefined;
}

/**
 * What a DiskTier holds: where every fused value is (`fused`, including values being
 * written by `writeMany`), the records of values that need more than a place, and the
 * totals `usage()` and `stats()` report.
 */
export class DiskCatalog {
  readonly fused = new Placements();
  readonly records = new Map<number, DiskRecord>();
  /** No record was ever made for an id above this (since the last clear): see Placements. */
  #highestRecord = -1;
  fileValues = 0;
  fusedValues = 0;
  /** Bytes on disk, and before compression. */
  stored = 0;
  logical = 0;

  get count(): number {
    return this.fileValues + this.fusedValues;
  }

  /** Stored, or a fused value being written by writeMany. */
  has(id: number): boolean {
    return this.fused.has(id) || (id <= this.#highestRecord && this.records.has(id));
  }

  /** A fused value being written by writeMany (a delete must cancel it). */
  isWriting(id: number): boolean {
    const slot = this.fused.slotOf(id);
    return slot >= 0 && this.fused.state(slot) === SlotState.Writing;
  }

  /** Makes a value written by `write` visible: one with a file, or a fused one already placed. */
  add(id: number, record: DiskRecord): void {
    if (record.file === undefined) {
      this.addFused(id, this.fused.slotOf(id), record.size, record.table);
      return;
    }
    this.#setRecord(id, record);
    this.fileValues++;
    this.stored += record.stored;
    this.logical += record.size;
  }

  /** Makes a placed fused value visible (its slot goes live), with a record only if it has compressed chunks. */
  addFused(id: number, slot: number, size: number, table: StoredChunk[] | undefined): void {
    const stored = this.fused.stored(slot);
    this.fused.setLive(slot);
    if (table !== undefined) this.#setRecord(id, new DiskRecord(size, stored, table, undefined));
    this.fusedValues++;
    this.stored += stored;
    this.logical += size;
  }

  #setRecord(id: number, record: DiskRecord): void {
    this.records.set(id, record);
    if (id > this.#highestRecord) this.#highestRecord = id;
  }

  /** A visible value's record (made up for a plain fused one), or undefined. */
  locate(id: number): DiskRecord | undefined {
    const record = this.records.get(id);
    if (record !== undefined) return record;
    const slot = this.fused.slotOf(id);
    if (slot < 0 || this.fused.state(slot) !== SlotState.Live) return undefined;
    const stored = this.fused.stored(slot);
    return new DiskRecord(stored, stored, undefined, undefined);
  }

  /**
   * Takes a visible value out of the catalog (unplace a fused one from its segment first:
   * that needs its slot). Undefined when it was not there; else its own file, if any.
   */
  forget(id: number): { file: string | undefined } | undefined {
    const record = this.records.get(id);
    const slot = this.fused.slotOf(id);
    if (slot >= 0) {
      const stored = this.fused.stored(slot);
      this.fused.delete(id);
      this.records.delete(id);
      this.fusedValues--;
      this.stored -= stored;
      this.logical -= record?.size ?? stored;
      return { file: undefined };
    }
    if (record === undefined) return undefined;
    this.records.delete(id);
    this.fileValues--;
    this.stored -= record.stored;
    this.logical -= record.size;
    return { file: record.file };
  }

  clear(): void {
    this.records.clear();
    this.#highestRecord = -1;
    this.fused.clear();
    this.fileValues = this.fusedValues = this.stored = this.logical = 0;
  }
}
