/**
 * Scalars, and integer via JSDoc.
 * @param {integer} count An integer.
 * @param {int} page Also an integer.
 * @param ratio A number.
 */
export function run(name: string, count: number, page: number, ratio: number, ok: boolean): void {}
