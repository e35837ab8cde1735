"""A call's cgroup and the process's guard (runtimes/process_linux.py): every cgroup is told to the guard before it is
made, so that a toolexec killed by SIGKILL leaves none (the guard kills what runs there and removes it); a one-shot
``toolexec run`` leaves the removal to the guard altogether, so that its exit does not wait the kernel's grace period
(~10 ms) a cgroup's removal takes; a long-lived executor removes its own and withdraws them from the guard. Real
cgroups: root and a writable pids hierarchy (a root toolexec caps a call's processes with one)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, end_call, run_as_subreaper, start_call, wait_until
from toolexec.runtimes import baseline, cgroup, process_linux, sandbox

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or sandbox._pids_root() is None or not process_linux.available(),
    reason="needs root, a writable pids cgroup hierarchy and the Linux process backend",
)


@pytest.fixture(autouse=True)
def pids_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Root's baseline caps a call with a pids cgroup (as on a kernel older than 6.14, which keeps no pid_max per PID
    namespace): these tests are that path's, in this process and in the toolexec it starts."""
    monkeypatch.setenv("TOOLEXEC_PIDS_CGROUP", "1")


def _ours(pid: int) -> list[str]:
    """The call cgroups process ``pid`` made that are still there."""
    root = sandbox._pids_root()
    assert root is not None
    return sorted(name for name in os.listdir(root) if name.startswith(f"toolexec-{pid}-"))


def _cleanup(paths: list[str]) -> None:
    for path in paths:
        cgroup.remove(path)


def test_the_guard_kills_what_runs_in_its_process_s_cgroups_and_removes_them_and_no_other() -> None:
    """``C TOKEN PARENT``: the process's cgroups under PARENT are ``toolexec-PID-TOKEN…``, PID its guard's parent's
    (this process, which started it). Another process's (another pid, another token), one not named as a call's, and
    a place that goes up a level are not the guard's to remove; nor does a token of another length count."""
    root = sandbox._pids_root()
    assert root is not None
    token, other = os.urandom(8).hex(), os.urandom(8).hex()
    me = os.getpid()
    ours = [os.path.join(root, f"toolexec-{me}-{token}{n}") for n in ("0a", "1b")]
    kept = [
        os.path.join(root, f"toolexec-{me}-{other}00"),  # this pid, another token (told in a line too short)
        os.path.join(root, f"toolexec-1-{token}00"),  # another pid
        os.path.join(root, f"notours-{me}-{token}00"),
    ]
    for path in ours + kept:
        os.mkdir(path)
    guard = process_linux._start_guard()
    assert guard is not None
    inside = subprocess.Popen([*cgroup.join_prefix([ours[0]], strict=True), "sleep", "1000"], start_new_session=True)
    try:
        wait_until(lambda: cgroup.holds(ours[0], inside.pid), "the sleeper to join its cgroup", timeout=30)
        # kept[0] is this pid's under another token: a place that reaches root through "..", "." would reach it
        lines = [f"C {token} {root}", f"C {other[:12]} {root}", f"C {other} {kept[1]}/..", f"C {other} {root}/."]
        lines += [f"C {other} {root}/./", f"C {other} relative"]
        os.write(guard.fd, "".join(line + "\n" for line in lines).encode())
        os.close(guard.fd)  # what the end of the guarded process does
        assert guard.proc.wait(timeout=30) == 0
        assert inside.wait(timeout=30) == -signal.SIGKILL
        assert [path for path in ours + kept if os.path.exists(path)] == kept
    finally:
        if inside.poll() is None:
            inside.kill()
            inside.wait()
        _cleanup(ours + kept)


