export default {
  name: "m",
  description: "A module tool.",
  inputSchema: { type: "object", properties: {} },
  sandbox: { network: "none", writes: ["cache"], fileSize: "10MiB", memory: 1048576 },
  run: async () => "hi",
};
