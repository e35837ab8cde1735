/**
 * Search the web and return the top results.
 * @typedef {Object} Args
 * @property {string} query - What to search for.
 * @property {integer} [limit=10] - How many results to return.
 * @property {'fast'|'deep'} [mode='fast'] - Quick or thorough search.
 * @property {string[]} [sites] - Only search these sites.
 * @property {boolean} [fresh] - Prefer recent pages.
 * @param {Args} args
 */
exports.run = function run(args) {
  return args.query;
};
