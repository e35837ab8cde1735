export const meta = {
  name: "meta_form",
  description: "Meta object plus an exported run.",
  inputSchema: { type: "object", properties: { n: { type: "integer", minimum: 0 } }, required: ["n"] },
};

export async function run(input, context) {
  return input.n * 2;
}
