import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { InvalidArgumentError } from '../../src/errors.js';
import { formatBytes, parseBytes } from '../../src/units.js';

function assertInvalid(input: unknown): void {
  assert.throws(
    () => parseBytes(input as string),
    (err: unknown) => err instanceof InvalidArgumentError && err.code === 'SPW_ERR_INVALID_ARG',
    `${typeof input} ${String(input)}`,
  );
}

describe('parseBytes', () => {
  it('numbers: whole bytes, fractions rounded down', () => {
    assert.equal(parseBytes(0), 0);
    assert.equal(parseBytes(4096), 4096);
    assert.equal(parseBytes(1.9), 1);
    assert.equal(parseBytes(2 ** 40), 2 ** 40);
  });

  it('strings with and without units', () => {
    const cases: [string, number][] = [
      ['4096', 4096],
      ['0', 0],
      ['512 MiB', 512 * 2 ** 20],
      ['512MiB', 512 * 2 ** 20],
      ['1.5GB', 1.5e9],
      ['2g', 2 * 2 ** 30],
      ['2G', 2 * 2 ** 30],
      ['10k', 10 * 1024],
      ['3 m', 3 * 2 ** 20],
      ['1 t', 2 ** 40],
      ['1 TiB', 2 ** 40],
      ['2 TB', 2e12],
      ['7 b', 7],
      ['7B', 7],
      ['1 kb', 1000],
      ['1 KiB', 1024],
      ['256mib', 256 * 2 ** 20],
      ['  64   gib  ', 64 * 2 ** 30],
      ['\t1\nMB\n', 1e6],
      ['0.5 KiB', 512],
      ['1.0001 b', 1],
    ];
    for (const [input, expected] of cases) assert.equal(parseBytes(input), expected, JSON.stringify(input));
  });

  it('is case-insensitive', () => {
    for (const unit of ['mib', 'MIB', 'MiB', 'mIb']) assert.equal(parseBytes(`3 ${unit}`), 3 * 2 ** 20);
  });

  it('rejects negative, NaN, infinite, empty, junk and unknown units with InvalidArgumentError', () => {
    for (const bad of [-1, -0.5, NaN, Infinity, -Infinity, '', ' ', '-1', '-5 MiB', 'abc', 'MiB', '5 XB', '5 kbit', '1e3', '.5 GB', '5.', '1,5 GB', '5 M iB', '0x10', 'NaN', 'Infinity', '9'.repeat(400)]) {
      assertInvalid(bad);
    }
  });

  it('rejects unit names that are Object.prototype members', () => {
    // Used to look units up in a plain object: '5 constructor' gave NaN bytes.
    for (const bad of ['5 constructor', '1 valueOf', '1 toString', '1 hasOwnProperty', '1 isPrototypeOf']) assertInvalid(bad);
  });

  it('rejects values that are neither numbers nor strings', () => {
    for (const bad of [null, undefined, {}, [], 10n, true]) assertInvalid(bad);
  });

  it('names what it was reading in the message', () => {
    assert.throws(() => parseBytes('lots', 'memoryLimit'), /memoryLimit/);
    assert.throws(() => parseBytes(-1, 'maxSpill'), /maxSpill/);
  });

  it('property: n with any unit spelling is n times the unit', () => {
    const units: [string, number][] = [['', 1], ['b', 1], ['kib', 1024], ['k', 1024], ['kb', 1000], ['mib', 2 ** 20], ['gb', 1e9], ['gib', 2 ** 30]];
    fc.assert(
      fc.property(
        fc.nat({ max: 1_000_000 }),
        fc.constantFrom(...units),
        fc.constantFrom('', ' ', '  '),
        fc.boolean(),
        (n, [unit, factor], space, upper) => {
          const text = `${n}${space}${upper ? unit.toUpperCase() : unit}`;
          assert.equal(parseBytes(text), n * factor);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('formatBytes', () => {
  it('picks the largest binary unit below 1024, one decimal above bytes', () => {
    const cases: [number, string][] = [
      [0, '0 B'],
      [1, '1 B'],
      [1023, '1023 B'],
      [1024, '1.0 KiB'],
      [1536, '1.5 KiB'],
      [512 * 2 ** 20, '512.0 MiB'],
      [1.5 * 2 ** 30, '1.5 GiB'],
      [3 * 2 ** 40, '3.0 TiB'],
      [2 ** 50, '1024.0 TiB'], // no unit above TiB
    ];
    for (const [bytes, text] of cases) assert.equal(formatBytes(bytes), text, String(bytes));
  });

  it('never prints 1024.0 of a unit when the next one fits', () => {
    // 1048575 bytes is 1023.999 KiB: used to print '1024.0 KiB'.
    assert.equal(formatBytes(2 ** 20 - 1), '1.0 MiB');
    assert.equal(formatBytes(2 ** 30 - 1), '1.0 GiB');
    fc.assert(
      fc.property(fc.integer({ min: 1024, max: 2 ** 45 }), (bytes) => {
        const [number, unit] = formatBytes(bytes).split(' ');
        if (unit !== 'TiB') assert.ok(Number(number) < 1024, formatBytes(bytes));
        assert.ok(Number(number) >= 0.9, formatBytes(bytes));
      }),
      { numRuns: 300 },
    );
  });

  it('negative values keep their sign', () => {
    assert.equal(formatBytes(-2048), '-2.0 KiB');
    assert.equal(formatBytes(-5), '-5 B');
  });

  it('round-trips with parseBytes within the printed precision', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 42 }), (bytes) => {
        const back = parseBytes(formatBytes(bytes));
        assert.ok(Math.abs(back - bytes) <= Math.max(0.05 * bytes, 1), `${bytes} -> ${formatBytes(bytes)} -> ${back}`);
      }),
      { numRuns: 300 },
    );
  });
});
