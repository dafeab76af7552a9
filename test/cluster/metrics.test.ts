import assert from 'node:assert/strict';
import { test } from 'node:test';
import parsePrometheusTextFormat, { type PrometheusFamily } from 'parse-prometheus-text-format';
import { Client } from '../../src/client/client.js';
import { ref } from '../../src/cluster/protocol.js';
import { Scheduler } from '../../src/scheduler/index.js';
import { Worker } from '../../src/worker/index.js';
import { ext } from '../helpers/suite.js';

const MiB = 2 ** 20;
/** make(value): an 8 MiB Float64Array; dot(a, b): their dot product. */
const fixture = (name: string): { module: string; name: string } => ({ module: new URL(`../worker/fixtures/tasks${ext}`, import.meta.url).href, name });

async function scrape(address: { host: string; port: number } | undefined, path = '/metrics'): Promise<{ status: number; type: string; body: string }> {
  assert.ok(address !== undefined, 'an HTTP address');
  const res = await fetch(`http://${address.host}:${address.port}${path}`);
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

/** The families by name, parsed by a real exposition-format parser. */
function parse(text: string): Map<string, PrometheusFamily> {
  return new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
}

function samples(families: Map<string, PrometheusFamily>, name: string, labels: Record<string, string> = {}): number[] {
  const family = families.get(name);
  assert.ok(family !== undefined, `family ${name} is exported`);
  return family.metrics.filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v)).map((m) => Number(m.value));
}

function histogramCount(text: string, fn: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`spillway_task_duration_seconds_count{function="${fn}"} `));
  return line === undefined ? 0 : Number(line.split(' ').at(-1));
}

const one = (families: Map<string, PrometheusFamily>, name: string, labels: Record<string, string>): number => {
  const found = samples(families, name, labels);
  assert.equal(found.length, 1, `one sample of ${name} ${JSON.stringify(labels)}`);
  return found[0];
};

/** Every family of ours follows the naming rules: a unit suffix, `_total` on counters only, and the right type. */
function checkConventions(families: Map<string, PrometheusFamily>): void {
  const ours = [...families.values()].filter((f) => f.name.startsWith('spillway_'));
  assert.ok(ours.length > 10);
  for (const f of ours) {
    assert.match(f.name, /^[a-z_][a-z0-9_]*$/, `${f.name}: snake case`);
    assert.ok(f.help.length > 10, `${f.name} has a help text`);
    if (f.type === 'COUNTER') assert.match(f.name, /_total$/, `counter ${f.name} ends in _total`);
    else assert.doesNotMatch(f.name, /_total$/, `${f.type} ${f.name} does not end in _total`);
    assert.doesNotMatch(f.name, /_(ms|milliseconds|kb|mb|mib|kib)(_|$)/, `${f.name}: base units only`);
    if (/(delay|duration|seconds)/.test(f.name)) assert.match(f.name, /_seconds(_total)?$/, `${f.name} is in seconds`);
    if (/(rss|spilled|_free|_limit|memory_bytes|_bytes)/.test(f.name) && !/_seconds/.test(f.name)) assert.match(f.name, /_bytes(_total)?$/, `${f.name} is in bytes`);
  }
}

const WORKER_FAMILIES: Record<string, PrometheusFamily['type']> = {
  spillway_worker_memory_bytes: 'GAUGE',
  spillway_worker_rss_bytes: 'GAUGE',
  spillway_worker_memory_limit_bytes: 'GAUGE',
  spillway_worker_spilled_bytes: 'GAUGE',
  spillway_worker_disk_free_bytes: 'GAUGE',
  spillway_worker_event_loop_delay_seconds: 'GAUGE',
  spillway_worker_spill_bytes_total: 'COUNTER',
  spillway_worker_spill_seconds_total: 'COUNTER',
  spillway_worker_transfer_bytes_total: 'COUNTER',
  spillway_worker_spill_errors_total: 'COUNTER',
  spillway_worker_event_loop_thread_seconds_total: 'COUNTER',
  spillway_task_duration_seconds: 'HISTOGRAM',
  // prom-client's default process metrics.
  process_resident_memory_bytes: 'GAUGE',
  process_cpu_seconds_total: 'COUNTER',
  nodejs_eventloop_lag_p99_seconds: 'GAUGE',
};

