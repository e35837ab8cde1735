/**
 * Misspelt metadata tags are warnings; examples that are code, not arguments, too.
 * @readonly
 * @openworld
 * @tittle Read a file
 * @example run("notes.txt")
 * @returns The file's text.
 * @param path - File to read.
 */
export function run(path: string): string {
  return path;
}
