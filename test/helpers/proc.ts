/** Another process's environment and command line, read from /proc (Linux only). */
import { readFile } from 'node:fs/promises';

/** A process's environment, from /proc. */
export async function environment(pid: number): Promise<Map<string, string>> {
  const raw = await readFile(`/proc/${pid}/environ`, 'utf8');
  return new Map(
    raw
      .split('\0')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

/** A process's command line, from /proc. */
export async function commandLine(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').filter((arg) => arg !== '');
}
