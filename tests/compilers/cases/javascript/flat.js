/**
 * Flat parameters typed by JSDoc.
 * @param {string} city - The city.
 * @param {integer} days - Days ahead.
 * @param {'c'|'f'} [unit] - Unit.
 * @param {string[]} tags - Labels.
 * @param {boolean} [loud=false] - Shout.
 */
export function run(city, days, unit, tags, loud = false) {
  return city;
}
