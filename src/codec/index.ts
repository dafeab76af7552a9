export { encode, encodedBatches, encodedBatchesSync, encodedBytesSync, writeEncodedSync, copiedBytesOf, encodedPiecesSync, encodeToBuffer, PackedLayout, SMALL_ENCODED_BYTES, type Encoded } from './encode.js';
export { gatheredBatches, gatheredByteLength } from './gathered.js';
export { decodeBody, decodeVerified, layoutOfBytes, checkChecksum } from './decode.js';
export { parseLayout, type Layout, FORMAT_VERSION, TRAILER_BYTES } from './format.js';
export { sizeof } from './sizeof.js';
export { ValueHasher, checksumChunked, nativeChecksum, xxh64 } from './checksum.js';
