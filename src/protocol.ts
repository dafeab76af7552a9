/**
 * `spillway/protocol`: the control plane's contract between clients, the scheduler and
 * workers (docs/cluster.md): method names, payload shapes and the graph helpers, for tools
 * that talk to a scheduler or worker directly.
 */
export * from './cluster/protocol.js';
