export const tool = {
  name: "broken_meta",
  description: "Every kind of malformed module metadata, reported together.",
  args: { type: "object", properties: { n: { type: "integer" } }, required: ["n"] },
  title: 42,
  tags: "math",
  examples: [{ n: "one" }, 7],
  annotations: { readOnlyHint: "yes", destructiveHint: true, slowHint: true },
  outputSchema: { type: "arry" },
  outputschema: {},
  run: async (input) => input.n,
};
