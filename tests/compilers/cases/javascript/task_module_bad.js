export default {
  name: "task_module_bad",
  description: "Transcode a file.",
  task: true,
  inputSchema: { type: "object", properties: {} },
  async run() {
    return "x";
  },
};
