/**
 * Spillway's own instance of msgpackr. msgpackr keeps one process-wide extension registry
 * per loaded copy of itself; with a copy of its own, Spillway's frame-reference extension
 * (type 0x53, part of the format) never meets the application's extensions in either
 * direction: the application may register any type, 0x53 included, on the msgpackr it
 * imports or requires, and its extensions never change how Spillway encodes a value.
 */
import { localRequire } from '../native.js';

export type Msgpackr = typeof import('msgpackr');

let instance: Msgpackr | undefined;

/** The private msgpackr, loaded on first use. */
export function msgpackr(): Msgpackr {
  if (instance !== undefined) return instance;
  const require = localRequire();
  const file = require.resolve('msgpackr');
  // Load a fresh copy, then leave the module cache as it was: an application's
  // `require('msgpackr')`, before or after, gets its own copy, not this one.
  const shared = require.cache[file];
  delete require.cache[file];
  try {
    instance = require(file) as Msgpackr;
  } finally {
    if (shared !== undefined) require.cache[file] = shared;
    else delete require.cache[file];
  }
  return instance;
}
