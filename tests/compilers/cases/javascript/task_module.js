export default {
  name: "task_module",
  description: "Transcode a file.",
  task: "optional",
  inputSchema: { type: "object", properties: { file: { type: "string" } }, required: ["file"] },
  async run({ file }) {
    return `transcoded ${file}`;
  },
};