test('the scheduler and each worker export Prometheus metrics that follow its conventions', async (t) => {
  const scheduler = await Scheduler.start({ httpPort: 0, heartbeatIntervalMs: 100 });
  t.after(() => scheduler.close());
  // Small limits and RSS monitoring off: the stores spill on their own byte counts, in a test process whose RSS is large.
  const workers = await Promise.all(
    ['alpha', 'beta'].map((name) => Worker.start({ scheduler: scheduler.address, name, memoryLimit: 24 * MiB, nthreads: 1, monitorIntervalMs: false, httpPort: 0 })),
  );
  t.after(() => Promise.all(workers.map((w) => w.close())));
  const client = await Client.connect(scheduler.address);
  t.after(() => client.close());
  // Eight 8 MiB arrays over two 24 MiB workers: some spill, and the sums read some from the other worker.
  const graph: Record<string, { fn: { module: string; name: string }; args: unknown[] }> = {};
  for (let i = 0; i < 8; i++) graph[`a${i}`] = { fn: fixture('make'), args: [i] };
  for (let i = 0; i < 8; i++) graph[`s${i}`] = { fn: fixture('dot'), args: [ref(`a${i}`), ref(`a${(i + 1) % 8}`)] };
  const sums = await client.compute<number>(graph, Array.from({ length: 8 }, (_, i) => `s${i}`));
  assert.equal(sums[1], 1 * 2 * 1024 * 1024);
  // A heartbeat after the last task, so the scheduler's copy of the figures includes it.
  const seen = scheduler.state().workers.map((w) => w.lastHeartbeat);
  await new Promise((resolve) => setTimeout(resolve, 350));
  assert.notDeepEqual(scheduler.state().workers.map((w) => w.lastHeartbeat), seen);

  const fromScheduler = await scrape(scheduler.httpAddress);
  assert.equal(fromScheduler.status, 200);
  assert.match(fromScheduler.type, /^text\/plain; version=0\.0\.4/);
  const s = parse(fromScheduler.body);
  checkConventions(s);
  for (const [name, type] of Object.entries(WORKER_FAMILIES)) assert.equal(s.get(name)?.type, type, `scheduler: ${name} is a ${type}`);
  assert.equal(s.has('spillway_scheduler_worker_bytes'), false, 'the old mixed gauge is gone');

  let spilled = 0;
  let sent = 0;
  for (const worker of workers) {
    const name = worker.name;
    // Labels are the workers' stable names.
    const rss = one(s, 'spillway_worker_rss_bytes', { worker: name });
    assert.ok(rss > 0);
    const parts = samples(s, 'spillway_worker_memory_bytes', { worker: name });
    assert.deepEqual(s.get('spillway_worker_memory_bytes')?.metrics.filter((m) => m.labels?.worker === name).map((m) => m.labels?.type).sort(), ['detached', 'managed', 'pinned', 'unmanaged']);
    const total = parts.reduce((a, b) => a + b, 0);
    assert.ok(total <= rss, `${name}: memory parts ${total} add up to no more than RSS ${rss}`);
    assert.ok(parts.every((p) => p >= 0));
    assert.equal(one(s, 'spillway_worker_memory_limit_bytes', { worker: name }), 24 * MiB);
    assert.ok(one(s, 'spillway_worker_disk_free_bytes', { worker: name }) > 0);
    for (const stat of ['max', 'p99']) {
      const delay = one(s, 'spillway_worker_event_loop_delay_seconds', { worker: name, stat });
      assert.ok(delay >= 0 && delay < 60, `${stat} delay ${delay} is in seconds`);
    }
    if (process.platform === 'linux') {
      const run = one(s, 'spillway_worker_event_loop_thread_seconds_total', { worker: name, state: 'run' });
      const wait = one(s, 'spillway_worker_event_loop_thread_seconds_total', { worker: name, state: 'wait' });
      assert.ok(run > 0 && run < 3600 && wait >= 0 && wait < 3600, `the loop ran ${run} s and waited ${wait} s: seconds`);
    }
    spilled += one(s, 'spillway_worker_spill_bytes_total', { worker: name, direction: 'write' });
    assert.ok(one(s, 'spillway_worker_spill_seconds_total', { worker: name, direction: 'write' }) >= 0);
    sent += samples(s, 'spillway_worker_transfer_bytes_total', { worker: name, direction: 'sent' }).reduce((a, b) => a + b, 0);
    assert.deepEqual(
      s.get('spillway_worker_transfer_bytes_total')?.metrics.filter((m) => m.labels?.worker === name).map((m) => `${m.labels?.direction}/${m.labels?.source}`).sort(),
      ['received/disk', 'received/memory', 'received/shuffle', 'sent/disk', 'sent/memory', 'sent/shuffle'],
      'sent and received, from memory, disk and shuffle pushes',
    );
    assert.ok(samples(s, 'spillway_worker_spilled_bytes', { worker: name }).length >= 1, 'one sample per tier');
  }
  assert.ok(spilled > 0, 'the workers spilled');
  assert.ok(sent > 0, 'the workers sent data to each other');
  // The parser merges a labelled histogram's series into one: the counts per function are read from the text.
  assert.equal(s.get('spillway_task_duration_seconds')?.type, 'HISTOGRAM');
  assert.equal(histogramCount(fromScheduler.body, 'tasks.dot'), 8, 'eight dot tasks timed, labelled by function');
  assert.equal(histogramCount(fromScheduler.body, 'tasks.make'), 8);
  assert.match(fromScheduler.body, /^spillway_task_duration_seconds_bucket\{le="\+Inf",function="tasks\.dot"\} 8$/m);

  for (const worker of workers) {
    const own = await scrape(worker.httpAddress);
    assert.equal(own.status, 200);
    const w = parse(own.body);
    checkConventions(w);
    for (const [name, type] of Object.entries(WORKER_FAMILIES)) assert.equal(w.get(name)?.type, type, `worker: ${name} is a ${type}`);
    const rss = one(w, 'spillway_worker_rss_bytes', { worker: worker.name });
    const total = samples(w, 'spillway_worker_memory_bytes', { worker: worker.name }).reduce((a, b) => a + b, 0);
    assert.ok(total <= rss, `${worker.name}'s own: parts ${total} ≤ RSS ${rss}`);
    const ran = histogramCount(own.body, 'tasks.dot') + histogramCount(own.body, 'tasks.make');
    assert.ok(ran > 0, 'a worker times its own tasks');
    const health = await scrape(worker.httpAddress, '/health');
    assert.equal(health.status, 200);
    assert.equal(JSON.parse(health.body).status, 'ok');
    assert.equal((await scrape(worker.httpAddress, '/status')).status, 404);
  }
  // A closed worker serves nothing.
  const beta = workers[1];
  const address = beta.httpAddress;
  await beta.close();
  await assert.rejects(fetch(`http://${address?.host}:${address?.port}/health`));
});
