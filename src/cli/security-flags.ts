/** The flags every network-facing command shares: TLS, --insecure, and its HTTP server's interface and bearer token. */
import type { Command } from 'commander';
import { InvalidArgumentError } from '../errors.js';
import { type TlsConfig, loadTlsFiles } from '../transfer/tls.js';

export interface SecurityFlags {
  tlsCaFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  insecure?: boolean;
  httpHost?: string;
  httpToken?: string;
}

/** Adds the shared flags to `command`, --allow-modules among them (the worker checks it as it runs each task). */
export function addSecurityFlags(command: Command, role: 'scheduler' | 'worker'): Command {
  command
    .option('--tls-ca-file <path>', 'the cluster\'s CA certificate (PEM): peers must present a certificate it signed (mutual TLS)')
    .option('--tls-cert <path>', 'this process\'s TLS certificate (PEM); turns TLS on for the control and data connections')
    .option('--tls-key <path>', 'the private key of --tls-cert (PEM)')
    .option('--insecure', 'listen beyond loopback without a token or TLS with a CA (only on a network you trust)')
    .option('--http-host <host>', 'interface of the HTTP server (default: --host)')
    .option('--http-token <token>', 'bearer token the HTTP routes require, /health excepted (prefer the variable)');
  if (role === 'scheduler') {
    command.option('--allow-modules <prefixes>', 'comma-separated module prefixes tasks may name (file:///srv/jobs/,node:); a graph naming another is refused before it runs; shipped modules are judged by the URL they were uploaded from');
  } else {
    command.option('--allow-modules <prefixes>', 'comma-separated module prefixes this worker runs tasks from (file:///srv/jobs/,node:); a task naming another errs (SPW_ERR_MODULE_REFUSED); shipped modules are judged by the URL they were uploaded from');
  }
  return command;
}

/** The TLS material the flags name, read from disk; undefined without TLS. */
export async function tlsFromFlags(flags: SecurityFlags): Promise<TlsConfig | undefined> {
  if (flags.tlsCert === undefined && flags.tlsKey === undefined) {
    if (flags.tlsCaFile !== undefined) throw new InvalidArgumentError('--tls-ca-file needs --tls-cert and --tls-key too: every member presents its own certificate');
    return undefined;
  }
  if (flags.tlsCert === undefined || flags.tlsKey === undefined) throw new InvalidArgumentError('--tls-cert and --tls-key go together');
  return loadTlsFiles({ caFile: flags.tlsCaFile, certFile: flags.tlsCert, keyFile: flags.tlsKey });
}
