/**
 * Multiply two numbers.
 * @typedef {Object} Args
 * @property {number} a - The first number.
 * @property {number} b
 * @param {Args} args
 */
exports.run = function run({ a, b }) {
  return a * b;
};
