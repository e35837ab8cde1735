"""A call's group is signalled as the group its tool led, not by a number another session may have taken since.

Once the supervisor has reaped the tool (its status read) and the last process of its group has ended, the number is
free; a process started then in a session of its own (another call's tool, a program of the host) takes it. The
supervisor still signals the call's group after that (SIGTERM to what the tool left, SIGKILL at the end, the search
for leftovers by group and session): none of it may reach that process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pid namespaces are Linux's")

# Run in a PID namespace of its own, where this process is root: the next number given is set through
# ns_last_pid, and no other program of the machine takes it first.
TAKES_THE_NUMBER = """
import json, os, subprocess, sys
from toolexec.runtimes.process import Launch, run_process

taken = []
reap = subprocess.Popen.wait


def wait(self, timeout=None):
    first = self.returncode is None
    code = reap(self, timeout)
    if first and self.args[-1] == "the-tool" and not taken:
        # the tool is reaped and its group empty: the next process started gets its number, in a session of its own
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(self.pid - 1))
        taken.append((self.pid, subprocess.Popen(["sleep", "60"], start_new_session=True)))
    return code


subprocess.Popen.wait = wait
finished = run_process(Launch(argv=["sh", "-c", "echo done", "the-tool"], env={"PATH": os.environ["PATH"]}))
tool, other = taken[0]
print(json.dumps({
    "status": finished.returncode,
    "output": finished.stdout.text()[0],
    "same number": other.pid == tool,
    "other's end": other.poll(),
}))
other.kill()
"""


def _in_own_pid_namespace(script: Path) -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs util-linux's unshare")
    own_user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    argv = [unshare, *own_user, "--pid", "--fork", "--mount-proc", sys.executable, str(script)]
    probe = subprocess.run([*argv[: argv.index(sys.executable)], "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no PID namespace here: {probe.stderr.decode().strip()}")
    return argv


@pytest.mark.parametrize("backend", ["linux", "portable"])
def test_a_session_that_took_the_tools_number_is_not_signalled(tmp_path: Path, backend: str) -> None:
    """The portable backend has no pidfd: once the tool is reaped, its number is the call's group's only while no
    process has it (a group that still has a process keeps its number from any new process)."""
    from toolexec.runtimes.process import BACKEND_VARIABLE

    script = tmp_path / "takes_the_number.py"
    script.write_text(TAKES_THE_NUMBER)
    env = {**os.environ, BACKEND_VARIABLE: backend}
    run = subprocess.run(_in_own_pid_namespace(script), capture_output=True, text=True, timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"status": 0, "output": "done\n", "same number": True, "other's end": None}


# The same for a warm Python call under ``sandbox: off``: its process is its server's child, which reaps it (and says
# its status) before the supervisor signals what the tool left in its group.
WARM_TAKES_THE_NUMBER = """
import json, os, subprocess, sys
from toolexec import Executor
from toolexec.runtimes.warm_fork import CallProcess

taken = []
reap = CallProcess.wait


def wait(self):
    first = self.returncode is None
    code = reap(self)
    if first and self.reported and not taken:
        # the server reaped the call's process and its group is empty: the next process started gets its number
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(self.pid - 1))
        taken.append((self.pid, subprocess.Popen(["sleep", "60"], start_new_session=True)))
    return code


with Executor(sys.argv[1]) as executor:
    first = executor.call("quick", {})
    CallProcess.wait = wait
    second = executor.call("quick", {})
    tool, other = taken[0]
    # Whoever took the number after the write: this sleep, or the process a warm Bash server forks ahead for the next
    # call right after a status (then the sleep got the next number). Either is a process, not the call's, holding
    # the call's old number, which must not have been signalled.
    try:
        with open(f"/proc/{tool}/stat") as f:
            holder = f.read().rsplit(") ", 1)[1][0] not in "ZX"
    except OSError:
        holder = False
    print(json.dumps({
        "results": [(r.status, r.output) for r in (first, second)],
        "its holder alive": holder,
        "other's end": other.poll(),
    }))
    other.kill()
"""

# A tool that answers at once; only a warm call's wait takes the number (a cold one would leave ``taken`` empty)
QUICK = {
    "quick.py": '''
def run() -> str:
    """Answer at once.

    Warm: true
    """
    return "done"
''',
    "quick.sh": """#!/usr/bin/env bash
# @describe Answer at once.
# @meta warm
main() {
    printf done >>"$LLM_OUTPUT"
}
""",
}


@pytest.mark.parametrize("tool", sorted(QUICK))
def test_a_session_that_took_a_warm_calls_number_is_not_signalled(tmp_path: Path, tool: str) -> None:
    """Python's server sends a pidfd of the call's process, through which its group is signalled; Bash's cannot, and
    its call's number is signalled only while no process has it once the server said the status."""
    import yaml

    (tmp_path / "functions" / "tools").mkdir(parents=True)
    (tmp_path / "functions" / "tools" / tool).write_text(QUICK[tool])
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"visible_tools": [tool], "sandbox": "off"}))
    script = tmp_path / "warm_takes_the_number.py"
    script.write_text(WARM_TAKES_THE_NUMBER)
    argv = _in_own_pid_namespace(script)
    run = subprocess.run([*argv, str(config)], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"results": [["ok", "done"]] * 2, "its holder alive": True, "other's end": None}
