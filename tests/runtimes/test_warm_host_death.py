"""A warm server ends with the toolexec that started it, even while it is still starting (its tool's top level
running, not yet reading the end of its socket or stdin): a host killed with SIGKILL leaves no process of it.

Real servers, a real host process (an Executor in a ``python -c`` of its own), killed the way nothing can catch.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, wait_until
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="the guard needs pidfd and /proc (Linux)")

HANG_SH = """#!/usr/bin/env bash
# @describe Never finish loading.
# @meta warm
echo "$BASHPID" >>{pids}
while :; do sleep 0.05; done
main() {{ echo never >>"$LLM_OUTPUT"; }}
"""
HANG_PY = '''import os, time

with open({pids!r}, "a") as out:
    out.write(f"{{os.getpid()}}\\n")
while True:
    time.sleep(0.05)


def run() -> str:
    """Never finish loading.

    Warm: true
    """
    return "never"
'''
HOST = """import sys, threading, time
from toolexec import Executor

executor = Executor(sys.argv[1], warm=True)
threading.Thread(target=lambda: executor.call("hang", {}), daemon=True).start()
time.sleep(120)
"""


@pytest.mark.parametrize("mode", ["off", "declared"])
@pytest.mark.parametrize("file", ["hang.sh", "hang.py"])
def test_a_host_killed_while_its_warm_server_starts_leaves_no_process_of_it(
    project: Project, tmp_path: Path, mode: str, file: str
) -> None:
    if mode != "off" and not baseline.usable():
        pytest.skip("the baseline needs bwrap and namespaces")
    pids = tmp_path / "pids"
    source = HANG_SH if file.endswith(".sh") else HANG_PY
    project.tool(file, source.format(pids=str(pids)))
    config = project.configure(sandbox=mode)
    here = tmp_path / "here"  # the host's working directory, so every process it starts (the guard too) starts here
    here.mkdir()
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(config)], cwd=here, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: pids.exists() and pids.read_text().endswith("\n"), "the warm server's top level to run", 60)
        loading = [int(line) for line in pids.read_text().split()]
        assert all(alive(pid) for pid in loading)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    # (a sandboxed server's top level says its own namespace's number: its processes are found by where they run)
    wait_until(lambda: not _started_in(here), "every process the host started to end", 15)
    assert _started_in(here) == []


def _started_in(here: Path) -> list[int]:
    """Live processes whose working directory is ``here`` (every process the host started, a warm server among them)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{name}/cwd") == str(here):
                state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
                if state not in (b"Z", b"X"):
                    found.append(int(name))
        except OSError:
            continue
    return found
