/**
 * Literal unions become typed enums.
 * @param unit Temperature unit.
 */
export function run(unit: "c" | "f", level: 1 | 2 | 3 = 2, ratio: 0.5 | 1.5): void {}
