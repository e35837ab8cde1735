/** Rest parameters cannot be described. */
export function run(...parts) {}
