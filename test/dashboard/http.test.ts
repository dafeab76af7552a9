import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { test } from 'node:test';
import { EventStream } from '../../src/http/event-stream.js';
import { HttpServer } from '../../src/http/server.js';
import { Methods } from '../../src/cluster/protocol.js';
import { FakeWorker, sleep, startScheduler } from '../scheduler/helpers.js';
import { waitFor } from '../helpers/wait.js';

type Address = { host: string; port: number };

async function get(address: Address | undefined, path: string, method = 'GET'): Promise<{ status: number; type: string; body: string }> {
  assert.ok(address !== undefined);
  const res = await fetch(`http://${address.host}:${address.port}${path}`, { method });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: await res.text() };
}

/** Reads Server-Sent Events from a fetch body: `next(name)` resolves the next event of that name, parsed. */
async function openStream(address: Address, signal: AbortSignal): Promise<{ next: (name: string) => Promise<Record<string, unknown>> }> {
  const res = await fetch(`http://${address.host}:${address.port}/api/stream`, { signal });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const reader = (res.body as ReadableStream<Uint8Array>).pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  return {
    async next(name) {
      for (;;) {
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = block
            .split('\n')
            .filter((l) => l.startsWith('data: '))
            .map((l) => l.slice(6))
            .join('\n');
          if (event === name) return JSON.parse(data) as Record<string, unknown>;
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('the stream ended');
        buffer += value;
      }
    },
  };
}

test('the scheduler serves the dashboard, its live stream and nothing else', async (t) => {
  const scheduler = await startScheduler(t, { httpPort: 0, heartbeatIntervalMs: 50, workerTimeoutMs: 60_000, dashboard: { intervalMs: 100 } });
  const http = scheduler.httpAddress;
  const page = await get(http, '/status');
  assert.equal(page.status, 200);
  assert.match(page.type, /^text\/html/);
  // Everything the page loads comes from the scheduler: no CDN, and small.
  const assets = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]).filter((u) => !u.startsWith('data:'));
  assert.deepEqual(assets.sort(), ['/status/dashboard.css', '/status/dashboard.js']);
  let total = Buffer.byteLength(page.body);
  for (const asset of assets) {
    const res = await get(http, asset);
    assert.equal(res.status, 200, asset);
    assert.doesNotMatch(res.body, /https?:\/\//, `${asset} loads nothing from elsewhere`);
    total += Buffer.byteLength(res.body);
  }
  assert.ok(total < 200 * 1024, `the page weighs ${total} bytes`);
  for (const path of ['/', '/nope', '/status/', '/status/missing.js', '/api/streams', '/metrics/x', '/static/dashboard/index.html']) {
    assert.equal((await get(http, path)).status, 404, path);
  }
  assert.equal((await get(http, '/status', 'POST')).status, 405);
  assert.equal((await get(http, '/status', 'HEAD')).status, 200);

  // The stream: a snapshot first, with no worker yet; then a frame per interval.
  const abort = new AbortController();
  t.after(() => abort.abort());
  const stream = await openStream(http as Address, abort.signal);
  const init = await stream.next('init');
  assert.deepEqual(init.workers, []);
  assert.deepEqual(init.history, {});
  for (let i = 0; !/^spillway_scheduler_dashboard_clients 1$/m.test((await get(http, '/metrics')).body); i++) {
    assert.ok(i < 100, 'the page is counted in /metrics');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  const worker = await FakeWorker.connect(t, scheduler, { name: 'alpha' });
  let frame = await stream.next('frame');
  while ((frame.workers as unknown[]).length === 0 || (frame.workers as Array<{ state: string }>)[0].state === 'starting') frame = await stream.next('frame');
  const [alpha] = frame.workers as Array<Record<string, number | string>>;
  assert.equal(alpha.name, 'alpha');
  assert.equal(alpha.state, 'running');
  assert.equal(Number(alpha.managed) + Number(alpha.pinned) + Number(alpha.detached) + Number(alpha.unmanaged), alpha.rss, 'the parts add up to RSS');
  // Gone without a word: shown as lost, and kept in the list.
  worker.close();
  do frame = await stream.next('frame');
  while ((frame.workers as Array<{ state: string }>)[0].state !== 'lost');
  assert.equal((frame.workers as unknown[]).length, 1);
});

