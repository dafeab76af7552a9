/**
 * Other processes: whether they run, and (from /proc, Linux only) their environment,
 * command line, process group and session.
 */
import { readFile } from 'node:fs/promises';

/** True while a process with this pid exists (with -pgid: while any process of that group does). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

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

/** A process's process group and session, from /proc. */
export async function groupAndSession(pid: number): Promise<{ pgrp: number; session: number }> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const [, , pgrp, session] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { pgrp: Number(pgrp), session: Number(session) };
}
