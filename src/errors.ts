/**
 * Every error Spillway raises on purpose is a `SpillwayError` with a stable `code`
 * (`SPW_ERR_*`). Codes never change meaning; messages may improve. See docs/errors.md.
 */
export class SpillwayError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** An option or argument has the wrong type or an impossible value. */
export class InvalidArgumentError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_INVALID_ARG', message);
  }
}

/** A value cannot be encoded (a function, a socket, a symbol...). It stays in memory. */
export class CodecError extends SpillwayError {
  readonly key: string | undefined;
  constructor(message: string, options?: { cause?: unknown; key?: string }) {
    super('SPW_ERR_CODEC', message, options);
    this.key = options?.key;
  }
}

/** `registerType` met a name or a class already registered with a different partner. */
export class TypeRegistrationError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_TYPE_REGISTRATION', message);
  }
}

/** Encoded bytes are not in Spillway's format (bad magic, version, lengths). */
export class FormatError extends SpillwayError {
  constructor(message: string, code = 'SPW_ERR_FORMAT', options?: { cause?: unknown }) {
    super(code, message, options);
  }
}

/**
 * An encoded value names a value type this process has no registration for: register it
 * (`registerType`) in a module every process that reads the value loads.
 */
export class UnknownTypeError extends FormatError {
  readonly typeName: string;
  constructor(typeName: string) {
    super(`the value was encoded as the type "${typeName}", which is not registered in this process`, 'SPW_ERR_UNKNOWN_TYPE');
    this.typeName = typeName;
  }
}

/** A registered type's `decode` threw, or its bytes (an Arrow IPC stream, say) are malformed. The encoded copy is kept. */
export class TypeDecodeError extends FormatError {
  readonly typeName: string;
  constructor(typeName: string, cause: unknown) {
    super(`cannot decode a value of the type "${typeName}": ${errorMessage(cause)}`, 'SPW_ERR_TYPE_DECODE', { cause });
    this.typeName = typeName;
  }
}

/** Encoded bytes fail their checksum: the copy on disk or on the wire is corrupt. */
export class ChecksumError extends SpillwayError {
  /** The checksum the trailer holds (XXH64-based, 64 bits: docs/protocol.md#checksum). */
  readonly expected: bigint;
  /** The checksum of the bytes as they arrived. */
  readonly actual: bigint;
  /** The store key whose copy failed, when a store's read found it (set by the store). */
  key: string | undefined;
  constructor(expected: bigint, actual: bigint, where = 'encoded value') {
    super(
      'SPW_ERR_CHECKSUM',
      `checksum mismatch in ${where}: expected 0x${expected.toString(16)}, got 0x${actual.toString(16)}`,
    );
    this.expected = expected;
    this.actual = actual;
  }
}

/** The key is not in the store. */
export class KeyNotFoundError extends SpillwayError {
  readonly key: string;
  constructor(key: string) {
    super('SPW_ERR_KEY_NOT_FOUND', `key not found: ${describeKey(key)}`);
    this.key = key;
  }
}

/** The store (or another resource) was used after close(). */
export class ClosedError extends SpillwayError {
  constructor(what = 'store') {
    super('SPW_ERR_CLOSED', `the ${what} is closed`);
  }
}

/** A lease was used after release(). */
export class LeaseReleasedError extends SpillwayError {
  constructor() {
    super('SPW_ERR_LEASE_RELEASED', 'the lease was already released');
  }
}

/** The key is not part of this lease. */
export class NotLeasedError extends SpillwayError {
  readonly key: string;
  constructor(key: string) {
    super('SPW_ERR_NOT_LEASED', `key is not held by this lease: ${describeKey(key)}`);
    this.key = key;
  }
}

/** Writing a value would exceed `maxSpill` bytes on disk. The value stays in memory. */
export class SpillCapError extends SpillwayError {
  readonly key: string;
  constructor(key: string, needed: number, cap: number, used: number) {
    super(
      'SPW_ERR_MAX_SPILL',
      `not spilling ${describeKey(key)}: ${needed} bytes would exceed maxSpill (${used} of ${cap} bytes used); it stays in memory`,
    );
    this.key = key;
  }
}

