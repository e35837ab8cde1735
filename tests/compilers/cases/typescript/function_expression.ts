/** Function expressions are not the supported form. */
export const run = function (city: string): string {
  return city;
};
