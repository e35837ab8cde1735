/**
 * ESM object-argument tool.
 * @typedef {Object} Args
 * @property {string} path - File to read.
 * @param {Args} args
 */
export async function run(args) {
  return args.path;
}
