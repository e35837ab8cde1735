const NAMES = ["LLM_AGENT_NAME", "LLM_AGENT_FUNC", "LLM_AGENT_ROOT_DIR", "LLM_AGENT_CACHE_DIR", "LLM_ROOT_DIR",
  "LLM_AGENT_RAW_JSON", "LLM_AGENT_VAR_OWNER", "LLM_AGENT_VAR_CURRENCY", "ROOT_ENV", "AGENT_ENV", "SHARED_ENV"];

/**
 * Add an expense to the ledger.
 * The amount is in the ledger's currency.
 * @typedef {Object} Args
 * @property {string} item - What was bought
 * @property {integer} amount - The price, in cents
 * @property {'food'|'rent'|'other'} [category] - Where it goes
 * @property {string[]} [tags] - Labels for the entry
 * @property {boolean} [refund] - Whether it is money back
 * @param {Args} args
 */
exports.add_entry = function (args) {
  return args;
};

/**
 * Report what the ledger's functions see of their environment.
 */
exports.show_env = async function () {
  const lines = NAMES.map((name) => `${name}=${process.env[name] ?? ""}\n`);
  lines.push(`PATH=${process.env.PATH}\n`);
  return lines.join("");
};

/**
 * Total of the ledger
 * @typedef {Object} Args
 * @property {string} [since] Only entries from this day on
 * @param {Args} args
 */
exports.total = function (args) {
  return _format(`0 ${process.env.LLM_AGENT_VAR_CURRENCY}`);
};

function _format(text) {
  return `total: ${text}\n`;
}

exports._instructions = async function () {
  return `You keep the ledger of ${process.env.LLM_AGENT_VAR_OWNER}.`;
};
