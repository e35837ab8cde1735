"""A warm Bash call has what its tool's top level left, as a cold call has it, whichever of its server's bashes runs
it: the server's first (whose sourcing also lists the files it loaded, under a DEBUG trap of toolexec's) or a later
spare of the sandbox's baseline (which sources the tool as a cold call's bash does, listing nothing: see
``bash_warm.sh``'s ``TOOLEXEC_WARM_QUIET``). A tool whose top level sets a DEBUG trap of its own is not served (its
calls run cold: ``test_warm_bash_traps.py``), so its calls have it as a cold call has it.
"""

from __future__ import annotations

import pytest

from tests.conftest import Project
from toolexec import Executor
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)")

# The tool's top level sets traps and options; each call says what it has of them, and whether it ran warm (forked
# after the sourcing, or in a spare: process 2 under the warm server's init).
TOOL = r"""#!/usr/bin/env bash
# @describe Say what the top level left.
# @meta warm
trap ': usr1' USR1
trap 'printf exit >>"$LLM_OUTPUT"' EXIT
shopt -s extglob
set -o noclobber -o pipefail
LOADED=$BASHPID
main() {
    local warm=cold
    [[ $LOADED == "$BASHPID" ]] || warm=warm
    if [[ -r /proc/1/cmdline ]] && [[ $(tr '\0' ' ' </proc/1/cmdline) == *_bash_zygote* ]]; then warm=warm; fi
    trap -p USR1 >>"$LLM_OUTPUT"
    printf '%s|%s|%s\n' "$(shopt extglob extdebug)" "$(set -o | grep -E '^(noclobber|pipefail) ')" "$warm" \
        >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""
# A DEBUG trap of the tool's own, which runs before each command of the call's top level (the bootstrap's) after
# the sourcing: it notes the command that calls main.
DEBUG_TOOL = r"""#!/usr/bin/env bash
# @describe Note the call of main.
# @meta warm
trap '[[ $BASH_COMMAND != main* ]] || printf "debug: %s\n" "$BASH_COMMAND" >>"$LLM_OUTPUT"' DEBUG
main() { printf 'main\n' >>"$LLM_OUTPUT"; }
eval "$(argc --argc-eval "$0" "$@")"
"""


def _cold_and_warm(project: Project, sandbox: str, name: str, source: str) -> tuple[str, list[tuple[str, object, str]]]:
    """The output of a cold call, and (status, error, output) of four warm ones: the first bash's call, then later
    ones (under the baseline, spares that listed nothing)."""
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no sandbox baseline here")
    project.tool(f"{name}.sh", source)
    with Executor(project.configure(sandbox=sandbox), warm=False) as executor:
        cold = executor.call(name, {})
    with project.executor(sandbox=sandbox, warm_tools=[name]) as executor:
        warm = [executor.call(name, {}) for _ in range(4)]
    assert (cold.status, cold.error) == ("ok", None)
    return cold.output, [(r.status, r.error, r.output) for r in warm]


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_every_warm_call_has_the_traps_and_options_the_top_level_left_as_a_cold_call_has_them(
    project: Project, sandbox: str
) -> None:
    cold, warm = _cold_and_warm(project, sandbox, "left", TOOL)
    expected = cold.replace("|cold\n", "|warm\n")
    assert expected == (
        "trap -- ': usr1' SIGUSR1\nextglob        \ton\nextdebug       \toff|noclobber      \ton\npipefail       \ton|warm\nexit"
    )
    assert warm == [("ok", None, expected)] * 4


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_a_tools_own_debug_trap_is_its_warm_calls_too(project: Project, sandbox: str) -> None:
    """It replaced the one the server's first bash lists the loaded files with, and toolexec's -T (which that one
    follows into files and functions) would have carried it where a cold call's does not: the tool is not served."""
    cold, warm = _cold_and_warm(project, sandbox, "noted", DEBUG_TOOL)
    assert cold == 'debug: main "${argc__positionals[@]}"\nmain\n'
    assert warm == [("ok", None, cold)] * 4
