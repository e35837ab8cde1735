interface Location {
  city: string;
  country?: string;
}

type Range = { from: number; to: number | null };

/**
 * Inline object types, interfaces and aliases become nested objects.
 * @param where Where to look.
 */
export function run(where: Location, span: Range, extra: { note: string; tags?: string[] }, counts: Record<string, number>): void {}
