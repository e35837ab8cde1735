export default {
  name: "m",
  description: "A module tool with a bad sandbox.",
  inputSchema: { type: "object", properties: {} },
  sandbox: { network: "none", writez: ["cache"], memory: "a lot" },
  run: async () => "hi",
};
