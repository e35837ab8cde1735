export const name = "word_count";
export const description = "Count the words of a text.";
export const inputSchema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };
export const annotations = { readOnlyHint: true, fastHint: true };
export const tag = ["text"];

export async function run(input) {
  return input.text.split(/\s+/).length;
}
