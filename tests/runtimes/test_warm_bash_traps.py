"""A warm Bash call's shell is its cold call's, whatever the tool's top level does with the shell's tracing: its own
``set -T`` / ``set -E`` (``functrace``, ``errtrace``), ``shopt -s extdebug``, or a DEBUG trap of its own. The server's
first bash lists the files the sourcing read under a DEBUG trap of toolexec's (``bash_warm.sh``); that listing ran
under extdebug, which turned the tool's own -T and -E off again (its warm calls lost them), and under which a DEBUG
trap of the tool's that fails skipped every command after it (the tool's own, and toolexec's: the server spun at
100% CPU until the call timed out). Each tool runs cold, then warm, and the whole results are compared; whether each
call ran warm is counted (``warm.WarmStart.spawn``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec import Executor
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)")

SANDBOXES = ["off", "declared"]  # (declared: the sandbox's baseline, each call in a spare of its own)

# main's traps, set in the call: what -T and -E (the top level's) carry into functions, command substitutions and
# subshells. Each notes itself in the output; the first line is the shell's flags and options.
_MAIN = r"""
inner() { false; printf 'in\n' >>"$LLM_OUTPUT"; }
main() {
    printf '%s|%s\n' "$-" "$SHELLOPTS" >>"$LLM_OUTPUT"
    trap 'printf "debug:%s\n" "${FUNCNAME[0]-top}" >>"$LLM_OUTPUT"' DEBUG
    trap 'printf "err:%s\n" "${FUNCNAME[0]-top}" >>"$LLM_OUTPUT"' ERR
    trap 'printf "return:%s\n" "${FUNCNAME[0]-top}" >>"$LLM_OUTPUT"' RETURN
    inner
    printf 'sub:%s\n' "$(false; echo x)" >>"$LLM_OUTPUT"
    trap - DEBUG ERR RETURN
}
"""
_TAIL = 'eval "$(argc --argc-eval "$0" "$@")"\n'
TOOLS = {
    # the top level's own -T and -E (the listing's `shopt -u extdebug` turned them off)
    "traced": "#!/usr/bin/env bash\n# @describe Trace.\n# @meta warm\nset -T -E\n" + _MAIN + _TAIL,
    # extdebug on and off (which sets -T and -E, then clears them), then -T set in a function the top level calls
    "nested": "#!/usr/bin/env bash\n# @describe Trace.\n# @meta warm\nshopt -s extdebug\nshopt -u extdebug\n"
    "trace() { set -o functrace; }\ntrace\nset -E\n" + _MAIN + _TAIL,
    # -T set, then unset again by the top level: off, as in a cold call
    "untraced": "#!/usr/bin/env bash\n# @describe Trace.\n# @meta warm\nset -T\nset +T\n" + _MAIN + _TAIL,
    # nothing: a cold call's shell has neither
    "plain": "#!/usr/bin/env bash\n# @describe Trace.\n# @meta warm\n" + _MAIN + _TAIL,
    # extdebug left on by the top level (it sets -T and -E too)
    "extdebug": "#!/usr/bin/env bash\n# @describe Trace.\n# @meta warm\nshopt -s extdebug\n" + _MAIN + _TAIL,
}


@pytest.fixture
def problems(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Why each Bash server that did not start did not (its ``problem``)."""
    from toolexec.runtimes import warm_bash, warm_fork

    said: list[str | None] = []
    for kind in (warm_bash.BashServer, warm_fork.ForkServer):

        def start(self: warm_fork.ServerProcess, _start=kind.start) -> bool:  # type: ignore[no-untyped-def]
            started = _start(self)
            if not started:
                said.append(self.problem)
            return started

        monkeypatch.setattr(kind, "start", start)
    return said


def _outcomes(project: Project, sandbox: str, name: str, calls: int = 3) -> tuple[tuple, list[tuple]]:
    """(ok, status, exit code, output, error, stderr) of a cold call, and of ``calls`` warm ones."""
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no sandbox baseline here")
    with Executor(project.configure(sandbox=sandbox), warm=False) as executor:
        cold = executor.call(name, {})
    with project.executor(sandbox=sandbox, warm_tools=[name]) as executor:
        warm = [executor.call(name, {}) for _ in range(calls)]
    shape = lambda r: (r.ok, r.status, r.exit_code, r.output, r.error, r.stderr)  # noqa: E731
    return shape(cold), [shape(r) for r in warm]


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", sorted(TOOLS))
def test_a_warm_call_has_the_tracing_its_top_level_left_as_its_cold_call_has_it(
    project: Project, sandbox: str, name: str, warm_calls: list[bool]
) -> None:
    project.tool(f"{name}.sh", TOOLS[name])
    cold, warm = _outcomes(project, sandbox, name)
    flags, options = cold[3].splitlines()[0].split("|")
    traced = name in ("traced", "nested", "extdebug")
    assert (("T" in flags, "E" in flags), "functrace" in options) == ((traced, traced), traced)
    assert (cold[:3], cold[4:]) == ((True, "ok", 0), (None, ""))
    assert warm == [cold] * 3
    assert warm_calls == [True] * 3


