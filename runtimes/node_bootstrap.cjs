// toolexec: load a JavaScript (or TypeScript) tool and call `run` with its dialect's convention.
// Invoked as `node node_bootstrap.cjs TOOL_PATH` with {"arguments", "convention", "order", "export", "function"}
// ("function": one export of an agent's multi-function tools.js, called instead of `run`)
// on stdin (a regular file). Works under node, bun, deno and tsx alike.
//
// CommonJS, not an ES module: node starts a CommonJS entry without its ESM loader (~4 ms of every call);
// the tool itself is still loaded by import(), with every hook and resolution rule an ESM entry has.
"use strict";
const { existsSync, readFileSync, writeFileSync } = require("node:fs");
const { fileURLToPath, pathToFileURL } = require("node:url");

// A pre-warmed spare (toolexec.runtimes.warm_node): started ahead of its call with the tool imported; it says so on
// its ready descriptor, then reads its one call (environment, working directory, request) on stdin. Its value names
// the ready and progress descriptors ("READY:PROGRESS").
const spare = process.env.TOOLEXEC_NODE_SPARE;
delete process.env.TOOLEXEC_NODE_SPARE;

// The private channel on which a failure is reported to toolexec; removed from the environment
// so that nothing the tool starts inherits it (a spare's comes with its call).
let failureFile = process.env.TOOLEXEC_FAILURE_FILE;
delete process.env.TOOLEXEC_FAILURE_FILE;

// Where node keeps the compiled code of the modules the tool loads, from one call to the next (Node >= 22.1).
const compileCache = process.env.TOOLEXEC_NODE_COMPILE_CACHE;
delete process.env.TOOLEXEC_NODE_COMPILE_CACHE;
if (compileCache) require("node:module").enableCompileCache?.(compileCache);

// The call's file size bound (RLIMIT_FSIZE): node cannot set it, so toolexec sets it on this process once it has
// started, and no line of the tool runs before it holds, soft and hard (read back from /proc/self/limits).
const fileLimit = process.env.TOOLEXEC_FILE_LIMIT;
delete process.env.TOOLEXEC_FILE_LIMIT;
if (fileLimit !== undefined) awaitFileLimit(fileLimit);

function awaitFileLimit(limit) {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + 5000;
  for (;;) {
    const line = readFileSync("/proc/self/limits", "utf8").match(/^Max file size\s+(\S+)\s+(\S+)/m);
    if (line && line[1] === limit && line[2] === limit) return;
    if (Date.now() > until) {
      process.stderr.write("toolexec: cannot bound the size of the files the tool writes\n");
      process.exit(70);
    }
    Atomics.wait(pause, 0, 0, 1);
  }
}

function report(type, message, stack = "") {
  if (failureFile) writeFileSync(failureFile, JSON.stringify({ type, message, stack }));
}

function fail(error) {
  const isError = error instanceof Error;
  const message = isError ? `${error.name}: ${error.message}` : String(error);
  process.stderr.write(`${error?.stack ?? message}\n`);
  report(isError ? error.name : null, isError ? error.message : String(error), error?.stack ?? "");
  process.exit(1);
}

