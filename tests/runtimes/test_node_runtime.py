"""JavaScript and TypeScript tools end to end with real node: every convention, errors, caching."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project, wrapper_interpreter
from tests.helpers import close_warm
from toolexec.state import State

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py): a node spare per call

FLAT_TS = """
/**
 * Describe the call.
 * @param city - The city.
 * @param {integer} days - Days.
 */
export async function run(city: string, days: number = 3, units?: "c" | "f"): Promise<object> {
  await new Promise((resolve) => setTimeout(resolve, 1));
  return { city, days, units: units ?? "unset", id: process.env.LLM_TOOL_CALL_ID };
}
"""
OBJECT_JS = """
/**
 * Object-argument tool.
 * @typedef {Object} Args
 * @property {string} text - Text.
 * @property {Integer} [count=2] - Count.
 * @param {Args} args
 */
exports.run = function ({ text, count }) {
  return `${text}:${count ?? "none"}`;
};
"""
FLAT_JS = """
/**
 * Flat JS.
 * @param {string} a - A.
 * @param {number} [b] - B.
 */
export function run(a, b = 5) {
  return [a, b];
}
"""
MODULE_DEFAULT = """
export default {
  name: "mod_default",
  description: "Module tool.",
  inputSchema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  async run(input, context) {
    return { q: input.q, id: context.toolCallId, now: context.now instanceof Date, self: this.name };
  },
};
"""
MODULE_META = """
export const meta = { name: "mod_meta", description: "Meta form.", inputSchema: { type: "object", properties: { n: { type: "integer" } } } };
export function run(input, context) {
  return input.n * 2;
}
"""
MODULE_TOOL = """
export const tool = {
  name: "mod_tool",
  description: "Tool form.",
  args: { type: "object", properties: { fail: { type: "boolean" } } },
  run: async (input) => (input.fail ? { ok: false, error: "no luck" } : { ok: true, output: "fine" }),
};
"""


def test_each_calling_convention(project: Project) -> None:
    project.tool("flat_ts.ts", FLAT_TS)
    project.tool("object_js.js", OBJECT_JS)
    project.tool("flat_js.mjs", FLAT_JS)
    project.tool("default.mjs", MODULE_DEFAULT)
    project.tool("meta.mjs", MODULE_META)
    project.tool("tool.mjs", MODULE_TOOL)
    executor = project.executor()
    assert json.loads(executor.call("flat_ts", {"city": "Porto"}, call_id="c7").output) == {
        "city": "Porto",
        "days": 3,
        "units": "unset",
        "id": "c7",
    }
    assert json.loads(executor.call("flat_ts", {"city": "Porto", "units": "f", "days": 1}).output)["units"] == "f"
    assert executor.call("object_js", {"text": "t"}).output == "t:2"  # the JSDoc's [count=2] applied
    assert executor.call("object_js", {"text": "t", "count": 4}).output == "t:4"
    assert executor.call("flat_js", {"a": "x"}).output == '["x",5]'
    assert json.loads(executor.call("mod_default", {"q": "z"}, call_id="c8").output) == {
        "q": "z",
        "id": "c8",
        "now": True,
        "self": "mod_default",
    }
    assert executor.call("mod_meta", {"n": 21}).output == "42"
    assert executor.call("mod_tool", {}).output == "fine"
    failed = executor.call("mod_tool", {"fail": True})
    assert (failed.ok, failed.exit_code, failed.error) == (False, 1, "Tool call 'mod_tool' exited with code 1: no luck")


def test_enum_parameters_arrive_as_the_enum_values(project: Project) -> None:
    project.tool(
        "convert.ts",
        'enum Units { C = "c", F = "f" }\nenum Level { Low, High }\n'
        "/** Convert. */\nexport function run(units: Units, level: Level = Level.High): string {\n"
        '  return `${units === Units.F ? "fahrenheit" : "celsius"} ${Level[level]}`;\n}\n',
    )
    executor = project.executor()
    assert executor.call("convert", {"units": "f"}).output == "fahrenheit High"
    assert executor.call("convert", {"units": "c", "level": 0}).output == "celsius Low"
    refused = executor.call("convert", {"units": "k"})
    assert (refused.status, refused.error) == (
        "refused",
        'invalid arguments for tool \'convert\':\n- parameter \'units\': expected one of "c", "f", got "k"',
    )


def test_thrown_error_is_a_failed_result(project: Project) -> None:
    project.tool("throws.ts", '/** Throw. */\nexport function run(): string {\n  throw new TypeError("bad input shape");\n}\n')
    result = project.executor().call("throws", {})
    assert (result.ok, result.exit_code) == (False, 1)
    assert result.error == "Tool call 'throws' exited with code 1: TypeError: bad input shape"
    assert result.stderr.startswith("TypeError: bad input shape\n    at run")


NEVER_SETTLED = "the tool's run() (or its module) awaited a promise that nothing will settle"


@pytest.mark.parametrize(
    ("file", "source"),
    [
        ("hangs.mjs", "/** Hang. */\nexport function run() {\n  return new Promise(() => {});\n}\n"),
        ("stuck.ts", "await new Promise(() => {});\n/** Stuck module. */\nexport function run(): string {\n  return 'x';\n}\n"),
    ],
    ids=["run", "module"],
)
def test_a_promise_nothing_settles_is_a_failed_call_not_an_empty_success(project: Project, file: str, source: str) -> None:
    """As node ends an ES module's unsettled top-level await: status 13 and why, never an empty "ok"."""
    project.tool(file, source)
    result = project.executor().call(file.split(".")[0], {})
    assert (result.status, result.exit_code, result.output, result.stderr) == ("error", 13, "", f"toolexec: {NEVER_SETTLED}\n")
    assert result.error == f"Tool call '{file.split('.')[0]}' exited with code 13: {NEVER_SETTLED}"


