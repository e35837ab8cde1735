// Parse JSON text and pick out one value by a dot path. The parser is our own, not JSON.parse: numbers
// keep the exact text they were written with (1e400, 18446744073709551617 and -0 come back as given,
// never as null or rounded), and it keeps its own stack, so a deeply nested valid document is read
// whatever its depth. Keys that could reach an object's prototype (__proto__, constructor, prototype)
// are dropped while parsing, so nothing downstream can be polluted through them and a path cannot walk
// into them; objects are Maps, which have no prototype keys to pollute anyway.

const BLOCKED = new Set(["__proto__", "constructor", "prototype"]);

/**
 * Parse a JSON string and return the value at a dot path (the whole document without one), as JSON.
 * Path parts are object keys or array indexes: "users.1.name". Numbers are returned exactly as written
 * (no rounding), documents of any depth are read, and the keys __proto__, constructor and prototype are
 * dropped. The result is indented by two spaces, or compact when the value nests more than 64 levels.
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
  let parsed;
  try {
    parsed = parse(json);
  } catch (error) {
    if (!(error instanceof JsonError)) throw error;
    return { ok: false, error: `invalid JSON: ${error.message}` };
  }
  let value = parsed;
  const parts = path === "" ? [] : path.split(".");
  for (const [index, part] of parts.entries()) {
    const walked = parts.slice(0, index).join(".") || "(the top level)";
    const found = step(value, part);
    if (!found.ok) {
      return { ok: false, error: `path not found: '${parts.slice(0, index + 1).join(".")}': ${found.why} at ${walked}` };
    }
    value = found.value;
  }
  return render(value, !nestsDeeper(value, PRETTY_DEPTH));
};

const PRETTY_DEPTH = 64; // deeper values are written compact: indentation would grow with the square of the depth

/** A number as written in the document. */
class Num {
  constructor(text) {
    this.text = text;
  }
}

class JsonError extends Error {}

const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const LITERALS = [
  ["true", true],
  ["false", false],
  ["null", null],
];

/** Parse ``text`` with an explicit stack; JsonError says what is wrong and where. */
function parse(text) {
  let at = 0;
  const stack = []; // open containers: {items: Array} or {entries: Map, key: string}
  const space = () => {
    while (at < text.length && " \t\n\r".includes(text[at])) at++;
  };
  const fail = (what) => {
    const before = text.slice(0, at);
    const line = before.split("\n").length;
    const column = at - before.lastIndexOf("\n");
    const found = at < text.length ? `found ${JSON.stringify(text[at])}` : "found the end of the text";
    throw new JsonError(`${what}, ${found} at position ${at} (line ${line}, column ${column})`);
  };
  const string = () => {
    STRING.lastIndex = at;
    if (!STRING.test(text)) {
      at++;
      while (at < text.length && text[at] !== '"' && text[at] !== "\\" && text.charCodeAt(at) >= 0x20) at++;
      if (at >= text.length) fail("the string never ends");
      if (text[at] === "\\") fail("a string holds an invalid escape");
      fail("a string holds a control character (escape it)");
    }
    const start = at;
    at = STRING.lastIndex;
    const inner = text.slice(start + 1, at - 1);
    return inner.includes("\\") ? JSON.parse(text.slice(start, at)) : inner;
  };
  const key = () => {
    space();
    if (text[at] !== '"') fail("expected a key in double quotes");
    const name = string();
    space();
    if (text[at] !== ":") fail(`expected ':' after the key ${JSON.stringify(name)}`);
    at++;
    return name;
  };
  for (;;) {
    // One value, or the opening of a container whose first value comes next.
    space();
    let value;
    const char = text[at];
    if (char === "{" || char === "[") {
      at++;
      space();
      const object = char === "{";
      if (text[at] === (object ? "}" : "]")) {
        at++;
        value = object ? new Map() : [];
      } else {
        stack.push(object ? { entries: new Map(), key: key() } : { items: [] });
        continue;
      }
    } else if (char === '"') {
      value = string();
    } else if (char === "-" || (char >= "0" && char <= "9")) {
      NUMBER.lastIndex = at;
      const start = at;
      if (NUMBER.test(text)) at = NUMBER.lastIndex;
      if (at === start || /[0-9.eE+-]/.test(text[at] ?? "")) fail("invalid number");
      value = new Num(text.slice(start, at));
    } else {
      const literal = LITERALS.find(([word]) => text.startsWith(word, at));
      if (!literal) fail(at >= text.length ? "expected a value" : "expected a value (an object, array, string, number, true, false or null)");
      at += literal[0].length;
      value = literal[1];
    }
    // Hand the value to the containers it completes.
    for (;;) {
      const open = stack[stack.length - 1];
      if (!open) {
        space();
        if (at < text.length) fail("unexpected text after the JSON value");
        return value;
      }
      if (open.items) open.items.push(value);
      else if (!BLOCKED.has(open.key)) open.entries.set(open.key, value);
      space();
      const close = open.items ? "]" : "}";
      if (text[at] === ",") {
        at++;
        if (!open.items) open.key = key();
        break;
      }
      if (text[at] !== close) fail(`expected ',' or '${close}'`);
      at++;
      stack.pop();
      value = open.items ?? open.entries;
    }
  }
}

