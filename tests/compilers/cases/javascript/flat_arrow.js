/** Arrow functions are not the supported form. */
export const run = (city) => city;
