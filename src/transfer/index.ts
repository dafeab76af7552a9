export { DataServer, type DataServerOptions, type DataServerStats } from './server.js';
export { DataClient, type DataClientOptions, type FetchResult, parseAddress } from './client.js';
export type { PeerAddress } from './client-connection.js';
export type { ServingStore, ReceivingStore, EncodedSource } from './store-like.js';
export * from './errors.js';
export { Parser, type ParserOptions, DEFAULT_MAX_FRAME_BYTES, DEFAULT_MAX_VALUE_BYTES } from './parser.js';
export * from './messages.js';
export * as serializer from './serializer.js';
