/**
 * Every kind of malformed metadata, reported together.
 * @title
 * @tag file system
 * @readOnly maybe
 * @destructive
 * @example {"path": ".", "limit": "ten"}
 * @example {"limit": 3}
 * @example {"path": }
 * @param path - Directory to list.
 * @param limit - At most this many entries.
 */
export function run(path: string, limit = 10): string {
  return path;
}
