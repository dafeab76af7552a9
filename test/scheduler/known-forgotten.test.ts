import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Engine } from '../../src/scheduler/engine.js';
import { validateSubmission } from '../../src/scheduler/graph.js';
import { task } from './helpers.js';

const noop = (): void => undefined;
const outbox = { computeTask: noop, releaseKeys: noop, cancelTask: noop, keyReady: noop, keyErred: noop, acquireReplicas: noop, retire: noop, retired: noop };

// Validation yields to the loop; a key it found known may be forgotten before the graph is
// added. Listed in the client's tasks anyway, it stayed there (forgetting is what prunes them).
test("a known key forgotten while a graph is checked does not stay in the client's tasks", async () => {
  const engine = new Engine(outbox);
  engine.addClient('c1', 'one');
  engine.addClient('c2', 'two');
  engine.submit('c1', await validateSubmission({ graph: { a: task() }, wanted: ['a'] }, (k) => engine.tasks.has(k)));
  // c2's graph names a (known) and b; a is released by c1 while c2's graph is being checked.
  const checking = validateSubmission({ graph: { a: task(), b: task() }, wanted: ['b'] }, (k) => engine.tasks.has(k));
  const submission = await checking;
  engine.release('c1', ['a']);
  assert.equal(engine.tasks.has('a'), false, 'a is forgotten');
  engine.submit('c2', submission);
  const c2 = engine.clients.get('c2')!;
  assert.deepEqual([...c2.tasks], ['b'], 'only keys the scheduler knows are listed');
});
