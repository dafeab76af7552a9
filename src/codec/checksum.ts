import zlib from 'node:zlib';

/** Bytes hashed per synchronous step; crc32 runs at ~2 GB/s here, so a step is ~2 ms. */
export const CHECKSUM_SLICE_BYTES = 4 * 1024 * 1024;

/** Incremental crc32 (zlib's, available since Node 20.15). */
export class Crc32 {
  value = 0;
  update(bytes: Uint8Array): this {
    this.value = zlib.crc32(bytes, this.value);
    return this;
  }
}

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** crc32 of `bytes`, yielding to the event loop between slices so a 1 GiB value never stalls it. */
export async function crc32Chunked(bytes: Uint8Array, sliceBytes = CHECKSUM_SLICE_BYTES): Promise<number> {
  const crc = new Crc32();
  for (let offset = 0; offset < bytes.byteLength; offset += sliceBytes) {
    if (offset > 0) await yieldToLoop();
    crc.update(bytes.subarray(offset, offset + sliceBytes));
  }
  return crc.value;
}