def test_a_tool_that_settles_its_promise_before_exit_still_succeeds(project: Project) -> None:
    """A tool's own beforeExit listener (which may give the event loop more work) runs: toolexec's stands aside."""
    project.tool(
        "late.mjs",
        "/** Late. */\nexport function run() {\n"
        "  return new Promise((resolve) => process.once('beforeExit', () => setTimeout(() => resolve('late'), 1)));\n}\n",
    )
    result = project.executor().call("late", {})
    assert (result.status, result.output, result.stderr) == ("ok", "late", "")


def test_large_and_unicode_arguments(project: Project) -> None:
    project.tool("echo.ts", "/** Echo. */\nexport function run(text: string): string {\n  return text;\n}\n")
    executor = project.executor(max_output_bytes=32 << 20)
    unicode_text = "naïve café — 日本語 🚀 \"q\" 'q' `b` ${x} \\ \n\n"
    assert executor.call("echo", {"text": unicode_text}).output == unicode_text
    big = "é✓x" * (10 * 1024 * 1024 // 6)
    assert executor.call("echo", {"text": big}).output == big


def test_typescript_cache_is_never_stale(project: Project) -> None:
    """Cold and warm alike: a warm spare runs the transpile (an esbuild bundle holds the siblings too), keyed by its
    text, so an edited sibling starts a new server (session 11: the key was the tool's own source, and the warm call
    after the edit ran the old sibling whenever its spare had been started before the edit)."""
    helper = project.tool("helper.ts", 'export const greeting: string = "hello";\n')
    project.tool(
        "greet.ts",
        'import { greeting } from "./helper";\n/** Greet. */\nexport function run(name: string): string {\n  return `${greeting} ${name}`;\n}\n',
    )
    executor = project.executor(["greet.ts"])
    assert executor.call("greet", {"name": "ana"}).output == "hello ana"
    helper.write_text('export const greeting: string = "goodbye";\n')
    os.utime(helper, ns=(0, 10**9))  # a different mtime even on coarse clocks
    assert executor.call("greet", {"name": "ana"}).output == "goodbye ana"


def test_concurrent_calls_on_a_cold_transpile_cache(project: Project) -> None:
    """Threads of one executor and separate processes all racing to transpile the same new tool."""
    project.tool("inc.ts", "/** Increment. */\nexport function run(n: number): number {\n  return n + 1;\n}\n")
    executor = project.executor()

    async def together() -> list[str]:
        results = await asyncio.gather(*(executor.acall("inc", {"n": n}) for n in range(8)))
        return [r.output for r in results]

    assert asyncio.run(together()) == [str(n + 1) for n in range(8)]
    cache = State(project.root / "functions").transpile_dir
    shutil.rmtree(cache)
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "toolexec", "--config", str(project.config), "run", "inc", f'{{"n": {n}}}'],
            stdout=subprocess.PIPE,
        )
        for n in range(4)
    ]
    assert [run.communicate(timeout=60)[0] for run in runs] == [str(n + 1).encode() for n in range(4)]
    assert sorted(p.suffixes[-1] for p in cache.iterdir()) == [".json", ".mjs"]  # no staging file left


