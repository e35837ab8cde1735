"""The hostile build catalogue (issue 10): one hostile tool file is that file's problem only.

Each row is one tool file built beside a good one (``sibling.py``). A refused row asserts the
exact build problem, the exact refusal of a call of it (status, exit code, message) and that
the sibling still builds and runs; a supported row asserts the call's exact output. After every
row, as in :mod:`tests.executor.test_bad_input`: no process of the call alive, no descriptor and no
temporary file left.
"""

from __future__ import annotations

import gc
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project, cli
from tests.helpers import close_warm, marked_processes

SIBLING = 'def run() -> str:\n    """Fine."""\n    return "fine"\n'


@dataclass(frozen=True)
class BuildCase:
    id: str
    file: str
    source: str
    problem: str | None  # the exact build problem ({path}: the file's path); None: the tool builds
    output: str | None = None  # a building row: what the call returns
    arguments: Any = "{}"
    tool: str | None = None  # the tool name, when not the file's stem


def module(schema: str, name: str = "mod") -> str:
    return f'export default {{\n  name: "{name}",\n  description: "A module tool.",\n  inputSchema: {schema},\n  run: async (input) => JSON.stringify(input),\n}};\n'


REF_HINT = '  hint: copy the schema it names under $defs and write $ref: "#/$defs/<name>"'
DEEP_HINT = "  hint: flatten it: give an inner part a name (a type alias, a TypedDict or an interface) and refer to that"
DEEP = "{path}:1:1: a type or literal here is nested too deeply: toolexec compiles at most 100 levels\n" + DEEP_HINT
SURROGATE_HINT = "  hint: a \\uD800-\\uDFFF escape must be half of a pair; write the character itself"
UNION = " | ".join(f'"m{i}"' for i in range(1000))

