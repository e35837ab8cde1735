"""Argc-built scripts against the real argc: what toolexec passes binds exactly; what it refuses, argc cannot take.

A script is built with the reference ``argc --argc-build`` (as Loki and Coyote ship their tools) and
run with the words :func:`built_argv` makes for generated values (leading ``-``, ``=``, ``--``,
spaces, newlines, commas, unicode). Whatever toolexec passes must come back in the ``argc_*``
variables exactly, in the C and the UTF-8 locale; whatever it refuses must be a value that neither
``--opt VALUE`` nor ``--opt=VALUE`` delivers. Skipped where the reference argc is absent.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.compilers.test_argc_reference import ARGC
from toolexec.compilers import compile_file
from toolexec.errors import BadRequest
from toolexec.records import Argc, ToolDeclaration
from toolexec.runtimes.argc_built import built_argv

pytestmark = pytest.mark.skipif(not ARGC.is_file(), reason=f"the reference argc is not at {ARGC}")

SOURCE = r"""#!/usr/bin/env bash
# @describe Every kind of parameter an argc-built parser binds.
# @option --text A text.
# @option -s --short A text with a short name.
# @option --many* Texts.
# @option --csv*, Comma-separated texts.
# @flag --on A flag.
# @arg first A first word.
# @arg rest* The other words.
dump() { local name="$1"; shift; printf '%s\0%s\0' "$name" "$#"; [ "$#" -eq 0 ] || printf '%s\0' "$@"; }
main() {
  dump text ${argc_text+"$argc_text"}
  dump short ${argc_short+"$argc_short"}
  dump many ${argc_many+"${argc_many[@]}"}
  dump csv ${argc_csv+"${argc_csv[@]}"}
  dump on ${argc_on+"$argc_on"}
  dump first ${argc_first+"$argc_first"}
  dump rest ${argc_rest+"${argc_rest[@]}"}
}
eval "$(argc --argc-eval "$0" "$@")"
"""
LOCALES = ("C", "C.UTF-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ToolDeclaration]:
    folder = tmp_path_factory.mktemp("built")
    (folder / "source.sh").write_text(SOURCE)
    script = folder / "every.sh"
    subprocess.run([str(ARGC), "--argc-build", str(folder / "source.sh"), str(script)], check=True, timeout=60)
    tool = compile_file(script)
    assert isinstance(tool.invocation, Argc) and tool.invocation.built
    return script, tool


def bound(script: Path, argv: list[str], locale: str = "C") -> dict[str, list[str]] | str:
    """What the built parser binds for ``argv`` (each variable's values), or its error message."""
    env = {"PATH": os.environ["PATH"], "LC_ALL": locale}
    done = subprocess.run(["bash", str(script), *argv], capture_output=True, env=env, timeout=60)
    if done.returncode != 0:
        return done.stderr.decode("utf-8", "replace")
    fields = done.stdout.decode("utf-8").split("\0")[:-1]
    result: dict[str, list[str]] = {}
    while fields:
        name, count = fields[0], int(fields[1])
        result[name] = fields[2 : 2 + count]
        fields = fields[2 + count :]
    return result


def expected(arguments: dict[str, Any]) -> dict[str, list[str]]:
    binding = {name: [] for name in ("text", "short", "many", "csv", "on", "first", "rest")}
    for name, value in arguments.items():
        binding[name] = ["1"] if value is True else (value if isinstance(value, list) else [value])
    return binding


# Words built from the characters that decide how argc reads them, and any other text.
PIECES = st.sampled_from(["-", "--", "---", "=", "==", " ", "\n", "\t", "a", "b=c", "é", "中", "\u3000", "\x1f", "-x"])
TEXT = st.one_of(
    st.lists(PIECES, max_size=5).map("".join),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12),
)
NO_COMMA = TEXT.filter(lambda text: "," not in text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["text", "short"]), value=TEXT, locale=st.sampled_from(LOCALES))
def test_an_option_value_binds_exactly_or_argc_cannot_take_it(
    built: tuple[Path, ToolDeclaration], name: str, value: str, locale: str
) -> None:
    script, tool = built
    assert isinstance(tool.invocation, Argc)
    try:
        argv = built_argv(tool, tool.invocation, {name: value})
    except BadRequest as refused:
        assert str(refused).startswith(f"parameter {name!r} of tool 'every': ")
        # in the C locale argc reads only ASCII spaces as spaces: no form of the option delivers the value
        long = f"--{name}"
        for form in ([long, value], [f"{long}={value}"], ["-s", value] if name == "short" else [long, value]):
            assert bound(script, form, "C") != expected({name: value})
        return
    assert bound(script, argv, locale) == expected({name: value})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    many=st.lists(TEXT, max_size=3),
    csv=st.lists(NO_COMMA, max_size=3),
    on=st.booleans(),
    first=st.none() | TEXT,
    rest=st.lists(TEXT, max_size=3),
)
def test_every_kind_of_parameter_together(
    built: tuple[Path, ToolDeclaration], many: list[str], csv: list[str], on: bool, first: str | None, rest: list[str]
) -> None:
    script, tool = built
    assert isinstance(tool.invocation, Argc)
    arguments: dict[str, Any] = {"many": many, "csv": csv, "on": on, "first": first, "rest": rest}
    arguments = {k: v for k, v in arguments.items() if v not in (None, [], False)}
    try:
        argv = built_argv(tool, tool.invocation, arguments)
    except BadRequest as refused:
        # only what argc cannot take: an option word it reads as an option, a newline in a comma list,
        # positional values it would bind to other parameters, or a lone 'help'
        assert "cannot" in str(refused)
        return
    # argc drops the empty parts of a comma-separated word, as `read -a` does
    want = expected(arguments)
    want["csv"] = [text for text in csv if text]
    assert bound(script, argv) == want


