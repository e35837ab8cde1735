/**
 * Greet someone.
 * @param name - Who to greet.
 */
export function run(
  name: string,
  shout = false,
): string {
  return shout ? `HELLO ${name.toUpperCase()}` : `Hello ${name}`;
}
