const BASE = 10;

/** Literal defaults are shown; computed ones only make the parameter optional. */
export function run(text = "hi", count: number = -2, flag = false, tags: string[] = ["a", 'b'], limit: number = BASE * 2): void {}
