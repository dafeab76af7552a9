/**
 * The dashboard in a real browser: Debian's `chromium`, driven by playwright-core (no
 * browser download; .ci/run installs the package). Skipped, saying so, only where Chromium
 * cannot start. Screenshots go to test-results/ (a CI artifact, git-ignored).
 */
import assert from 'node:assert/strict';
import { access, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { type TestContext, test } from 'node:test';
import { type Browser, type Page, chromium } from 'playwright-core';
import { Client } from '../../src/client/client.js';
import { LocalCluster } from '../../src/client/local-cluster.js';
import type { ClusterState } from '../../src/cluster/protocol.js';
import { loopCpuTimes } from '../../src/runtime/loop-cpu.js';
import { planWorkload } from '../../src/workloads/index.js';
import { FakeClient, FakeWorker, startScheduler, task } from '../scheduler/helpers.js';
import { repoRoot } from '../helpers/suite.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const RESULTS = path.join(repoRoot, 'test-results');
const MiB = 2 ** 20;

/** A headless Chromium, closed after the test; undefined (and the test skipped) where it cannot start. */
async function launch(t: TestContext): Promise<Browser | undefined> {
  let browser: Browser;
  try {
    await access(CHROMIUM);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, timeout: 60_000 });
  } catch (err) {
    t.skip(`Chromium cannot start here (${CHROMIUM}): ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    return undefined;
  }
  t.after(() => browser.close());
  return browser;
}

/** Opens a page that records console errors and uncaught exceptions. */
async function open(browser: Browser, url: string): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const errors: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  await page.goto(url);
  return { page, errors };
}

interface Bar {
  name: string;
  state: string;
  rss: number;
  parts: Record<string, number>;
}

/** Every worker row as the page shows it: state, and the bytes of the memory bar's parts. (Page code is a string: the tests compile without the DOM's types.) */
async function bars(page: Page): Promise<Bar[]> {
  return (await page.evaluate(`[...document.querySelectorAll('#worker-rows tr')].map((tr) => {
    const bar = tr.querySelector('.bar');
    const parts = {};
    for (const seg of bar.querySelectorAll('.seg')) parts[seg.dataset.part] = Number(seg.dataset.bytes);
    return { name: tr.dataset.worker, state: tr.dataset.state, rss: Number(bar.dataset.rss), parts };
  })`)) as Bar[];
}

/** Page code: each worker row's "loop run / wait" cell, by worker, found under its column's header. */
const LOOP_CELLS = `(() => {
  const column = [...document.querySelectorAll('#workers thead th')].findIndex((th) => th.textContent === 'loop run / wait');
  return Object.fromEntries([...document.querySelectorAll('#worker-rows tr')].map((tr) => [tr.dataset.worker, tr.cells[column]?.textContent]));
})()`;

async function loopCells(page: Page): Promise<Record<string, string | undefined>> {
  return (await page.evaluate(LOOP_CELLS)) as Record<string, string | undefined>;
}

const sum = (parts: Record<string, number>): number => Object.values(parts).reduce((a, b) => a + b, 0);

async function screenshot(page: Page, name: string): Promise<void> {
  await mkdir(RESULTS, { recursive: true });
  await page.screenshot({ path: path.join(RESULTS, name), fullPage: true });
}

test('the dashboard during a real shuffle: a bar per worker summing to its RSS, live figures, a killed worker shown lost', async (t) => {
  const browser = await launch(t);
  if (browser === undefined) return;
  const heartbeatMs = 500;
  const workerTimeoutMs = 5 * heartbeatMs;
  // RSS policing off: a 128 MiB worker shuffling twice the cluster's memory passes 0.95 of
  // its limit with the runtime's own footprint on top, and the page is what is tested here.
  const cluster = await LocalCluster.start({ workers: 3, memoryLimit: '128 MiB', nthreads: 1, heartbeatIntervalMs: heartbeatMs });
  t.after(() => cluster.close());
  const client = await Client.connect(cluster.address, { token: cluster.token, localDirectory: cluster.directory });
  t.after(() => client.close());
  // Twice the cluster's memory: it spills and reads back while the page watches. It need
  // not finish: the test kills a worker and leaves.
  const plan = planWorkload('shuffle', { bytes: 512 * MiB, partitions: 16, seed: 29 });
  const running = client.compute(plan.graph, plan.wanted).catch(() => undefined);

  // What /api/state says, polled all along: each worker's RSS with the time it was seen.
  const seen: Array<{ at: number; rss: Map<string, number> }> = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const state = (await cluster.state().catch(() => undefined)) as ClusterState | undefined;
      if (state !== undefined) seen.push({ at: Date.now(), rss: new Map(state.workers.map((w) => [w.name, w.lastHeartbeat?.rss ?? 0])) });
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  t.after(async () => {
    polling = false;
    await poller;
  });

  const { page, errors } = await open(browser, `${cluster.httpAddress}/status`);
  await page.waitForFunction(`document.querySelectorAll('#worker-rows tr[data-state="running"], #worker-rows tr[data-state="paused"]').length === 3`, null, { timeout: 30_000 });
  // Wait for the shuffle to be under way (tasks done, memory held) before reading figures.
  await page.waitForFunction(`Number(document.getElementById('progress-done').textContent) > 3`, null, { timeout: 30_000 });

  // The page's figure must be one /api/state gave within a few heartbeats of the read. The
  // poller shares this loop with the browser driver and the cluster's pipes, so on a loaded
  // machine it can miss a heartbeat; a read is therefore tried up to five times, and one
  // whose every bar matches a polled figure byte for byte proves the page shows the real ones.
  const mismatches: string[] = [];
  let matched = false;
  for (let attempt = 0; attempt < 5 && !matched; attempt++) {
    if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, 700));
    const read = await bars(page);
    const readAt = Date.now();
    assert.deepEqual(read.map((b) => b.name), ['local-0', 'local-1', 'local-2'], 'one bar per worker');
    for (const bar of read) {
      assert.deepEqual(Object.keys(bar.parts).sort(), ['detached', 'managed', 'pinned', 'unmanaged']);
      assert.equal(sum(bar.parts), bar.rss, `${bar.name}: the parts add up to the RSS the bar shows`);
    }
    // Let the poller catch up past the read before judging it.
    const caughtUp = Date.now() + 10_000;
    while ((seen.at(-1)?.at ?? 0) < readAt + 500 && Date.now() < caughtUp) await new Promise((resolve) => setTimeout(resolve, 50));
    const nearby = seen.filter((s) => s.at >= readAt - 4 * heartbeatMs - 500 && s.at <= readAt + 500);
    const misses = read.filter((bar) => !nearby.some((s) => s.rss.get(bar.name) === bar.rss));
    if (misses.length === 0) matched = true;
    for (const bar of misses) mismatches.push(`${bar.name}: RSS ${bar.rss} on the page, /api/state said ${[...new Set(nearby.map((s) => s.rss.get(bar.name)))].join(', ')}`);
  }
  assert.ok(matched, `the page's RSS figures are ones /api/state reported within a few heartbeats:\n${mismatches.join('\n')}`);

  // The loop's shares of the last heartbeat interval, where this system lets a process read
  // its threads' times (the workers read theirs the same way), else n/a.
  const shares = /^\d+% \/ \d+%$/;
  if ((await loopCpuTimes()) === null) {
    assert.deepEqual(Object.values(await loopCells(page)), ['n/a', 'n/a', 'n/a']);
  } else {
    // Two heartbeats with the times after the first reading: a second or so into the run.
    await page.waitForFunction(`Object.values(${LOOP_CELLS}).every((text) => ${shares}.test(text))`, null, { timeout: 10_000 }).catch(() => undefined);
    for (const [name, text] of Object.entries(await loopCells(page))) assert.match(text ?? '', shares, `${name}: loop run / wait`);
  }

  // Live: the same figures a second later are not the same.
  const figures = async (): Promise<string> =>
    String(await page.evaluate(`[document.getElementById('updated').textContent, ...[...document.querySelectorAll('#worker-rows .bar')].map((b) => b.dataset.rss), document.getElementById('task-states').textContent].join('|')`));
  const before = await figures();
  const updatedBefore = await page.textContent('#updated');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  assert.notEqual(await figures(), before, 'the figures moved within a second');
  assert.notEqual(await page.textContent('#updated'), updatedBefore, 'a new frame within a second');

  // kill -9: the worker is shown as lost within the heartbeat timeout.
  const killedAt = Date.now();
  await cluster.killWorker(1, 'SIGKILL');
  await page.waitForFunction(`document.querySelector('#worker-rows tr[data-worker="local-1"]')?.dataset.state === 'lost'`, null, { timeout: 30_000 });
  const lostAfter = Date.now() - killedAt;
  // The scheduler hears of it when the socket closes, and the next frame (every 500 ms) shows it.
  assert.ok(lostAfter <= workerTimeoutMs, `shown as lost after ${lostAfter} ms (timeout ${workerTimeoutMs} ms)`);
  assert.equal(await page.textContent('#workers-lost'), '1');
  assert.equal((await bars(page)).length, 3, 'the lost worker stays listed');
  assert.equal((await loopCells(page))['local-1'], '–', 'a lost worker has no loop figures');

  await screenshot(page, 'dashboard-shuffle.png');
  assert.deepEqual(errors, [], 'no console errors');
  await page.close();
  await client.close();
  await running;
});

