// Parse JSON text and pick out one value by a dot path. Keys that could reach an object's prototype
// (__proto__, constructor, prototype) are dropped while parsing, so nothing downstream can be polluted
// through them and a path cannot walk into them.

const BLOCKED = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Parse a JSON string and return the value at a dot path (the whole document without one), as JSON.
 * Path parts are object keys or array indexes: "users.1.name". The keys __proto__, constructor and
 * prototype are dropped.
 * @typedef {Object} Args
 * @property {string} json - The JSON text to parse.
 * @property {string} [path] - A dot path into the parsed value, e.g. "users.1.name"; empty for the whole value.
 * @param {Args} args
 * @title Parse JSON
 * @summary Parse JSON text and return the value at a dot path.
 * @tags json, data
 * @readOnly
 * @destructive false
 * @idempotent
 * @openWorld false
 * @example {"json": "{\"users\": [{\"name\": \"Ada\"}, {\"name\": \"Lin\"}]}", "path": "users.1.name"}
 * @example {"json": "[1, 2, 3]"}
 * @error invalid JSON: the text does not parse (the parser's message says where)
 * @error path not found: names the part of the path that failed and what was there instead
 */
exports.run = function run({ json, path = "" }) {
  let value;
  try {
    value = JSON.parse(json, (key, item) => (BLOCKED.has(key) ? undefined : item));
  } catch (error) {
    return { ok: false, error: `invalid JSON: ${error.message}` };
  }
  const parts = path === "" ? [] : path.split(".");
  for (const [index, part] of parts.entries()) {
    const walked = parts.slice(0, index).join(".") || "(the top level)";
    const found = step(value, part);
    if (!found.ok) {
      return { ok: false, error: `path not found: '${parts.slice(0, index + 1).join(".")}': ${found.why} at ${walked}` };
    }
    value = found.value;
  }
  return JSON.stringify(value, null, 2);
};

/** One step down the path: an own key of an object or an index of an array. */
function step(value, part) {
  if (Array.isArray(value)) {
    if (!/^(0|[1-9]\d*)$/.test(part)) return { ok: false, why: `'${part}' is not an index of the array` };
    const index = Number(part);
    if (index >= value.length) {
      return { ok: false, why: `index ${index} is past the end of the array of ${value.length} item(s)` };
    }
    return { ok: true, value: value[index] };
  }
  if (value !== null && typeof value === "object") {
    if (!Object.hasOwn(value, part)) {
      const keys = Object.keys(value);
      const listed = keys.length ? `keys: ${keys.slice(0, 20).join(", ")}${keys.length > 20 ? ", …" : ""}` : "the object is empty";
      return { ok: false, why: `no key '${part}' (${listed})` };
    }
    return { ok: true, value: value[part] };
  }
  return { ok: false, why: `cannot look up '${part}' in ${value === null ? "null" : typeof value}` };
}
