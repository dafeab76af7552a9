/**
 * Content addresses of shipped modules (docs/code-shipping.md). A task naming a shipped
 * module names `spillway:module/<sha256 of the bundle>`: an edited module is another
 * bundle, so another address, and a worker imports it as a new module.
 */
import { createHash } from 'node:crypto';

export const SHIPPED_MODULE_PREFIX = 'spillway:module/';

/** Largest bundle shipped: it travels in one control frame (64 MiB) to every worker. */
export const MAX_BUNDLE_BYTES = 32 * 1024 * 1024;

/** The address of a bundle's source text. */
export function moduleAddress(source: string): string {
  return SHIPPED_MODULE_PREFIX + createHash('sha256').update(source).digest('hex');
}

/** True for a module specifier that is a shipped module's address. */
export function isShippedModule(module: string): boolean {
  return module.startsWith(SHIPPED_MODULE_PREFIX) && /^[0-9a-f]{64}$/.test(module.slice(SHIPPED_MODULE_PREFIX.length));
}

/** The hex digest of an address (the file name a worker caches it under). */
export function addressDigest(address: string): string {
  return address.slice(SHIPPED_MODULE_PREFIX.length);
}

/** The address shortened for messages: prefix and 12 hex digits. */
export function shortAddress(address: string): string {
  return address.slice(0, SHIPPED_MODULE_PREFIX.length + 12);
}
