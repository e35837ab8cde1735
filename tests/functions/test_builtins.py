"""End-to-end tests of the shipped built-in tools, called through the executor on the shipped config.

Network tests use an HTTP server the test starts on 127.0.0.1; nothing here needs the network.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from toolexec import Executor
from toolexec.records import ToolResult

READ_ONLY = ["calculator", "current_time", "fs_cat", "fs_glob", "fs_grep", "fs_ls", "fs_read", "http_fetch", "json_parse"]
MODIFYING = ["execute_command", "fs_mkdir", "fs_patch", "fs_rm", "fs_write"]


@pytest.fixture(scope="module")
def shipped() -> Executor:
    """The shipped config, built once."""
    return Executor(REPO / "config.yaml")


@pytest.fixture(scope="module")
def everything(shipped: Executor) -> Executor:
    """The shipped tools with every one enabled (the destructive ones are not, out of the box)."""
    return Executor(dataclasses.replace(shipped.config, enabled_tools=None))


def failed(result: ToolResult) -> str:
    """The message a failed built-in gave (its stderr), after checking that the call did fail."""
    assert (result.ok, result.status, result.exit_code) == (False, "error", 1), result
    assert result.error == f"{result.tool_call_error}: {result.stderr.rstrip(chr(10))}"
    return result.stderr


# --- the shipped config ----------------------------------------------------------------------


def test_shipped_config_enables_only_tools_that_modify_nothing(shipped: Executor) -> None:
    assert shipped.build().ok
    enabled = sorted(t.name for t in shipped.tools())
    assert enabled == sorted(["demo_js", "demo_py", "demo_sh", "demo_ts", *READ_ONLY])
    visible = sorted(t.name for t in shipped.tools(enabled_only=False))
    assert visible == sorted(["demo_js", "demo_py", "demo_sh", "demo_ts", *READ_ONLY, *MODIFYING])
    for name in MODIFYING:
        refused = shipped.call(name, {})
        assert (refused.status, refused.reason) == ("refused", "not_enabled")


def test_builtins_declare_their_behaviour(shipped: Executor) -> None:
    tools = {t.name: t for t in shipped.tools(enabled_only=False)}
    if not any(t.metadata.title for t in tools.values()):
        pytest.skip("the compilers do not read metadata yet (issue 11)")
    for name in READ_ONLY + MODIFYING:
        meta = tools[name].metadata
        assert meta.title and meta.summary and meta.tags and meta.examples, name
        hints = meta.annotations
        assert hints.read_only is (name in READ_ONLY), name
        assert hints.destructive is (name in ("execute_command", "fs_patch", "fs_rm", "fs_write")), name
        assert hints.open_world is (name in ("http_fetch", "execute_command")), name


# --- calculator ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4) ** 2", 98),
        ("-2 ** 2", -4),
        ("2 ** -1", 0.5),
        ("2 ** 3 ** 2", 512),
        ("7 % 3 + 10 / 4", 3.5),
        ("0.1 + 0.2", 0.3),
        ("sqrt(16) + abs(-3) + round(2.5) + floor(2.7) + ceil(2.1)", 15),
        ("max(1, 5, 3) - min(4, 2) + pow(2, 10)", 1027),
        ("log(E) + log2(8) + log10(1000) + exp(0)", 8),
        ("sin(0) + cos(0) + tan(0)", 1),
        ("PI", 3.14159265358979),
        ("1e3 + .5", 1000.5),
    ],
)
def test_calculator(shipped: Executor, expression: str, value: float) -> None:
    result = shipped.call("calculator", {"expression": expression})
    assert result.ok, result.error
    assert json.loads(result.output) == {"expression": expression, "value": value}


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1 / (2 - 2)", "division by zero at position 3\n  1 / (2 - 2)\n    ^\n"),
        ("5 % 0", "modulo by zero at position 3\n  5 % 0\n    ^\n"),
        ("10 ** 1000000", "the result is too large at position 4\n  10 ** 1000000\n     ^\n"),
        ("2 ^ 3", "unexpected character '^'; use ** for powers at position 3\n  2 ^ 3\n    ^\n"),
        ("(1 + 2", "expected ')' but found 'end of expression' at position 7\n  (1 + 2\n        ^\n"),
        ("1 +", "the expression ended early; expected a number, a name or '(' at position 4\n  1 +\n     ^\n"),
        ("sqrt(-1)", "sqrt(-1) is not defined at position 1\n  sqrt(-1)\n  ^\n"),
        ("pow(2)", "pow() takes 2 argument(s), got 1 at position 1\n  pow(2)\n  ^\n"),
        ("pi * 2", "unknown name 'pi'; did you mean 'PI'? at position 1\n  pi * 2\n  ^\n"),
        (
            "1 + exit(1)",
            "unknown name 'exit'; known: PI, E, sqrt, abs, round, floor, ceil, sin, cos, tan, log, "
            "log2, log10, exp, pow, min, max at position 5\n  1 + exit(1)\n      ^\n",
        ),
        ("process.exit(1)", "unexpected character '.' at position 8\n  process.exit(1)\n         ^\n"),
    ],
)
def test_calculator_refuses(shipped: Executor, expression: str, message: str) -> None:
    assert failed(shipped.call("calculator", {"expression": expression})) == message


def test_calculator_bounds_its_work(shipped: Executor) -> None:
    deep = "(" * 65 + "1" + ")" * 65
    assert failed(shipped.call("calculator", {"expression": deep})).startswith(
        "the expression nests deeper than 64 levels at position 65\n"
    )
    long = "1+" * 600 + "1"
    assert failed(shipped.call("calculator", {"expression": long})) == (
        "the expression is 1201 characters long; at most 1000 are accepted\n"
    )


# --- json_parse ------------------------------------------------------------------------------

DOC = json.dumps({"users": [{"name": "Ada", "age": 36}, {"name": "Lin"}], "count": 2})


@pytest.mark.parametrize(
    ("path", "value"),
    [("users.1.name", "Lin"), ("count", 2), ("users.0", {"name": "Ada", "age": 36}), ("", json.loads(DOC))],
)
def test_json_parse(shipped: Executor, path: str, value: Any) -> None:
    result = shipped.call("json_parse", {"json": DOC, "path": path})
    assert result.ok, result.error
    assert json.loads(result.output) == value


def test_json_parse_drops_prototype_keys(shipped: Executor) -> None:
    text = '{"a": {"__proto__": {"admin": true}, "constructor": {"x": 1}, "prototype": 1, "b": 2}}'
    assert json.loads(shipped.call("json_parse", {"json": text}).output) == {"a": {"b": 2}}
    assert failed(shipped.call("json_parse", {"json": text, "path": "a.__proto__.admin"})) == (
        "path not found: 'a.__proto__': no key '__proto__' (keys: b) at a\n"
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("users.5.name", "path not found: 'users.5': index 5 is past the end of the array of 2 item(s) at users"),
        ("users.first", "path not found: 'users.first': 'first' is not an index of the array at users"),
        ("users.0.email", "path not found: 'users.0.email': no key 'email' (keys: name, age) at users.0"),
        ("count.value", "path not found: 'count.value': cannot look up 'value' in number at count"),
        ("nobody", "path not found: 'nobody': no key 'nobody' (keys: users, count) at (the top level)"),
    ],
)
def test_json_parse_names_the_failing_part(shipped: Executor, path: str, message: str) -> None:
    assert failed(shipped.call("json_parse", {"json": DOC, "path": path})) == message + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{'a': 1}", 'expected a key in double quotes, found "\'" at position 1 (line 1, column 2)'),
        ("", "expected a value, found the end of the text at position 0 (line 1, column 1)"),
        (
            "[1,]",
            'expected a value (an object, array, string, number, true, false or null), found "]" at position 3 (line 1, column 4)',
        ),
        ('{\n  "a" 1}', 'expected \':\' after the key "a", found "1" at position 8 (line 2, column 7)'),
        ("[01]", 'invalid number, found "1" at position 2 (line 1, column 3)'),
        ("1.", 'invalid number, found "." at position 1 (line 1, column 2)'),
        (
            "NaN",
            'expected a value (an object, array, string, number, true, false or null), found "N" at position 0 (line 1, column 1)',
        ),
        ('"abc', "the string never ends, found the end of the text at position 4 (line 1, column 5)"),
        ('"a\tb"', 'a string holds a control character (escape it), found "\\t" at position 2 (line 1, column 3)'),
        ('"\\x"', 'a string holds an invalid escape, found "\\\\" at position 1 (line 1, column 2)'),
        ("[1] x", 'unexpected text after the JSON value, found "x" at position 4 (line 1, column 5)'),
        ("[" * 3000 + "]" * 2999, "expected ',' or ']', found the end of the text at position 5999 (line 1, column 6000)"),
    ],
)
def test_json_parse_refuses_invalid_json(shipped: Executor, text: str, message: str) -> None:
    assert failed(shipped.call("json_parse", {"json": text})) == f"invalid JSON: {message}\n"


def test_json_parse_keeps_numbers_exactly(shipped: Executor) -> None:
    numbers = ["1e400", "-1e400", "18446744073709551617", "-0", "0.1", "1E-7", "123456789012345678901234567890.5", "5e-324"]
    text = "[" + ", ".join(numbers) + "]"
    assert shipped.call("json_parse", {"json": text}).output == "[\n" + ",\n".join(f"  {n}" for n in numbers) + "\n]"
    assert shipped.call("json_parse", {"json": '{"big": 18446744073709551617}', "path": "big"}).output == "18446744073709551617"
    # Strings, true/false/null and nesting come back as JSON would write them; the last of duplicate keys wins.
    assert shipped.call("json_parse", {"json": '{"s": "\\u00e9\\n", "t": [true, false, null, {}, []], "s": "x"}'}).output == (
        '{\n  "s": "x",\n  "t": [\n    true,\n    false,\n    null,\n    {},\n    []\n  ]\n}'
    )


def test_json_parse_reads_a_deep_valid_document(shipped: Executor) -> None:
    deep = "[" * 5000 + "7" + "]" * 5000
    assert shipped.call("json_parse", {"json": deep}).output == deep  # compact: it nests deeper than 64 levels
    assert shipped.call("json_parse", {"json": deep, "path": ".".join(["0"] * 4998)}).output == "[\n  [\n    7\n  ]\n]"
    objects = '{"a": ' * 20000 + "1" + "}" * 20000
    assert shipped.call("json_parse", {"json": objects, "path": ".".join(["a"] * 19999)}).output == '{\n  "a": 1\n}'
    assert shipped.call("json_parse", {"json": objects, "path": ".".join(["a"] * 19935)}).output == '{"a":' * 65 + "1" + "}" * 65


# --- current_time ----------------------------------------------------------------------------


def test_current_time(shipped: Executor) -> None:
    from datetime import datetime

    for zone, offsets in (("UTC", {"+00:00"}), ("Asia/Tokyo", {"+09:00"}), ("Europe/Lisbon", {"+00:00", "+01:00"})):
        arguments = {} if zone == "UTC" else {"zone": zone}
        result = shipped.call("current_time", arguments)
        assert result.ok, result.error
        now = json.loads(result.output)
        assert set(now) == {"iso", "unix", "zone", "utc_offset", "weekday"}
        assert now["zone"] == zone and now["utc_offset"] in offsets
        stamp = datetime.fromisoformat(now["iso"])
        assert int(stamp.timestamp()) == now["unix"]
        assert stamp.isoformat().endswith(now["utc_offset"]) and stamp.strftime("%A") == now["weekday"]


@pytest.mark.parametrize(
    ("zone", "message"),
    [
        ("Europe/Lisbn", "unknown time zone 'Europe/Lisbn'; did you mean Europe/Lisbon, Europe/Dublin, Europe/Berlin?"),
        ("tokyo", "unknown time zone 'tokyo'; did you mean Asia/Tokyo?"),
        ("Mars/Olympus", "unknown time zone 'Mars/Olympus'; use an IANA name such as Europe/Lisbon"),
        ("../../etc/passwd", "unknown time zone '../../etc/passwd'; use an IANA name such as Europe/Lisbon"),
    ],
)
def test_current_time_unknown_zone(shipped: Executor, zone: str, message: str) -> None:
    assert failed(shipped.call("current_time", {"zone": zone})) == message + "\n"


# --- file tools ------------------------------------------------------------------------------


def test_fs_read(shipped: Executor, tmp_path: Path) -> None:
    file = tmp_path / "lines.txt"
    file.write_text("".join(f"line {n}\n" for n in range(1, 13)))
    assert shipped.call("fs_read", {"path": str(file), "offset": 9, "limit": 2}).output == (
        " 9\tline 9\n10\tline 10\n[showing lines 9-10 of 12; read on with offset=11]\n"
    )
    assert shipped.call("fs_read", {"path": str(file), "offset": 11}).output == (
        "11\tline 11\n12\tline 12\n[showing lines 11-12 of 12]\n"
    )
    (tmp_path / "short.txt").write_text("a\nb")
    assert shipped.call("fs_read", {"path": str(tmp_path / "short.txt")}).output == "1\ta\n2\tb\n"
    (tmp_path / "empty.txt").write_text("")
    assert shipped.call("fs_read", {"path": str(tmp_path / "empty.txt")}).output == f"[{tmp_path / 'empty.txt'} is empty]\n"
    assert shipped.call("fs_read", {"path": str(file), "offset": 20}).output == (
        f"[{file} has 12 line(s); offset 20 is past the end]\n"
    )


def test_fs_read_refuses(shipped: Executor, tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert failed(shipped.call("fs_read", {"path": str(tmp_path / "nope")})) == f"not found: {tmp_path / 'nope'}\n"
    assert (
        failed(shipped.call("fs_read", {"path": str(tmp_path)}))
        == f"{tmp_path} is a directory; use fs_ls or fs_glob to list it\n"
    )
    assert failed(shipped.call("fs_read", {"path": str(tmp_path / "blob.bin")})) == (
        f"{tmp_path / 'blob.bin'} is not a text file (it holds NUL bytes)\n"
    )
    assert failed(shipped.call("fs_read", {"path": str(tmp_path), "offset": 0})) == (
        "offset (0) and limit (2000) must both be at least 1\n"
    )


def test_fs_cat_and_ls(shipped: Executor, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / ".hidden").write_text("")
    (tmp_path / "sub").mkdir()
    assert shipped.call("fs_cat", {"path": str(tmp_path / "a.txt")}).output == "alpha\n"
    assert shipped.call("fs_ls", {"path": str(tmp_path)}).output == "a.txt\nsub/\n"
    assert shipped.call("fs_ls", {"path": str(tmp_path), "all": True}).output == ".hidden\na.txt\nsub/\n"
    assert failed(shipped.call("fs_ls", {"path": str(tmp_path / "a.txt")})) == f"not a directory: {tmp_path / 'a.txt'}\n"
    assert not shipped.call("fs_cat", {"path": str(tmp_path / "nope")}).ok


def test_fs_glob(shipped: Executor, tmp_path: Path) -> None:
    for name in ("a.py", "b.txt", "src/c.py", "src/deep/d.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    assert shipped.call("fs_glob", {"pattern": "**/*.py", "path": str(tmp_path)}).output == ("a.py\nsrc/c.py\nsrc/deep/d.py\n")
    assert shipped.call("fs_glob", {"pattern": "*", "path": str(tmp_path), "limit": 2}).output == (
        "a.py\nb.txt\n[showing 2 of 3 matches; narrow the pattern or raise limit]\n"
    )
    assert shipped.call("fs_glob", {"pattern": "*.rs", "path": str(tmp_path)}).output == f"[no match for *.rs in {tmp_path}]\n"
    assert failed(shipped.call("fs_glob", {"pattern": "*", "path": str(tmp_path / "a.py")})) == (
        f"not a directory: {tmp_path / 'a.py'}\n"
    )
    assert failed(shipped.call("fs_glob", {"pattern": "/etc/*", "path": str(tmp_path)})) == (
        "invalid pattern '/etc/*': give a pattern relative to path, e.g. '**/*.py'\n"
    )
    assert failed(shipped.call("fs_glob", {"pattern": "./.", "path": str(tmp_path)})) == (
        "invalid pattern './.': it names no file or directory below path, e.g. '*' or '**/*.py'\n"
    )


def test_fs_grep(shipped: Executor, tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import os\n# TODO: tidy\nx = 1\n")
    (tmp_path / "src" / "b.md").write_text("todo list\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "c.py").write_text("TODO hidden\n")
    (tmp_path / "blob.py").write_bytes(b"TODO\x00")
    src = tmp_path / "src"
    assert shipped.call("fs_grep", {"pattern": "TODO", "path": str(tmp_path)}).output == f"{src / 'a.py'}:2:# TODO: tidy\n"
    assert shipped.call("fs_grep", {"pattern": "todo", "path": str(src), "ignore_case": True}).output == (
        f"{src / 'a.py'}:2:# TODO: tidy\n{src / 'b.md'}:1:todo list\n"
    )
    assert shipped.call("fs_grep", {"pattern": "todo", "path": str(src), "include": "*.md"}).output == (
        f"{src / 'b.md'}:1:todo list\n"
    )
    assert shipped.call("fs_grep", {"pattern": ".", "path": str(src / "a.py"), "limit": 1}).output == (
        f"{src / 'a.py'}:1:import os\n[showing 1 of 3 matching lines; narrow the search or raise limit]\n"
    )
    assert shipped.call("fs_grep", {"pattern": "nothing", "path": str(src)}).output == f"[no line matches nothing in {src}]\n"
    assert failed(shipped.call("fs_grep", {"pattern": "a(b", "path": str(src)})) == (
        "invalid regular expression 'a(b': missing ), unterminated subpattern at position 2\n"
    )
    assert (
        failed(shipped.call("fs_grep", {"pattern": "a", "path": str(tmp_path / "nope")})) == f"not found: {tmp_path / 'nope'}\n"
    )


def test_fs_write(everything: Executor, tmp_path: Path) -> None:
    target = tmp_path / "new" / "dir" / "note.md"
    text = "line one\n  indented 'quoted' $HOME `x`\n\n"
    result = everything.call("fs_write", {"path": str(target), "contents": text})
    assert (result.ok, result.output) == (True, f"wrote {len(text.encode())} bytes to {target}\n")
    assert target.read_text() == text
    everything.call("fs_write", {"path": str(target), "contents": "replaced"})
    assert target.read_text() == "replaced"
    assert failed(everything.call("fs_write", {"path": str(tmp_path), "contents": "x"})) == (
        f"{tmp_path} is a directory; name a file to write\n"
    )


def test_fs_patch(everything: Executor, tmp_path: Path) -> None:
    file = tmp_path / "greeting.txt"
    file.write_text("hello\nworld\nthe end\n")
    patch = "--- a/greeting.txt\n+++ b/greeting.txt\n@@ -1,3 +1,4 @@\n hello\n-world\n+there\n+friend\n the end\n"
    result = everything.call("fs_patch", {"path": str(file), "patch": patch})
    assert (result.ok, result.output) == (True, f"applied 1 hunk(s) to {file}; it now has 4 line(s) (+1)\n")
    assert file.read_text() == "hello\nthere\nfriend\nthe end\n"
    # The stated line is off by two: the hunk is found nearby.
    shifted = "@@ -5,2 +5,2 @@\n friend\n-the end\n+The End\n"
    assert everything.call("fs_patch", {"path": str(file), "patch": shifted}).ok
    assert file.read_text() == "hello\nthere\nfriend\nThe End\n"


def test_fs_patch_refuses_and_leaves_the_file(everything: Executor, tmp_path: Path) -> None:
    file = tmp_path / "f.txt"
    file.write_text("a\nb\nc\n")
    two = "@@ -1,1 +1,1 @@\n-a\n+A\n@@ -3,1 +3,1 @@\n-x\n+X\n"
    assert failed(everything.call("fs_patch", {"path": str(file), "patch": two})) == (
        "hunk 2 (@@ -3,1 +3,1 @@) does not match: line 3 should be 'x' but is 'c'; the file was not changed\n"
    )
    assert file.read_text() == "a\nb\nc\n"
    assert failed(everything.call("fs_patch", {"path": str(file), "patch": "just text"})) == (
        "patch line 1: expected a hunk header '@@ -OLD,COUNT +NEW,COUNT @@', found 'just text'\n"
    )
    assert failed(everything.call("fs_patch", {"path": str(file), "patch": ""})) == (
        "no hunks: the patch holds no '@@ -OLD,COUNT +NEW,COUNT @@' header\n"
    )
    assert failed(everything.call("fs_patch", {"path": str(tmp_path / "nope"), "patch": two})) == (
        f"not found: {tmp_path / 'nope'}\n"
    )
    assert sorted(os.listdir(tmp_path)) == ["f.txt"]


def test_fs_mkdir_and_rm(everything: Executor, tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert everything.call("fs_mkdir", {"path": str(target)}).output == f"created {target}\n"
    assert everything.call("fs_mkdir", {"path": str(target)}).ok  # idempotent
    (target / "f.txt").write_text("x")
    assert failed(everything.call("fs_mkdir", {"path": str(target / "f.txt")})) == (
        f"{target / 'f.txt'} exists and is not a directory\n"
    )
    assert everything.call("fs_rm", {"path": str(target / "f.txt")}).output == f"removed {target / 'f.txt'}\n"
    assert failed(everything.call("fs_rm", {"path": str(target / "f.txt")})) == f"not found: {target / 'f.txt'}\n"
    assert failed(everything.call("fs_rm", {"path": str(tmp_path / "a")})) == (
        f"{tmp_path / 'a'} is a directory; set recursive to remove it and everything in it\n"
    )
    assert everything.call("fs_rm", {"path": str(tmp_path / "a"), "recursive": True}).ok
    assert os.listdir(tmp_path) == []
    assert (
        failed(everything.call("fs_rm", {"path": "/", "recursive": True})) == "refused: will not remove / (the root directory)\n"
    )
    assert failed(everything.call("fs_rm", {"path": os.environ["HOME"] + "/.", "recursive": True})) == (
        f"refused: will not remove {os.path.realpath(os.environ['HOME'])} (your home directory)\n"
    )


def test_execute_command(shipped: Executor, everything: Executor) -> None:
    refused = shipped.call("execute_command", {"command": "echo hi"})
    assert (refused.status, refused.reason) == ("refused", "not_enabled")
    assert everything.call("execute_command", {"command": "echo out; echo err >&2"}).output == "out\nerr\n"
    result = everything.call("execute_command", {"command": "exit 3"})
    assert (result.ok, result.exit_code) == (False, 3)


# --- http_fetch ------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        port = self.server.server_address[1]
        routes: dict[str, tuple[int, dict[str, str], bytes]] = {
            "/hello": (200, {"Content-Type": "text/plain; charset=utf-8"}, "héllo\n".encode()),
            "/json": (201, {"Content-Type": "application/json"}, b'{"a": 1}'),
            "/headers": (200, {"Content-Type": "text/plain"}, (self.headers.get("X-Token") or "none").encode()),
            "/big": (200, {"Content-Type": "text/plain"}, b"x" * (60 * 1024)),
            "/redirect": (302, {"Location": "/hello"}, b""),
            "/to-private": (302, {"Location": f"http://internal.example.com:{port}/hello"}, b""),
            "/to-mapped": (302, {"Location": f"http://[::ffff:127.0.0.1]:{port}/hello"}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
            "/missing": (404, {"Content-Type": "text/plain"}, b"no such page"),
        }
        status, headers, body = routes.get(self.path, routes["/missing"])
        self.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=10)


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test resolver: public-looking names that resolve to private addresses. In /var/tmp: the shipped config's
    sandbox gives http_fetch a /tmp of its own (docs/sandbox.md), which a file under the host's /tmp is not in."""
    import shutil
    import tempfile

    directory = Path(tempfile.mkdtemp(prefix="toolexec-hosts-", dir="/var/tmp"))
    table = directory / "hosts"
    table.write_text(
        "127.0.0.1 api.example.com\n10.1.2.3 internal.example.com\n169.254.169.254 metadata.example.org\n"
        "93.184.215.14 mixed.example.com\n10.9.8.7 mixed.example.com\n"
    )
    monkeypatch.setenv("HTTP_FETCH_HOSTS_FILE", str(table))
    yield
    shutil.rmtree(directory, ignore_errors=True)


