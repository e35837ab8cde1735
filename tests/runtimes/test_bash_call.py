"""A warm Bash call's script (runtimes/_bash_call.py), run by a real bash: the environment it exports is the one it was
given, word for word (every value quoted at once, joined by NUL: no quote, space, newline, ``$``, backquote or
backslash of a value is anything but itself), its working directory entered and nothing else run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from toolexec.runtimes._bash_call import call_script

HOSTILE = {
    "PLAIN": "value",
    "QUOTES": "it's \"quoted\" 'twice''",
    "EMPTY": "",
    "LINES": "one\ntwo; touch {sentinel}\n\n",
    "EXPANSIONS": "$(touch {sentinel}) `touch {sentinel}` ${{HOME}} $HOME !! \\ \\'",
    "ONLY_QUOTE": "'",
    "SPACES": "  a  b  ",
    "UNICODE": "ünï — 語",
    "SHLVL": "4",
}


def test_the_call_script_exports_each_value_as_it_is_and_runs_nothing(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    env = {name: value.format(sentinel=sentinel) for name, value in HOSTILE.items()}
    script = call_script(env, str(tmp_path))
    # (a clean environment: only what the script exports, and what bash sets itself, is there; `env` is not the last
    # command, which bash would exec with SHLVL one less)
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", 'eval "$(cat)"; printf "%s\\0" "$PWD"; env -0; true'],
        input=script,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    cwd, *pairs = done.stdout.decode().rstrip("\0").split("\0")
    seen = dict(pair.split("=", 1) for pair in pairs)
    assert cwd == str(tmp_path)
    assert {name: seen.get(name) for name in env} == {**env, "SHLVL": "5"}
    assert not sentinel.exists()
    assert done.stderr == b""


def test_with_the_bashs_own_environment_the_script_sets_only_what_the_call_changes(tmp_path: Path) -> None:
    """Started in ``base`` (the server's environment), the bash ends with the call's: changed and new variables set,
    a variable the call lacks unset, one both share untouched (so that what the tool's top level made of it stays)."""
    base = {"PATH": "/usr/bin:/bin", "SHARED": "same", "CHANGED": "before", "GONE": "x", "SHLVL": "2"}
    env = {"PATH": "/usr/bin:/bin", "SHARED": "same", "CHANGED": "after'$(x)", "NEW": "new", "SHLVL": "2"}
    script = call_script(env, str(tmp_path), base=base)
    assert script.decode().splitlines() == [
        "command export -- 'CHANGED=after'\\''$(x)' 'NEW=new' 2>/dev/null",
        "command unset -v -- 'GONE' 2>/dev/null",
        f"cd -- '{tmp_path}' || exit 70",
    ]
    # SHARED, changed by the top level after the bash started, keeps the top level's value
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", 'SHARED=top; eval "$(cat)"; env -0; true'],
        input=script,
        capture_output=True,
        env=base,
        check=True,
    )
    seen = dict(pair.split("=", 1) for pair in done.stdout.decode().rstrip("\0").split("\0"))
    assert {name: seen.get(name) for name in (*env, "GONE")} == {**env, "SHARED": "top", "SHLVL": "3", "GONE": None}
