"""The hostile catalogue (issue 10): a hostile tool or caller gets an exact result, never a traceback.

Same rows and checks as :mod:`tests.executor.test_bad_input` (exact status, exit code and error; no process,
descriptor or temporary file left), with the tools of this file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import Case, check_case

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

TOOLS = {
    "fifo.sh": '# @describe Put a FIFO at LLM_OUTPUT.\nmain() { rm "$LLM_OUTPUT"; mkfifo "$LLM_OUTPUT"; }\n',
    "link.sh": '# @describe Link LLM_OUTPUT to /etc/passwd.\nmain() { rm "$LLM_OUTPUT"; ln -s /etc/passwd "$LLM_OUTPUT"; }\n',
    "zero.sh": '# @describe Link LLM_OUTPUT to /dev/zero.\nmain() { rm "$LLM_OUTPUT"; ln -s /dev/zero "$LLM_OUTPUT"; }\n',
    "dir.sh": '# @describe Put a directory at LLM_OUTPUT.\nmain() { rm "$LLM_OUTPUT"; mkdir "$LLM_OUTPUT"; touch "$LLM_OUTPUT/x"; }\n',
    "gone.sh": '# @describe Remove LLM_OUTPUT.\nmain() { echo hi >>"$LLM_OUTPUT"; rm "$LLM_OUTPUT"; }\n',
    "echo.sh": '# @describe Echo.\n# @option --text! Text.\nmain() { printf \'%s\' "$argc_text" >>"$LLM_OUTPUT"; }\n',
    "num.sh": '# @describe Echo a number.\n# @option --n! <INT> A number.\nmain() { printf \'%s\' "$argc_n" >>"$LLM_OUTPUT"; }\n',
    "count.py": 'def run(n: int) -> str:\n    """Type of n."""\n    return f"{type(n).__name__} {n}"\n',
    "anyval.py": 'def run(v: dict) -> str:\n    """Anything."""\n    return "got"\n',
    "big.js": "/**\n * Echo an integer.\n * @param {integer} n - N.\n */\nexport function run(n) {\n  return String(n);\n}\n",
    "cyclic.js": "/** Return a cycle. */\nexport function run() {\n  const a = {};\n  a.a = a;\n  return a;\n}\n",
    "bigint.js": "/** Return a BigInt. */\nexport function run() {\n  return { n: 10n };\n}\n",
    "nan.py": 'def run() -> float:\n    """Return NaN."""\n    return float("nan")\n',
    "huge.py": 'def run() -> int:\n    """Return a huge integer."""\n    return 10**5000\n',
    "stderrflood.sh": "# @describe Flood stderr.\nmain() { head -c 5000000 /dev/zero | tr '\\\\0' e >&2; }\n",
}
VISIBLE = list(TOOLS)


def out_error(tool: str, what: str) -> str:
    return f"Tool call '{tool}' failed: {what}"


def stderr_kept(result) -> bool:  # type: ignore[no-untyped-def]
    path = result.stderr_file
    ok = path is not None and os.path.getsize(path) == 100_000 and (os.stat(path).st_mode & 0o777) == 0o600
    ok = ok and result.notes == (
        f"stderr was longer than max_output_bytes; its first 100000 bytes are in {path}, the last 4900000 were dropped (max_kept_bytes)",
    )
    if path:
        os.unlink(path)
    return ok


CASES = [
    Case("output-fifo", "fifo", "{}", "error", 1, out_error("fifo", "the tool replaced $LLM_OUTPUT with a FIFO, not a regular file")),
    Case("output-symlink", "link", "{}", "error", 1, out_error("link", "$LLM_OUTPUT cannot be read (Too many levels of symbolic links): the tool replaced it with a link")),
    Case("output-symlink-dev-zero", "zero", "{}", "error", 1, out_error("zero", "$LLM_OUTPUT cannot be read (Too many levels of symbolic links): the tool replaced it with a link")),
    Case("output-directory", "dir", "{}", "error", 1, out_error("dir", "the tool replaced $LLM_OUTPUT with a directory, not a regular file")),
    Case("output-removed", "gone", "{}", "error", 1, out_error("gone", "the tool removed the file $LLM_OUTPUT names")),
    Case("stderr-flood-kept-bounded", "stderrflood", "{}", "ok", 0, check=stderr_kept),
    Case("nan-literal", "count", '{"n": NaN}', "refused", 2, "arguments for tool 'count' are not valid JSON: NaN is not a JSON number"),
    Case("infinity-literal", "count", '{"n": -Infinity}', "refused", 2, "arguments for tool 'count' are not valid JSON: -Infinity is not a JSON number"),
    Case("overflowing-float", "count", '{"n": 1e400}', "refused", 2, "arguments for tool 'count' are not valid JSON: 1e400 is too large for a JSON number (it would be infinite)"),
    Case("nan-object", "count", {"n": float("nan")}, "refused", 2, "parameter 'n' of tool 'count' is nan, which is not a JSON number"),
    Case("5000-digit-integer-text", "count", '{"n": ' + "9" * 5000 + "}", "refused", 2, "arguments for tool 'count' are not valid JSON: an integer of more than 4300 digits"),
    Case("5000-digit-integer-object", "count", {"n": 10**5000}, "refused", 2, "parameter 'n' of tool 'count' is an integer of more than 4300 digits"),
    Case("lone-surrogate-bash", "echo", '{"text": "\\ud800"}', "refused", 2, "parameter 'text' of tool 'echo' holds a lone surrogate (U+D800), which is not Unicode text"),
    Case("lone-surrogate-python", "anyval", {"v": {"k": "a\udc00"}}, "refused", 2, "parameter 'v.k' of tool 'anyval' holds a lone surrogate (U+DC00), which is not Unicode text"),
    Case("lone-surrogate-key", "anyval", {"v": {"\ud800": 1}}, "refused", 2, "arguments for tool 'anyval' have a key that is not text: '\\ud800'"),
    Case("not-json-value", "anyval", {"v": {"s": {1, 2}}}, "refused", 2, "parameter 'v.s' of tool 'anyval' is not a JSON value (a set)"),
    Case("nesting-just-under-limit", "anyval", '{"v": ' + '{"a": ' * 99 + "1" + "}" * 99 + "}", "ok", 0, check=lambda r: r.output == "got"),
    Case("nesting-just-over-limit", "anyval", '{"v": ' + '{"a": ' * 100 + "1" + "}" * 100 + "}", "refused", 2, "arguments for tool 'anyval' are not valid JSON: nested more than 100 levels deep"),
    Case("nesting-object-over-limit", "anyval", {"v": __import__("functools").reduce(lambda a, _: {"a": a}, range(150), {})}, "refused", 2, "arguments for tool 'anyval' are nested more than 100 levels deep"),
    Case("integral-float-python", "count", '{"n": 3.0}', "ok", 0, check=lambda r: r.output == "int 3"),
    Case("integral-float-bash", "num", '{"n": 3.0}', "ok", 0, check=lambda r: r.output == "3"),
    Case("beyond-2-53-javascript", "big", '{"n": 9007199254740993}', "refused", 2, "parameter 'n' of tool 'big' is 9007199254740993, beyond the integers a JavaScript number holds exactly (up to 9007199254740991); pass it as a string"),
    Case("at-2-53-javascript", "big", '{"n": 9007199254740991}', "ok", 0, check=lambda r: r.output == "9007199254740991"),
    Case("js-cyclic-result", "cyclic", "{}", "error", 1, None, lambda r: r.error is not None and r.error.startswith("Tool call 'cyclic' exited with code 1: TypeError: run() returned a value that cannot be written as JSON: Converting circular structure to JSON")),
    Case("js-bigint-result", "bigint", "{}", "error", 1, "Tool call 'bigint' exited with code 1: TypeError: run() returned a value that cannot be written as JSON: Do not know how to serialize a BigInt"),
    Case("python-nan-result", "nan", "{}", "error", 1, "Tool call 'nan' exited with code 1: ValueError: run() returned a value that cannot be written as JSON: Out of range float values are not JSON compliant"),
    Case("python-huge-int-result", "huge", "{}", "error", 1, None, lambda r: r.error is not None and r.error.startswith("Tool call 'huge' exited with code 1: ValueError: run() returned a value that cannot be written as JSON: Exceeds the limit (4300 digits)")),
    Case("unknown-tool-huge-name", "x" * 100_000, "{}", "refused", 2, "unknown tool '" + "x" * 76 + "..."),
    Case("timeout-nan", "count", '{"n": 1}', "refused", 2, "timeout must be a positive number of seconds, got nan"),
]  # fmt: skip
TIMEOUTS = {"timeout-nan": float("nan")}


@pytest.fixture
def catalogue(project: Project):  # type: ignore[no-untyped-def]
    for name, source in TOOLS.items():
        project.tool(name, source)
    return project.executor(VISIBLE, max_output_bytes=4096, max_kept_bytes=100_000)


def test_catalogue_size() -> None:
    assert len({c.id for c in CASES}) == len(CASES) >= 29


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_hostile(case: Case, catalogue, private_tmpdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    if case.id in TIMEOUTS:
        call = catalogue.call
        monkeypatch.setattr(catalogue, "call", lambda *a, **k: call(*a, **k, timeout=TIMEOUTS[case.id]))
    check_case(case, catalogue, private_tmpdir)


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "visible_tools: []\n"  # fmt: skip
CONFIGS = [
    ("alias-bomb", BOMB, "{path}: its aliases expand to more than 100000 values; write the values out"),
    ("many-aliases", "a: &a x\nvisible_tools: [" + ", ".join(["*a"] * 101) + "]\n", "{path}: more than 100 YAML aliases (*name); write the values out"),
    ("deep-yaml", "visible_tools: " + "[" * 2000 + "]" * 2000 + "\n", "{path}: nested too deeply to be a config"),
    ("nul-in-visible-tools", 'visible_tools: ["a\\0.py"]\n', "{path}: key 'visible_tools': 'a\\x00.py' is not a file name in functions/tools/"),
    ("unbalanced-quote-in-runtimes", "visible_tools: []\nruntimes:\n  python: \"'python3\"\n", "{path}: key 'runtimes.python': cannot split \"'python3\" into a command: No closing quotation"),
    ("functions-dir-is-a-file", "visible_tools: []\nfunctions_dir: config.yaml\n", "{path}: key 'functions_dir': {path} is a file, not a directory; name the directory holding tools/"),
    ("timeout-too-large", "visible_tools: []\ntimeout: 1.0e+10\n", "{path}: key 'timeout': expected at most 86400 (one day), got 10000000000.0"),
    ("max-output-bytes-huge", "visible_tools: []\nmax_output_bytes: " + "9" * 5000 + "\n", "{path}: holds a value YAML cannot load: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
]  # fmt: skip


@pytest.mark.parametrize("row", CONFIGS, ids=lambda r: r[0])
def test_hostile_config(row: tuple[str, str, str], tmp_path: Path) -> None:
    from toolexec.config import load_config
    from toolexec.errors import ConfigError

    _, text, message = row
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == message.replace("{path}", str(path))
