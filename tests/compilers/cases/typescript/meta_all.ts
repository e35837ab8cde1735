interface Entry {
  name: string;
  size: number;
  isDir: boolean;
}

type Listing = {
  path: string;
  entries: Entry[];
  truncated?: boolean;
};

/**
 * List the entries of a directory.
 *
 * Directories come first; each entry carries its size in bytes.
 * @title List directory
 * @summary List a directory's entries with their sizes.
 * @tags fs, read
 * @readOnly
 * @idempotent true
 * @openWorld false
 * @timeout 30
 * @max_output_bytes 65536
 * @example {"path": "."}
 * @example {"path": "/tmp",
 *   "limit": 5}
 * @throws {Error} not a directory: the path exists but is a file
 * @error permission denied: the directory cannot be read
 * @param path - Directory to list.
 * @param limit - At most this many entries.
 */
export async function run(path: string, limit: number = 100): Promise<Listing> {
  return { path, entries: [] };
}