CASES = [
    # 1. a module tool's inputSchema: valid JSON Schema, local references only, required names declared
    BuildCase("schema-remote-ref", "mod.js", module('{ type: "object", properties: { a: { $ref: "http://127.0.0.1:9/x.json" } } }'), "{path}:4:59: inputSchema refers to 'http://127.0.0.1:9/x.json' outside itself (properties/a/$ref); toolexec never fetches a schema\n" + REF_HINT),
    BuildCase("schema-file-ref", "mod.js", module('{ type: "object", properties: { a: { $ref: "file:///etc/passwd" } } }'), "{path}:4:59: inputSchema refers to 'file:///etc/passwd' outside itself (properties/a/$ref); toolexec never fetches a schema\n" + REF_HINT),
    BuildCase("schema-relative-ref", "mod.js", module('{ type: "object", properties: { a: { "$ref": "other.json#/x" } } }'), "{path}:4:61: inputSchema refers to 'other.json#/x' outside itself (properties/a/$ref); toolexec never fetches a schema\n" + REF_HINT),
    BuildCase("schema-nested-id", "mod.js", module('{ type: "object", properties: { a: { $id: "https://example.com/a", type: "string" } } }'), "{path}:4:58: inputSchema has a nested $id (properties/a/$id), which changes what '#' refers to\n  hint: remove it; put shared parts under $defs"),
    BuildCase("schema-dangling-local-ref", "mod.js", module('{ type: "object", properties: { a: { $ref: "#/$defs/nope" } } }'), "{path}:4:59: $ref '#/$defs/nope' points at nothing in inputSchema\n  hint: define it under $defs, or fix the path"),
    BuildCase("schema-local-ref-resolved", "mod.js", module('{ type: "object", $defs: { s: { type: "string" } }, properties: { a: { $ref: "#/$defs/s" } } }'), None, '{"a":"x"}', {"a": "x"}),
    BuildCase("schema-local-ref-validated", "mod.js", module('{ type: "object", $defs: { s: { type: "string" } }, properties: { a: { $ref: "#/$defs/s" } } }'), None, None, {"a": 5}),
    BuildCase("schema-ref-as-data", "mod.js", module('{ type: "object", properties: { a: { type: "object", default: { $ref: "http://x/y" } } } }'), None, "{}", {}),
    BuildCase("schema-type-typo", "mod.js", module('{ type: "object", properties: { a: { type: "strin" } } }'), "{path}:4:59: inputSchema properties/a/type: 'strin' is not a JSON Schema type; did you mean 'string'?\n  hint: use one of array, boolean, integer, null, number, object, string"),
    BuildCase("schema-type-list-typo", "mod.js", module('{ type: "object", properties: { a: { type: ["string", "nul"] } } }'), "{path}:4:70: inputSchema properties/a/type/1: 'nul' is not a JSON Schema type; did you mean 'null'?\n  hint: use one of array, boolean, integer, null, number, object, string"),
    BuildCase("schema-bad-pattern", "mod.js", module('{ type: "object", properties: { a: { type: "string", pattern: "(" } } }'), "{path}:4:78: inputSchema properties/a/pattern: '(' is not a regular expression (missing ), unterminated subpattern at position 0)\n  hint: toolexec checks patterns with Python's re module; fix or remove the pattern"),
    BuildCase("schema-bad-pattern-property", "mod.js", module('{ type: "object", patternProperties: { "[": {} } }'), "{path}:4:53: inputSchema patternProperties: '[' is not a regular expression (unterminated character set at position 0)\n  hint: toolexec checks patterns with Python's re module; fix or remove the pattern"),
    BuildCase("schema-properties-number", "mod.js", module('{ type: "object", properties: 5 }'), "{path}:4:46: inputSchema properties is not valid JSON Schema: 5 is not of type 'object'\n  hint: write it as JSON Schema 2020-12 describes it"),
    BuildCase("schema-negative-min-length", "mod.js", module('{ type: "object", properties: { a: { type: "string", minLength: -1 } } }'), "{path}:4:80: inputSchema properties/a/minLength is not valid JSON Schema: -1 is less than the minimum of 0\n  hint: write it as JSON Schema 2020-12 describes it"),
    BuildCase("schema-required-unknown", "mod.js", module('{ type: "object", properties: { city: { type: "string" } }, required: ["cty"] }'), "{path}:4:87: inputSchema requires 'cty', which is not in its properties; did you mean 'city'?\n  hint: add it to properties, or remove it from required (the tool could never be called)"),
    BuildCase("output-schema-remote-ref", "mod.js", module('{ type: "object" }').replace("  run:", '  outputSchema: { type: "object", properties: { a: { $ref: "https://example.com/a.json" } } },\n  run:'), "{path}:5:17: outputSchema refers to 'https://example.com/a.json' outside itself (properties/a/$ref); toolexec never fetches a schema\n  hint: write a JSON Schema: {\"type\": \"object\", \"properties\": {…}}, {\"type\": \"array\", \"items\": {…}}, …"),
    # 2. one file never breaks the build: deep or huge types, lone surrogates
    BuildCase("ts-union-1000-members", "union.ts", f"/**\n * Union.\n * @param mode - M.\n */\nexport function run(mode: {UNION}): string {{\n  return mode;\n}}\n", None, "m999", {"mode": "m999"}),
    BuildCase("ts-array-nested-1500", "nested.ts", '/**\n * Nested.\n * @param x - X.\n */\nexport function run(x: string' + "[]" * 1500 + '): string {\n  return "x";\n}\n', DEEP),
    BuildCase("ts-object-nested-200", "objs.ts", '/**\n * Nested.\n * @param x - X.\n */\nexport function run(x: ' + "{a: " * 200 + "string" + "}" * 200 + '): string {\n  return "x";\n}\n', DEEP),
    BuildCase("python-type-nested-400", "deep.py", "def run(x: " + "list[" * 400 + "int" + "]" * 400 + ') -> str:\n    """Deep."""\n    return "x"\n', DEEP),
    BuildCase("python-type-nested-30", "deep30.py", "def run(x: " + "list[" * 30 + "int" + "]" * 30 + ') -> str:\n    """Deep but fine (past what fastjsonschema compiles)."""\n    return "ok"\n', None, "ok", {"x": __import__("functools").reduce(lambda a, _: [a], range(30), 1)}),
    BuildCase("js-schema-nested-1200", "mod.js", module('{ type: "object", properties: { a: ' + '{ "items": ' * 1200 + "{}" + " }" * 1200 + " } }"), DEEP, tool="mod"),
    BuildCase("python-surrogate-default", "surr.py", 'def run(x: str = "\\ud800") -> str:\n    """Surrogate."""\n    return x\n', "{path}:1:1: parameters.properties.x.default holds a lone surrogate (U+D800), which is not Unicode text\n" + SURROGATE_HINT),
    BuildCase("ts-surrogate-literal", "surr.ts", '/**\n * Surrogate literal.\n * @param x - X.\n */\nexport function run(x: "\\udc01" | "b"): string {\n  return x;\n}\n', "{path}:1:1: parameters.properties.x.enum[0] holds a lone surrogate (U+DC01), which is not Unicode text\n" + SURROGATE_HINT),
    BuildCase("js-surrogate-default", "surr.js", '/**\n * Surrogate default.\n * @param {string} [x="\\ud800"] - X.\n */\nexport function run(x) {\n  return x;\n}\n', "{path}:1:1: parameters.properties.x.default holds a lone surrogate (U+D800), which is not Unicode text\n" + SURROGATE_HINT),
    BuildCase("python-surrogate-description", "surrdoc.py", 'def run() -> str:\n    """Surrogate \\udfff in the description."""\n    return "x"\n', "{path}:1:1: metadata.summary holds a lone surrogate (U+DFFF), which is not Unicode text\n" + SURROGATE_HINT),
    BuildCase("python-surrogate-pair-is-two-halves", "pair.py", 'def run(x: str = "\\ud83d\\ude00") -> str:\n    """In Python source, escaped halves stay two lone surrogates."""\n    return x\n', "{path}:1:1: parameters.properties.x.default holds a lone surrogate (U+D83D), which is not Unicode text\n" + SURROGATE_HINT),
    BuildCase("js-surrogate-pair-is-fine", "pair.js", '/**\n * A pair is one character.\n * @param {string} [x="\\ud83d\\ude00"] - X.\n */\nexport function run(x = "\\ud83d\\ude00") {\n  return x;\n}\n', None, "\U0001f600"),
    # 3. compiles but cannot run as declared: supported, or refused with the fix
    BuildCase("js-export-default-function", "defjs.js", '/**\n * Default export.\n * @param {string} x - X.\n */\nexport default function run(x) {\n  return "got " + x;\n}\n', None, "got a", {"x": "a"}),
    BuildCase("ts-export-default-function", "defts.ts", '/**\n * Default export.\n * @param x - X.\n */\nexport default function run(x: string): string {\n  return "got " + x;\n}\n', None, "got a", {"x": "a"}),
    BuildCase("js-export-default-object-argument", "defobj.js", '/**\n * Default export, llm-functions style.\n * @typedef {Object} Args\n * @property {string} x - X.\n * @param {Args} args\n */\nexport default function run(args) {\n  return "got " + args.x;\n}\n', None, "got a", {"x": "a"}),
    BuildCase("python-duplicate-parameter", "dup.py", 'def run(x: str, x: int) -> str:\n    """Dup."""\n    return "d"\n', "{path}:1:17: parameter 'x' is declared twice\n  hint: rename one: Python refuses a function with two parameters of one name"),
    BuildCase("ts-duplicate-parameter", "dup.ts", '/**\n * Dup.\n * @param x - X.\n */\nexport function run(x: string, x: number): string {\n  return "d";\n}\n', "{path}:5:32: parameter 'x' is declared twice\n  hint: rename one: a module refuses a function with two parameters of one name"),
    BuildCase("bash-dotted-option-as-argc", "dots.sh", '# @describe Dots.\n# @option --foo.bar A dotted option.\nmain() { printf "[%s]" "$argc_foo_bar" >>"$LLM_OUTPUT"; }\n', None, "[v]", {"foo_bar": "v"}),
    BuildCase("bash-tab-after-option-kept", "tab.sh", '# @describe Tab.\n# @option\t--need! Required.\nmain() { printf "[%s]" "$argc_need" >>"$LLM_OUTPUT"; }\n', None, "[n]", {"need": "n"}),
    BuildCase("bash-tab-after-option-required", "tab.sh", '# @describe Tab.\n# @option\t--need! Required.\nmain() { printf "[%s]" "$argc_need" >>"$LLM_OUTPUT"; }\n', None, None, {}),
    BuildCase("bash-arg-named-fn", "fn.sh", '# @describe Fn arg.\n# @arg _fn A function name.\nmain() { printf "[%s]" "$argc__fn" >>"$LLM_OUTPUT"; }\n', "{path}:2:8: @arg: '_fn' would be argc__fn, which argc sets itself\n  hint: rename it: @arg fn"),
    BuildCase("bash-arg-named-positionals", "pos.sh", '# @describe Positionals arg.\n# @arg _positionals Values.\nmain() { :; }\n', "{path}:2:8: @arg: '_positionals' would be argc__positionals, which argc sets itself\n  hint: rename it: @arg positionals"),
    BuildCase("bash-crlf", "crlf.sh", '# @describe CRLF.\r\n# @option --x X.\r\nmain() {\r\n  echo "[$argc_x]" >>"$LLM_OUTPUT"\r\n}\r\n', "{path}:1:1: the file has Windows (CRLF) line endings, which bash cannot run\n  hint: convert it: dos2unix {path}  (or: sed -i 's/\\r$//' {path})"),
    BuildCase("bash-crlf-late", "crlf2.sh", '# @describe CRLF late.\nmain() {\n  echo hi\r\n}\n', "{path}:3:1: the file has Windows (CRLF) line endings, which bash cannot run\n  hint: convert it: dos2unix {path}  (or: sed -i 's/\\r$//' {path})"),
]  # fmt: skip


