export default {
  name: "bad name!",
  description: "The name field is validated.",
  inputSchema: { type: "object", properties: {} },
  run() {},
};
