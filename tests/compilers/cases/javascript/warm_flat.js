/**
 * Answer fast.
 * @warm
 * @param {string} name - Who.
 */
export function run(name) {
  return `hi ${name}`;
}
