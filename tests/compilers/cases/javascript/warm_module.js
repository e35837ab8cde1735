export default {
  name: "warm_module",
  description: "Keep a cache.",
  warm: "shared",
  inputSchema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
  async run({ key }) {
    return key;
  },
};