/** No tier below memory has room for a value (every one is at its capacity). It stays where it was. */
export class TiersFullError extends SpillwayError {
  readonly key: string;
  constructor(key: string, bytes: number) {
    super('SPW_ERR_TIERS_FULL', `no tier has room for ${describeKey(key)} (${bytes} bytes); it stays in memory`);
    this.key = key;
  }
}

/** A tier failed to write a value (disk full, I/O error). The value stays where it was. */
export class TierWriteError extends SpillwayError {
  readonly key: string;
  readonly tier: string;
  constructor(tier: string, key: string, cause: unknown) {
    super(
      'SPW_ERR_TIER_WRITE',
      `tier "${tier}" failed to write ${describeKey(key)}: ${errorMessage(cause)}; the value stays in memory`,
      { cause },
    );
    this.key = key;
    this.tier = tier;
  }
}

/** A tier failed to read a value back. Only that key is affected. */
export class TierReadError extends SpillwayError {
  readonly key: string;
  readonly tier: string;
  constructor(tier: string, key: string, cause: unknown) {
    super('SPW_ERR_TIER_READ', `tier "${tier}" failed to read ${describeKey(key)}: ${errorMessage(cause)}`, {
      cause,
    });
    this.key = key;
    this.tier = tier;
  }
}

/** Keys can be any string, even a megabyte long: keep messages readable. */
export function describeKey(key: string): string {
  const shown = key.length > 80 ? `${key.slice(0, 77)}...` : key;
  return JSON.stringify(shown);
}

export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A tier write was cancelled because its id was deleted while it ran; nothing was kept. */
export class TierWriteCancelledError extends SpillwayError {
  readonly id: number;
  constructor(tier: string, id: number) {
    super('SPW_ERR_TIER_CANCELLED', `tier "${tier}": write of value ${id} was cancelled by a delete`);
    this.id = id;
  }
}

/** A submitted graph is invalid (a cycle, a missing key, a malformed task, an unknown function). Nothing of it ran. */
export class GraphError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_GRAPH', message);
  }
}

/**
 * A task's function threw on a worker; `remoteStack` is the stack as the worker saw it.
 * `code` is always SPW_ERR_TASK; `remoteCode` is the code of the worker's error when it
 * had one (SPW_ERR_BUILTIN_ARGUMENT, SPW_ERR_TASK_IMPORT, SPW_ERR_LOST_INPUT...).
 */
export class TaskError extends SpillwayError {
  readonly key: string;
  readonly failedKey: string;
  readonly remoteName: string;
  readonly remoteStack: string | undefined;
  readonly remoteCode: string | undefined;
  constructor(key: string, failedKey: string, info: { name: string; message: string; stack?: string; code?: string }) {
    super(
      'SPW_ERR_TASK',
      failedKey === key
        ? `task ${describeKey(key)} failed: ${info.name}: ${info.message}`
        : `task ${describeKey(key)} cannot run: its input ${describeKey(failedKey)} failed: ${info.name}: ${info.message}`,
    );
    this.key = key;
    this.failedKey = failedKey;
    this.remoteName = info.name;
    this.remoteStack = info.stack;
    this.remoteCode = typeof info.code === 'string' ? info.code : undefined;
  }
}

/**
 * A task was running on more workers that died than the scheduler's `allowedFailures`
 * allows (it likely kills them: too much memory, a native crash). `failedKey` is the task
 * that killed them (`key` itself, or an input of it); `worker` names the last one.
 */
export class KilledWorkerError extends SpillwayError {
  readonly key: string;
  readonly failedKey: string;
  readonly worker: string | undefined;
  constructor(key: string, failedKey: string, info: { message: string; worker?: string }) {
    super('SPW_ERR_KILLED_WORKER', failedKey === key ? info.message : `task ${describeKey(key)} cannot run: its input failed: ${info.message}`);
    this.key = key;
    this.failedKey = failedKey;
    this.worker = typeof info.worker === 'string' ? info.worker : undefined;
  }
}

