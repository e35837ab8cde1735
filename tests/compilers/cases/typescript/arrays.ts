/** Every array form. */
export function run(a: string[], b: Array<number>, c: ReadonlyArray<boolean>, d: string[][]): void {}