def _problem(case: BuildCase, path: Path) -> str | None:
    return None if case.problem is None else case.problem.replace("{path}", str(path))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile_build(case: BuildCase, project: Project, private_tmpdir: Path) -> None:
    path = project.tool(case.file, case.source)
    project.tool("sibling.py", SIBLING)
    executor = project.executor([case.file, "sibling.py"])
    report = executor.build()
    name = case.tool or path.stem
    expected = _problem(case, path)
    gc.collect()  # what an earlier test left to the collector is closed before the snapshot, not during this test
    descriptors = sorted(os.listdir("/proc/self/fd"))
    if expected is not None:
        assert report.problems == [expected]
        result = executor.call(name, case.arguments)
        assert (result.status, result.exit_code, result.error) == ("refused", 2, f"tool {name!r} failed to build:\n{expected}")
    else:
        assert report.problems == []
        result = executor.call(name, case.arguments)
        if case.output is None:
            assert (result.status, result.exit_code) == ("refused", 2), result.error
        else:
            assert (result.status, result.exit_code, result.output) == ("ok", 0, case.output), result.error
    sibling = executor.call("sibling", "{}")
    assert (sibling.status, sibling.output) == ("ok", "fine")
    close_warm(executor)  # (a long-lived executor keeps its cold calls' file sets, in a directory of its own, until then)
    assert marked_processes(private_tmpdir) == []
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert os.listdir(private_tmpdir) == []


