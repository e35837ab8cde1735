"""Random input for the built-ins: a result or a clear refusal, never a traceback.

The Python built-ins are imported in this process (their folder on ``sys.path``, as toolexec's bootstrap
does), with the network cut off, so thousands of inputs take seconds; ``json_parse`` is compared with
``JSON.parse`` in one node process over a whole batch of documents.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO

TOOLS = REPO / "functions" / "tools"
FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)


def _module(name: str) -> ModuleType:
    """The shipped tool module, imported as toolexec's bootstrap does (no bytecode written beside it)."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        return __import__(name)
    finally:
        sys.dont_write_bytecode = writes


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No name resolves and no connection opens: the checks before them are what is fuzzed."""

    def no_lookup(*_: object, **__: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    def no_connection(*_: object, **__: object) -> socket.socket:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    monkeypatch.setattr(socket, "create_connection", no_connection)


def _is_refusal(value: object) -> bool:
    return isinstance(value, dict) and value.get("ok") is False and isinstance(value.get("error"), str) and bool(value["error"])


URL_PIECES = st.sampled_from(
    ["http://", "https://", "ftp://", "HTTP://", "[", "]", "::1", "::ffff:", "64:ff9b::", ":", "@", "%", "%00", "%zz",
     "\r\n", "\x00", " ", "/", "?", "#", "..", ".", "a" * 64, "xn--", "ü", "\ud800", "0x7f", "99999", "-1", "example.com",
     "127.0.0.1", "1.2.3.4.5", "localhost", "user:pw@"]
)  # fmt: skip
URLS = st.one_of(st.lists(URL_PIECES, max_size=8).map("".join), st.text(max_size=40), st.just("http://") | st.just(""))
HEADERS = st.dictionaries(st.text(max_size=12), st.text(max_size=12), max_size=3)


@FUZZ
@example(url="http://[::1/", headers={})
@example(url="http://example.com:99999/", headers={"X": "a\r\nb"})
@given(url=URLS, headers=HEADERS)
def test_http_fetch_never_raises(url: str, headers: dict[str, str]) -> None:
    result = _module("http_fetch").run(url, headers=headers, timeout=1)
    assert _is_refusal(result), result


@FUZZ
@example(pattern=".", path=".")
@example(pattern="(a", path=".")
@example(pattern="[[", path=".")  # a FutureWarning (possible nested set) under -W error
@given(pattern=st.text(max_size=12), path=st.sampled_from([".", "", "..", "/nonexistent", "\x00", "/dev/null"]))
def test_fs_grep_and_glob_never_raise(pattern: str, path: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = tmp_path_factory.getbasetemp() / "fuzz-tree"
    if not root.exists():
        (root / "sub").mkdir(parents=True)
        (root / "sub" / "a.txt").write_text("alpha\nbeta\n")
    for tool, arguments in (("fs_grep", {"pattern": pattern}), ("fs_glob", {"pattern": pattern or "*"})):
        where = str(root / path) if path in (".", "..", "") else path
        result = _module(tool).run(path=where, **arguments)
        assert isinstance(result, str) or _is_refusal(result), (tool, result)


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=6),
        st.sampled_from([Decimal("1e400"), Decimal("-0"), Decimal("18446744073709551617"), Decimal("0.1")]),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=12,
)


def _dumps(value: object) -> str:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


MUTATIONS = st.sampled_from(["", ",", "]", "}", "{", "[", '"', "\\", "-", "e", ".", "0", " ", "\t", "\x01", "nul", "\ud800"])


@st.composite
def documents(draw: st.DrawFn) -> str:
    text = _dumps(draw(JSON_VALUES))
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(text)))
        cut = draw(st.integers(min_value=0, max_value=2))
        text = text[:at] + draw(MUTATIONS) + text[at + cut :]
    return text


CHECK = r"""
const { run } = require(process.argv[1]);
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const out = lines.map((text) => {
  let reference = "valid";
  try { JSON.parse(text); } catch { reference = "invalid"; }
  const result = run({ json: text });
  return { reference, ours: typeof result === "string" ? result : result.error };
});
process.stdout.write(JSON.stringify(out));
"""


@st.composite
def batches(draw: st.DrawFn) -> list[str]:
    return draw(st.lists(documents(), min_size=50, max_size=50))


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(texts=batches())
def test_json_parse_agrees_with_json_parse_and_keeps_numbers(texts: list[str]) -> None:
    given_lines = "".join(json.dumps(t) + "\n" for t in texts)
    done = subprocess.run(
        ["node", "-e", CHECK, str(TOOLS / "json_parse.js")], input=given_lines, capture_output=True, text=True, check=True
    )
    for text, verdict in zip(texts, json.loads(done.stdout), strict=True):
        if verdict["reference"] == "invalid":
            assert verdict["ours"].startswith("invalid JSON: "), (text, verdict)
            continue
        assert not verdict["ours"].startswith("invalid JSON: "), (text, verdict)
        # The same value, every number with exactly the text it was written with.
        assert _read(verdict["ours"]) == _without_blocked(_read(text)), text


@dataclass(frozen=True)
class Number:
    text: str


def _read(text: str) -> object:
    return json.loads(text, parse_float=Number, parse_int=Number, parse_constant=Number)


def _without_blocked(value: object) -> object:
    if isinstance(value, list):
        return [_without_blocked(v) for v in value]
    if isinstance(value, dict):
        return {k: _without_blocked(v) for k, v in value.items() if k not in ("__proto__", "constructor", "prototype")}
    return value


def test_the_fuzzed_modules_are_the_shipped_ones() -> None:
    assert Path(_module("http_fetch").__file__ or "").resolve() == (TOOLS / "http_fetch.py").resolve()
    assert not (TOOLS / "__pycache__").exists()


# --- the bounds, made small in-process ---------------------------------------------------------


def test_fs_glob_stops_at_its_entry_and_time_bounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs_glob = _module("fs_glob")
    for name in ("a.py", "b.py", "c.py", "d/e.py"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    monkeypatch.setattr(fs_glob, "MAX_ENTRIES", 3)
    assert fs_glob.run("**/*.py", str(tmp_path)) == (
        "[stopped after looking at 3 entries; the matches found until then are shown: narrow the pattern or the path]\n"
    )
    monkeypatch.setattr(fs_glob, "MAX_ENTRIES", 100)
    monkeypatch.setenv("FS_GLOB_TIME_LIMIT", "0.01")
    monkeypatch.setattr(fs_glob.time, "monotonic", iter([0.0, 1.0, 2.0, 3.0]).__next__)
    assert fs_glob.run("**/*.py", str(tmp_path)) == (
        "[stopped after 0.01 seconds; the matches found until then are shown: narrow the pattern or the path]\n"
    )


def test_fs_grep_searches_a_bounded_part_of_each_line_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fs_grep = _module("fs_grep")
    monkeypatch.setattr(fs_grep, "MAX_SEARCHED", 10)
    monkeypatch.setattr(fs_grep, "MAX_FILE", 40)
    (tmp_path / "a.txt").write_text("0123456789needle\nneedle\n" + "x\n" * 10 + "needle late\n")
    file = tmp_path / "a.txt"
    assert fs_grep.run("needle", str(file)) == (
        f"{file}:2:needle\n[1 line(s) longer than 10 bytes were searched in their first 10 bytes]\n"
        f"[only the first 40 bytes of {file} were searched]\n"
    )


def test_http_fetch_refuses_a_connection_that_reached_another_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layer below (a socket shim, a transparent proxy) that lands the connection elsewhere is caught."""
    http_fetch = _module("http_fetch")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        real = socket.socket.connect

        def elsewhere(address: tuple[str, int], timeout: float) -> socket.socket:
            sock = socket.socket()
            real(sock, ("127.0.0.1", port))
            return sock

        monkeypatch.setattr(socket, "create_connection", elsewhere)
        monkeypatch.setenv("HTTP_FETCH_ALLOW_HOSTS", "127.0.0.0/8")
        assert http_fetch.run(f"http://127.0.0.2:{port}/") == {
            "ok": False,
            "error": "refused: the connection for 127.0.0.2 reached 127.0.0.1 instead",
        }
