/**
 * Get the current weather in a given location.
 * @typedef {Object} Args
 * @property {string} location - The city, e.g. "London" or "San Francisco, CA".
 * @property {'celsius'|'fahrenheit'} [unit] - Temperature unit.
 * @property {Integer} [days=3] - Days ahead.
 * @property {Boolean} verbose - More detail.
 * @property {string[]} tags - Labels.
 * @property {NUMBER} ratio - A number.
 * @param {Args} args
 */
exports.run = function ({ location }) {
  return location;
};
