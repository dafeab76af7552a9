import { lookup } from 'node:dns/promises';
import net from 'node:net';
import os from 'node:os';
import { InvalidArgumentError } from '../errors.js';
import type { DataAddress } from './protocol.js';

/** 0.0.0.0 and :: listen on every interface but name none a peer can connect to. */
export function isUnspecified(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]' || host === '::0';
}

/** 127.0.0.0/8, ::1, an IPv4-mapped loopback, and `localhost`. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const v4 = h.startsWith('::ffff:') ? h.slice(7) : h;
  return net.isIPv4(v4) && v4.startsWith('127.');
}

/** The first non-loopback IPv4 address of this host (else IPv6), for a worker bound to every interface. */
export function firstExternalAddress(interfaces: ReturnType<typeof os.networkInterfaces> = os.networkInterfaces()): string | undefined {
  const all = Object.values(interfaces).flatMap((list) => list ?? []);
  const usable = all.filter((i) => !i.internal && !(i.family === 'IPv6' && i.address.toLowerCase().startsWith('fe80')));
  return (usable.find((i) => i.family === 'IPv4') ?? usable[0])?.address;
}

/** `host:port` or `[v6]:port` → { host, port }; InvalidArgumentError otherwise. */
export function parseHostPort(value: string, what: string): DataAddress {
  const match = /^\[?([^\]]+?)\]?:(\d+)$/.exec(value.trim());
  if (match === null || Number(match[2]) < 1 || Number(match[2]) > 65535) {
    throw new InvalidArgumentError(`${what}: expected HOST:PORT with a port from 1 to 65535, got ${JSON.stringify(value)}`);
  }
  return { host: match[1], port: Number(match[2]) };
}

/**
 * The data address a worker tells peers: its contact address when given (checked: not an
 * unspecified address, and a name that resolves), else the address it listens on, or the
 * host's first non-loopback address when it listens on every interface.
 */
export async function contactAddress(listening: DataAddress, contact: DataAddress | string | undefined): Promise<DataAddress> {
  if (contact !== undefined) {
    const address = typeof contact === 'string' ? parseHostPort(contact, 'contactAddress') : contact;
    if (typeof address?.host !== 'string' || !Number.isInteger(address.port) || address.port < 1 || address.port > 65535) {
      throw new InvalidArgumentError('contactAddress must be HOST:PORT or { host, port }');
    }
    if (isUnspecified(address.host)) throw new InvalidArgumentError(`contactAddress ${address.host}:${address.port} names no host a peer can connect to; give this host's address or name`);
    if (net.isIP(address.host.replace(/^\[|\]$/g, '')) === 0) {
      await lookup(address.host).catch((err: unknown) => {
        throw new InvalidArgumentError(`contactAddress ${address.host}:${address.port}: the name does not resolve (${err instanceof Error ? err.message : String(err)})`);
      });
    }
    return { host: address.host.replace(/^\[|\]$/g, ''), port: address.port };
  }
  if (!isUnspecified(listening.host)) return listening;
  const external = firstExternalAddress();
  // A host with no other interface: only local peers exist, and loopback reaches them.
  return { host: external ?? '127.0.0.1', port: listening.port };
}
