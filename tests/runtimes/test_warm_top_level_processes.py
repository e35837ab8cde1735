"""A process a warm tool's top level starts (a Bash ``helper &``, a Node ``spawn`` at import) in its warm server.

The server says it is ready on a pipe once the tool is loaded; such a process inherits that pipe and holds it open
as long as it runs. The word ends with its own end mark (two NULs), and where the server ends instead its end is
watched (a pidfd), so neither waits for the pipe to close: before, a Bash tool's first warm call waited for the
helper to end (under ``sandbox: off`` up to the 60 s a tool may take to load, then ran cold) and under the baseline
every warm call timed out. A process of the tool's top level is the server's: it is ended with the server, as a cold
call's end ends what the tool left.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import Project
from tests.helpers import sleeping, wait_until
from toolexec.runtimes import baseline, process_linux

pytestmark = [
    pytest.mark.skipif(not process_linux.available(), reason="needs pidfd and /proc"),
    pytest.mark.usefixtures("no_new_zombie"),
]

HELPER = "61.2345"  # how long the helper sleeps: longer than the test; and its mark (no other process sleeps it)
TOOLS = {
    "bash": (
        "holder.sh",
        f"""#!/usr/bin/env bash
# @describe Start a helper at the top level, then answer.
# @meta warm
# @option --n! which call
sleep {HELPER} &
main() {{ printf 'call %s' "$argc_n" >>"$LLM_OUTPUT"; }}
""",
    ),
    "javascript": (
        "holder.mjs",
        f"""import {{ spawn }} from "node:child_process";
spawn("sleep", ["{HELPER}"], {{ stdio: "ignore" }});

/**
 * Start a helper at import, then answer.
 * @warm
 * @param {{string}} n - which call
 */
export function run(n) {{
  return `call ${{n}}`;
}}
""",
    ),
}
FAILING = f"""#!/usr/bin/env bash
# @describe Start a helper at the top level, then fail there.
# @meta warm
# @option --n! which call
sleep {HELPER} &
echo "the top level failed" >&2
exit 3
main() {{ printf 'never' >>"$LLM_OUTPUT"; }}
"""
MODES = ["off", pytest.param("declared", marks=pytest.mark.skipif(not baseline.usable(), reason="needs bwrap"))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("language", sorted(TOOLS))
def test_a_helper_the_top_level_started_neither_holds_warm_calls_nor_outlives_the_server(
    project: Project, language: str, mode: str
) -> None:
    file, source = TOOLS[language]
    project.tool(file, source)
    tool = file.rsplit(".", 1)[0]
    took = []
    with project.executor(sandbox=mode, timeout=20, warm_tools=[tool]) as executor:
        for n in range(3):
            started = time.monotonic()
            result = executor.call(tool, {"n": str(n)})
            took.append(time.monotonic() - started)
            assert (result.status, result.output, result.error) == ("ok", f"call {n}", None)
    assert max(took) < 10, took  # (the helper sleeps 61 s: a call that waited for it would take that, or time out)
    wait_until(lambda: not sleeping(HELPER), "the helpers to end with their servers", timeout=10)


@pytest.mark.parametrize("mode", MODES)
def test_a_top_level_that_fails_after_starting_a_helper_gives_the_cold_calls_result_at_once(project: Project, mode: str) -> None:
    project.tool("failing.sh", FAILING)
    project.tool("failing_cold.sh", FAILING.replace("# @meta warm\n", ""))
    with project.executor(sandbox=mode, timeout=20, warm_tools=["failing"]) as executor:
        cold = executor.call("failing_cold", {"n": "0"})
        started = time.monotonic()
        warm = [executor.call("failing", {"n": str(n)}) for n in range(2)]
        took = time.monotonic() - started
    assert (cold.status, cold.output) == ("error", "")
    assert "exited with code 3: the top level failed" in (cold.error or "")
    expected = (cold.status, "", (cold.error or "").replace("'failing_cold'", "'failing'"))
    assert [(result.status, result.output, result.error) for result in warm] == [expected] * 2
    assert took < 10, took
    wait_until(lambda: not sleeping(HELPER), "the helpers to end", timeout=10)
