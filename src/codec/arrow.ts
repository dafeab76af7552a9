/**
 * Apache Arrow values (Table, RecordBatch, Vector) as a built-in value type: encoded as the
 * Arrow IPC stream the value's own writer produces, each piece of it a frame (views of the
 * value's memory, not a copy), and decoded with a zero-copy IPC read over the frames, which
 * lie back to back in the read buffer.
 *
 * `apache-arrow` is loaded only when such a value first appears. Its package ships an ES
 * module build and a CommonJS one, and a value of one is not an instance of the other's
 * classes: where Node can `require` an ES module, the ES build is loaded first (it is what
 * `import 'apache-arrow'` gives the application, so decoded values are instances of the
 * application's classes); the CommonJS build is loaded only for a value that comes from it.
 * An application whose copy is another (a bundle, a loader's own instance) hands it over
 * with registerArrow.
 */
import { CodecError, InvalidArgumentError } from '../errors.js';
import { localRequire } from '../native.js';
import type { DecodedParts, EncodedParts, TypeEntry } from './types.js';

/** The name the built-in Arrow type writes with every value. */
export const ARROW_TYPE_NAME = 'spillway.arrow';

type Kind = 'Table' | 'RecordBatch' | 'Vector';
const KINDS: ReadonlySet<string> = new Set<Kind>(['Table', 'RecordBatch', 'Vector']);

/** The parts of apache-arrow this module uses. */
interface ArrowModule {
  Table: new (...args: never[]) => ArrowTable;
  RecordBatch: new (...args: never[]) => object;
  Vector: new (...args: never[]) => object;
  RecordBatchStreamWriter: new () => ArrowWriter;
  tableFromIPC(bytes: Uint8Array): ArrowTable;
  /** The type ids, both ways (a TypeScript enum). */
  Type: Record<number, string>;
}

interface ArrowData {
  readonly valueOffsets?: ArrayBufferView;
  readonly values?: ArrayBufferView;
  readonly nullBitmap?: ArrayBufferView;
  readonly typeIds?: ArrayBufferView;
  readonly children: readonly ArrowData[];
  readonly dictionary?: { readonly data: readonly ArrowData[] };
}

interface ArrowTable {
  readonly batches: readonly { readonly data: ArrowData }[];
  getChildAt(index: number): object | null;
}

interface ArrowWriter {
  writeAll(table: object): ArrowWriter;
  toUint8Array(sync: true): Uint8Array;
}

interface ArrowMeta {
  readonly kind: Kind;
  /** The IPC stream's length: the last frame may be followed by the format's padding. */
  readonly length: number;
}

const REGISTERED = Symbol.for('spillway.arrowModules');
/**
 * Copies the application handed over (registerArrow), the first one decoding's; shared by
 * every copy of Spillway in this thread, as the registry of types is (types.ts).
 */
const registered: ArrowModule[] = ((globalThis as unknown as Record<symbol, ArrowModule[] | undefined>)[REGISTERED] ??= []);
/** Copies found by resolving apache-arrow from here, loaded on demand. */
let found: ArrowModule[] | undefined;
let cjsLoaded = false;
const entries = new Map<unknown, TypeEntry>();

/**
 * Makes `arrow` (the module object of `import * as arrow from 'apache-arrow'`) the copy of
 * Apache Arrow whose values Spillway encodes and decodes into. Needed only where the
 * application's copy is not the one Node resolves from Spillway's folder: a bundle, or a
 * loader such as tsx that gives each importer its own instance.
 */
export function registerArrow(arrow: object): void {
  const module = arrow as Partial<ArrowModule>;
  for (const name of ['Table', 'RecordBatch', 'Vector', 'RecordBatchStreamWriter', 'tableFromIPC'] as const) {
    if (typeof module[name] !== 'function') throw new InvalidArgumentError(`registerArrow: expected the apache-arrow module, which has ${name}`);
  }
  if (typeof module.Type !== 'object' || module.Type === null) throw new InvalidArgumentError('registerArrow: expected the apache-arrow module, which has Type');
  if (registered.includes(module as ArrowModule)) return;
  registered.unshift(module as ArrowModule);
}

/**
 * The built-in type of an Apache Arrow value, or undefined for anything else. Cheap for
 * values that are not Arrow's: apache-arrow is loaded only for an object whose class has
 * one of Arrow's names and Arrow's shape.
 */
export function arrowTypeOf(value: object): TypeEntry | undefined {
  const ctor = (value as { constructor?: { name?: unknown } }).constructor;
  if (typeof ctor !== 'function' || !KINDS.has(ctor.name as string)) return undefined;
  if (!('schema' in value) && !('type' in value && 'data' in value)) return undefined;
  // The CommonJS build is loaded only for a value the others do not own: each build is
  // about 150 modules, compiled and kept by every thread that loads it.
  const entry = entryIn(registered, value) ?? entryIn(foundCopies(false), value) ?? entryIn(foundCopies(true), value);
  if (entry !== undefined) return entry;
  throw new CodecError(
    `cannot encode an Apache Arrow ${String(ctor.name)} from a copy of apache-arrow Spillway does not know: call registerArrow(arrow) with the module your code imports`,
  );
}

