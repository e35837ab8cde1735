"""``.env`` files against python-dotenv: the environment a tool gets is the one ``load_dotenv`` makes.

Generated files mix what decides how a line is read (``export``, quoted keys and values spanning
lines, escapes, ``#`` comments, ``${VAR}`` / ``${VAR:-default}``, CR/LF endings, a BOM, lines that
do not parse) with any other text. For each, python-dotenv's ``load_dotenv`` (without override)
runs on a copy of an environment, and toolexec's reader must produce the same environment.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from unittest import mock

import pytest
from dotenv import load_dotenv
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import Project
from toolexec.runtimes.environment import dotenv_values, parse_dotenv

PIECES = st.sampled_from(
    [
        "A", "B", "export ", "export", "'k ey'", "=", " = ", "\n", "\r\n", "\r", " ", "\t", "#", " #", "# c",
        "'", '"', "\\", "\\n", "\\'", '\\"', "\\t", "\\\\", "${A}", "${B:-d}", "${HOME}", "${", "}", ":-", "$",
        "x", "1", "é", "中", "\ufeff", "=#", "a b",
    ]
)  # fmt: skip
VALUE_PIECES = st.sampled_from(
    [
        "x", "1", " ", "#", " #", "é", "${A}", "${B:-d}", "${HOME:-}", "${C_1}", "${k ey}", "$A", "\\", "\\n", "\\v",
        "\\a", "\\b", "\\f", "\\r", "\\t", "\\'", '\\"', "\\\\", "\\x", "\n", "\r\n", "'", '"', "=", ":-",
        "}", "${",
    ]
)  # fmt: skip
# One binding a line, each part drawn from what changes its reading.
LINE = st.tuples(
    st.sampled_from(["", "export ", "export\t", "export\n", "export", "  ", "\n"]),
    st.sampled_from(["A", "B", "HOME", "C_1", "'k ey'", "'a=b'", "#A", "k-ey"]),
    st.sampled_from(["=", " = ", "=\t", " =", "", "= "]),
    st.sampled_from(["", "'", '"']),
    st.lists(VALUE_PIECES, max_size=6).map("".join),
    st.booleans(),
    st.sampled_from(["", " # c", "#c", "  #", "\t# x", " x"]),
    st.sampled_from(["\n", "\r\n", "\r", ""]),
).map(lambda p: f"{p[0]}{p[1]}{p[2]}{p[3]}{p[4]}{p[3] if p[5] else ''}{p[6]}{p[7]}")
TEXT = st.one_of(
    st.lists(LINE, max_size=6).map("".join),
    st.lists(PIECES, max_size=16).map("".join),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40),
)
ENVIRON = st.dictionaries(st.sampled_from(["A", "B", "HOME", "C_1", "k ey"]), st.sampled_from(["", "env", "e=v"]), max_size=3)


def load_dotenv_environment(text: str, environ: dict[str, str]) -> dict[str, str] | None:
    """The environment python-dotenv's load_dotenv makes of ``environ`` and ``text`` (None if it raises)."""
    with mock.patch.dict(os.environ, environ, clear=True):
        try:
            load_dotenv(stream=io.StringIO(text), override=False)
        except ValueError:  # a name or value no environment can hold ('=' in a quoted key)
            return None
        return dict(os.environ)


@settings(max_examples=1000, deadline=None)
@given(text=TEXT, environ=ENVIRON)
def test_read_exactly_as_python_dotenv_loads_it(text: str, environ: dict[str, str]) -> None:
    ours = {**parse_dotenv(text, environ), **environ}
    reference = load_dotenv_environment(text, environ)
    if reference is None:  # python-dotenv refuses the whole file; toolexec leaves out what cannot be set
        assert all("=" not in key for key in ours)
        return
    assert ours == reference


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("export A=1\nB = 'two words' # note\n", {"A": "1", "B": "two words"}),
        ('C="line one\nline two"\nD=\'it\\\'s\'\n', {"C": "line one\nline two", "D": "it's"}),
        ('E="tab\\there \\"q\\""\nF=x #comment\nG=#not a comment\nH= # empty\n', {"E": 'tab\there "q"', "F": "x", "G": "#not a comment", "H": ""}),
        ("URL=http://${HOST}:${PORT:-8080}/x\nHOST=ignored\n", {"URL": "http://from-env:8080/x", "HOST": "ignored"}),
        ("I=1\nJ=${I}${I}\nK\nL=${K:-d}\n", {"I": "1", "J": "11", "L": ""}),
        ("bad line here\nM=ok\n'unclosed\nN=ok\n", {"M": "ok", "N": "ok"}),
    ],
)  # fmt: skip
def test_what_a_dotenv_file_means(text: str, values: dict[str, str]) -> None:
    environ = {"HOST": "from-env"}
    assert parse_dotenv(text, environ) == values
    assert {**values, **environ} == load_dotenv_environment(text, environ)


def test_a_tool_sees_the_expanded_multi_line_values(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_HOST", "api.example")
    monkeypatch.delenv("API_URL", raising=False)
    functions = project.root / "functions"
    functions.mkdir(parents=True, exist_ok=True)
    (functions / ".env").write_text('export API_URL="https://${API_HOST}/v1"\nKEY="-----BEGIN-----\nabc\n-----END-----"\n')
    (functions / "tools").mkdir(exist_ok=True)
    (functions / "tools" / ".env").write_text("NEAR=${API_URL}/near # the nearer file sees the first\n")
    project.tool(
        "show.py",
        'import os\n\ndef run() -> str:\n    """Show."""\n    return "|".join(os.environ[k] for k in ("API_URL", "KEY", "NEAR"))\n',
    )
    output = project.executor().call("show", {}).output
    assert output == "https://api.example/v1|-----BEGIN-----\nabc\n-----END-----|https://api.example/v1/near"


def test_files_that_cannot_be_read_give_nothing(tmp_path: Path) -> None:
    (tmp_path / ".env").mkdir()
    assert dotenv_values(tmp_path, environ={}) == {}


def test_expansion_reads_only_the_environment_it_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a variable kept from tools (a server's token) must not come back through a .env line naming it
    monkeypatch.setenv("SERVER_TOKEN", "s3cret")
    (tmp_path / ".env").write_text("LEAK=${SERVER_TOKEN}\nSEEN=${VISIBLE}\n")
    assert dotenv_values(tmp_path, environ={"VISIBLE": "yes"}) == {"LEAK": "", "SEEN": "yes"}
