/** Not exported, so not a tool. */
function run(city: string): string {
  return city;
}