def test_a_tool_esbuild_cannot_bundle_says_why(project: Project) -> None:
    project.tool("lost.ts", 'import { x } from "./missing";\n/** Lost. */\nexport function run(): string {\n  return x;\n}\n')
    result = project.executor().call("lost", {})
    assert (result.status, result.exit_code) == ("unavailable", 127)
    first, *rest = (result.error or "").splitlines()
    assert first.endswith(f"esbuild could not transpile {project.tools / 'lost.ts'}:")
    assert '✘ [ERROR] Could not resolve "./missing"' in rest
    assert sorted(p.name for p in State(project.root / "functions").transpile_dir.iterdir()) == []


def test_shebang_selects_the_runtime(project: Project, tmp_path: Path) -> None:
    wrapper = wrapper_interpreter(tmp_path, "my-node", "node")
    body = '/** Which runtime. */\nexport function run() {\n  return process.env.VIA_WRAPPER ?? "no";\n}\n'
    project.tool("custom.mjs", f"#!{wrapper}\n{body}")
    project.tool("plain.mjs", body)
    executor = project.executor()
    assert executor.call("custom", {}).output == "yes"
    assert executor.call("plain", {}).output == "no"


WHICH_RUNTIME_TS = """
enum Greeting { Hello = "hello" }  // TypeScript-only syntax: the chosen runtime must transpile it
/** Say which runtime ran the tool. */
export function run(name: string): string {
  const g = globalThis as any;
  const who = g.Bun ? "bun" : g.Deno ? "deno" : process.execArgv.join(" ").includes("tsx") ? "tsx" : "node";
  return `${who}: ${Greeting.Hello} ${name}`;
}
"""


@pytest.fixture
def js_runtimes(monkeypatch: pytest.MonkeyPatch) -> Path:
    """bun, deno and tsx as `make test` installs them (npm), put first on PATH like a user's own install."""
    bin_dir = Path(sys.prefix) / "js-runtimes" / "node_modules" / ".bin"
    if not (bin_dir / "deno").exists():
        pytest.skip(f"bun, deno and tsx are not installed in {bin_dir.parent.parent}; run `make test`")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


@pytest.mark.parametrize(
    ("shebang", "runtime"),
    [("#!/usr/bin/env bun", "bun"), ("#!/usr/bin/env -S deno run -A", "deno"), ("#!/usr/bin/env tsx", "tsx"), ("", "node")],
)
def test_shebang_runtime_really_runs_the_typescript(
    project: Project, js_runtimes: Path, shebang: str, runtime: str, private_tmpdir: Path
) -> None:
    project.tool("who.ts", f"{shebang}\n{WHICH_RUNTIME_TS}")
    result = project.executor().call("who", {"name": "zoë"})
    assert (result.status, result.output) == ("ok", f"{runtime}: hello zoë"), result.stderr
    if runtime in ("tsx", "node"):  # whatever the TypeScript path, nothing is left in $TMPDIR (tsx's CLI leaves tsx-<uid>/)
        close_warm()  # a warm pool keeps its files until the executor closes
        assert os.listdir(private_tmpdir) == []


