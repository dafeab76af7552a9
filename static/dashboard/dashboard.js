// The Spillway dashboard: one EventSource on /api/stream ('init' once, then a 'frame' per
// interval), drawn with plain DOM and canvas. Rows are kept per worker and updated in
// place, so a frame costs the same whether it changes one figure or all of them.
'use strict';
(() => {
  const HISTORY_MS = 5 * 60_000;
  const STREAM_MS = 60_000;
  const STREAM_MAX = 20_000;
  const RECENT_ROWS = 12;
  const PARTS = ['managed', 'pinned', 'detached', 'unmanaged'];
  const STATE_ORDER = ['released', 'waiting', 'ready', 'processing', 'memory', 'erred'];

  const $ = (id) => document.getElementById(id);
  const rows = new Map();
  /** name -> [[t, rss, managed, spilled]] */
  let history = {};
  /** finished tasks: {key, fn, worker, endedAt, computeSeconds, fetchSeconds} */
  let stream = [];
  let frame = null;
  let clockSkew = 0;

  function bytes(n) {
    if (!Number.isFinite(n)) return '–';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return `${n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)} ${units[i]}`;
  }
  const rate = (n) => `${bytes(n)}/s`;
  const ms = (n) => (n >= 1000 ? `${(n / 1000).toFixed(1)} s` : `${n.toFixed(n < 10 ? 1 : 0)} ms`);
  const seconds = (s) => ms(s * 1000);
  const percent = (share) => `${(100 * share).toFixed(0)}%`;
  const clock = (t) => new Date(t).toLocaleTimeString([], { hour12: false });
  const naturally = (a, b) => a.localeCompare(b, undefined, { numeric: true });

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  // ---- workers -------------------------------------------------------------------

  function makeRow(name) {
    const tr = el('tr');
    tr.dataset.worker = name;
    const cells = {};
    for (const key of ['name', 'state', 'memory', 'spilled', 'delay', 'loop', 'spill', 'net', 'tasks', 'spark']) {
      cells[key] = el('td');
      tr.append(cells[key]);
    }
    cells.name.textContent = name;
    const badge = el('span', 'badge');
    cells.state.append(badge);
    const bar = el('div', 'bar');
    const segments = {};
    for (const part of PARTS) {
      segments[part] = el('span', `seg ${part}`);
      segments[part].dataset.part = part;
      bar.append(segments[part]);
    }
    const limit = el('i', 'mark limit');
    const pause = el('i', 'mark pause');
    bar.append(limit, pause);
    const barLabel = el('div', 'bar-label');
    cells.memory.append(bar, barLabel);
    const spillBar = el('span', 'spill-bar');
    const spillFill = el('span');
    spillBar.append(spillFill);
    const spillLabel = el('span', 'bar-label');
    cells.spilled.append(spillBar, ' ', spillLabel);
    const spark = el('canvas', 'spark');
    spark.width = 160;
    spark.height = 26;
    cells.spark.append(spark);
    const row = { tr, cells, badge, bar, segments, limit, pause, barLabel, spillFill, spillLabel, spark };
    rows.set(name, row);
    return row;
  }

  function renderWorkers(f) {
    const workers = [...f.workers].sort((a, b) => naturally(a.name, b.name));
    const scale = Math.max(1, ...workers.map((w) => Math.max(w.memoryLimit, w.rss))) * 1.05;
    const spillScale = Math.max(1 << 20, ...workers.map((w) => w.spilled));
    const seen = new Set();
    const body = $('worker-rows');
    let previous = null;
    for (const w of workers) {
      seen.add(w.name);
      const row = rows.get(w.name) ?? makeRow(w.name);
      // Keep DOM order = sorted order, moving only rows that are out of place.
      const expected = previous === null ? body.firstChild : previous.nextSibling;
      if (expected !== row.tr) body.insertBefore(row.tr, expected);
      previous = row.tr;
      row.tr.dataset.state = w.state;
      setText(row.badge, w.state);
      row.bar.dataset.rss = String(w.rss);
      row.bar.dataset.limit = String(w.memoryLimit);
      for (const part of PARTS) {
        const seg = row.segments[part];
        seg.dataset.bytes = String(w[part]);
        seg.style.width = `${((100 * w[part]) / scale).toFixed(3)}%`;
        seg.title = `${part}: ${bytes(w[part])}`;
      }
      row.limit.style.left = `${((100 * w.memoryLimit) / scale).toFixed(3)}%`;
      row.limit.title = `limit ${bytes(w.memoryLimit)}`;
      row.pause.hidden = w.pauseBytes === null;
      if (w.pauseBytes !== null) {
        row.pause.style.left = `${((100 * w.pauseBytes) / scale).toFixed(3)}%`;
        row.pause.title = `pause level ${bytes(w.pauseBytes)}`;
      }
      setText(row.barLabel, `${bytes(w.rss)} of ${bytes(w.memoryLimit)} · managed ${bytes(w.managed)} · unmanaged ${bytes(w.unmanaged)}`);
      row.spillFill.style.width = `${((100 * w.spilled) / spillScale).toFixed(2)}%`;
      row.spillFill.parentElement.dataset.bytes = String(w.spilled);
      setText(row.spillLabel, bytes(w.spilled));
      const gone = w.state === 'lost' || w.state === 'closed';
      setText(row.cells.delay, gone ? '–' : `${ms(w.delayMaxMs)} / ${ms(w.delayP99Ms)}`);
      const loop = w.loopRunShare === null || w.loopWaitShare === null ? 'n/a' : `${percent(w.loopRunShare)} / ${percent(w.loopWaitShare)}`;
      setText(row.cells.loop, gone ? '–' : loop);
      setText(row.cells.spill, gone ? '–' : `${rate(w.rates.spillWrite)} / ${rate(w.rates.spillRead)}`);
      setText(row.cells.net, gone ? '–' : `${rate(w.rates.sent)} / ${rate(w.rates.received)}`);
      setText(row.cells.tasks, gone ? `lost ${clock(w.goneAt)}` : `${w.executing} / ${w.queued}`);
      drawSpark(row.spark, history[w.name] ?? [], w.memoryLimit, f.t);
    }
    for (const [name, row] of rows) {
      if (seen.has(name)) continue;
      row.tr.remove();
      rows.delete(name);
    }
    $('no-workers').hidden = workers.length > 0;
    const count = (state) => workers.filter((w) => w.state === state).length;
    setText($('workers-running'), String(count('running') + count('starting')));
    setText($('workers-paused'), String(count('paused')));
    setText($('workers-lost'), String(count('lost')));
    setText($('workers-closed'), String(count('closed') + count('closing')));
  }

  function drawSpark(canvas, points, limit, now) {
    const ctx = canvas.getContext('2d');
    const w = canvas.width;
    const h = canvas.height;
    ctx.clearRect(0, 0, w, h);
    const top = Math.max(limit, ...points.map((p) => p[1])) * 1.05 || 1;
    const x = (t) => w - ((now - t) / HISTORY_MS) * w;
    const y = (v) => h - (v / top) * (h - 1);
    ctx.strokeStyle = '#111827';
    ctx.setLineDash([3, 3]);
    ctx.beginPath();
    ctx.moveTo(0, y(limit));
    ctx.lineTo(w, y(limit));
    ctx.stroke();
    ctx.setLineDash([]);
    if (points.length < 2) return;
    ctx.fillStyle = 'rgba(37, 99, 235, .35)';
    ctx.beginPath();
    ctx.moveTo(x(points[0][0]), h);
    for (const p of points) ctx.lineTo(x(p[0]), y(p[2]));
    ctx.lineTo(x(points[points.length - 1][0]), h);
    ctx.fill();
    ctx.strokeStyle = '#2563eb';
    ctx.beginPath();
    points.forEach((p, i) => (i === 0 ? ctx.moveTo(x(p[0]), y(p[1])) : ctx.lineTo(x(p[0]), y(p[1]))));
    ctx.stroke();
  }

  function recordHistory(f) {
    for (const w of f.workers) {
      if (w.state === 'lost' || w.state === 'closed') continue;
      const points = (history[w.name] ??= []);
      const last = points[points.length - 1];
      if (last !== undefined && f.t - last[0] < 1000) continue;
      points.push([f.t, w.rss, w.managed + w.pinned + w.detached, w.spilled]);
      while (points.length > 0 && f.t - points[0][0] > HISTORY_MS) points.shift();
    }
    const listed = new Set(f.workers.map((w) => w.name));
    for (const name of Object.keys(history)) if (!listed.has(name)) delete history[name];
  }

  // ---- summary ---------------------------------------------------------------------

  function renderSummary(f) {
    setText($('scheduler'), f.scheduler);
    setText($('updated'), clock(f.t));
    const { done, total } = f.progress;
    $('progress-bar').style.width = total > 0 ? `${((100 * done) / total).toFixed(1)}%` : '0';
    setText($('progress-done'), String(done));
    setText($('progress-total'), String(total));
    setText($('task-rate'), f.rates.tasks.toFixed(1));
    setText($('clients'), String(f.clients));
    const list = $('task-states');
    for (const state of STATE_ORDER) {
      let item = list.querySelector(`[data-task-state="${state}"]`);
      if (item === null) {
        item = el('li');
        item.dataset.taskState = state;
        item.append(`${state} `, el('b'));
        list.append(item);
      }
      setText(item.querySelector('b'), String(f.tasks[state] ?? 0));
    }
    setText($('rate-spill-write'), rate(f.rates.spillWrite));
    setText($('rate-spill-read'), rate(f.rates.spillRead));
    setText($('rate-transfer'), rate(f.rates.sent));
  }

  // ---- task stream -----------------------------------------------------------------

  function hue(text) {
    let h = 0;
    for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) >>> 0;
    return h % 360;
  }

  function renderStream(f) {
    const cutoff = f.t - STREAM_MS;
    while (stream.length > 0 && stream[0].endedAt < cutoff) stream.shift();
    if (stream.length > STREAM_MAX) stream = stream.slice(-STREAM_MAX);
    const canvas = $('stream');
    const names = f.workers.map((w) => w.name).sort(naturally);
    const lane = names.length === 0 ? 0 : Math.max(2, Math.min(18, Math.floor(360 / names.length)));
    const height = Math.max(60, lane * names.length + 16);
    const width = Math.max(200, canvas.clientWidth);
    if (canvas.width !== width) canvas.width = width;
    if (canvas.height !== height) canvas.height = height;
    const ctx = canvas.getContext('2d');
    ctx.clearRect(0, 0, width, height);
    const laneOf = new Map(names.map((n, i) => [n, i]));
    const x = (t) => width - ((f.t - t) / STREAM_MS) * width;
    ctx.fillStyle = '#9ca3af';
    ctx.font = '10px system-ui, sans-serif';
    for (let s = 0; s <= 60; s += 10) ctx.fillText(`-${s}s`, Math.max(0, x(f.t - s * 1000) - 20), height - 3);
    for (const task of stream) {
      const i = laneOf.get(task.worker);
      if (i === undefined) continue;
      const end = task.endedAt;
      const start = end - task.computeSeconds * 1000;
      const waitStart = start - task.fetchSeconds * 1000;
      const y = i * lane;
      const color = hue(task.fn);
      ctx.fillStyle = `hsl(${color} 60% 80%)`;
      ctx.fillRect(x(waitStart), y, Math.max(1, x(start) - x(waitStart)), lane - 1);
      ctx.fillStyle = `hsl(${color} 65% 42%)`;
      ctx.fillRect(x(start), y, Math.max(1, x(end) - x(start)), lane - 1);
    }
    if (lane >= 10) {
      ctx.fillStyle = '#374151';
      names.forEach((n, i) => ctx.fillText(n, 2, i * lane + lane - 3));
    }
    const body = $('recent-rows');
    const recent = stream.slice(-RECENT_ROWS).reverse();
    while (body.rows.length > recent.length) body.deleteRow(-1);
    recent.forEach((task, i) => {
      const tr = body.rows[i] ?? body.insertRow();
      while (tr.cells.length < 6) tr.insertCell();
      const started = task.endedAt - task.computeSeconds * 1000;
      const values = [task.key, task.fn, task.worker, clock(started), seconds(task.computeSeconds), seconds(task.fetchSeconds)];
      values.forEach((v, j) => setText(tr.cells[j], v));
    });
  }

  // ---- events ----------------------------------------------------------------------

  function render(f) {
    frame = f;
    renderSummary(f);
    renderWorkers(f);
    renderStream(f);
  }

  function connect() {
    const source = new EventSource('/api/stream');
    const status = $('connection');
    source.addEventListener('init', (event) => {
      const f = JSON.parse(event.data);
      clockSkew = Date.now() - f.t;
      history = f.history ?? {};
      stream = f.stream ?? [];
      status.dataset.state = 'live';
      status.textContent = 'live';
      render(f);
    });
    source.addEventListener('frame', (event) => {
      const f = JSON.parse(event.data);
      clockSkew = Date.now() - f.t;
      stream.push(...f.stream);
      recordHistory(f);
      render(f);
    });
    source.addEventListener('error', () => {
      status.dataset.state = 'lost';
      status.textContent = 'reconnecting…';
    });
  }

  // Keep the stream's time axis moving between frames, and redraw it at the new width.
  window.addEventListener('resize', () => frame !== null && renderStream(frame));
  document.addEventListener('visibilitychange', () => {
    if (!document.hidden && frame !== null) renderStream({ ...frame, t: Date.now() - clockSkew, stream: [] });
  });
  connect();
})();
