"""Root's process cap under the baseline on a kernel that keeps ``kernel.pid_max`` per PID namespace (Linux 6.14 on,
runtimes/baseline.py): the call's namespace gets pid_max ``PROCESSES + 300``, written inside it before the tool
starts (by a shell in front of the tool on a cold start, by the early spare itself with its go: Bash, Python, node), and no pids cgroup
is made. The host's pid_max never moves, whatever the tool writes in its own namespace. Real bwrap, real one-shot
runs (cold, then started early from the memo the first wrote)."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.conftest import Project
from tests.helpers import run_as_subreaper
from toolexec.runtimes import baseline, sandbox

CAPPED = pytest.mark.skipif(
    not baseline.pid_max_capped() or not baseline.usable(),
    reason="needs root, Linux 6.14 or later (pid_max per PID namespace), bwrap and the right to make a PID namespace",
)

# Each says how its process started (early or cold) and the pid_max it sees, and with ``set`` writes that first.
BASH = r"""#!/usr/bin/env bash
# @describe Say my pid_max.
# @option --set A pid_max to write first.
main() {
    if tr '\0' '\n' </proc/$$/environ | grep -q '^TOOLEXEC_EARLY='; then early=early; else early=cold; fi
    [[ -z ${argc_set-} ]] || echo "$argc_set" >/proc/sys/kernel/pid_max
    printf '%s %s' "$early" "$(cat /proc/sys/kernel/pid_max)" >>"$LLM_OUTPUT"
}
"""
PYTHON = '''def run(set: str = "") -> str:
    """Say my pid_max.

    Args:
        set: a pid_max to write first
    """
    started = open("/proc/self/environ", "rb").read().split(b"\\0")
    early = "early" if any(e.startswith(b"TOOLEXEC_EARLY=") for e in started) else "cold"
    if set:
        with open("/proc/sys/kernel/pid_max", "w") as handle:
            handle.write(set)
    return early + " " + open("/proc/sys/kernel/pid_max").read().strip()
'''

JAVASCRIPT = """import { readFileSync, writeFileSync } from "node:fs";
/** Say my pid_max.
 * @param {string} [set] - A pid_max to write first.
 */
export function run(set = "") {
  const started = readFileSync("/proc/self/environ", "latin1").split("\\0");
  const early = started.some((e) => e.startsWith("TOOLEXEC_NODE_SPARE=")) ? "early" : "cold";
  if (set) writeFileSync("/proc/sys/kernel/pid_max", set);
  return early + " " + readFileSync("/proc/sys/kernel/pid_max", "utf8").trim();
}
"""
NODE = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")


def _host_pid_max() -> str:
    with open(baseline.PID_MAX) as handle:
        return handle.read().strip()


@pytest.mark.parametrize(
    ("release", "at_least"),
    [
        ("6.14.0", True),
        ("6.18.44-fc-v1098", True),
        ("7.0", True),
        ("10.1rc2", True),
        ("6.13.12-arch1", False),
        ("5.15.0-91-generic", False),
        ("6", False),
        ("x.y", False),
        ("", False),
    ],
)
def test_the_kernel_release_decides_whether_pid_max_is_per_namespace(release: str, at_least: bool) -> None:
    assert baseline.kernel_at_least(release, (6, 14)) is at_least


@CAPPED
@pytest.mark.parametrize(
    ("file", "name", "source"),
    [
        ("say.sh", "say", BASH),
        ("say_py.py", "say_py", PYTHON),
        pytest.param("say_js.js", "say_js", JAVASCRIPT, marks=NODE),
    ],
)
def test_a_root_one_shot_run_caps_its_namespace_s_pid_max_cold_and_early_and_makes_no_cgroup(
    project: Project, file: str, name: str, source: str
) -> None:
    project.tool(file, source)
    config = project.configure(runtimes={"python": sys.executable})
    command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", name, "{}"]
    env = {k: v for k, v in os.environ.items() if k != "TOOLEXEC_PIDS_CGROUP"} | {"TOOLEXEC_NO_SERVER": "1"}
    host = _host_pid_max()
    said = []
    for _ in range(2):  # the first run writes the memo the second starts early from
        status, out, err, pid, orphans = run_as_subreaper(command, env)
        assert (status, err) == (0, "")
        assert orphans <= 1  # its guard, when it had not yet read the end of its input
        said.append(out)
        root = sandbox._pids_root()
        assert root is None or [n for n in os.listdir(root) if n.startswith(f"toolexec-{pid}-")] == []
    cap = str(baseline.pid_max(baseline.PROCESSES))
    assert said == [f"cold {cap}", f"early {cap}"]
    assert _host_pid_max() == host


@CAPPED
@pytest.mark.launch_modes
def test_a_root_tool_that_rewrites_its_pid_max_moves_only_its_own_namespace_s(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root may raise its own cap (as it may leave a pids cgroup: the cap stops a runaway tool, not a hostile root);
    the write stays in the call's namespace: the host's pid_max and the next call's are as they were (a cold call's or
    one set up ahead is its cap; a warm server's call, capped by its pids cgroup, sees a new namespace's default)."""
    monkeypatch.delenv("TOOLEXEC_PIDS_CGROUP", raising=False)
    project.tool("say.sh", BASH)
    host = _host_pid_max()
    with project.executor(["say.sh"], sandbox="declared") as executor:
        raised = executor.call("say", {"set": "5000"})
        after = executor.call("say", {})
    assert (raised.status, after.status) == ("ok", "ok"), (raised.error, after.error)
    assert raised.output.split()[1] == "5000"
    assert after.output.split()[1] in (str(baseline.pid_max(baseline.PROCESSES)), "4194304")
    assert _host_pid_max() == host