def test_runtimes_config_naming_tsx_or_npx_tsx_leaves_nothing_in_tmpdir(
    project: Project, js_runtimes: Path, private_tmpdir: Path
) -> None:
    project.tool("who.ts", WHICH_RUNTIME_TS)
    for command in ("tsx", "npx tsx"):
        result = project.executor(runtimes={"typescript": command}).call("who", {"name": "zoë"})
        assert (result.status, result.output) == ("ok", "tsx: hello zoë"), result.stderr
        close_warm()  # a warm pool keeps its files until the executor closes
        assert os.listdir(private_tmpdir) == []


SYSTEM_NODE = shutil.which("node", path=os.defpath + os.pathsep + "/usr/local/bin")  # Node 20 here: no type stripping


@pytest.fixture
def no_esbuild(monkeypatch: pytest.MonkeyPatch) -> None:
    """esbuild (the accelerator, installed for the tests) hidden, so the next fallback is what runs."""
    from toolexec.runtimes import typescript

    real = typescript.find_program
    monkeypatch.setattr(typescript, "find_program", lambda name, context: None if name == "esbuild" else real(name, context))


@pytest.fixture
def old_node() -> str:
    if SYSTEM_NODE is None:
        pytest.skip("no system node")
    version = subprocess.run(
        [SYSTEM_NODE, "-p", "typeof require('node:module').stripTypeScriptTypes"], capture_output=True, text=True
    )
    if version.stdout.strip() != "undefined":
        pytest.skip(f"{SYSTEM_NODE} can strip types itself")
    return SYSTEM_NODE


def test_without_esbuild_or_type_stripping_tsx_runs_the_typescript(
    project: Project, js_runtimes: Path, no_esbuild: None, old_node: str, private_tmpdir: Path
) -> None:
    project.tool("who.ts", WHICH_RUNTIME_TS)
    result = project.executor(runtimes={"typescript": old_node}).call("who", {"name": "ana"})
    assert (result.status, result.output) == ("ok", "tsx: hello ana"), result.stderr
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []  # tsx's cache and IPC pipe stay out of $TMPDIR


def test_without_esbuild_stripping_or_tsx_npx_tsx_runs_the_typescript(
    project: Project, js_runtimes: Path, old_node: str, monkeypatch: pytest.MonkeyPatch, isolated: Path, private_tmpdir: Path
) -> None:
    """The last resort, tsx fetched by npx, run for real (offline: npx finds tsx in the working directory's node_modules)."""
    from toolexec.runtimes import typescript

    monkeypatch.setattr(typescript, "find_program", lambda name, context: None)
    (isolated / "node_modules").symlink_to(js_runtimes.parent)
    monkeypatch.setenv("npm_config_offline", "true")
    project.tool("who.ts", WHICH_RUNTIME_TS)
    executor = project.executor(runtimes={"typescript": old_node})
    for name in ("ana", "bo"):  # the second call uses the tsx npx found, without asking npx again
        result = executor.call("who", {"name": name})
        assert (result.status, result.output) == ("ok", f"tsx: hello {name}"), result.stderr
    remembered = State(project.root / "functions").transpile_dir / "npx-tsx.path"
    assert Path(remembered.read_text()).resolve() == (js_runtimes / "tsx").resolve()
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []


NOTHING_TRIED = "esbuild (not found), node's own type stripping ({node} has none; it needs Node >= 22.13), tsx (not found), "
ADVICE = "install the Node extra (pip install 'toolexec[node]') or set runtimes.typescript in config.yaml"