/**
 * A task was ready while no worker could run it (none registered, or all closing) for the
 * scheduler's `noWorkersTimeoutMs`. `failedKey` is that task (`key` itself, or an input of it).
 */
export class NoWorkersError extends SpillwayError {
  readonly key: string;
  readonly failedKey: string;
  constructor(key: string, failedKey: string, info: { message: string }) {
    super('SPW_ERR_NO_WORKERS', failedKey === key ? info.message : `task ${describeKey(key)} cannot run: its input failed: ${info.message}`);
    this.key = key;
    this.failedKey = failedKey;
  }
}

/**
 * A task's memory hint (`memory: '2 GiB'`) is more than the memory limit of every connected
 * worker: no worker could ever run it, so it fails rather than waiting. `failedKey` is that
 * task (`key` itself, or an input of it).
 */
export class MemoryHintError extends SpillwayError {
  readonly key: string;
  readonly failedKey: string;
  constructor(key: string, failedKey: string, info: { message: string }) {
    super('SPW_ERR_MEMORY_HINT', failedKey === key ? info.message : `task ${describeKey(key)} cannot run: its input failed: ${info.message}`);
    this.key = key;
    this.failedKey = failedKey;
  }
}

/**
 * A task could not run: its worker's memory was full and spilling failed (a full disk,
 * `maxSpill` or the tiers' capacity reached) for the worker's `spillFailureTimeoutMs`. The
 * message names the worker, its spill folder and the write error. `failedKey` is that task
 * (`key` itself, or an input of it).
 */
export class DiskFullError extends SpillwayError {
  readonly key: string;
  readonly failedKey: string;
  constructor(key: string, failedKey: string, info: { message: string }) {
    super('SPW_ERR_DISK_FULL', failedKey === key ? info.message : `task ${describeKey(key)} cannot run: its input failed: ${info.message}`);
    this.key = key;
    this.failedKey = failedKey;
  }
}

/** A tier was asked for a value id it does not hold. */
export class TierMissingError extends SpillwayError {
  constructor(tier: string, id: number) {
    super('SPW_ERR_TIER_MISSING', `tier "${tier}" holds no value ${id}`);
  }
}

/** A tier was asked to write an id it already holds or is writing (ids are never reused). */
export class TierDuplicateIdError extends SpillwayError {
  constructor(tier: string, id: number, state = 'already holds') {
    super('SPW_ERR_TIER_DUPLICATE_ID', `tier "${tier}" ${state} value ${id}`);
  }
}

/** A tier was used before open(). */
export class TierNotOpenError extends SpillwayError {
  constructor(tier: string) {
    super('SPW_ERR_TIER_NOT_OPEN', `tier "${tier}" is not open`);
  }
}

/** A write source gave more or fewer bytes than declared. Nothing was stored. */
export class TierLengthError extends SpillwayError {
  constructor(got: number, expected: number) {
    super('SPW_ERR_TIER_LENGTH', `source gave ${got} bytes, expected ${expected}`);
  }
}

/** Stored bytes end early: the file was truncated behind the tier's back. */
export class TierTruncatedError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_TIER_TRUNCATED', message);
  }
}

/** A compressed chunk does not decompress to its recorded size, or stored bytes do not match their record. */
export class TierCorruptError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_TIER_CORRUPT', message);
  }
}

/** The operating system accepted no bytes of a write. */
export class TierShortWriteError extends SpillwayError {
  constructor() {
    super('SPW_ERR_TIER_SHORT_WRITE', 'write made no progress');
  }
}

/** A failure that is a bug, not bad input: a non-Error was thrown somewhere. */
export class InternalError extends SpillwayError {
  constructor(message: string) {
    super('SPW_ERR_INTERNAL', message);
  }
}

/** A native module Spillway needs (`lz4-napi`) could not be loaded on this platform. */
export class NativeModuleError extends SpillwayError {
  /** The package that failed to load. */
  readonly module: string;
  constructor(module: string, cause: unknown) {
    super('SPW_ERR_NATIVE_MODULE', `the native module ${module} could not be loaded (${errorMessage(cause)}); reinstall it for this platform, or choose compression 'none'`, { cause });
    this.module = module;
  }
}
