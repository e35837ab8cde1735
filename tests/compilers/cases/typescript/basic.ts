function helper(x: number): number {
  return x * 2;
}

/**
 * Forecast the weather for a city.
 * @param city - Name of the city.
 * @param {number} days How many days ahead.
 */
export function run(city: string, days: number = 1): string {
  return `${city}: ${helper(days)}`;
}
