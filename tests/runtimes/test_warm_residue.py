"""A warm Python call cannot find an earlier call's request in the memory it was forked with."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from tests.conftest import Project
from toolexec import Executor
from toolexec.records import ToolCall
from toolexec.runtimes import baseline, process_linux, sandbox

# Where in the memory of a process (its /proc folder) ``head`` is followed by ``tail``: the probes' one search.
SCAN = """
def _scan(where, head, tail):
    found = []
    with open(where + "/maps") as maps, open(where + "/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except (OSError, OverflowError, ValueError):
                continue
            at = data.find(head)
            while at >= 0:
                if data[at + len(head): at + len(head) + len(tail)] == tail:
                    found.append(" ".join(fields[5:]) or "anonymous")
                at = data.find(head, at + 1)
    return found
"""

PROBE = (
    """
import os, sys
"""
    + SCAN
    + '''

def run(action: str, first: str = "", second: str = "") -> dict:
    """Remember, or look for what an earlier call was given.

    Warm: true
    Env: PROBE_PORT

    Args:
        action: what to do
        first: the secret's first half
        second: its second half
    """
    if action == "keep":
        return {}
    # never joined here: only an earlier call's memory holds both
    return {"found": _scan("/proc/self", first.encode(), second.encode())}
'''
)

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available() and sandbox.mechanism()[0] == "bwrap"),
    reason="needs bwrap, PID namespaces, pidfd and /proc",
)


@pytest.mark.parametrize("following", [False, True], ids=["first", "back-to-back"])
@pytest.mark.parametrize("mode", ["strict", "baseline", "off"])
def test_a_warm_call_cannot_read_an_earlier_calls_arguments_in_its_memory(project: Project, mode: str, following: bool) -> None:
    """Each call's process is a spare forked from the tool's server: nothing of an earlier call's request (its
    arguments, in ``LLM_TOOL_RAW_JSON``; its files' names) may be in what the server keeps, nor left where it read
    it. A spare rehearsed with the last call's message, which it kept. ``following``: the call that holds the
    secret comes right after another (back to back), so the next spare is made while it runs, just after the server
    handed its message on."""
    head, tail = "SECRET-e1b9f0c4", "7d2a-arguments-of-the-first-call"
    project.tool("probe.py", PROBE)
    settings = {} if mode == "baseline" else {"sandbox": mode}
    with Executor(project.configure(**settings), warm=True) as executor:
        if following:
            assert executor.call("probe", {"action": "keep"}).status == "ok"
        kept = executor.call("probe", {"action": "keep", "first": head + tail})
        looked = [executor.call("probe", {"action": "look", "first": head, "second": tail}) for _ in range(2)]
    assert (kept.status, kept.output) == ("ok", "{}"), kept
    assert [(result.status, json.loads(result.output)) for result in looked] == [("ok", {"found": []})] * 2


@pytest.mark.parametrize("mode", ["strict", "baseline", "off"])
def test_warm_calls_at_once_cannot_read_one_anothers_arguments(project: Project, mode: str) -> None:
    """Calls beyond the spare waiting (calls at once) have theirs made as they come: never while the server holds
    another call's message."""
    head, tail = "SECRET-3f5e77a0", "c41d-arguments-of-a-call"
    project.tool("probe.py", PROBE)
    settings = {} if mode == "baseline" else {"sandbox": mode}
    with Executor(project.configure(max_parallel=8, **settings), warm=True) as executor:
        assert executor.call("probe", {"action": "keep"}).status == "ok"
        kept = executor.call_many(
            [ToolCall(name="probe", arguments={"action": "keep", "first": f"{head}{tail}{n}"}) for n in range(6)]
        )
        looked = executor.call_many(
            [ToolCall(name="probe", arguments={"action": "look", "first": head, "second": tail}) for _ in range(6)]
        )
    assert [(result.status, result.output) for result in kept] == [("ok", "{}")] * 6, kept
    assert [(result.status, json.loads(result.output)) for result in looked] == [("ok", {"found": []})] * 6


BASH_PROBE = """#!/usr/bin/env bash
# @describe Remember, or look for what an earlier call was given, in the memory of this call's namespace init.
# @meta warm
# @option --action! what to do
# @option --first the secret's first half
# @option --second its second half
main() {
    if [[ "$argc_action" == keep ]]; then
        echo '{}' >> "$LLM_OUTPUT"
        return
    fi
    # pid 1 is the call's init: a fork of the server made ahead; root keeps the capabilities to read its memory
    PYTHON -c "$(< LOOK)" "$argc_first" "$argc_second" /proc/1 >> "$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""

LOOK = (
    "import json, sys\n" + SCAN + 'print(json.dumps({"found": _scan(sys.argv[3], sys.argv[1].encode(), sys.argv[2].encode())}))\n'
)


def test_a_warm_bash_call_cannot_read_an_earlier_calls_arguments_in_its_init(project: Project) -> None:
    """Under the baseline a warm Bash call's init is a fork of the server (Python) made ahead: none may be made while
    the server still holds a call's message. Calls beyond the spares waiting (here: calls at once) had the next spares
    made in the hand-over, before the message was zeroed: their inits held an earlier call's arguments, which a root
    tool (its capabilities kept under the baseline) read in its init's memory."""
    head, tail = "SECRET-5c0ffee1", "9a7b-arguments-of-a-call"
    look = project.root / "look.py"
    look.write_text(LOOK)
    project.tool("probe.sh", BASH_PROBE.replace("PYTHON", shlex.quote(sys.executable)).replace("LOOK", shlex.quote(str(look))))
    with Executor(project.configure(max_parallel=8), warm=True) as executor:
        assert executor.call("probe", {"action": "keep"}).status == "ok"
        kept = executor.call_many(
            [ToolCall(name="probe", arguments={"action": "keep", "first": f"{head}{tail}{n}"}) for n in range(6)]
        )
        looked = executor.call_many(
            [ToolCall(name="probe", arguments={"action": "look", "first": head, "second": tail}) for _ in range(6)]
        )
    assert [(result.status, result.output.strip()) for result in kept] == [("ok", "{}")] * 6, kept
    assert [(result.status, json.loads(result.output)) for result in looked] == [("ok", {"found": []})] * 6
