/**
 * @param city The city.
 */
export function run(city: string): string {
  return city;
}
