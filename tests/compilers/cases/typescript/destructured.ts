/** Destructuring hides the parameter names. */
export function run({ city, days }: { city: string; days: number }): void {}