test('the dashboard copes with no worker and with 200', async (t) => {
  const browser = await launch(t);
  if (browser === undefined) return;
  const scheduler = await startScheduler(t, { httpPort: 0, heartbeatIntervalMs: 250, workerTimeoutMs: 60_000, dashboard: { intervalMs: 250 } });
  const http = scheduler.httpAddress as { host: string; port: number };
  const { page, errors } = await open(browser, `http://${http.host}:${http.port}/status`);
  await page.waitForFunction(`document.getElementById('connection').dataset.state === 'live'`);
  assert.equal(await page.isVisible('#no-workers'), true, 'says there is no worker');
  assert.equal((await bars(page)).length, 0);

  await Promise.all(Array.from({ length: 200 }, (_, i) => FakeWorker.connect(t, scheduler, { name: `w${String(i).padStart(3, '0')}` })));
  const client = await FakeClient.connect(t, scheduler);
  const graph = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`t${i}`, task()]));
  await client.submit(graph, Object.keys(graph));
  await page.waitForFunction(`document.querySelectorAll('#worker-rows tr[data-state="running"]').length === 200`, null, { timeout: 30_000 });
  await page.waitForFunction(`document.getElementById('progress-done').textContent === '2000'`, null, { timeout: 30_000 });
  const all = await bars(page);
  assert.equal(all.length, 200);
  assert.equal(new Set(all.map((b) => b.name)).size, 200);
  for (const bar of all) assert.equal(sum(bar.parts), bar.rss, `${bar.name}: parts add up to RSS`);
  // Fake workers report no loop times, as a worker off Linux.
  assert.deepEqual(new Set(Object.values(await loopCells(page))), new Set(['n/a']));
  assert.equal(await page.isVisible('#no-workers'), false);
  assert.ok((await page.$$('#recent-rows tr')).length > 0, 'the task stream lists finished tasks');
  await screenshot(page, 'dashboard-200-workers.png');
  assert.deepEqual(errors, [], 'no console errors');
  await page.close();
});
