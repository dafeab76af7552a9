import fc from 'fast-check';

/** Binary values the codec carries as raw frames. */
export type BinaryValue = ArrayBufferView | ArrayBuffer | SharedArrayBuffer;

type TypedArrayConstructor =
  | Uint8ArrayConstructor
  | Uint8ClampedArrayConstructor
  | Int8ArrayConstructor
  | Uint16ArrayConstructor
  | Int16ArrayConstructor
  | Uint32ArrayConstructor
  | Int32ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor
  | BigInt64ArrayConstructor
  | BigUint64ArrayConstructor;

export const TYPED_ARRAY_CONSTRUCTORS: readonly TypedArrayConstructor[] = [
  Uint8Array,
  Uint8ClampedArray,
  Int8Array,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
];

export const BINARY_KINDS = [
  ...TYPED_ARRAY_CONSTRUCTORS.map((ctor) => ctor.name),
  'Buffer',
  'DataView',
  'ArrayBuffer',
  'SharedArrayBuffer',
] as const;

/** Fills `bytes` with pseudo-random bytes from `seed` (xorshift32), deterministically. */
export function fill(bytes: Uint8Array, seed: number): void {
  let x = seed | 0 || 0x9e3779b9;
  for (let i = 0; i < bytes.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
}

export interface BinarySpec {
  /** One of BINARY_KINDS. */
  readonly kind: string;
  /** Elements (bytes for Buffer, DataView, ArrayBuffer). */
  readonly length: number;
  /** Elements of the backing buffer before the view, so byteOffset is not 0. */
  readonly before: number;
  /** Elements of the backing buffer after the view. */
  readonly after: number;
  readonly shared: boolean;
  readonly seed: number;
}

/** Builds the binary value a spec describes, its bytes filled from the seed. */
export function makeBinary(spec: BinarySpec): BinaryValue {
  const Backing = spec.shared ? SharedArrayBuffer : ArrayBuffer;
  switch (spec.kind) {
    case 'ArrayBuffer':
    case 'SharedArrayBuffer': {
      const buffer = spec.kind === 'ArrayBuffer' ? new ArrayBuffer(spec.length) : new SharedArrayBuffer(spec.length);
      fill(new Uint8Array(buffer), spec.seed);
      return buffer;
    }
    case 'Buffer':
    case 'DataView': {
      const backing = new Backing(spec.before + spec.length + spec.after);
      fill(new Uint8Array(backing), spec.seed);
      return spec.kind === 'Buffer'
        ? // Buffer.from accepts a SharedArrayBuffer too; its typings only say ArrayBuffer.
          Buffer.from(backing as ArrayBuffer, spec.before, spec.length)
        : new DataView(backing, spec.before, spec.length);
    }
  }
  const ctor = TYPED_ARRAY_CONSTRUCTORS.find((c) => c.name === spec.kind);
  if (ctor === undefined) throw new Error(`unknown kind ${spec.kind}`);
  const bpe = ctor.BYTES_PER_ELEMENT;
  const backing = new Backing((spec.before + spec.length + spec.after) * bpe);
  fill(new Uint8Array(backing), spec.seed);
  return new ctor(backing as ArrayBuffer, spec.before * bpe, spec.length); // (may be shared: typings lag)
}

export function binarySpecArb(kinds: readonly string[] = BINARY_KINDS, maxLength = 40): fc.Arbitrary<BinarySpec> {
  return fc.record({
    kind: fc.constantFrom(...kinds),
    length: fc.oneof(fc.constantFrom(0, 1, 3, 7), fc.nat({ max: maxLength })),
    before: fc.nat({ max: 5 }),
    after: fc.nat({ max: 5 }),
    shared: fc.boolean(),
    seed: fc.integer(),
  });
}

/** Every binary kind, at any length (0 and odd ones included), often at a non-zero byteOffset. */
export function binaryArb(kinds: readonly string[] = BINARY_KINDS, maxLength = 40): fc.Arbitrary<BinaryValue> {
  return binarySpecArb(kinds, maxLength).map(makeBinary);
}

/** The bytes a binary value covers (a copy, for comparing). */
export function bytesOf(value: BinaryValue): Buffer {
  if (ArrayBuffer.isView(value)) return Buffer.from(new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
  return Buffer.from(new Uint8Array(value));
}

/** Object keys, including the awkward ones: lone surrogates, `__proto__`, prototype names. */
export const keyArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', '', '0', '\uD800', 'a\uDC00') },
);
