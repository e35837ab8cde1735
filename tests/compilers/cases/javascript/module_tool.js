export const tool = {
  name: "ns:echo.v1",
  description: "Echo the input back.",
  args: { type: "object", properties: { text: { type: "string" } } },
  run: async (input) => input.text,
};
