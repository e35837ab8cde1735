"""A warm Python call cannot find an earlier call's request in the memory it was forked with."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project
from toolexec import Executor
from toolexec.runtimes import baseline, process_linux, sandbox

PROBE = '''
import os, sys


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
    head, tail = first.encode(), second.encode()  # never joined here: only an earlier call's memory holds both
    found = []
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
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
    return {"found": found}
'''

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
