/** Values of every layout, for the portable-checksum test: binary of several sizes, plain, objects with shared and copied frames, a large frame. */
export function sampleValues(): unknown[] {
  return [
    new Float64Array([1.5, 2.5, 3.5]),
    Buffer.from('odd length'),
    new Uint8Array(0),
    { a: 1, s: 'text', n: [null, true] },
    { small: new Int32Array([7, 8, 9]), big: new Float32Array(3000).map((_, i) => i / 3) },
    new Uint8Array(5 * 1024 * 1024).map((_, i) => (i * 131) & 0xff),
  ];
}
