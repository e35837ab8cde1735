/**
 * Search the web and return the top results.
 * @typedef {Object} Args
 * @property {string} query - What to search for.
 * @property {integer} [limit=10] - How many results to return.
 * @property {'fast'|'deep'} [mode='fast'] - Quick or thorough search.
 * @property {string[]} [sites] - Only search these sites.
 * @property {boolean} [fresh] - Prefer recent pages.
 * @param {Args} args
 * @title Web search
 * @summary Search the web.
 * @tags web, search
 * @readOnly
 * @openWorld
 * @timeout 20
 * @example {"query": "toolexec"}
 * @example {"query": "mcp", "limit": 3, "mode": "deep"}
 * @error rate limited: too many searches in a minute
 */
exports.run = function run(args) {
  return args.query;
};
