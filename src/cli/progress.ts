import cliProgress from 'cli-progress';
import { formatBytes } from '../units.js';

/** A byte-count progress bar per phase on stderr; does nothing when disabled. */
export interface Progress {
  update(phase: string, done: number, total: number): void;
  stop(): void;
}

/** Enabled only for a terminal: a bar in a pipe or a log file is just noise. */
export function createProgress(enabled: boolean, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!enabled || stream.isTTY !== true) return { update: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    {
      stream,
      format: '{phase} [{bar}] {percentage}% | {doneText} / {totalText} | {rate}',
      hideCursor: true,
      // The bar is redrawn on a timer, not on every update: updates come many times a second.
      fps: 10,
    },
    cliProgress.Presets.shades_classic,
  );
  let phase: string | undefined;
  let phaseStart = 0;
  return {
    update(name, done, total) {
      if (name !== phase) {
        if (phase !== undefined) bar.stop();
        phase = name;
        phaseStart = performance.now();
        bar.start(total, 0, { phase: name.padEnd(5), doneText: formatBytes(0), totalText: formatBytes(total), rate: '' });
      }
      const seconds = (performance.now() - phaseStart) / 1000;
      const rate = seconds > 0 ? `${formatBytes(done / seconds)}/s` : '';
      bar.update(done, { doneText: formatBytes(done), rate });
    },
    stop() {
      if (phase !== undefined) bar.stop();
      phase = undefined;
    },
  };
}