function entryIn(copies: readonly ArrowModule[], value: object): TypeEntry | undefined {
  for (const arrow of copies) {
    const kind = kindOf(arrow, value);
    if (kind !== undefined) return entryOf(arrow, kind);
  }
  return undefined;
}

/** The Arrow type's entry for decoding (loads apache-arrow), or undefined for another name. */
export function arrowTypeNamed(name: string): TypeEntry | undefined {
  if (name !== ARROW_TYPE_NAME) return undefined;
  return entryOf(decodingCopy(), 'Table');
}

function entryOf(arrow: ArrowModule, kind: Kind): TypeEntry {
  let entry = entries.get(arrow[kind]);
  if (entry === undefined) {
    addCopy(arrow);
    entry = entries.get(arrow[kind]) as TypeEntry;
  }
  return entry;
}

function decodingCopy(): ArrowModule {
  return registered[0] ?? foundCopies(false)[0];
}

/**
 * The kind of `value` if it is an instance of this copy's classes. By prototype, not
 * `instanceof`: Arrow's classes answer `instanceof` for look-alikes from other copies, and
 * this copy's writer, handed another copy's table, writes its schema without its data.
 */
function kindOf(arrow: ArrowModule, value: object): Kind | undefined {
  if (isPrototypeOf(arrow.Table.prototype, value)) return 'Table';
  if (isPrototypeOf(arrow.RecordBatch.prototype, value)) return 'RecordBatch';
  if (isPrototypeOf(arrow.Vector.prototype, value)) return 'Vector';
  return undefined;
}

function isPrototypeOf(proto: unknown, value: object): boolean {
  return Object.prototype.isPrototypeOf.call(proto, value);
}

/** The copies of apache-arrow resolved from here, the ES build first; `both` also loads the CommonJS one. */
function foundCopies(both: boolean): ArrowModule[] {
  if (found === undefined) {
    const require = localRequire();
    let cjsPath: string;
    try {
      cjsPath = require.resolve('apache-arrow');
    } catch (err) {
      throw new CodecError('an Apache Arrow value needs the apache-arrow package, which cannot be found', { cause: err });
    }
    found = [];
    if (process.features.require_module === true) {
      try {
        found.push(addCopy(require(cjsPath.replace(/\.js$/, '.mjs')) as ArrowModule));
      } catch {
        // An older build layout: the CommonJS build below serves alone.
      }
    }
    if (found.length === 0) {
      found.push(addCopy(require(cjsPath) as ArrowModule));
      cjsLoaded = true;
    }
  }
  if (both && !cjsLoaded) {
    cjsLoaded = true;
    found.push(addCopy(localRequire()('apache-arrow') as ArrowModule));
  }
  return found;
}

function addCopy(arrow: ArrowModule): ArrowModule {
  for (const kind of KINDS as ReadonlySet<Kind>) entries.set(arrow[kind], makeEntry(arrow, kind));
  return arrow;
}

function makeEntry(arrow: ArrowModule, kind: Kind): TypeEntry {
  return {
    name: ARROW_TYPE_NAME,
    encode: (value) => encodeArrow(arrow, kind, value),
    decode: (parts) => decodeArrow(decodingCopy(), parts),
    sizeof: (value) => arrowBytes(kind, value),
  };
}

/** The value as a Table (what the IPC stream carries): a batch as a table of one, a vector as one column. */
function asTable(arrow: ArrowModule, kind: Kind, value: object): object {
  switch (kind) {
    case 'Table':
      return value;
    case 'RecordBatch':
      return new (arrow.Table as unknown as new (batch: object) => object)(value);
    case 'Vector':
      return new (arrow.Table as unknown as new (columns: Record<string, object>) => object)({ value });
  }
}

function encodeArrow(arrow: ArrowModule, kind: Kind, value: object): EncodedParts {
  checkTypes(arrow, (value as { schema?: { fields: readonly ArrowField[] } }).schema?.fields ?? [{ name: 'value', type: (value as { type: ArrowType }).type }]);
  const writer = new arrow.RecordBatchStreamWriter().writeAll(asTable(arrow, kind, value));
  // The writer queues each piece it writes (message prefixes, metadata, padding and views of
  // the value's own buffers); taking them as frames writes the value without a copy. Its
  // padding is dropped where the format's own 8-byte padding recreates it byte for byte.
  const pieces = (writer as unknown as { _sink?: { _values?: unknown } })._sink?._values;
  if (Array.isArray(pieces) && pieces.every((piece) => piece instanceof Uint8Array)) {
    const frames = framesOf(pieces as Uint8Array[]);
    return { meta: { kind, length: frames.length } satisfies ArrowMeta, buffers: frames.buffers };
  }
  const bytes = writer.toUint8Array(true);
  return { meta: { kind, length: bytes.byteLength } satisfies ArrowMeta, buffers: [bytes] };
}

