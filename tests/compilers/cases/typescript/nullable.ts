/** null and undefined members make a parameter optional and keep the rest. */
export function run(a: string | null, b: undefined | number, c: "x" | null | "y" | undefined, d: null | string[]): void {}
