enum Color {
  Red = "red",
  Blue = "blue",
}

namespace Util {
  export const shout = (s: string) => s.toUpperCase();
}

class Box {
  constructor(private readonly value: string) {}
  get(): string {
    return this.value;
  }
}

/**
 * TypeScript-only syntax in helpers does not disturb the declaration.
 * @param text What to box.
 * @timeout 20
 */
export function run(text: string): string {
  return Util.shout(new Box(text).get()) + Color.Red;
}
