/**
 * Type-level tests of typed tasks and futures: `npm run typecheck` compiles this file, and
 * every `@ts-expect-error` below must meet an error (an expectation that stops erring fails
 * the typecheck). Nothing here runs.
 */
import type { Client, Delayed, Future } from '../../src/index.js';
import { type Row, tasks } from '../cluster/fixtures/typed-tasks.js';

declare const client: Client;
declare const rowsFuture: Future<Row[]>;
declare const numberFuture: Future<number>;
declare const stringFuture: Future<string>;

export async function accepted(): Promise<void> {
  // Builders take what their functions take; results are the awaited return types.
  const rows: Delayed<Row[]> = tasks.load(1);
  const rows2: Delayed<Row[]> = tasks.load(1, 50);
  const count: Delayed<number> = tasks.total(rows);
  const fromFuture: Delayed<number> = tasks.total(rowsFuture);
  const n: number = await client.compute(count);
  const [a, b]: [number, number] = await client.compute([count, fromFuture]);
  // An array parameter takes an array of values, lazy tasks and futures, mixed.
  const summed: Delayed<number> = tasks.sum([1, numberFuture, count]);

  // submit, map, gather, persist.
  const f: Future<Row[]> = client.submit(tasks.load, 3);
  const g: Future<number> = client.submit(tasks.total, f);
  const parts: Future<Row[]>[] = client.map(tasks.load, [1, 2, 3]);
  const sizes: Future<Row[]>[] = client.map(tasks.load, [1, 2, 3], 10);
  const totals: Future<number>[] = client.map(tasks.total, parts);
  const all: Future<number> = client.submit(tasks.sum, totals);
  const values: number[] = await client.gather(totals);
  const [x, y]: [number, Row[]] = await client.gather([g, f] as const);
  const kept: Future<number> = client.persist(count);
  const keptMany: [Future<Row[]>, Future<number>] = client.persist([rows, count]);
  const viaDict: Future<unknown>[] = client.persist({ k: { fn: tasks.load.fn, args: [1] } }, ['k']);
  const r: number = await kept.result();
  const hinted: Future<Float64Array> = client.submit(tasks.fill.with({ memory: '2 GiB', retries: 2 }), 10, 1);
  const nested: Delayed<string> = tasks.describe({ name: 'a', tags: ['x'] });
  // A plain object parameter takes futures in place of its properties.
  const nestedFutures: Delayed<string> = tasks.describe({ name: stringFuture, tags: ['x', stringFuture] });
  using disposable = client.submit(tasks.load, 1);
  await using asyncDisposable = client.submit(tasks.load, 2);
  void [rows2, n, a, b, summed, sizes, all, values, x, y, keptMany, viaDict, r, hinted, nested, nestedFutures, disposable, asyncDisposable];
}

export async function rejected(): Promise<void> {
  // @ts-expect-error a string where the function takes a number
  tasks.load('1');
  // @ts-expect-error a future of the wrong result type
  tasks.total(numberFuture);
  // @ts-expect-error a lazy task of the wrong result type
  tasks.total(tasks.sum([1]));
  // @ts-expect-error too many arguments
  tasks.sum([1], 2);
  // @ts-expect-error a missing argument
  tasks.total();
  // @ts-expect-error an array element of the wrong type
  tasks.sum([1, stringFuture]);
  // @ts-expect-error submit checks its arguments as the task does
  client.submit(tasks.load, 'x');
  // @ts-expect-error submit: a future of the wrong type
  client.submit(tasks.total, numberFuture);
  // @ts-expect-error map: inputs of the wrong type
  client.map(tasks.total, [numberFuture]);
  // @ts-expect-error map: the fixed arguments are checked too
  client.map(tasks.load, [1, 2], 'ten');
  // @ts-expect-error the result type follows the function
  const wrong: Future<string> = client.submit(tasks.load, 1);
  // @ts-expect-error compute's result type too
  const wrongValue: string = await client.compute(tasks.total(tasks.load(1)));
  // @ts-expect-error a property of the wrong type inside an object argument
  tasks.describe({ name: 'a', tags: [1] });
  // @ts-expect-error a future of the wrong type in place of a property
  tasks.describe({ name: numberFuture, tags: [] });
  // @ts-expect-error a binary parameter is not searched: a future of a number is no Float64Array
  tasks.scale(numberFuture, 2);
  // @ts-expect-error a memory hint is a number or a size string
  tasks.load.with({ memory: true });
  void [wrong, wrongValue];
}