# A DEBUG trap of the tool's own that fails (returns non-zero) as its top level ends: harmless in a cold call; under
# the listing's extdebug it skipped each command after it, the top level's own (SET) and then toolexec's, for ever.
FAILING_DEBUG = r"""#!/usr/bin/env bash
# @describe Debug.
# @meta warm
trap '[[ $BASH_COMMAND != main* ]] || printf "debug:%s\n" "$BASH_COMMAND" >>"$LLM_OUTPUT"; false' DEBUG
SET=yes
main() { printf 'set:%s\n' "${SET-}" >>"$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""
# A RETURN trap set at the top level: toolexec's -T (before each function call and source, so that its DEBUG trap
# follows) would have carried it into the functions the top level calls; a cold call's runs it for none of them.
RETURN_TOOL = r"""#!/usr/bin/env bash
# @describe Return.
# @meta warm
trap 'printf "return:%s\n" "${FUNCNAME[0]-top}" >>"${LLM_OUTPUT:-/dev/null}"' RETURN
helper() { :; }
helper
main() { helper; printf 'main\n' >>"$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize(
    ("name", "source", "expected"),
    [
        ("debugged", FAILING_DEBUG, 'debug:main "${argc__positionals[@]}"\nset:yes\n'),
        ("returned", RETURN_TOOL, "return:top\nmain\n"),
    ],
)
def test_a_tool_whose_top_level_sets_a_debug_or_return_trap_runs_cold_and_at_once(
    project: Project, sandbox: str, name: str, source: str, expected: str, warm_calls: list[bool], problems: list
) -> None:
    """Not served (no server runs its top level as a cold call would: the trap would follow toolexec's -T), and no
    server spins: each call runs cold, with its cold call's result."""
    project.tool(f"{name}.sh", source)
    cold, warm = _outcomes(project, sandbox, name, calls=2)
    assert cold == (True, "ok", 0, expected, None, "")
    assert warm == [cold] * 2
    assert warm_calls == [False] * 2
    assert problems == [
        "the tool's top level sets a DEBUG or RETURN trap (a warm server would run it unlike a cold call): its calls run cold"
    ]


# A file the top level sources from a function, which defines no function (declare -F cannot name it): the listing
# still finds it (toolexec's -T is on for the function's call, so that its trap follows into the file), and an edit
# of it is run by the next call.
SOURCING = r"""#!/usr/bin/env bash
# @describe Word.
# @meta warm
load() { . "${BASH_SOURCE[0]%/*}/words.sh"; }
load
main() { printf '%s|%s\n' "$WORD" "$-" >>"$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_file_sourced_in_a_function_is_looked_at_before_each_call(
    project: Project, sandbox: str, warm_calls: list[bool]
) -> None:
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no sandbox baseline here")
    project.tool("sourcing.sh", SOURCING)
    words = project.tools / "words.sh"
    words.write_text("WORD=hello\n")
    with project.executor(["sourcing.sh"], sandbox=sandbox, warm_tools=["sourcing"]) as executor:
        first = executor.call("sourcing", {}).output
        before = words.stat()
        words.write_text("WORD=howdy\n")
        os.utime(words, ns=(before.st_atime_ns, before.st_mtime_ns))  # (only its ctime tells it changed)
        second = executor.call("sourcing", {}).output
    assert (first, second) == ("hello|hB\n", "howdy|hB\n")
    assert warm_calls == [True, True]
    assert Path(words).read_text() == "WORD=howdy\n"


# The top level changes the environment it was started in: a variable it adds to, one it exports anew from another,
# one it unsets. A warm call's script set every variable of the call again after the sourcing (the top level's PATH
# was the call's again in main, the unset variable back); it now sets only what the call changes of the server's
# environment (its own variables: LLM_*, the call's marker), so main sees what a cold call's main sees.
ENVIRONMENT_TOOL = r"""#!/usr/bin/env bash
# @describe Change the environment.
# @meta warm
PATH="$PATH:/top-level"
export S15_DERIVED="${S15_KEPT-unset}-top"
unset S15_GONE
main() {
    printf '%s|%s|%s|%s|%s\n' "${PATH##*:}" "$S15_DERIVED" "${S15_GONE-gone}" "$(printenv S15_DERIVED)" \
        "$([[ -w $LLM_OUTPUT ]] && echo output)" >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_a_warm_call_has_the_environment_its_top_level_left_as_its_cold_call_has_it(
    project: Project, sandbox: str, warm_calls: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S15_KEPT", "kept")
    monkeypatch.setenv("S15_GONE", "here")
    project.tool("environment.sh", ENVIRONMENT_TOOL)
    cold, warm = _outcomes(project, sandbox, "environment")
    assert cold == (True, "ok", 0, "/top-level|kept-top|gone|kept-top|output\n", None, "")
    assert warm == [cold] * 3
    assert warm_calls == [True] * 3
