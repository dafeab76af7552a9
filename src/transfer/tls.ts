import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type tls from 'node:tls';
import { ProtocolError, TlsError } from './errors.js';

/**
 * TLS material of a scheduler, worker or client: PEM text or bytes. With `ca`, every peer must
 * present a certificate signed by it (mutual TLS); without it the connections are encrypted
 * but peers are not verified (the token still authenticates them).
 */
export interface TlsConfig {
  /** The cluster's CA certificate(s). */
  ca?: string | Buffer;
  /** This process's certificate (it is presented to every peer). */
  cert: string | Buffer;
  key: string | Buffer;
}

/** The same as files (`--tls-ca-file`, `--tls-cert`, `--tls-key`). */
export interface TlsFiles {
  caFile?: string;
  certFile: string;
  keyFile: string;
}

/** Reads TLS files; a file that cannot be read is a TlsError naming it. */
export async function loadTlsFiles(files: TlsFiles): Promise<TlsConfig> {
  const read = (path: string, what: string): Promise<Buffer> =>
    readFile(path).catch((err: unknown) => {
      throw new TlsError(`cannot read the ${what} ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
  const [cert, key, ca] = await Promise.all([read(files.certFile, 'certificate'), read(files.keyFile, 'private key'), files.caFile === undefined ? undefined : read(files.caFile, 'CA certificate')]);
  return ca === undefined ? { cert, key } : { ca, cert, key };
}

/**
 * Checks TLS material before anything listens or connects: each part parses, the key is the
 * certificate's, the certificate is within its dates and, with a CA, signed by it. Each
 * problem is a TlsError saying which.
 */
export function checkTlsConfig(config: TlsConfig, what = 'tls'): TlsConfig {
  if (typeof config !== 'object' || config === null) throw new TlsError(`${what} must be { ca?, cert, key }`);
  if (config.cert === undefined || config.key === undefined) throw new TlsError(`${what} needs both cert and key (a CA alone is not enough: peers verify each other)`);
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(config.cert);
  } catch (err) {
    throw new TlsError(`${what}.cert is not a PEM certificate: ${message(err)}`, { cause: err });
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(config.key))) throw new TlsError(`${what}.key is not the private key of the certificate ${cert.subject.replace(/\n/g, ', ')}`);
  } catch (err) {
    if (err instanceof TlsError) throw err;
    throw new TlsError(`${what}.key is not a PEM private key: ${message(err)}`, { cause: err });
  }
  const now = Date.now();
  if (Date.parse(cert.validTo) < now) throw new TlsError(`${what}.cert expired on ${cert.validTo}`);
  if (Date.parse(cert.validFrom) > now) throw new TlsError(`${what}.cert is not valid before ${cert.validFrom}`);
  if (config.ca !== undefined) {
    const authorities = splitPem(config.ca);
    if (authorities.length === 0) throw new TlsError(`${what}.ca holds no PEM certificate`);
    let parsed: X509Certificate[];
    try {
      parsed = authorities.map((pem) => new X509Certificate(pem));
    } catch (err) {
      throw new TlsError(`${what}.ca is not a PEM certificate: ${message(err)}`, { cause: err });
    }
    if (!parsed.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey))) {
      throw new TlsError(`${what}.cert (${cert.subject.replace(/\n/g, ', ')}) is not signed by the CA (${parsed[0].subject.replace(/\n/g, ', ')}): peers would refuse it`);
    }
  }
  return config;
}

/**
 * A listener's TLS options. With a CA it asks every peer for a certificate and refuses one
 * the CA did not sign.
 */
export function serverTls(config: TlsConfig): tls.TlsOptions {
  const verify = config.ca !== undefined;
  return { key: config.key, cert: config.cert, ca: config.ca, requestCert: verify, rejectUnauthorized: verify, minVersion: 'TLSv1.2' };
}

/**
 * A connecting side's TLS options. The peer's certificate is verified against the CA, not
 * against the host name connected to: cluster members reach each other by IP address, and
 * one certificate may serve every worker (as a Kubernetes Secret mounted in each pod).
 */
export function clientTls(config: TlsConfig): tls.ConnectionOptions {
  const verify = config.ca !== undefined;
  return { key: config.key, cert: config.cert, ca: config.ca, rejectUnauthorized: verify, checkServerIdentity: () => undefined, minVersion: 'TLSv1.2' };
}

/** OpenSSL's and Node's codes for a certificate that does not verify, or a TLS exchange that failed. */
const CERTIFICATE_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_SIGNATURE_FAILURE',
  'CERT_REJECTED',
  'CERT_UNTRUSTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * The TlsError an error of a TLS connection stands for, or undefined when it is not about
 * TLS. `tlsOn` says whether this side spoke TLS: a TLS client whose peer closes before the
 * TLS handshake is most likely talking to a server without TLS.
 */
export function asTlsError(err: unknown, peer: string, tlsOn: boolean): TlsError | undefined {
  if (err instanceof TlsError) return err;
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code ?? '';
    if (CERTIFICATE_CODES.has(code)) return new TlsError(`the certificate of ${peer} does not verify against this side's CA (${e.message})`, { cause: err });
    if (code.startsWith('ERR_SSL_') && /ALERT/.test(code)) {
      return new TlsError(`${peer} refused this side's certificate (${e.message}); is it signed by the cluster's CA?`, { cause: err });
    }
    if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_HTTP_REQUEST' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG') {
      return new TlsError(`${peer} does not speak TLS (${e.message}); start it with the same --tls-* settings`, { cause: err });
    }
    if (tlsOn && /before secure TLS connection was established/.test(e.message)) {
      return new TlsError(`${peer} closed the connection during the TLS handshake: it does not speak TLS, or it refused this side's certificate`, { cause: err });
    }
    // The peer hung up before answering the protocol's hello: a TLS server refusing this
    // side's certificate (TLS 1.3 checks it after the client thinks it is connected), or a
    // TLS server getting plain bytes.
    if (e instanceof ProtocolError && /closed during the handshake/.test(e.message)) {
      return tlsOn
        ? new TlsError(`${peer} closed the connection right after the TLS handshake: it refused this side's certificate (is it signed by the cluster's CA?)`, { cause: err })
        : new TlsError(`${peer} closed the connection during the handshake: it may require TLS (give this side --tls-cert, --tls-key and --tls-ca-file)`, { cause: err });
    }
  }
  return undefined;
}

function splitPem(pem: string | Buffer): string[] {
  return String(pem).match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
