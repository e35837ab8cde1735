export default {
  name: "scope_module",
  description: "Push a repository.",
  scope: ["repo:write"],
  inputSchema: { type: "object", properties: { repo: { type: "string" } }, required: ["repo"] },
  run({ repo }) {
    return repo;
  },
};
