"""The bad-input catalogue: every refusal is exact and clear, and nothing is left behind.

Each row: a tool name, raw arguments (a JSON string, or an object), the expected
status and exit code, and the exact error (or, for successful rows, a check on the
output). After every row: no process started by the row's call is alive, this
process has the descriptors it had before, and the temporary directory is empty.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import Case, check_case

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

TOOLS = {
    "typed.py": '''from typing import Literal


def run(count: int, name: str, tags: list[int] = [], mode: Literal["fast", "slow"] = "fast", opts: dict = {}) -> str:
    """Typed parameters.

    Args:
        count: How many.
        name: A name.
    """
    return f"{count}:{name}:{tags}:{mode}:{len(str(opts))}"
''',
    "digest.py": 'import hashlib\n\ndef run(text: str) -> str:\n    """Hash."""\n    return f"{len(text)} {hashlib.sha256(text.encode()).hexdigest()[:12]}"\n',
    "nul.sh": '# @describe Echo.\n# @option --text! Text.\nmain() { printf \'%s\' "$argc_text" >>"$LLM_OUTPUT"; }\n',
    "hidden.py": 'def run():\n    """Not visible."""\n',
    "ghost.py": '#!/usr/bin/env python-not-installed-9\ndef run():\n    """Never runs."""\n',
    "broken.py": 'def run(x: int):\n    """Broken at run time."""\n    return x +\n',
    "die.py": 'import os, signal\n\ndef run():\n    """Die by signal."""\n    os.kill(os.getpid(), signal.SIGKILL)\n',
    "segv.sh": "# @describe Segfault-like.\nmain() { kill -SEGV $$; }\n",
    "closes.sh": '# @describe Close stdout and stderr, then finish.\nmain() { exec >&- 2>&-; echo done >>"$LLM_OUTPUT"; }\n',
    "grandchild.sh": (
        "# @describe Leave a grandchild that ignores TERM and holds the pipes.\n"
        'main() { bash -c \'trap "" TERM; exec sleep 1000\' & echo left >>"$LLM_OUTPUT"; }\n'
    ),
    "forever.py": 'import time\n\ndef run():\n    """Sleep forever.\n\n    Timeout: 0.5\n    """\n    while True:\n        time.sleep(100)\n',
    "flood.sh": "# @describe Write 2 GiB.\nmain() { head -c 2147483648 /dev/zero | tr '\\\\0' x; }\n",
    "badutf8.sh": "# @describe Invalid UTF-8.\nmain() { printf 'ok \\xff\\xfe end' >>\"$LLM_OUTPUT\"; }\n",
    "silent.sh": "# @describe Say nothing.\nmain() { :; }\n",
    "importfail.py": 'import module_that_does_not_exist_xyz\n\ndef run():\n    """Import fails."""\n',
    "throws.js": '/** Throw a non-Error. */\nexport function run() {\n  throw "plain string";\n}\n',
    "doomed.py": 'def run():\n    """Deleted after the build."""\n',
    "odd.py": 'def run():\n    """Return something odd."""\n    return object.__new__(type("Thing", (), {"__str__": lambda s: "a Thing"}))\n',
}
VISIBLE = [name for name in TOOLS if name != "hidden.py"]

TYPED_ERR = "invalid arguments for tool 'typed':\n"


def deep(levels: int) -> str:
    return '{"opts": ' + '{"a": ' * levels + "1" + "}" * levels + ', "count": 1, "name": "n"}'


CASES = [
    Case(
        "malformed-json",
        "typed",
        "{bad",
        "refused",
        2,
        "arguments for tool 'typed' are not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
    ),
    Case(
        "trailing-garbage",
        "typed",
        '{"count": 1} x',
        "refused",
        2,
        "arguments for tool 'typed' are not valid JSON: Extra data at line 1 column 14",
    ),
    Case(
        "json-array",
        "typed",
        "[1, 2]",
        "refused",
        2,
        "arguments for tool 'typed' must be a JSON object of parameter names to values, got an array [1, 2]",
    ),
    Case(
        "json-string",
        "typed",
        '"hello"',
        "refused",
        2,
        "arguments for tool 'typed' must be a JSON object of parameter names to values, got a string \"hello\"",
    ),
    Case(
        "json-number",
        "typed",
        "42",
        "refused",
        2,
        "arguments for tool 'typed' must be a JSON object of parameter names to values, got an integer 42",
    ),
    Case(
        "python-list-object",
        "typed",
        [1],
        "refused",
        2,
        "arguments for tool 'typed' must be a JSON object of parameter names to values, got an array [1]",
    ),
    Case(
        "null-means-empty",
        "typed",
        "null",
        "refused",
        2,
        TYPED_ERR + "- missing required parameter 'count' (an integer)\n- missing required parameter 'name' (a string)",
    ),
    Case("empty-string-means-empty", "silent", "", "ok", 0, check=lambda r: r.output == ""),
    Case(
        "string-for-integer",
        "typed",
        '{"count": "3", "name": "n"}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'count': expected an integer, got a string \"3\"",
    ),
    Case(
        "float-for-integer",
        "typed",
        '{"count": 1.5, "name": "n"}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'count': expected an integer, got a number 1.5",
    ),
    Case(
        "bool-for-integer",
        "typed",
        '{"count": true, "name": "n"}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'count': expected an integer, got a boolean true",
    ),
    Case(
        "null-for-string",
        "typed",
        '{"count": 1, "name": null}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'name': expected a string, got null",
    ),
    Case(
        "object-for-string",
        "typed",
        '{"count": 1, "name": {"a": 1}}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'name': expected a string, got an object {\"a\": 1}",
    ),
    Case(
        "string-for-array",
        "typed",
        '{"count": 1, "name": "n", "tags": "1,2"}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'tags': expected an array of integers, got a string \"1,2\"",
    ),
    Case(
        "bad-array-item",
        "typed",
        '{"count": 1, "name": "n", "tags": [1, "x"]}',
        "refused",
        2,
        TYPED_ERR + "- parameter 'tags[1]': expected an integer, got a string \"x\"",
    ),
    Case("missing-required", "typed", '{"count": 1}', "refused", 2, TYPED_ERR + "- missing required parameter 'name' (a string)"),
    Case(
        "unknown-param-suggested",
        "typed",
        '{"count": 1, "nmae": "n"}',
        "refused",
        2,
        TYPED_ERR + "- missing required parameter 'name' (a string)\n- unknown parameter 'nmae'; did you mean 'name'?",
    ),
    Case(
        "unknown-param-listed",
        "typed",
        '{"count": 1, "name": "n", "zzz": 1}',
        "refused",
        2,
        TYPED_ERR + "- unknown parameter 'zzz'; known parameters: count, name, tags, mode, opts",
    ),
    Case(
        "enum-violation",
        "typed",
        '{"count": 1, "name": "n", "mode": "medium"}',
        "refused",
        2,
        TYPED_ERR + '- parameter \'mode\': expected one of "fast", "slow", got "medium"',
    ),
    Case(
        "every-problem-at-once",
        "typed",
        '{"count": "x", "mode": ["fast"], "extra": 1}',
        "refused",
        2,
        TYPED_ERR
        + "- missing required parameter 'name' (a string)\n- unknown parameter 'extra'; known parameters: count, name, tags, mode, opts\n- parameter 'count': expected an integer, got a string \"x\"\n- parameter 'mode': expected a string, got an array [\"fast\"]",
    ),
    Case("object-arguments", "typed", {"count": 2, "name": "n"}, "ok", 0, check=lambda r: r.output == "2:n:[]:fast:2"),
    Case("string-arguments", "typed", '  {"count": 2, "name": "n"}  ', "ok", 0, check=lambda r: r.output == "2:n:[]:fast:2"),
    Case(
        "huge-50mb-argument",
        "digest",
        {"text": "x" * (50 * 1024 * 1024)},
        "ok",
        0,
        check=lambda r: r.output.startswith(f"{50 * 1024 * 1024} "),
    ),
    Case("nul-byte-python", "digest", {"text": "a\0b"}, "ok", 0, check=lambda r: r.output.startswith("3 ")),
    Case(
        "nul-byte-bash",
        "nul",
        {"text": "a\0b"},
        "refused",
        2,
        "parameter 'text' of tool 'nul' contains a NUL character, which a Bash tool cannot receive",
    ),
    Case(
        "deeply-nested-json",
        "typed",
        deep(100_000),
        "refused",
        2,
        "arguments for tool 'typed' are not valid JSON: nested more than 100 levels deep",
    ),
    Case("nested-but-fine", "typed", deep(50), "ok", 0, check=lambda r: r.output.startswith("1:n:[]:fast:")),
    Case("traversal-name", "../typed", "{}", "refused", 2, "unknown tool '../typed'; did you mean 'typed'?"),
    Case("absolute-path-name", "/etc/passwd", "{}", "refused", 2, "unknown tool '/etc/passwd'"),
    Case("shell-metachar-name", "x;rm -rf /", "{}", "refused", 2, "unknown tool 'x;rm -rf /'"),
    Case("empty-name", "", "{}", "refused", 2, "unknown tool ''"),
    Case("misspelt-name", "digets", "{}", "refused", 2, "unknown tool 'digets'; did you mean 'digest'?"),
    Case(
        "not-visible",
        "hidden",
        "{}",
        "refused",
        2,
        "unknown tool 'hidden': {tools}/hidden.py exists but is not listed under visible_tools in {config}; "
        "add the line '  - hidden.py' there",
    ),
    Case(
        "missing-interpreter",
        "ghost",
        "{}",
        "unavailable",
        127,
        "interpreter 'python-not-installed-9' not found; install Python 3 or set runtimes.python in config.yaml",
    ),
    Case(
        "syntax-error-file",
        "broken",
        "{}",
        "refused",
        2,
        None,
        lambda r: r.error is not None and r.error.startswith("tool 'broken' failed to build:\n") and "broken.py:3:" in r.error,
    ),
    Case("killed-by-signal", "die", "{}", "error", 128 + 9, "Tool call 'die' was killed by signal 9"),
    Case("segv-signal", "segv", "{}", "error", 128 + 11, "Tool call 'segv' was killed by signal 11"),
    Case("closes-stdout", "closes", "{}", "ok", 0, check=lambda r: r.output == "done\n"),
    Case("grandchild-holds-pipes", "grandchild", "{}", "ok", 0, check=lambda r: r.output == "left\n"),
    Case("sleeps-forever", "forever", "{}", "timeout", 124, "Tool call 'forever' timed out after 0.5s"),
    Case(
        "writes-2gb",
        "flood",
        "{}",
        "ok",
        0,
        check=lambda r: (
            r.output_file is not None
            and os.path.getsize(r.output_file) == 2**20
            and len(r.output) < 5000
            and r.notes[-1].endswith(f"the last {2**31 - 2**20} were dropped (max_kept_bytes)")
        ),
    ),
    Case(
        "invalid-utf8",
        "badutf8",
        "{}",
        "ok",
        0,
        check=lambda r: (
            r.output == "ok \ufffd\ufffd end"
            and r.notes == ("output was not valid UTF-8; invalid bytes were replaced with U+FFFD",)
        ),
    ),
    Case("writes-nothing", "silent", "{}", "ok", 0, check=lambda r: r.output == "" and r.error is None),
    Case(
        "bootstrap-import-fails",
        "importfail",
        "{}",
        "error",
        1,
        "Tool call 'importfail' exited with code 1: ModuleNotFoundError: No module named 'module_that_does_not_exist_xyz'",
    ),
    Case("js-throws-non-error", "throws", "{}", "error", 1, "Tool call 'throws' exited with code 1: plain string"),
    Case("odd-return-value", "odd", "{}", "ok", 0, check=lambda r: r.output == "a Thing"),
    Case(
        "tool-file-deleted-after-build",
        "doomed",
        "{}",
        "refused",
        2,
        "tool 'doomed' cannot run: its file {tools}/doomed.py is gone; restore it or remove it from visible_tools",
        prepare=lambda tools: (tools / "doomed.py").unlink(),
    ),
]


@pytest.fixture
def catalogue(project: Project):  # type: ignore[no-untyped-def]
    for name, source in TOOLS.items():
        project.tool(name, source)
    return project.executor(VISIBLE, max_output_bytes=4096, max_kept_bytes=1 << 20)


def test_catalogue_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bad_input(case: Case, catalogue, private_tmpdir: Path) -> None:  # type: ignore[no-untyped-def]
    check_case(case, catalogue, private_tmpdir)


SPAWNING = [case for case in CASES if case.status in ("ok", "error", "timeout")]  # the rows whose tool really runs


@pytest.mark.parametrize("case", SPAWNING, ids=lambda c: c.id)
def test_bad_input_through_the_portable_backend(
    case: Case, catalogue, private_tmpdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The same rows, with the same checks (nothing alive, no descriptor, no temporary file), without pidfd."""
    monkeypatch.setenv("TOOLEXEC_PROCESS_BACKEND", "portable")
    monkeypatch.delattr(os, "pidfd_open")
    check_case(case, catalogue, private_tmpdir)