function render(value) {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

// An ES module's top-level await on a promise nothing will settle ends node with status 13 and a warning; here the
// event loop would just drain, so the same end is made explicit (unless the tool listens for it itself).
process.once("beforeExit", () => {
  if (process.listenerCount("beforeExit") > 0) return;
  const message = "the tool's run() (or its module) awaited a promise that nothing will settle";
  process.stderr.write(`toolexec: ${message}\n`);
  report(null, message);
  process.exit(13);
});

async function main() {
  const tool = spare === undefined ? null : await warmUp(spare);
  const request = spare === undefined ? JSON.parse(readFileSync(0, "utf8")) : takeCall();
  const { arguments: args, convention, order = [], export: form = "named", function: named = null } = request;
  return call(tool ?? (await load()), request, args, convention, order, form, named);
}

async function load() {
  try {
    return await import(pathToFileURL(process.argv[2]).href);
  } catch (error) {
    fail(error);
  }
}

// A spare: import the tool, then say "R" on the ready descriptor ("F" and why, should the import fail: the call then
// runs cold, where the failure is reported as the call's). A "lazy" one (a one-shot run's, toolexec.node_early)
// imports the tool only once it has its call, as a cold call does.
//
// With the "R" go the files the import loaded (NUL-separated; runtimes/loaded.py): toolexec looks at them before
// the call and starts another spare should one have changed. A node that cannot say which files it loads (no
// module.registerHooks: Node < 22.15), or that runs under a loader, imports the tool only once it has its call, as
// a lazy spare does.
async function warmUp(descriptors) {
  const [ready, progress, lazy] = descriptors.split(":");
  const { closeSync, writeSync } = require("node:fs");
  const { registerHooks } = require("node:module");
  let tool = null;
  const files = new Set();
  // (Under a loader of its own, tsx's, the hooks would meet its: such a spare imports once it has its call.)
  const loader = process.execArgv.some((flag) => /^--(import|loader|experimental-loader|require)\b|^-r$/.test(flag));
  if (lazy !== "lazy" && typeof registerHooks === "function" && !loader) {
    const own = require("node:path").resolve(process.argv[2]); // (not a file of its own: its text keys its server)
    const hooks = registerHooks({
      resolve: (specifier, context, nextResolve) => noted(specifier, context, nextResolve(specifier, context), files, own),
    });
    try {
      tool = await import(pathToFileURL(process.argv[2]).href);
    } catch (error) {
      writeSync(Number(ready), `F${error?.message ?? error}\0\0`); // (the word's end: a child the import started holds the pipe)
      process.exit(0);
    } finally {
      hooks.deregister?.();
    }
  }
  writeSync(Number(ready), `${["R", ...files].join("\0")}\0\0`); // (ends with two NULs: toolexec.runtimes.loaded)
  closeSync(Number(ready));
  spareProgress = Number(progress);
  return tool;
}

// A module the import resolved: its file (outside node_modules, like site-packages for Python), and the path it was
// named by when that is another (a symlink: node runs the file it points to, which a new link changes).
// Nothing in here may require(): the hook would resolve that too.
function noted(specifier, context, resolved, files, own) {
  const local = (path) => !path.includes("/node_modules/") && path !== own && files.add(path);
  if (resolved?.url?.startsWith("file:")) local(fileURLToPath(resolved.url));
  if (/^\.{0,2}\//.test(specifier) && context.parentURL?.startsWith("file:")) {
    const named = fileURLToPath(new URL(specifier, context.parentURL));
    if (existsSync(named)) local(named);
  }
  return resolved;
}

let spareProgress = -1;

// The spare's call: nothing came (its server closed) ends it; else it joins the call's cgroup (or, alone in a PID
// namespace of its own, sets that namespace's pid_max: root's cap on Linux 6.14 on), takes the call's environment and
// working directory, and goes on as a cold call would (toolexec has set its limits already).
function takeCall() {
  const text = readFileSync(0, "utf8");
  if (text === "") process.exit(0);
  const { env, cwd, cgroup = null, pidMax = null, progress = false, request } = JSON.parse(text);
  if (pidMax !== null) {
    try {
      writeFileSync("/proc/sys/kernel/pid_max", String(pidMax));
    } catch {} // best effort, as a cold call's: the baseline never refuses a call
  }
  if (cgroup !== null) {
    try {
      writeFileSync(`${cgroup}/tasks`, "0"); // this thread, which starts every process of the tool
    } catch {} // best effort, as a cold call's join: the baseline never refuses a call
  }
  for (const name of Object.keys(process.env)) if (!Object.hasOwn(env, name)) delete process.env[name];
  Object.assign(process.env, env);
  failureFile = process.env.TOOLEXEC_FAILURE_FILE;
  delete process.env.TOOLEXEC_FAILURE_FILE;
  delete process.env.TOOLEXEC_NODE_COMPILE_CACHE; // the spare's own start used it
  const limit = process.env.TOOLEXEC_FILE_LIMIT;
  delete process.env.TOOLEXEC_FILE_LIMIT;
  if (limit !== undefined) awaitFileLimit(limit);
  process.chdir(cwd);
  if (!progress && spareProgress >= 0) require("node:fs").closeSync(spareProgress);
  return request;
}

async function call(tool, request, args, convention, order, form, named) {
  const holder = form === "default" ? tool.default : form === "tool" ? tool.tool : tool;
  // `export default function run` (the flat and llm-functions dialects): the default export is run itself.
  const run = named !== null ? (tool[named] ?? tool.default?.[named])
    : holder?.run ?? tool.default?.run ?? (form === "named" && typeof tool.default === "function" ? tool.default : undefined);
  if (typeof run !== "function") fail(new Error(`${process.argv[2]} does not export a ${named ?? "run"} function`));

  let value;
  try {
    if (convention === "positional") {
      value = await run(...order.map((name) => (Object.hasOwn(args, name) ? args[name] : undefined)));
    } else if (convention === "object") {
      value = await run(args);
    } else {
      const context = { toolCallId: process.env.LLM_TOOL_CALL_ID, toolName: process.env.LLM_TOOL_NAME, now: new Date() };
      value = await run.call(holder, args, context);
    }
  } catch (error) {
    fail(error);
  }
  if (value && typeof value === "object" && typeof value.ok === "boolean" && Object.keys(value).every((k) => ["ok", "output", "error"].includes(k))) {
    // The {ok, output, error} convention: ok=false is a failed call.
    if (!value.ok) {
      const message = render(value.error) || "the tool reported failure";
      process.stderr.write(`${message}\n`);
      report(null, message);
      process.exit(1);
    }
    value = value.output;
  }
  let text;
  try {
    text = render(value);
  } catch (error) {
    // a cycle, a BigInt: say so instead of dying in the bootstrap
    fail(new TypeError(`run() returned a value that cannot be written as JSON: ${error?.message ?? error}`));
  }
  // A returned value replaces what the tool wrote to LLM_OUTPUT, as Loki's runner does.
  if (value !== undefined && value !== null) writeFileSync(process.env.LLM_OUTPUT, text);
  // The result is written: timers and sockets the tool left open do not keep the call running.
  process.exit(0);
}

main().catch(fail);
