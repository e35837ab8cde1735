/**
 * Every @param form.
 * @param a - Dash form.
 * @param {string} b Braced type form.
 * @param [c] Bracketed optional form.
 * @param d? Question-mark form.
 */
export function run(a: string, b: string, c?: string, d?: string): void {}
