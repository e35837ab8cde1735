/**
 * Run a query.
 * @typedef {Object} Args
 * @property {string} sql - The statement.
 * @property {"Fast"|"Slow"} [mode="Fast"] - Mode, values exactly as written.
 * @param {Args} args
 */
module.exports.run = async function run(args) {
  return args.sql;
};
