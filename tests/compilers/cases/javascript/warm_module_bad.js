export default {
  name: "warm_module_bad",
  description: "Keep a cache.",
  warm: 3,
  inputSchema: { type: "object", properties: {} },
  run() {
    return 1;
  },
};