# Runs a program whose cgroups its guard removes: it makes one for a call, gives it back as the call's end does,
# and exits normally; it prints the cgroup, whether the cgroup was still there at its exit, and its guard's pid.
LEFT_TO_GUARD = """
import os, sys
from toolexec.runtimes import cgroup, process_linux, sandbox

cgroup.leave_to_guard()
path = sandbox._cgroup(8)
sandbox.release(sandbox.Held(cgroups=[path]))
print(path, os.path.isdir(path), process_linux._guard.proc.pid, flush=True)
"""


def test_a_one_shot_process_leaves_its_cgroups_to_its_guard_which_removes_them_after_its_exit() -> None:
    done = subprocess.run([sys.executable, "-c", LEFT_TO_GUARD], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    path, there, guard = done.stdout.split()
    assert there == "True"  # the process did not remove it (nor wait for its removal) before its exit
    wait_until(lambda: not os.path.exists(path), "the guard to remove the cgroup", timeout=30)
    wait_until(lambda: not alive(int(guard)), "the guard to end once it removed it", timeout=30)


def test_a_long_lived_process_removes_its_cgroups_itself_its_guard_knowing_the_place_once() -> None:
    told: list[str] = []
    real = process_linux._tell_guard

    def tell(message: str) -> bool:
        told.append(message)
        return real(message)

    paths = []
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(process_linux, "_tell_guard", tell)
            for _ in range(3):
                path = sandbox._cgroup(8)
                assert path is not None
                paths.append(path)
                sandbox.release(sandbox.Held(cgroups=[path]))
            cgroup.drain()
        assert [path for path in paths if os.path.exists(path)] == []
        root = os.path.dirname(paths[0])
        assert process_linux.removes_cgroups_at_end(root)
        # told of the place once at most (an earlier test of this process may have made one there already)
        assert [line for line in told if line.startswith("C ")] in ([], [f"C {cgroup._token()} {root}\n"])
    finally:
        _cleanup(paths)


NOOP = '#!/usr/bin/env bash\n# @describe Nothing.\nmain() {\n    printf ok >>"$LLM_OUTPUT"\n}\n'


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
def test_a_one_shot_run_under_the_baseline_leaves_no_cgroup_and_its_guard_ends(project: Project) -> None:
    """The run's pids cgroup is removed by its guard after the run ended; the guard is its only orphan, and ends (the
    wrapper waits for it, bounded by the test's timeout)."""
    project.tool("noop.sh", NOOP)
    config = project.configure()
    command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", "noop", "{}"]
    env = {**os.environ, "TOOLEXEC_NO_SERVER": "1"}
    status, out, err, pid, orphans = run_as_subreaper(command, env)
    assert (status, out, err) == (0, "ok", "")
    assert orphans <= 1  # its guard, when it was still removing the cgroup as the run ended
    assert _ours(pid) == []


SLEEPER = """# @describe Say it runs, then wait.
# @option --ready! A file to create once it runs.
main() {
    : >"$argc_ready"
    sleep 1000
}
"""


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
@pytest.mark.parametrize("surface", ["run", "mcp"])
def test_sigkill_of_a_root_toolexec_mid_call_leaves_no_cgroup_no_process_and_no_call_file(
    project: Project, private_tmpdir: Path, tmp_path: Path, surface: str
) -> None:
    """A one-shot run (which leaves its cgroups to its guard) and a long-lived server (which removes its own): killed
    mid-call, the guard kills the call's processes and removes its cgroup and files (before, the cgroup was left)."""
    project.tool("sleeper.sh", SLEEPER)
    config = project.configure()
    ready = tmp_path / "ready"
    base = [sys.executable, "-m", "toolexec", "--config", str(config)]
    env = {**os.environ, "TOOLEXEC_NO_SERVER": "1"}
    arguments = {"ready": str(ready)}
    proc = start_call(base, surface, "sleeper", arguments, env)
    root = sandbox._pids_root()
    assert root is not None
    try:
        wait_until(ready.exists, "the tool to start")
        (name,) = _ours(proc.pid)
        with open(os.path.join(root, name, "cgroup.procs")) as handle:
            members = [int(line) for line in handle]
        assert members  # the tool's processes (and bwrap's) are there
        # (a long-lived server keeps a cold baseline call's files in its pool's directory, toolexec-calls-…)
        assert [p.name for p in private_tmpdir.rglob("toolexec-sleeper-*")]
        proc.kill()
        proc.wait()
        wait_until(lambda: not [pid for pid in members if alive(pid)], "the guard to kill the call's processes")
        wait_until(lambda: _ours(proc.pid) == [], "the guard to remove the call's cgroup")
        wait_until(
            lambda: (
                not [p for p in private_tmpdir.rglob("toolexec-*") if p.name.startswith(("toolexec-sleeper-", "toolexec-calls-"))]
            ),
            "the guard to remove the call's files (and the pool's directory holding them)",
        )
    finally:
        end_call(proc)


ESCAPER = r"""#!/usr/bin/env bash
# @describe Leave a process behind, out of the call's cgroup and session; say how this process started.
# @option --pids! A file to write how this process started and its cgroup to.
# @option --name! The escapee's name.
main() {
    if tr '\0' '\n' </proc/$$/environ | grep -q '^TOOLEXEC_EARLY='; then early=early; else early=cold; fi
    local cgroup
    cgroup=$(grep ':pids:' /proc/$$/cgroup)
    setsid bash -c 'exec -a "$0" sleep 1000' "$argc_name" </dev/null >/dev/null 2>&1 &
    echo "$!" >/sys/fs/cgroup/pids/cgroup.procs
    printf '%s %s %s\n' "$early" "${cgroup##*:}" "$(grep ':pids:' /proc/$!/cgroup)" >>"$argc_pids"
    printf ok >>"$LLM_OUTPUT"
}
"""


@pytest.mark.skipif(not baseline.usable(), reason="needs bwrap and the right to make a PID namespace")
def test_a_root_early_run_that_does_not_wait_for_its_guard_leaves_no_escapee_and_no_cgroup(
    project: Project, tmp_path: Path
) -> None:
    """A root one-shot run whose tool's process was started early (the run before wrote its memo) joins its pids
    cgroup, and at its exit leaves the cgroup's removal to its guard without waiting for it (nothing else is left for
    the guard to do). The tool leaves a process behind in a session of its own, moved out of the call's cgroup: it
    is gone by the time the run has returned (its PID namespace ended with the call), the run leaves no orphan but
    its guard, and the guard removes the cgroup."""
    project.tool("escaper.sh", ESCAPER)
    config = project.configure(sandbox="declared")
    pids = tmp_path / "pids"
    name = f"escapee-{os.urandom(8).hex()}"
    arguments = json.dumps({"pids": str(pids), "name": name})
    command = [sys.executable, "-m", "toolexec", "--config", str(config), "run", "escaper", arguments]
    env = {**os.environ, "TOOLEXEC_NO_SERVER": "1"}
    for _ in range(2):  # the first run writes the memo the second starts early from
        status, out, err, pid, orphans = run_as_subreaper(command, env)
        assert (status, out, err) == (0, "ok", "")
        assert orphans <= 1  # its guard, still removing the cgroup as the run ended (waited for until it ended)
        assert _named(name) == []  # gone by the time the run returned
        wait_until(lambda pid=pid: _ours(pid) == [], "the guard to remove the call's cgroup", timeout=30)
    lines = [line.split() for line in pids.read_text().splitlines()]
    assert [line[0] for line in lines] == ["cold", "early"]
    for _, joined, moved in lines:
        assert joined.startswith("/toolexec-")  # the tool ran in its call's cgroup
        assert moved.rsplit(":", 1)[1] == "/"  # (what it did get out of it: root keeps its powers in the baseline)


def _named(name: str) -> list[int]:
    """Live processes whose command line names ``name``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                line = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if name.encode() in line and alive(int(entry)):
                found.append(int(entry))
    return found
