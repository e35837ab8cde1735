/**
 * Delete a file.
 * @title Delete file
 * @tags fs, write
 * @destructive
 * @idempotent
 * @example {"path": "old.log"}
 * @error not found: there is no such file
 * @param {string} path - File to delete.
 */
export function run(path) {
  return path;
}
