export default {
  name: "undocumented_module",
  description: "Join words.",
  inputSchema: {
    type: "object",
    properties: {
      words: { type: "array", items: { type: "string" }, description: "The words." },
      separator: { type: "string" },
    },
    required: ["words"],
  },
  run(input) {
    return input.words.join(input.separator ?? " ");
  },
};
