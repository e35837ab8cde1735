interface Results {
  urls: string[];
  engine: string;
  more?: boolean;
}

/**
 * Search the web and return the top results.
 * @param query - What to search for.
 * @param {integer} limit - How many results to return.
 * @param mode - Quick or thorough search.
 * @param sites - Only search these sites.
 * @param fresh - Prefer recent pages.
 * @title Web search
 * @summary Search the web.
 * @tags web, search
 * @readOnly
 * @openWorld
 * @timeout 20
 * @example {"query": "toolexec"}
 * @example {"query": "mcp", "limit": 3, "mode": "deep"}
 * @error rate limited: too many searches in a minute
 */
export function run(query: string, limit: number = 10, mode: "fast" | "deep" = "fast", sites?: string[], fresh?: boolean): Results {
  return { urls: [query], engine: "none" };
}
