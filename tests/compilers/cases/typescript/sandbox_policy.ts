/**
 * Read a page of notes.
 * @param page - which page
 * @network api.github.com, localhost:8080
 * @writes ~/notes
 * @reads ~/.aws
 * @cpu 2 min
 * @fileSize 1GiB
 */
export function run(page: number): string {
  return String(page);
}