def test_catalogue_size() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 40


@pytest.mark.parametrize("case", [c for c in CASES if c.problem is not None], ids=lambda c: c.id)
def test_compile_reports_the_file_and_goes_on(case: BuildCase, project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    """``toolexec compile`` reports each broken file and still prints the others' declarations."""
    path = project.tool(case.file, case.source)
    sibling = project.tool("sibling.py", SIBLING)
    status, out, err = cli(capsys, "compile", str(path), str(sibling))
    assert (status, err) == (1, str(_problem(case, path)) + "\n")
    assert '"name": "sibling"' in out


class _Listener:
    """A local HTTP server that counts the connections it is sent (there must be none)."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.hits = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.hits += 1
            connection.sendall(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"type": "integer"}')
            connection.close()

    def close(self) -> None:
        self.socket.close()


@pytest.mark.parametrize("ref", ["http://127.0.0.1:{port}/x.json", "//127.0.0.1:{port}/x.json", "file:///etc/passwd", "urn:x"])
def test_validators_never_fetch_at_call_time(ref: str) -> None:
    """A schema that reached the executor without the build's check (a hand-edited catalog) is refused, never fetched."""
    from toolexec.errors import ToolBroken
    from toolexec.validation import compile_validator, explain

    listener = _Listener()
    try:
        target = ref.replace("{port}", str(listener.port))
        schema = {"type": "object", "properties": {"a": {"$ref": target}}}
        validate = compile_validator(schema)
        with pytest.raises(ToolBroken) as refused:
            validate("t", {"a": "s"})
        assert str(refused.value) == (
            f"tool 't' failed to build:\nits parameter schema refers to {target!r} outside itself (properties/a/$ref); "
            "toolexec never fetches a schema"
        )
        with pytest.raises(Exception, match="Unresolvable"):
            explain(schema, {"a": "s"})  # the explaining validator has no way to fetch either
        assert listener.hits == 0
    finally:
        listener.close()
