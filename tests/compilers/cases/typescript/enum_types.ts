export enum Units {
  Celsius = "c",
  Fahrenheit = "f",
}

const enum Level {
  Low, // 0
  Mid = 5,
  High, // 6
}

enum Flags {
  Read = 1 << 0,
}

/**
 * Same-file enums are enums of their runtime values.
 * @param units The units.
 * @param level How loud.
 * @param flags Computed members have no JSON Schema equivalent.
 */
export function run(units: Units, level: Level = Level.Mid, flags?: Flags): string {
  return `${units}${level}${flags}`;
}