def test_nothing_to_run_typescript_is_unavailable_naming_what_was_tried(
    project: Project, old_node: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, private_tmpdir: Path
) -> None:
    from toolexec.runtimes import typescript

    monkeypatch.setattr(typescript, "find_program", lambda name, context: None)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no npx
    project.tool("who.ts", WHICH_RUNTIME_TS)
    result = project.executor(runtimes={"typescript": old_node}).call("who", {"name": "ana"})
    assert (result.ok, result.status, result.exit_code, result.stderr) == (False, "unavailable", 127, "")
    assert result.error == (
        f"interpreter 'tsx' not found; tried {NOTHING_TRIED.format(node=old_node)}npx tsx (npx not found); {ADVICE}"
    )
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []


def test_npx_offline_is_unavailable_not_a_tool_failure(
    project: Project, old_node: str, monkeypatch: pytest.MonkeyPatch, private_tmpdir: Path
) -> None:
    """npx with an empty cache and no network: no npm log dressed as the tool's error."""
    from toolexec.runtimes import typescript

    if shutil.which("npx") is None:
        pytest.skip("no npx")
    monkeypatch.setattr(typescript, "find_program", lambda name, context: None)
    monkeypatch.setenv("npm_config_offline", "true")  # HOME is private: npm's cache is empty
    project.tool("who.ts", WHICH_RUNTIME_TS)
    result = project.executor(runtimes={"typescript": old_node}).call("who", {"name": "ana"})
    assert (result.status, result.exit_code, result.stderr) == ("unavailable", 127, "")
    assert result.error == (
        f"interpreter 'tsx' not found; tried {NOTHING_TRIED.format(node=old_node)}"
        f"npx tsx (npx could not fetch tsx: npm error code ENOTCACHED); {ADVICE}"
    )
    assert result.tool_call_error == "Tool call 'who' failed: " + result.error
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []


NODE24_TS = """
enum Units { C = "c", F = "f" }
namespace Scale {
  export const factor = 1.8;
}
class Reading {
  constructor(private readonly celsius: number, public units: Units = Units.F) {}
  show(): string {
    return `${this.units === Units.F ? this.celsius * Scale.factor + 32 : this.celsius}${this.units}`;
  }
}
/** Convert. */
export function run(celsius: number): string {
  return `${process.version.split(".")[0]} ${new Reading(celsius).show()}`;
}
"""


@pytest.fixture
def node_extra() -> str:
    from toolexec.runtimes.interpreter import bundled_node

    node = bundled_node()
    if node is None:
        pytest.skip("the Node extra is not installed; run `make test`")
    return node


def test_the_node_extra_is_the_default_and_strips_types_itself(
    project: Project, node_extra: str, no_esbuild: None, private_tmpdir: Path
) -> None:
    project.tool("convert.ts", NODE24_TS)
    project.tool("version.mjs", "/** Version. */\nexport function run() {\n  return process.execPath;\n}\n")
    executor = project.executor()
    assert executor.call("convert", {"celsius": 100}).output == "v24 212f"
    assert executor.call("version", {}).output == node_extra
    cache = State(project.root / "functions").transpile_dir
    assert sorted(p.suffix for p in cache.iterdir()) == [".json", ".mjs"]
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []


def test_type_stripping_resolves_sibling_imports_and_notices_their_edits(
    project: Project, node_extra: str, no_esbuild: None
) -> None:
    helper = project.tool("helper.ts", 'export enum Mood { Happy = "happy" }\nexport const greeting: string = "hello";\n')
    project.tool("plain.js", "export const punctuation = '!';\n")
    (project.tools / "lib").mkdir()
    project.tool("lib/index.ts", 'import { Mood } from "../helper.js";\nexport const mood = (): string => Mood.Happy;\n')
    project.tool(
        "greet.ts",
        'import { greeting } from "./helper";\nimport { punctuation } from "./plain.js";\nimport { mood } from "./lib";\n'
        "/** Greet. */\nexport async function run(name: string): Promise<string> {\n"
        '  const again = await import("./helper.ts");\n'
        "  return `${greeting} ${name}${punctuation} (${mood()}, ${again.greeting === greeting})`;\n}\n",
    )
    executor = project.executor(["greet.ts"])
    assert executor.call("greet", {"name": "ana"}).output == "hello ana! (happy, true)"
    helper.write_text('export enum Mood { Happy = "glad" }\nexport const greeting: string = "goodbye";\n')
    os.utime(helper, ns=(0, 10**9))  # a different mtime even on coarse clocks
    assert executor.call("greet", {"name": "ana"}).output == "goodbye ana! (glad, true)"


