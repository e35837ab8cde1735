export function run(city) {
  return city;
}
