export default {
  name: "get_time",
  description: "Tell the time in a time zone.",
  inputSchema: {
    type: "object",
    properties: { tz: { type: "string", description: "IANA zone, e.g. Europe/Lisbon." } },
    required: ["tz"],
  },
  async run(input, context) {
    return new Date().toLocaleString("en-GB", { timeZone: input.tz });
  },
};