def test_type_stripping_names_an_import_it_cannot_find(project: Project, node_extra: str, no_esbuild: None) -> None:
    project.tool("lost.ts", '\nimport { x } from "./missing";\n/** Lost. */\nexport function run(): string {\n  return x;\n}\n')
    result = project.executor().call("lost", {})
    assert (result.status, result.exit_code) == ("unavailable", 127)
    lost = project.tools / "lost.ts"
    assert result.error == f"node could not transpile {lost}:\n{lost}:2: cannot find the module './missing'"


def test_missing_node_is_a_clear_error(project: Project) -> None:
    project.tool("x.js", "/** X. */\nexport function run() {}\n")
    result = project.executor(runtimes={"javascript": "node-not-installed-xyz"}).call("x", {})
    assert (result.status, result.exit_code) == ("unavailable", 127)
    assert (
        result.error
        == "interpreter 'node-not-installed-xyz' not found; install the Node extra (pip install 'toolexec[node]') or Node.js, or set runtimes.javascript in config.yaml"
    )


CACHED_JS = '/** Say whether the compile cache variable reached the tool. */\nexport function run() {\n  return process.env.TOOLEXEC_NODE_COMPILE_CACHE ?? "unset";\n}\n'


def _compile_cache_files(project: Project) -> list[str]:
    root = State(project.root / "functions").private_dir / "node-compile-cache"
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()) if root.exists() else []


