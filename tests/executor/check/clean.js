/**
 * Add two numbers.
 * @typedef {Object} Args
 * @property {number} a - The first number.
 * @property {number} b - The second number.
 * @param {Args} args
 * @example {"a": 1, "b": 2}
 */
exports.run = function run({ a, b }) {
  return a + b;
};
