/**
 * How much lower a task thread's CPU priority is than its event loop's. On a busy host the
 * event loop (heartbeats, peers, spilling) otherwise waits for a core behind its own task
 * threads. piscina applies it in each thread it starts (its `niceIncrement`, through the
 * `@napi-rs/nice` binding it installs with itself).
 */

/**
 * piscina's `niceIncrement` for task threads asked to run `nice` below the event loop:
 * `nice` on Linux, where nice is per thread; 0 elsewhere, where it would lower the whole
 * process, event loop included.
 */
export function threadNiceIncrement(nice: number, platform: NodeJS.Platform = process.platform): number {
  return platform === 'linux' && nice > 0 ? nice : 0;
}