/** ``value`` as JSON text (numbers as written), indented by two spaces when ``pretty``; no recursion. */
function render(value, pretty) {
  let out = "";
  const stack = []; // {items, keys, index, close}
  const indents = [""];
  const newline = (level) => {
    if (!pretty) return "";
    while (indents.length <= level) indents.push(indents[indents.length - 1] + "  ");
    return "\n" + indents[level];
  };
  let next = { value };
  for (;;) {
    if (next) {
      const item = next.value;
      next = null;
      if (item instanceof Map && item.size) {
        out += "{";
        stack.push({ items: item, keys: [...item.keys()], index: 0, close: "}" });
      } else if (Array.isArray(item) && item.length) {
        out += "[";
        stack.push({ items: item, keys: null, index: 0, close: "]" });
      } else {
        out += scalar(item);
      }
    }
    const open = stack[stack.length - 1];
    if (!open) return out;
    const length = open.keys ? open.keys.length : open.items.length;
    if (open.index < length) {
      out += (open.index ? "," : "") + newline(stack.length);
      const index = open.index++;
      if (open.keys) {
        const key = open.keys[index];
        out += JSON.stringify(key) + (pretty ? ": " : ":");
        next = { value: open.items.get(key) };
      } else {
        next = { value: open.items[index] };
      }
    } else {
      stack.pop();
      out += newline(stack.length) + open.close;
    }
  }
}

/** Whether containers nest more than ``limit`` levels deep in ``value``. */
function nestsDeeper(value, limit) {
  const pending = [[value, 0]];
  while (pending.length) {
    const [item, level] = pending.pop();
    const children = item instanceof Map ? [...item.values()] : Array.isArray(item) ? item : null;
    if (!children || !children.length) continue;
    if (level + 1 > limit) return true;
    for (const child of children) if (child instanceof Map || Array.isArray(child)) pending.push([child, level + 1]);
  }
  return false;
}

function scalar(value) {
  if (value instanceof Num) return value.text;
  if (value instanceof Map) return "{}";
  if (Array.isArray(value)) return "[]";
  return JSON.stringify(value);
}

function kind(value) {
  if (value === null) return "null";
  if (value instanceof Num) return "number";
  return typeof value;
}

/** One step down the path: a key of an object or an index of an array. */
function step(value, part) {
  if (Array.isArray(value)) {
    if (!/^(0|[1-9]\d*)$/.test(part)) return { ok: false, why: `'${part}' is not an index of the array` };
    const index = Number(part);
    if (index >= value.length) {
      return { ok: false, why: `index ${index} is past the end of the array of ${value.length} item(s)` };
    }
    return { ok: true, value: value[index] };
  }
  if (value instanceof Map) {
    if (!value.has(part)) {
      const keys = [...value.keys()];
      const listed = keys.length ? `keys: ${keys.slice(0, 20).join(", ")}${keys.length > 20 ? ", …" : ""}` : "the object is empty";
      return { ok: false, why: `no key '${part}' (${listed})` };
    }
    return { ok: true, value: value.get(part) };
  }
  return { ok: false, why: `cannot look up '${part}' in ${kind(value)}` };
}