def test_values_that_argc_built_tools_such_as_fs_patch_receive(built: tuple[Path, ToolDeclaration]) -> None:
    script, tool = built
    assert isinstance(tool.invocation, Argc)
    patch = "--- a/x.yaml\n+++ b/x.yaml\n@@ -1 +1 @@\n-key=old\n+key=new\n"
    front_matter = "- name: a=b\n- other\n"
    for value in (patch, front_matter, "-", "--", "-x", "-- a=b", "-a b=c", "===", "- =", "--x\n=y", "-中 =é"):
        argv = built_argv(tool, tool.invocation, {"text": value, "many": [value, value]})
        assert bound(script, argv) == expected({"text": value, "many": [value, value]})


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ({"text": "-x=1"}, "parameter 'text' of tool 'every': '-x=1' cannot reach the tool's own argc parser"),
        ({"text": "--opt=a"}, "parameter 'text' of tool 'every': '--opt=a' cannot reach"),
        (
            {"csv": ["a\nb"]},
            "parameter 'csv' of tool 'every': 'a\\nb' cannot reach the tool's own argc parser (an "
            "argc-built script): the parser splits a comma-separated value with `read`, which keeps only its first line",
        ),
        (
            {"first": "help"},
            "parameter 'first' of tool 'every': 'help' cannot reach the tool's own argc parser (an "
            "argc-built script): an argc-built parser answers a lone positional 'help' with its usage",
        ),
        (
            {"rest": ["a", "b"]},
            "parameter 'first' of tool 'every': the tool's own argc parser (an argc-built script) "
            "fills positional parameters in order, so it cannot receive these values of rest; give the positional "
            "parameters before 'first' too",
        ),
    ],
)
def test_what_argc_cannot_receive_is_refused_with_the_reason(
    built: tuple[Path, ToolDeclaration], arguments: dict[str, Any], why: str
) -> None:
    _, tool = built
    assert isinstance(tool.invocation, Argc)
    with pytest.raises(BadRequest) as refused:
        built_argv(tool, tool.invocation, arguments)
    assert str(refused.value).startswith(why)


def test_what_is_refused_really_does_not_reach_argc(built: tuple[Path, ToolDeclaration]) -> None:
    script, _ = built
    assert bound(script, ["--", "help"]) != expected({"first": "help"})  # argc prints its usage
    assert bound(script, ["--", "a", "b"]) == expected({"first": "a", "rest": ["b"]})  # not rest=[a, b]
    assert bound(script, ["--csv", "a\nb"]) == expected({"csv": ["a"]})  # the second line is lost
    assert bound(script, ["--text=-x=1"]) == expected({"text": "1"})
    assert "incorrect number of values" in str(bound(script, ["--text", "-x=1"]))