def fetch(executor: Executor, url: str, **arguments: Any) -> ToolResult:
    return executor.call("http_fetch", {"url": url, **arguments})


def test_http_fetch_allow_listed_local_server(shipped: Executor, server: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_FETCH_ALLOW_HOSTS", "127.0.0.1")
    base = f"http://127.0.0.1:{server}"
    result = fetch(shipped, f"{base}/hello")
    assert result.ok, result.error
    assert json.loads(result.output) == {
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "url": f"{base}/hello",
        "body": "héllo\n",
        "truncated": False,
    }
    assert json.loads(fetch(shipped, f"{base}/redirect").output)["url"] == f"{base}/hello"
    assert json.loads(fetch(shipped, f"{base}/json").output)["status"] == 201
    assert json.loads(fetch(shipped, f"{base}/missing").output)["status"] == 404
    assert json.loads(fetch(shipped, f"{base}/headers", headers={"X-Token": "s3cret"}).output)["body"] == "s3cret"
    head = json.loads(fetch(shipped, f"{base}/hello", method="HEAD").output)
    assert (head["status"], head["body"]) == (200, "")
    big = json.loads(fetch(shipped, f"{base}/big").output)
    assert big["truncated"] is True
    assert big["body"] == "x" * 51200 + "\n[… cut: the body is longer than 51200 bytes]"
    assert failed(fetch(shipped, f"{base}/loop")) == "too many redirects (more than 5) starting from the given URL\n"


def test_http_fetch_refuses_redirects_to_private_addresses(
    shipped: Executor, server: int, hosts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_FETCH_ALLOW_HOSTS", "127.0.0.1")
    base = f"http://127.0.0.1:{server}"
    assert failed(fetch(shipped, f"{base}/to-private")) == (
        "refused: internal.example.com resolves to 10.1.2.3, which is not a public address; "
        "add the host to HTTP_FETCH_ALLOW_HOSTS to trust it\n"
    )
    # The allow-listed IPv4 address does not let the same address through spelt as IPv4-mapped IPv6.
    assert failed(fetch(shipped, f"{base}/to-mapped")) == (
        "refused: ::ffff:127.0.0.1 resolves to ::ffff:7f00:1, which is not a public address; "
        "add the host to HTTP_FETCH_ALLOW_HOSTS to trust it\n"
    )


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("localhost", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),  # decimal
        ("0x7f000001", "127.0.0.1"),  # hex
        ("0177.0.0.1", "127.0.0.1"),  # octal
        ("0x7f.1", "127.0.0.1"),  # hex, short form
        ("127.1", "127.0.0.1"),
        ("0", "0.0.0.0"),
        ("10.0.0.1", "10.0.0.1"),
        ("012.0.0.1", "10.0.0.1"),
        ("172.16.5.4", "172.16.5.4"),
        ("192.168.1.1", "192.168.1.1"),
        ("3232235777", "192.168.1.1"),
        ("169.254.169.254", "169.254.169.254"),
        ("100.64.0.1", "100.64.0.1"),  # shared address space (carrier-grade NAT)
        ("224.0.0.1", "224.0.0.1"),  # multicast
        ("255.255.255.255", "255.255.255.255"),
        ("[::1]", "::1"),
        ("[::]", "::"),
        ("[fe80::1]", "fe80::1"),  # link-local
        ("[fc00::1]", "fc00::1"),  # unique-local
        ("[ff02::1]", "ff02::1"),  # multicast
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),  # IPv4-mapped
        ("[::ffff:a00:1]", "::ffff:a00:1"),  # IPv4-mapped 10.0.0.1, hex spelling
        ("[2002:a00:1::]", "2002:a00:1::"),  # 6to4 around 10.0.0.1
        ("[::127.0.0.1]", "::7f00:1"),  # IPv4-compatible
        ("[::a00:1]", "::a00:1"),  # IPv4-compatible 10.0.0.1, hex spelling
        ("[::ffff:0:127.0.0.1]", "::ffff:0:7f00:1"),  # IPv4-translated (SIIT)
        ("[64:ff9b::10.0.0.1]", "64:ff9b::a00:1"),  # NAT64, well-known prefix
        ("[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe"),  # NAT64 of the metadata address 169.254.169.254
        ("[64:ff9b:1::8.8.8.8]", "64:ff9b:1::808:808"),  # NAT64 local-use prefix: never public
        ("[2001:0:a00:1::f7f7:f7f7]", "2001:0:a00:1::f7f7:f7f7"),  # Teredo: server 10.0.0.1, client 8.8.8.8
        ("[2001:0:4136:e378:8000:63bf:80ff:fffe]", "2001:0:4136:e378:8000:63bf:80ff:fffe"),  # Teredo client 127.0.0.1
        ("[2606:4700::5efe:a00:1]", "2606:4700::5efe:a00:1"),  # ISATAP around 10.0.0.1
        ("[2606:4700::200:5efe:c0a8:101]", "2606:4700::200:5efe:c0a8:101"),  # ISATAP (u bit) around 192.168.1.1
        ("api.example.com", "127.0.0.1"),  # public-looking names, private answers (the test resolver)
        ("metadata.example.org", "169.254.169.254"),
        ("mixed.example.com", "10.9.8.7"),  # one public answer and one private: refused
    ],
)
def test_http_fetch_refuses_non_public_addresses(shipped: Executor, hosts: None, host: str, address: str) -> None:
    shown = host.strip("[]")
    assert failed(fetch(shipped, f"http://{host}:9/")) == (
        f"refused: {shown} resolves to {address}, which is not a public address; "
        "add the host to HTTP_FETCH_ALLOW_HOSTS to trust it\n"
    )


