/** Rest parameters cannot be described. */
export function run(...paths: string[]): void {}
