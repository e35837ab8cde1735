class Point {}

/** Types with no JSON Schema equivalent become strings with a warning. */
export function run(p: Point, anything: any, either: string | number): void {}