/**
 * The stream's pieces as frames that, each padded to 8 bytes by the format, lay the stream
 * out exactly. A frame starts at each 8-aligned offset between pieces; zero padding at the
 * end of a frame is dropped (the format writes the same zeros), so a buffer of the value is
 * its own frame, a view; only runs of small pieces (a message's prefix) are joined into a copy.
 */
function framesOf(pieces: readonly Uint8Array[]): { buffers: Uint8Array[]; length: number } {
  const buffers: Uint8Array[] = [];
  let run: Uint8Array[] = [];
  let offset = 0;
  const close = (): void => {
    while (run.length > 1 && run[run.length - 1].every((byte) => byte === 0)) run.pop();
    if (run.length === 1) buffers.push(run[0]);
    else if (run.length > 1) buffers.push(Buffer.concat(run));
    run = [];
  };
  for (const piece of pieces) {
    if (offset % 8 === 0) close();
    run.push(piece);
    offset += piece.byteLength;
  }
  close();
  return { buffers, length: offset };
}

interface ArrowType {
  readonly typeId: number;
  readonly children?: readonly ArrowField[];
  readonly dictionary?: ArrowType;
}

interface ArrowField {
  readonly name: string;
  readonly type: ArrowType;
}

/** Refuses a column whose type the IPC format has no id for: written, it could never be read back. */
function checkTypes(arrow: ArrowModule, fields: readonly ArrowField[]): void {
  for (const field of fields) {
    const type = field.type;
    if (typeof arrow.Type[type.typeId] !== 'string') {
      throw new CodecError(`cannot encode the Arrow column "${field.name}": its type (id ${String(type.typeId)}) is not one the Arrow IPC format carries`);
    }
    if (Array.isArray(type.children)) checkTypes(arrow, type.children);
    if (type.dictionary != null) checkTypes(arrow, [{ name: field.name, type: type.dictionary }]);
  }
}

function decodeArrow(arrow: ArrowModule, { meta, buffers }: DecodedParts): object {
  const { kind, length } = checkMeta(meta);
  const table = arrow.tableFromIPC(streamOf(buffers, length));
  switch (kind) {
    case 'Table':
      return table;
    case 'RecordBatch': {
      const batch = table.batches[0];
      if (table.batches.length !== 1) throw new RangeError(`an encoded RecordBatch holds ${table.batches.length} batches`);
      return batch;
    }
    case 'Vector': {
      const column = table.getChildAt(0);
      if (column === null) throw new RangeError('an encoded Vector holds no column');
      return column;
    }
  }
}

function checkMeta(meta: unknown): ArrowMeta {
  const { kind, length } = (meta ?? {}) as Partial<ArrowMeta>;
  if (typeof kind !== 'string' || !KINDS.has(kind) || !Number.isSafeInteger(length) || (length as number) < 0) {
    throw new RangeError('malformed Arrow value header');
  }
  return { kind, length: length as number };
}

/** The IPC stream: a view across the frames where they lie back to back (they do in a read buffer), else a copy. */
function streamOf(buffers: readonly Uint8Array[], length: number): Uint8Array {
  if (buffers.length === 0) throw new RangeError('an encoded Arrow value has no frames');
  const first = buffers[0];
  let end = first.byteOffset;
  for (const buffer of buffers) {
    if (buffer.buffer !== first.buffer || buffer.byteOffset !== end) return copyStream(buffers, length);
    end += (buffer.byteLength + 7) & ~7;
  }
  if (first.byteOffset + length > first.buffer.byteLength || length > end - first.byteOffset) {
    throw new RangeError(`an encoded Arrow stream of ${length} bytes is longer than its frames`);
  }
  return new Uint8Array(first.buffer, first.byteOffset, length);
}

function copyStream(buffers: readonly Uint8Array[], length: number): Uint8Array {
  const out = new Uint8Array(buffers.reduce((sum, buffer) => sum + ((buffer.byteLength + 7) & ~7), 0));
  let offset = 0;
  for (const buffer of buffers) {
    out.set(buffer, offset);
    offset += (buffer.byteLength + 7) & ~7;
  }
  if (length > out.byteLength) throw new RangeError(`an encoded Arrow stream of ${length} bytes is longer than its frames`);
  return out.subarray(0, length);
}

/** The bytes of the value's buffers (a dictionary shared by batches counted once). */
function arrowBytes(kind: Kind, value: object): number {
  const seen = new Set<object>();
  const dataOf = (data: ArrowData): number => {
    if (seen.has(data)) return 0;
    seen.add(data);
    let total = 0;
    for (const buffer of [data.valueOffsets, data.values, data.nullBitmap, data.typeIds]) total += buffer?.byteLength ?? 0;
    for (const child of data.children) total += dataOf(child);
    if (data.dictionary !== undefined) for (const part of data.dictionary.data) total += dataOf(part);
    return total;
  };
  switch (kind) {
    case 'Table':
      return (value as ArrowTable).batches.reduce((sum, batch) => sum + dataOf(batch.data), 0);
    case 'RecordBatch':
      return dataOf((value as { data: ArrowData }).data);
    case 'Vector':
      return (value as { data: readonly ArrowData[] }).data.reduce((sum, data) => sum + dataOf(data), 0);
  }
}
