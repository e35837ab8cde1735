export default {
  name: "fetch_page",
  title: "Fetch a web page",
  description: "Fetch a web page and return its text.\nScripts are not run.",
  summary: "Fetch a page's text.",
  tags: ["web", "read"],
  inputSchema: {
    type: "object",
    properties: { url: { type: "string" }, timeout: { type: "number" } },
    required: ["url"],
  },
  examples: [{ url: "https://example.org" }, { url: "https://example.org/a", timeout: 5 }],
  errors: ["unreachable: the host did not answer", "not text: the page is binary"],
  annotations: { readOnlyHint: true, openWorldHint: true, idempotentHint: false },
  outputSchema: {
    type: "object",
    properties: { status: { type: "integer" }, text: { type: "string" } },
    required: ["status", "text"],
  },
  async run(input, context) {
    return { status: 200, text: "" };
  },
};
