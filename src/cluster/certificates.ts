import { chmod, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { generate } from 'selfsigned';
import type { TlsConfig, TlsFiles } from '../transfer/tls.js';

/** A throwaway CA and one certificate it signed, for every member of a test or local cluster. */
export interface ThrowawayCertificates extends TlsConfig {
  ca: string;
  /** The CA's private key (to sign more certificates, or a wrong one in a test). */
  caKey: string;
  cert: string;
  key: string;
}

const DAY = 24 * 3600 * 1000;

/**
 * Generates a CA valid for `days` and a certificate it signed for both TLS roles (server and
 * client), naming `hosts` (IP addresses or names; peers verify the CA's signature, not the
 * name). For tests and LocalCluster: production clusters bring their own CA.
 */
export async function generateThrowawayCertificates(options: { hosts?: readonly string[]; days?: number; commonName?: string } = {}): Promise<ThrowawayCertificates> {
  const now = new Date(Date.now() - 60_000);
  const until = new Date(now.getTime() + (options.days ?? 7) * DAY);
  const ca = await generate([{ name: 'commonName', value: 'Spillway throwaway CA' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: now,
    notAfterDate: until,
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  const hosts = options.hosts ?? ['localhost', '127.0.0.1', '::1'];
  const leaf = await generate([{ name: 'commonName', value: options.commonName ?? 'spillway' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: now,
    notAfterDate: until,
    ca: { key: ca.private, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
      { name: 'subjectAltName', altNames: hosts.map((h) => (/^[\d.]+$|:/.test(h) ? { type: 7 as const, ip: h } : { type: 2 as const, value: h })) },
    ],
  });
  return { ca: ca.cert, caKey: ca.private, cert: leaf.cert, key: leaf.private };
}

/** Writes TLS material as PEM files readable by this user only; returns their paths (for --tls-* flags). */
export async function writeTlsFiles(directory: string, material: TlsConfig): Promise<TlsFiles> {
  const files: TlsFiles = { certFile: path.join(directory, 'tls-cert.pem'), keyFile: path.join(directory, 'tls-key.pem') };
  await writeFile(files.certFile, material.cert, { mode: 0o600 });
  await writeFile(files.keyFile, material.key, { mode: 0o600 });
  await chmod(files.keyFile, 0o600);
  if (material.ca !== undefined) {
    files.caFile = path.join(directory, 'tls-ca.pem');
    await writeFile(files.caFile, material.ca, { mode: 0o600 });
  }
  return files;
}
