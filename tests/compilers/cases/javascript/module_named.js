export const name = "named_exports";
export const description = "Each field exported on its own.";
export const inputSchema = { type: "object", properties: { q: { type: "string" } } };
export function run(input) {
  return input.q;
}
