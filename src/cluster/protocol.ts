/**
 * The control-plane contract between clients, the scheduler and workers (docs/cluster.md).
 * Every exchange is a request (answered) or a notification (one way) on a `Channel`
 * (src/control). Method names and payload shapes here are the whole protocol: the
 * scheduler, the worker and the client all import them from this one module.
 */
export * from './protocol/graph.js';
export * from './protocol/heartbeat.js';
export * from './protocol/worker-messages.js';
export * from './protocol/client-messages.js';
export * from './protocol/methods.js';
