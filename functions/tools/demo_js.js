/**
 * A demonstration JavaScript tool in the llm-functions style: one object argument.
 * It returns a JSON object describing what it received.
 * @typedef {Object} Args
 * @property {string} text - Any text.
 * @property {Integer} [count=1] - How many times to repeat it.
 * @property {'calm'|'busy'} [mood] - One of a fixed set of moods.
 * @property {string[]} [tags] - Labels to echo back.
 * @property {boolean} [loud] - Shout the text.
 * @param {Args} args
 * @title JavaScript demonstration
 * @tags demo
 * @readOnly
 * @openWorld false
 * @example {"text": "hello", "count": 2}
 */
exports.run = async function run({ text, count = 1, mood = "calm", tags = [], loud = false }) {
  const said = Array(count).fill(loud ? text.toUpperCase() : text).join(" ");
  return { said, mood, tags, tool: process.env.LLM_TOOL_NAME };
};
