/** Exact decimals for query results: scaled bigints printed, and rounded, to two places. */

/** A decimal printed with two places, e.g. "1234.57". */
export type Decimal = string;

/** `value` × 10^-scale rounded half up to two places. */
export function decimal(value: bigint, scale: number): Decimal {
  return ratio(value, 10n ** BigInt(scale));
}

/** numerator / denominator (both ≥ 0, denominator > 0) rounded half up to two places. */
export function ratio(numerator: bigint, denominator: bigint): Decimal {
  const cents = (numerator * 200n + denominator) / (2n * denominator);
  const whole = cents / 100n;
  const rest = cents % 100n;
  return `${whole}.${rest.toString().padStart(2, '0')}`;
}