def test_http_fetch_refuses_bad_requests(shipped: Executor) -> None:
    assert failed(fetch(shipped, "file:///etc/passwd")) == (
        "unsupported scheme 'file' in file:///etc/passwd: only http and https URLs are fetched\n"
    )
    assert failed(fetch(shipped, "http:///path")) == "http:///path names no host\n"
    assert failed(fetch(shipped, "http://x.invalid/", method="POST")) == "method 'POST' is not supported; use GET or HEAD\n"
    assert (
        failed(fetch(shipped, "http://x.invalid/", timeout=0)) == "timeout 0 is out of range; give 0 < timeout <= 300 seconds\n"
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"url": "http://example.com:99999/"},
            "invalid port '99999' in http://example.com:99999/: give a number from 1 to 65535",
        ),
        ({"url": "http://example.com:0/"}, "invalid port '0' in http://example.com:0/: give a number from 1 to 65535"),
        ({"url": "http://example.com:http/"}, "invalid port 'http' in http://example.com:http/: give a number from 1 to 65535"),
        ({"url": "http://example.com:-1/"}, "invalid port '-1' in http://example.com:-1/: give a number from 1 to 65535"),
        ({"url": "http://[::1/"}, "invalid URL 'http://[::1/': Invalid IPv6 URL"),
        (
            {"url": "http://[1.2.3.4.5]/"},
            "invalid URL 'http://[1.2.3.4.5]/': '1.2.3.4.5' does not appear to be an IPv4 or IPv6 address",
        ),
        (
            {"url": f"http://{'a' * 64}.example.com/"},
            f"invalid host name '{'a' * 64}.example.com': each dot-separated label must have 1 to 63 characters, and the name at most 253",
        ),
        (
            {"url": "http://a..example.com/"},
            "invalid host name 'a..example.com': each dot-separated label must have 1 to 63 characters, and the name at most 253",
        ),
        ({"url": "http://exa$mple.com/"}, "invalid host name 'exa$mple.com': a label may hold only letters, digits, '-' and '_'"),
        (
            {"url": "http://example.com/a b"},
            "invalid URL 'http://example.com/a b': it holds a space or a control character (percent-encode them)",
        ),
        (
            {"url": "http://example.com/\r\nX: y"},
            "invalid URL 'http://example.com/\\r\\nX: y': it holds a space or a control character (percent-encode them)",
        ),
        (
            {"url": "http://example.com/", "headers": {"X-A": "1\r\nX-Injected: yes"}},
            "invalid value for header 'X-A': it holds a line break or NUL",
        ),
        (
            {"url": "http://example.com/", "headers": {"X-A\r\nB": "1"}},
            "invalid header name 'X-A\\r\\nB': use letters, digits and !#$%&'*+-.^_`|~ only",
        ),
        (
            {"url": "http://example.com/", "headers": {"Host": "internal"}},
            "header 'Host' is set by http_fetch itself and cannot be given",
        ),
        (
            {"url": "http://example.com/", "headers": {"Transfer-Encoding": "chunked"}},
            "header 'Transfer-Encoding' is set by http_fetch itself and cannot be given",
        ),
        (
            {"url": "http://example.com/", "headers": {"X-A": "€"}},
            "invalid value for header 'X-A': only Latin-1 text can be sent in a header",
        ),
    ],
)
def test_http_fetch_refuses_malformed_input_clearly(shipped: Executor, arguments: dict[str, Any], message: str) -> None:
    assert failed(shipped.call("http_fetch", arguments)) == message + "\n"


def test_http_fetch_connects_to_the_address_it_checked(
    shipped: Executor, server: int, hosts: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # api.example.com exists only in the test resolver: the request reaches the server only because the
    # connection goes to the address that was resolved and checked, never through a second lookup.
    monkeypatch.setenv("HTTP_FETCH_ALLOW_HOSTS", "127.0.0.1")
    result = fetch(shipped, f"http://api.example.com:{server}/hello")
    assert json.loads(result.output)["body"] == "héllo\n"
    # Non-ASCII in the path and query is percent-encoded, not a traceback.
    assert json.loads(fetch(shipped, f"http://api.example.com:{server}/héllo?q=ü").output)["status"] == 404
