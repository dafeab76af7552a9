import cliProgress from 'cli-progress';
import type { ClusterSample } from '../client/monitor.js';
import { formatBytes } from '../units.js';

/** A live bar on stderr: tasks done, bytes spilled, memory of each worker. Only on a terminal. */
export function createClusterProgress(label: string, enabled: boolean, stream: NodeJS.WriteStream = process.stderr): {
  update(sample: ClusterSample): void;
  stop(): void;
} {
  if (!enabled || stream.isTTY !== true) return { update: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    { stream, format: `${label} [{bar}] {value}/{total} tasks | spilled {spilled} | {memory}`, hideCursor: true, fps: 5 },
    cliProgress.Presets.shades_classic,
  );
  let started = false;
  return {
    update(sample) {
      const spilled = formatBytes(sample.workers.reduce((n, w) => n + w.spilledBytes, 0));
      const memory = sample.workers.map((w, i) => `w${i} ${w.alive ? formatBytes(w.rss) : 'dead'}`).join(' ');
      const total = Math.max(1, sample.tasks.total);
      if (!started) {
        bar.start(total, sample.tasks.done, { spilled, memory });
        started = true;
      }
      bar.setTotal(total);
      bar.update(sample.tasks.done, { spilled, memory });
    },
    stop() {
      if (started) bar.stop();
    },
  };
}
