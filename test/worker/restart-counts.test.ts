/** The restart counts a supervisor hands each worker it starts (SPILLWAY_SUPERVISOR_RESTARTS). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { InvalidArgumentError } from '../../src/errors.js';
import { formatSupervisorRestarts, parseSupervisorRestarts, resolveWorkerOptions } from '../../src/worker/options.js';

test('restart counts survive the trip through the environment', () => {
  fc.assert(
    fc.property(fc.nat(), fc.nat(), (exit, memory) => {
      assert.deepEqual(parseSupervisorRestarts(formatSupervisorRestarts({ exit, memory })), { exit, memory });
    }),
  );
  assert.equal(parseSupervisorRestarts(undefined), undefined);
  assert.equal(parseSupervisorRestarts(' '), undefined);
  assert.deepEqual(parseSupervisorRestarts('memory=2'), { exit: 0, memory: 2 });
});

test('malformed restart counts are refused with SPW_ERR_INVALID_ARG', () => {
  for (const bad of ['exit=-1', 'exit=1;memory=2', 'oom=1', 'exit=x', 'exit=99999999999999999999']) {
    assert.throws(() => parseSupervisorRestarts(bad), (err: unknown) => err instanceof InvalidArgumentError && /SPILLWAY_SUPERVISOR_RESTARTS/.test(err.message), bad);
  }
  const base = { scheduler: { host: '127.0.0.1', port: 1 }, memoryLimit: 1 << 30 };
  assert.throws(() => resolveWorkerOptions({ ...base, supervisorRestarts: { exit: 1.5, memory: 0 } }), InvalidArgumentError);
  assert.throws(() => resolveWorkerOptions({ ...base, supervisorRestarts: { crash: 1 } as never }), InvalidArgumentError);
  assert.deepEqual(resolveWorkerOptions({ ...base, supervisorRestarts: { exit: 1, memory: 2 } }).supervisorRestarts, { exit: 1, memory: 2 });
});
