/** sizes and intervals the CLI accepts but cannot honour. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { parseBytes } from '../../src/units.js';
import { cli } from './helpers.js';



test('parseBytes rejects sizes beyond exact integers instead of rounding them', () => {
  assert.throws(() => parseBytes('9007199254740993'), InvalidArgumentError);
  assert.throws(() => parseBytes('1000000000 TiB'), InvalidArgumentError);
  assert.throws(() => parseBytes(2 ** 60), InvalidArgumentError);
  assert.equal(parseBytes('8 TiB'), 8 * 2 ** 40);
});

test('a huge --memory-limit is a usage error (2), not a worker that fails to start (1)', async () => {
  const { code, stderr } = await cli(['local', '--memory-limit', '1000000000TiB', '--size', '1MiB']);
  assert.equal(code, 2, stderr);
  assert.doesNotMatch(stderr, /worker 0 exited/);
});

test('a --heartbeat-interval a timer cannot hold is a usage error, not a 1 ms heartbeat', async () => {
  const { code, stderr } = await cli(['scheduler', '--port', '0', '--heartbeat-interval', '3000000000']);
  assert.equal(code, 2, stderr);
  assert.doesNotMatch(stderr, /TimeoutOverflowWarning/);
});

test('a --monitor-interval a timer cannot hold is a usage error, not a 1 ms monitor', async () => {
  const { code, stderr } = await cli(['demo', '--memory-limit', '4MiB', '--monitor-interval', '3000000000', '--json']);
  assert.equal(code, 2, stderr);
  assert.doesNotMatch(stderr, /TimeoutOverflowWarning/);
});

test('--partitions a task-based shuffle cannot submit is a usage error, not a lost scheduler connection', async () => {
  const { code, stderr, stdout } = await cli(['local', '--workers', '1', '--memory-limit', '64MiB', '--method', 'tasks', '--partitions', '800', '--size', '8MiB', '--json']);
  assert.equal(code, 2, stdout + stderr);
  assert.match(stderr, /partitions/);
  assert.doesNotMatch(stdout, /lost the connection/);
});

test('--scheduler HOST:0 is a usage error (port 0 names no server), not ECONNREFUSED', async () => {
  const { code, stderr } = await cli(['worker', '--scheduler', '127.0.0.1:0', '--memory-limit', '64MiB']);
  assert.equal(code, 2, stderr);
  assert.match(stderr, /HOST:PORT|port/);
});
