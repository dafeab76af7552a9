/**
 * Every flag of every command can come from the environment as `SPILLWAY_<FLAG>` (commander's
 * Option.env: the flag wins over the variable, the variable over the default). This module
 * names the variables and checks what commander does not: a switch's value, and names that
 * match no flag.
 */
import { Command, Option } from 'commander';
import { HEAP_GROWING_VARIABLE, OLD_SPACE_VARIABLE } from '../runtime/tuned-environment.js';

/** `--memory-limit` → `SPILLWAY_MEMORY_LIMIT`. */
export function envName(flags: string): string {
  const long = /--([a-z0-9-]+)/.exec(flags)?.[1] ?? flags;
  return `SPILLWAY_${long.replace(/-/g, '_').toUpperCase()}`;
}

/**
 * A Command whose options (`.option`, `.requiredOption`) and subcommands' options read
 * their SPILLWAY_* variable (shown in --help).
 */
export class EnvCommand extends Command {
  override createCommand(name?: string): EnvCommand {
    return new EnvCommand(name);
  }

  override createOption(flags: string, description?: string): Option {
    const option = new Option(flags, description);
    // Commander's own --help and --version are not settings.
    return option.long === '--help' || option.long === '--version' ? option : option.env(envName(flags));
  }
}

/** Variables Spillway reads that are not flags (docs/configuration.md). */
const OTHER_VARIABLES = new Set(['SPILLWAY_LOG', 'SPILLWAY_LOG_FORMAT', 'SPILLWAY_CHECKSUM', 'SPILLWAY_EXIT_WITH_STDIN', 'SPILLWAY_SUPERVISOR_RESTARTS', HEAP_GROWING_VARIABLE, OLD_SPACE_VARIABLE]);

const TRUE = new Set(['1', 'true', 'yes', 'on']);
const FALSE = new Set(['', '0', 'false', 'no', 'off']);

export interface EnvironmentCheck {
  /** Problems that stop the command (a switch set to a value that is neither on nor off). */
  errors: string[];
  /** `SPILLWAY_*` names that match no flag of any command (a typo?). */
  unknown: string[];
}

/**
 * Checks the `SPILLWAY_*` variables against the flags of every command. A switch (a flag
 * without a value) is on for 1/true/yes/on and off for 0/false/no/off/empty; commander only
 * asks whether it is set, so an "off" value is removed from `env` here.
 */
export function checkEnvironment(program: Command, env: NodeJS.ProcessEnv = process.env): EnvironmentCheck {
  const known = new Set(OTHER_VARIABLES);
  const switches = new Map<string, string>();
  for (const command of [program, ...program.commands]) {
    for (const option of command.options) {
      if (option.envVar === undefined) continue;
      known.add(option.envVar);
      if (!option.required && !option.optional) switches.set(option.envVar, option.long ?? option.flags);
    }
  }
  const errors: string[] = [];
  for (const [name, flag] of switches) {
    const value = env[name];
    if (value === undefined) continue;
    const normalized = value.trim().toLowerCase();
    if (FALSE.has(normalized)) delete env[name];
    else if (!TRUE.has(normalized)) errors.push(`environment variable ${name}=${JSON.stringify(value)} (for ${flag}) must be 1/true/yes/on or 0/false/no/off`);
  }
  const unknown = Object.keys(env).filter((name) => name.startsWith('SPILLWAY_') && !known.has(name)).sort();
  return { errors, unknown };
}

/** An option built by hand (choices...) with its SPILLWAY_* variable, for `.addOption`. */
export function envOption(flags: string, description: string): Option {
  return new Option(flags, description).env(envName(flags));
}
