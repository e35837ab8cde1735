export function run(city: string): string {
  return city;
}
