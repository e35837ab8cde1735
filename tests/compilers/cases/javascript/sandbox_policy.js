/**
 * A thing.
 * @param {string} x - the thing
 * @network none
 * @writes cache
 * @memory 256MiB
 * @cpu 10
 * @processes 64
 * @fileSize 10MiB
 * @env GITHUB_TOKEN
 */
export function run(x) { return x; }
