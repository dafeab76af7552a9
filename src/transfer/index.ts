/**
 * `spillway/transfer`: the data plane on the wire. `DataServer` serves a store's values to
 * peers and `DataClient` fetches them; the value format (encode, verified decode), the
 * frame parser and serializer, and the message constants are here for tools that speak the
 * protocol themselves (docs/protocol.md).
 */
export { DataServer, type DataServerOptions, type DataServerStats } from './server.js';
export { DataClient, type DataClientOptions, type FetchResult, parseAddress } from './client.js';
export type { PeerAddress } from './client-connection.js';
export type { ServingStore, ReceivingStore, EncodedSource } from './store-like.js';
export * from './errors.js';
export type { TlsConfig } from './tls.js';
export { Parser, type ParserOptions, DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_VALUE_BYTES } from './parser.js';
export * from './messages.js';
export * as serializer from './serializer.js';
export { encode, encodedBatches, encodeToBuffer, decodeVerified, sizeof, parseLayout, FORMAT_VERSION, TRAILER_BYTES, type Encoded, type Layout } from '../codec/index.js';
export { HeaderKind } from '../codec/format.js';
