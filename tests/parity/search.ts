/**
 * Search the web and return the top results.
 * @param query - What to search for.
 * @param {integer} limit - How many results to return.
 * @param mode - Quick or thorough search.
 * @param sites - Only search these sites.
 * @param fresh - Prefer recent pages.
 */
export function run(query: string, limit: number = 10, mode: "fast" | "deep" = "fast", sites?: string[], fresh?: boolean): string {
  return query;
}
