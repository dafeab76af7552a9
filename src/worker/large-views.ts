/**
 * Views that a message between threads cannot carry as they are. V8 11 (Node 20) writes a
 * typed array's or DataView's byteOffset and byteLength as u32 when it serializes a message
 * (ValueSerializer::WriteJSArrayBufferView casts both to uint32_t), and the receiving side
 * only checks that the view fits in its buffer. The buffer itself (moved or shared) arrives
 * whole, so a view whose end does not fit in 32 bits would arrive shorter, with no error.
 *
 * So a hand-off lifts each such view out of the message: it travels as a plain object
 * (its buffer, offset, length and kind) listed in `views`, and the receiver puts the view
 * back in its place. A structured clone keeps identity within a message, so the receiver
 * finds the placeholders by identity, not by their shape: user data that looks like one is
 * left alone.
 */
import { define } from '../codec/v8-typed.js';
import { KEEP, isPlainObject, replaceInPlace } from './value-walk.js';

/** A view whose byteOffset + byteLength exceeds this is lifted out of a message. */
export const MAX_POSTED_VIEW_END = 2 ** 32 - 1;

const VIEW_KINDS = {
  Int8Array,
  Uint8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
  DataView,
} as const;

type ViewKind = keyof typeof VIEW_KINDS;

/** A lifted view, as it travels: its place in the value holds this very object. */
export interface LiftedView {
  buffer: ArrayBufferLike;
  byteOffset: number;
  /** In elements (bytes for a DataView). */
  length: number;
  /** The kind a structured clone would rebuild: a Buffer arrives as a Uint8Array. */
  kind: ViewKind;
}

export function needsLift(view: ArrayBufferView): boolean {
  return view.byteOffset + view.byteLength > MAX_POSTED_VIEW_END;
}

/**
 * `value` with every view ending past 4 GiB replaced by a LiftedView listed in `views`;
 * `value` itself when it holds none (nothing copied). Otherwise arrays, plain objects,
 * Maps and Sets on the way are copied (the value given is never changed); shared and
 * cyclic references stay so. Other objects go as they are, as a clone would take them.
 */
export function liftLargeViews(value: unknown): { value: unknown; views: LiftedView[] } {
  const views: LiftedView[] = [];
  if (!holdsLargeView(value)) return { value, views };
  const seen = new Map<object, unknown>();
  const visit = (v: unknown): unknown => {
    if (typeof v !== 'object' || v === null) return v;
    if (seen.has(v)) return seen.get(v);
    let out: unknown = v;
    if (ArrayBuffer.isView(v)) {
      if (needsLift(v)) {
        const lifted: LiftedView = { buffer: v.buffer, byteOffset: v.byteOffset, length: lengthOf(v), kind: kindOf(v) };
        views.push(lifted);
        out = lifted;
      }
    } else if (Array.isArray(v)) {
      const copy = new Array<unknown>(v.length);
      seen.set(v, copy); // before the items: a cycle stays a cycle
      for (let i = 0; i < v.length; i++) if (i in v) copy[i] = visit(v[i]);
      return copy;
    } else if (v instanceof Map) {
      const copy = new Map<unknown, unknown>();
      seen.set(v, copy);
      for (const [k, item] of v) copy.set(visit(k), visit(item));
      return copy;
    } else if (v instanceof Set) {
      const copy = new Set<unknown>();
      seen.set(v, copy);
      for (const item of v) copy.add(visit(item));
      return copy;
    } else if (isPlainObject(v)) {
      const copy: Record<string, unknown> = Object.create(Object.getPrototypeOf(v) as object | null) as Record<string, unknown>;
      seen.set(v, copy);
      for (const [k, item] of Object.entries(v)) define(copy, k, visit(item));
      return copy;
    }
    seen.set(v, out);
    return out;
  };
  return { value: visit(value), views };
}

/** Puts the lifted views back in a value just received (changed in place: it is the receiver's own copy). */
export function restoreLargeViews(value: unknown, views: readonly LiftedView[] | undefined): unknown {
  if (views === undefined || views.length === 0) return value;
  const rebuilt = new Map<object, ArrayBufferView>(views.map((v) => [v, viewOf(v)]));
  return replaceInPlace(value, (v) => rebuilt.get(v) ?? KEEP);
}

/** Whether a view ending past 4 GiB is reachable through arrays, plain objects, Maps and Sets. */
function holdsLargeView(value: unknown): boolean {
  const seen = new Set<object>();
  const visit = (v: unknown): boolean => {
    if (typeof v !== 'object' || v === null || seen.has(v)) return false;
    seen.add(v);
    if (ArrayBuffer.isView(v)) return needsLift(v);
    if (Array.isArray(v) || v instanceof Set) {
      for (const item of v as Iterable<unknown>) if (visit(item)) return true;
    } else if (v instanceof Map) {
      for (const [k, item] of v) if (visit(k) || visit(item)) return true;
    } else if (isPlainObject(v)) {
      for (const item of Object.values(v)) if (visit(item)) return true;
    }
    return false;
  };
  return visit(value);
}


function kindOf(view: ArrayBufferView): ViewKind {
  if (view instanceof DataView) return 'DataView';
  // The intrinsic kind (TypedArray's toStringTag): 'Uint8Array' for a Buffer, as a clone makes it.
  const tag = Object.prototype.toString.call(view).slice(8, -1);
  if (tag in VIEW_KINDS) return tag as ViewKind;
  throw new TypeError(`unknown kind of view: ${tag}`);
}

function lengthOf(view: ArrayBufferView): number {
  return view instanceof DataView ? view.byteLength : (view as unknown as { length: number }).length;
}

function viewOf(lifted: LiftedView): ArrayBufferView {
  const ctor = VIEW_KINDS[lifted.kind] as unknown as new (buffer: ArrayBufferLike, byteOffset: number, length: number) => ArrayBufferView;
  if (typeof ctor !== 'function') throw new TypeError(`unknown kind of view: ${String(lifted.kind)}`);
  return new ctor(lifted.buffer, lifted.byteOffset, lifted.length);
}
