"""A tool that has started but whose call fails before its supervision begins (no guard can be had, an interrupt)
is ended there: killed, its pipes closed, reaped. Nothing of it is left, neither a process nor a descriptor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the guard's register is Linux's")

FAILS_AFTER_THE_START = """
import gc, json, os, sys
from toolexec.runtimes import process_linux
from toolexec.runtimes.process import Launch, run_process

unraisable = []
sys.unraisablehook = lambda u: unraisable.append(repr(u.exc_value))
started = []


def register(pid, *args, **kwargs):
    started.append(pid)
    raise OSError(24, "Too many open files")


run_process(Launch(argv=["true"], env={"PATH": os.environ["PATH"]}))  # the guard, started once for every call
process_linux.register = register
before = set(os.listdir("/proc/self/fd"))
try:
    run_process(Launch(argv=["sleep", "60"], env={"PATH": os.environ["PATH"]}, timeout=30))
    said = "ran"
except OSError as error:
    said = str(error)
gc.collect()
children = set()
for task in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{task}/children") as f:
        children.update(int(pid) for pid in f.read().split())
print(json.dumps({
    "said": said,
    "tool_left": bool(started) and started[0] in children,
    "tool_exists": bool(started) and os.path.exists(f"/proc/{started[0]}"),
    "new_fds": len(set(os.listdir("/proc/self/fd")) - before),
    "unraisable": unraisable,
}))
"""


def test_a_tool_started_before_its_call_failed_is_killed_reaped_and_holds_no_descriptor() -> None:
    done = subprocess.run([sys.executable, "-c", FAILS_AFTER_THE_START], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "said": "[Errno 24] Too many open files",
        "tool_left": False,
        "tool_exists": False,
        "new_fds": 0,
        "unraisable": [],
    }