def test_node_keeps_a_tools_compiled_code_between_calls(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second call's node takes the tool's V8 code from the cache the first one wrote (node says so on stderr
    when asked), in toolexec's private state directory; the tool never sees where that is."""
    monkeypatch.setenv("NODE_DEBUG_NATIVE", "COMPILE_CACHE")
    tool = project.tool("cached.mjs", CACHED_JS)
    executor = project.executor()
    first, second = executor.call("cached", {}), executor.call("cached", {})
    assert (first.status, first.output, second.status, second.output) == ("ok", "unset", "ok", "unset")
    accepted = f"[compile cache] V8 code cache for ESM {tool.resolve().as_uri()} was accepted, keeping the in-memory entry"
    assert accepted not in first.stderr.splitlines()
    assert accepted in second.stderr.splitlines()
    assert _compile_cache_files(project) != []


@pytest.mark.skipif(not os.path.exists("/proc/self/ns/user"), reason="Linux namespaces only")
def test_a_confined_tool_cannot_write_the_compile_cache(project: Project) -> None:
    """Confined, the private state directory is read-only: the call runs as usual, quietly, and adds nothing to the
    cache that unconfined calls load code from."""
    project.tool("cached.mjs", CACHED_JS)
    with project.executor(sandbox="strict") as executor:
        result = executor.call("cached", {})
    assert (result.status, result.output, result.stderr) == ("ok", "unset", "")
    assert _compile_cache_files(project) == []


def test_no_temporary_file_left(project: Project, private_tmpdir: Path) -> None:
    project.tool("x.ts", "/** X. */\nexport function run(a: number): number {\n  return a;\n}\n")
    executor = project.executor()
    assert executor.call("x", {"a": 1}).output == "1"
    assert executor.call("x", {"a": "1"}).status == "refused"
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []


@pytest.mark.parametrize(
    ("tool", "arguments", "check"), [("demo_ts", {"city": "Lisbon", "days": 2}, "forecast"), ("demo_js", {"text": "hi"}, "said")]
)
def test_shipped_demos(tool: str, arguments: dict, check: str) -> None:
    from tests.conftest import REPO
    from toolexec import Executor

    result = Executor(REPO / "config.yaml").call(tool, arguments)
    assert result.ok, result.error
    assert check in json.loads(result.output)


def test_typescript_runtime_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Plain node gets the cached transpile; another runtime gets the .ts; no esbuild means tsx, else npx tsx."""
    from toolexec.compilers import compile_source
    from toolexec.runtimes import interpreter, typescript
    from toolexec.runtimes.base import Site
    from toolexec.runtimes.javascript import BOOTSTRAP
    from toolexec.state import State

    source = tmp_path / "tool.ts"
    source.write_text("/** T. */\nexport function run(): string {\n  return 'x';\n}\n")
    declaration = compile_source(source.read_text(), str(source))
    site = Site(functions_dir=tmp_path, cwd=tmp_path, state=State(tmp_path))
    runtime = typescript.TypeScriptRuntime()

    class Runtime:  # the argv prepared when the interpreter chosen for the tool is `chosen`
        @staticmethod
        def command(declaration: object, chosen: list[str], _: object) -> list[str]:
            monkeypatch.setattr(typescript, "launcher_for", lambda tool, site: (list(chosen), {}))
            return runtime.prepare(declaration, {}, site).argv  # type: ignore[arg-type]

    context = None

    runtime_ = Runtime()
    fast = runtime_.command(declaration, ["/usr/bin/node"], context)
    assert fast[:2] == ["/usr/bin/node", str(BOOTSTRAP)]
    assert Path(fast[2]).parent == State(tmp_path).transpile_dir and fast[2].endswith(".mjs")
    assert runtime_.command(declaration, ["/opt/bun"], context) == ["/opt/bun", str(BOOTSTRAP), str(source)]
    assert runtime_.command(declaration, ["deno", "run", "-A"], context) == ["deno", "run", "-A", str(BOOTSTRAP), str(source)]

    # a node without type stripping: its answer is remembered next to the cache, so it is asked once
    monkeypatch.setattr(typescript, "stripped", lambda source, node, cache: None)
    npx = tmp_path / "bin" / "npx"  # stands in for npx: prints where it put tsx, as `npx --call 'command -v tsx'` does
    cli = tmp_path / "npx-cache" / "node_modules" / "tsx" / "dist" / "cli.mjs"
    cli.parent.mkdir(parents=True)
    cli.write_text("")
    (cli.parent / "loader.mjs").write_text("")
    bin_tsx = cli.parent.parent.parent / ".bin" / "tsx"
    bin_tsx.parent.mkdir()
    bin_tsx.symlink_to(cli)
    cli.chmod(0o755)
    npx.parent.mkdir()
    npx.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "npx.log"}\necho {bin_tsx}\n')
    npx.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(npx) if name == "npx" else None)
    monkeypatch.setattr(interpreter.sys, "prefix", str(tmp_path / "no-venv"))
    tsx = tmp_path / "node_modules" / ".bin" / "tsx"  # the working directory's node_modules
    tsx.parent.mkdir(parents=True)
    tsx.write_text("#!/bin/sh\n")
    tsx.chmod(0o755)
    assert runtime_.command(declaration, ["/usr/bin/node"], context) == [str(tsx), str(BOOTSTRAP), str(source)]
    monkeypatch.setenv("TOOLEXEC_TSX", "/bin/true")  # the override wins over node_modules
    assert runtime_.command(declaration, ["/usr/bin/node"], context) == ["/bin/true", str(BOOTSTRAP), str(source)]
    monkeypatch.delenv("TOOLEXEC_TSX")
    tsx.unlink()
    under_tsx = ["/usr/bin/node", "--import", typescript.TSX_NO_CACHE, "--import", (cli.parent / "loader.mjs").as_uri()]
    for _ in range(2):  # npx is asked once; its answer is remembered in the cache
        assert runtime_.command(declaration, ["/usr/bin/node"], context) == [*under_tsx, str(BOOTSTRAP), str(source)]
    assert (tmp_path / "npx.log").read_text() == "--yes --package tsx --call command -v tsx\n"
