// toolexec: transpile TypeScript files with node's own stripTypeScriptTypes (Node >= 22.13).
// Invoked as `node --no-warnings node_transpile.mjs` with [{"source", "code", "out"}, ...] on stdin;
// writes each file's JavaScript to its "out". Exits 3 when this node has no stripTypeScriptTypes.
import * as nodeModule from "node:module";
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

if (typeof nodeModule.stripTypeScriptTypes !== "function") process.exit(3);
for (const { source, code, out } of JSON.parse(readFileSync(0, "utf8"))) {
  let js;
  try {
    js = nodeModule.stripTypeScriptTypes(code, { mode: "transform", sourceUrl: pathToFileURL(source).href });
  } catch (error) {
    process.stderr.write(`${source}: ${error?.message ?? error}\n`);
    process.exit(1);
  }
  writeFileSync(out, js, { flag: "wx", mode: 0o644 });
}