test("a worker's loop run and wait shares and its rates come from two heartbeats, over the time between their arrivals", async (t) => {
  // Heartbeats by hand, frames every 500 ms: the first heartbeat just after a frame, the
  // second 900 ms later, before the frame after next. Over the 500 ms between the frames
  // that saw them, the shares would read 0.9 and 0.45 where 0.5 and 0.25 are right.
  const scheduler = await startScheduler(t, { httpPort: 0, heartbeatIntervalMs: 60_000, workerTimeoutMs: 120_000, dashboard: { intervalMs: 500 } });
  const abort = new AbortController();
  t.after(() => abort.abort());
  const stream = await openStream(scheduler.httpAddress as Address, abort.signal);
  await stream.next('init');
  const worker = await FakeWorker.connect(t, scheduler, { name: 'alpha', heartbeats: false });
  assert.equal(scheduler.state().workers[0].lastHeartbeatMsAgo, null, 'no heartbeat yet');
  const beat = (figures: { loopRunSeconds: number | null; loopWaitSeconds: number | null; spilledBytes: number }): void =>
    worker.channel.notify(Methods.heartbeat, { ...worker.heartbeatPayload(), ...figures });
  type Alpha = { state: string; loopRunShare: number | null; loopWaitShare: number | null; rates: { spillWrite: number } };
  /** Alpha in the next frames, until one passes `done`. */
  const alphaUntil = async (done: (alpha: Alpha) => boolean, what: string): Promise<Alpha> => {
    for (let i = 0; i < 40; i++) {
      const [alpha] = (await stream.next('frame')).workers as Alpha[];
      if (alpha !== undefined && done(alpha)) return alpha;
    }
    throw new Error(`no frame with ${what}`);
  };

  await stream.next('frame');
  beat({ loopRunSeconds: 10, loopWaitSeconds: 2, spilledBytes: 0 });
  const first = performance.now();
  const one = await alphaUntil((a) => a.state === 'running', 'the first heartbeat');
  assert.deepEqual([one.loopRunShare, one.loopWaitShare], [null, null], 'one heartbeat gives no share yet');
  await sleep(first + 900 - performance.now());
  const gap = (performance.now() - first) / 1000;
  beat({ loopRunSeconds: 10 + 0.5 * gap, loopWaitSeconds: 2 + 0.25 * gap, spilledBytes: Math.round(gap * 2 ** 20) });
  const two = await alphaUntil((a) => a.loopRunShare !== null, 'loop shares');
  assert.ok(Math.abs((two.loopRunShare ?? NaN) - 0.5) < 0.1, `ran ${two.loopRunShare} of the time, 0.5 sent`);
  assert.ok(Math.abs((two.loopWaitShare ?? NaN) - 0.25) < 0.1, `waited ${two.loopWaitShare} of the time, 0.25 sent`);
  assert.ok(Math.abs(two.rates.spillWrite / 2 ** 20 - 1) < 0.2, `spilled ${two.rates.spillWrite} B/s, 1 MiB/s sent`);

  // A worker that cannot read its loop's times (not Linux) says null: so does the frame.
  beat({ loopRunSeconds: null, loopWaitSeconds: null, spilledBytes: Math.round(gap * 2 ** 20) });
  const three = await alphaUntil((a) => a.loopRunShare === null, 'no loop shares');
  assert.equal(three.loopWaitShare, null);
});

test('a slow page is dropped and counted, a vanished one forgotten; neither holds up a broadcast', async (t) => {
  let drops = 0;
  const events = new EventStream({ maxBufferedBytes: 256 * 1024, maxClients: 2, onDrop: () => drops++ });
  const server = await HttpServer.listen('127.0.0.1', 0, { '/events': (req, res) => events.accept(req, res, () => EventStream.format('init', '{}')) });
  t.after(() => server.close());
  const request = `GET /events HTTP/1.1\r\nhost: x\r\n\r\n`;
  // A client that never reads: the kernel's buffers fill, then Node's, then it is dropped.
  const slow = net.connect(server.address.port, '127.0.0.1');
  slow.pause();
  slow.write(request);
  await waitFor(() => events.clients === 1, 'the slow client connected');
  const closed = once(slow, 'close');
  const message = EventStream.format('frame', JSON.stringify('x'.repeat(1024 * 1024)));
  for (let i = 0; i < 200 && events.dropped === 0; i++) {
    events.broadcast(message);
    // A turn of the loop, so the socket can pass what it can to the kernel.
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.equal(events.dropped, 1, 'the slow client was dropped');
  assert.equal(drops, 1);
  assert.equal(events.clients, 0);
  // Reading again, it gets what was sent before the drop, then the end of the stream.
  slow.on('error', () => undefined).resume();
  await closed;

  // One that goes away is forgotten when its socket closes.
  const gone = net.connect(server.address.port, '127.0.0.1');
  gone.write(request);
  await waitFor(() => events.clients === 1, 'the second client connected');
  gone.destroy();
  await waitFor(() => events.clients === 0, 'the vanished client forgotten');
  assert.equal(events.dropped, 1, 'a client that left is not a drop');

  // More clients than allowed: 503.
  const keep = [net.connect(server.address.port, '127.0.0.1'), net.connect(server.address.port, '127.0.0.1')];
  t.after(() => keep.forEach((s) => s.destroy()));
  for (const s of keep) s.write(request);
  await waitFor(() => events.clients === 2, 'two clients');
  const res = await fetch(`http://127.0.0.1:${server.address.port}/events`);
  assert.equal(res.status, 503);
  await res.text();
  events.close();
  assert.equal(events.clients, 0);
});

test('behind an HTTP token, a browser gets in with ?access_token= and then a cookie; nothing gets in without', async (t) => {
  const scheduler = await startScheduler(t, { httpPort: 0, httpToken: 's3cret', dashboard: { intervalMs: 100 } });
  const base = `http://${scheduler.httpAddress?.host}:${scheduler.httpAddress?.port}`;
  assert.equal((await fetch(`${base}/status`)).status, 401);
  assert.equal((await fetch(`${base}/status?access_token=wrong`)).status, 401);
  assert.equal((await fetch(`${base}/api/stream`, { headers: { cookie: 'spillway_token=wrong' } })).status, 401);
  const page = await fetch(`${base}/status?access_token=s3cret`);
  assert.equal(page.status, 200);
  await page.text();
  const cookie = page.headers.get('set-cookie') ?? '';
  assert.match(cookie, /^spillway_token=s3cret; HttpOnly; SameSite=Strict; Path=\//);
  // The page's own requests carry the cookie: its script and its event stream.
  const jar = cookie.split(';')[0];
  const script = await fetch(`${base}/status/dashboard.js`, { headers: { cookie: jar } });
  assert.equal(script.status, 200);
  await script.text();
  const abort = new AbortController();
  const stream = await fetch(`${base}/api/stream`, { headers: { cookie: `other=1; ${jar}` }, signal: abort.signal });
  assert.equal(stream.status, 200);
  abort.abort();
  // Scripts use the header, as before.
  const metrics = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer s3cret' } });
  assert.equal(metrics.status, 200);
  await metrics.text();
});
