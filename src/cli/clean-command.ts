import os from 'node:os';
import { reclaimStaleFolders } from '../folders/reclaim.js';
import { createLogger } from '../log.js';
import { formatBytes } from '../units.js';
import { resolveLogLevel } from './options.js';

export interface CleanFlags {
  localDirectory?: string;
  dryRun: boolean;
  json: boolean;
  logLevel?: string;
}

/**
 * `spillway clean`: removes the spill folders under a parent directory whose owner process
 * is gone (what every store, worker and local cluster does when it starts there), or with
 * `--dry-run` lists them without removing anything. The report goes to stdout; with
 * `--log-level debug`, stderr says why each folder it looked at stays or goes.
 */
export async function cleanCommand(flags: CleanFlags): Promise<void> {
  const report = await reclaimStaleFolders(flags.localDirectory ?? os.tmpdir(), { dryRun: flags.dryRun, log: createLogger('spillway-clean', resolveLogLevel(flags.logLevel)) });
  if (flags.json) {
    process.stdout.write(JSON.stringify(report) + '\n');
    return;
  }
  const verb = report.dryRun ? 'would remove' : 'removed';
  const lines = report.folders.map(
    (f) => `${verb} ${f.path} (${formatBytes(f.bytes)}; owner pid ${f.owner.pid} on ${f.owner.hostname}, started ${f.owner.started})`,
  );
  lines.push(
    report.folders.length === 0
      ? `no stale spill folder in ${report.parent}`
      : `${report.dryRun ? 'would free' : 'freed'} ${formatBytes(report.bytes)} in ${report.folders.length} folder${report.folders.length === 1 ? '' : 's'} of ${report.parent}`,
  );
  process.stdout.write(lines.join('\n') + '\n');
}
