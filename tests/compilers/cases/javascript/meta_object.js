/**
 * Search the notes and return matching lines.
 * @title Search notes
 * @tag notes
 * @tag search
 * @readOnly
 * @idempotent
 * @example {"query": "todo"}
 * @example {"query": "meeting", "limit": 3}
 * @throws {Error} the notes folder is missing
 * @timeout 20
 * @typedef {Object} Args
 * @property {string} query - What to look for.
 * @property {integer} [limit=10] - At most this many lines.
 * @param {Args} args
 */
exports.run = async function run({ query, limit = 10 }) {
  return `${query} ${limit}`;
};
