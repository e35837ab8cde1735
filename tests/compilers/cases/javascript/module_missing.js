const schema = { type: "object" };
export default {
  name: "incomplete",
  inputSchema: schema,
};
