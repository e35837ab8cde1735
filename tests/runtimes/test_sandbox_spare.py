"""Sandboxes set up ahead (runtimes/sandbox_spare.py), against hostile tools and a hostile host.

The behaviour suites (tests/runtimes/test_sandbox.py, test_baseline.py and the ``launch_modes`` modules) run every
confined and baseline call through a spare too (tests/conftest.py's ``ahead`` mode). Here is what only spares have:
one is made from a kind's second call on and used once; what it holds is its call's alone (files, /tmp, processes,
environment); one made for another policy, view or working directory is never used; a spare pre-seeded, replaced or
killed from outside is noticed and the call runs cold; nothing is left after close, after the executor is collected,
after a fork.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import wait_until, zombies_of
from toolexec.runtimes import Launch, baseline, run_process, sandbox, sandbox_spare

pytestmark = pytest.mark.skipif(
    not sandbox_spare.eligible(sandbox.Confinement()) or not baseline.usable(),
    reason="needs bwrap able to set a sandbox up, and the Linux process backend",
)

PROBE = '''
import os, signal

def run(action: str, arg: str = "") -> str:
    """A tool that looks around.

    Args:
        action: what to try
        arg: its argument
    """
    if action == "env":
        return os.environ.get(arg, "<unset>")
    if action == "read":
        try:
            with open(arg) as handle:
                return handle.read() or "<empty>"
        except OSError as exc:
            return f"refused: {exc.strerror}"
    if action == "write":
        try:
            with open(arg, "w") as handle:
                handle.write("pwned")
            return "wrote"
        except OSError as exc:
            return f"refused: {exc.strerror}"
    if action == "kill":
        try:
            os.kill(int(arg), signal.SIGKILL)
            return "killed"
        except OSError as exc:
            return f"refused: {exc.strerror}"
    if action == "ls":
        return " ".join(sorted(os.listdir(arg)))
    if action == "pids":
        return " ".join(sorted(name for name in os.listdir("/proc") if name.isdigit()))
    return "ok"
'''
POLICY = {"network": "none", "writes": ["cache"]}


def _executor(project: Project, **settings: Any) -> Any:
    project.tool("probe.py", PROBE)
    project.tool("other.py", PROBE.replace("A tool that looks around.", "Another."))
    policies = {"probe": POLICY, "other": POLICY}
    return project.executor(["probe.py", "other.py"], **{"sandbox_policies": policies, **settings})


def _spares(executor: Any) -> sandbox_spare.Spares:
    spares = executor.calls._spares
    assert spares is not None
    return spares


def _primed(executor: Any, kind: str = "confined") -> sandbox_spare.Spare:
    """Two calls (the second orders a spare), then the spare made for the next one."""
    for _ in range(2):
        assert executor.call("probe", {"action": "ok"}).output == "ok"
    spares = _spares(executor)
    assert spares.wait_made()
    key = (kind, "probe", str(executor.config.path), *((False,) if kind == "confined" else ()))
    spare = spares._state.ready.get(key)
    assert spare is not None and spare.alive(), spares._state.ready
    return spare


def _launchers() -> list[int]:
    """The spare launchers of this process's spares that are still running (none must outlive their pool)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if sandbox_spare.LAUNCHER.encode() in cmdline:
                found.append(int(name))
    return found


@pytest.fixture
def went(monkeypatch: pytest.MonkeyPatch) -> list[sandbox_spare.Spare]:
    """The spares that started a call, in order."""
    started: list[sandbox_spare.Spare] = []
    go = sandbox_spare.Spare.go

    def go_and_say(self: sandbox_spare.Spare, *args: Any, **options: Any) -> bool:
        ok = go(self, *args, **options)
        if ok:
            started.append(self)
        return ok

    monkeypatch.setattr(sandbox_spare.Spare, "go", go_and_say)
    return started


def test_a_kinds_second_call_orders_a_spare_and_each_is_used_once(project: Project, went: list[Any]) -> None:
    before = _launchers()
    with _executor(project) as executor:
        assert executor.call("probe", {"action": "ok"}).ok
        assert _spares(executor).wait_made()
        assert len(_spares(executor)) == 0  # called once: nothing is made ahead
        first = _primed(executor)
        assert went == []
        result = executor.call("probe", {"action": "pids"})
        assert (result.ok, went) == (True, [first])
        assert result.output == "1 2"  # the namespace's init and the tool: its own PID namespace, as cold
        assert not first.alive() or first.proc.wait(timeout=5) is not None
        assert _spares(executor).wait_made()
        second = _spares(executor)._state.ready[("confined", "probe", str(executor.config.path), False)]
        assert second is not first and second.pid != first.pid and set(second.files).isdisjoint(first.files)
        assert executor.call("probe", {"action": "ok"}).ok
        assert went == [first, second]
    assert _launchers() == before


def test_the_baseline_is_served_ahead_too(project: Project, went: list[Any]) -> None:
    project.tool("probe.py", PROBE)
    with project.executor(["probe.py"]) as executor:  # no policy: the baseline (its own PID namespace, limits)
        spare = _primed(executor, "baseline")
        result = executor.call("probe", {"action": "pids"})
        assert (result.ok, result.output, went) == (True, "1 2", [spare])


def test_the_spares_files_are_the_calls_and_a_confined_call_sees_only_its_own(project: Project, went: list[Any]) -> None:
    with _executor(project) as executor:
        spare = _primed(executor)
        names = sorted(os.path.basename(path) for path in spare.files)
        result = executor.call("probe", {"action": "ls", "arg": os.path.dirname(spare.files[0])})
        assert went == [spare]
        assert result.output == " ".join(names)  # in its private /tmp: its own three files, nothing of another spare's
        for path in spare.files:
            assert not os.path.lexists(path)  # removed with the call, as a cold call's are
        for _ in range(2):
            assert executor.call("other", {"action": "ok"}).ok
        assert _spares(executor).wait_made()
        (waiting,) = [spare for key, spare in _spares(executor)._state.ready.items() if key[1] == "other"]
        for path in waiting.files:  # another call's files, made ahead: not there in this call's private /tmp
            assert executor.call("probe", {"action": "read", "arg": path}).output.startswith("refused")
            executor.call("probe", {"action": "write", "arg": path})  # (a file of its own /tmp, gone with it)
        assert waiting.alive() and waiting.intact()  # the same files, still empty


def test_a_confined_call_cannot_see_or_signal_another_calls_spare(project: Project, went: list[Any]) -> None:
    with _executor(project) as executor:
        _primed(executor)
        spares = _spares(executor)
        # the call below takes the spare made for it; the next one is made once it is over: one of another kind
        # (another tool's) is there during the call
        for _ in range(2):
            assert executor.call("other", {"action": "ok"}).ok
        assert spares.wait_made()
        waiting = [spare for key, spare in spares._state.ready.items() if key[1] == "other"]
        assert len(waiting) == 1 and waiting[0].alive()
        victim = waiting[0]
        assert executor.call("probe", {"action": "kill", "arg": str(victim.pid)}).output == "refused: No such process"
        assert executor.call("probe", {"action": "kill", "arg": str(victim.child)}).output == "refused: No such process"
        assert victim.alive()
        pids = executor.call("probe", {"action": "pids"}).output
        assert pids == "1 2"  # nothing of the waiting spare is in its view
        assert executor.call("other", {"action": "ok"}).ok
        assert victim in went


def test_a_pre_seeded_spare_is_never_used(project: Project, went: list[Any]) -> None:
    """A process of the same user writes into a waiting spare's LLM_OUTPUT, or puts another file in its place: the
    spare is discarded, and the call runs cold with files of its own."""
    with _executor(project) as executor:
        spare = _primed(executor)
        Path(spare.files[0]).write_text("forged result")
        result = executor.call("probe", {"action": "ok"})
        assert (result.ok, result.output, went) == (True, "ok", [])
        assert not spare.alive() or spare.proc.wait(timeout=5) is not None
        assert _spares(executor).wait_made()
        spare = _spares(executor)._state.ready[("confined", "probe", str(executor.config.path), False)]
        os.unlink(spare.files[1])
        Path(spare.files[1]).write_text("")  # the same name, another file: the sandbox binds the old one
        result = executor.call("probe", {"action": "ok"})
        assert (result.ok, result.output, went) == (True, "ok", [])
        assert _spares(executor).wait_made()
        spare = _spares(executor)._state.ready[("confined", "probe", str(executor.config.path), False)]
        (Path(spare.files[2]) / "forged.txt").write_text("an artifact nobody made")
        result = executor.call("probe", {"action": "ok"})
        assert (result.ok, result.output, result.artifacts, went) == (True, "ok", (), [])


def test_a_spare_killed_from_outside_is_noticed_and_the_call_runs_cold(project: Project, went: list[Any]) -> None:
    before, zombies = _launchers(), zombies_of()
    with _executor(project) as executor:
        spare = _primed(executor)
        os.killpg(spare.pid, signal.SIGKILL)
        wait_until(lambda: spare.proc.poll() is not None, "the spare's bwrap to end")
        result = executor.call("probe", {"action": "ok"})
        assert (result.ok, result.output, went) == (True, "ok", [])
        assert _spares(executor).wait_made()
        spare = _spares(executor)._state.ready[("confined", "probe", str(executor.config.path), False)]
        assert spare.child is not None
        os.kill(spare.child, signal.SIGKILL)  # its namespace's init: the launcher goes with it
        wait_until(lambda: spare.proc.poll() is not None, "the spare's bwrap to end")
        result = executor.call("probe", {"action": "ok"})
        assert (result.ok, result.output, went) == (True, "ok", [])
    assert _launchers() == before
    assert zombies_of() <= zombies  # none of the spares' (an earlier test's are not this one's to judge)


def test_a_spare_made_for_one_policy_is_never_used_for_another(tmp_path: Path, went: list[Any]) -> None:
    """A spare is used only by a call whose confinement is the one it was made with: another policy's (a wider
    write, a tighter limit) discards it and runs cold, under its own policy."""
    place = tmp_path / "place"
    place.mkdir()
    files = (str(tmp_path / "call.out"),)
    Path(files[0]).touch()
    narrow = sandbox.Confinement(files=files, processes=64)
    wide = sandbox.Confinement(files=files, writable=(str(place),), processes=64)
    argv = [sys.executable, "-c", f"open({str(place / 'x')!r}, 'w').write('x'); print('wrote')"]
    for made_for, used_for, runs in ((narrow, wide, "wrote"), (wide, narrow, None), (wide, wide, "wrote")):
        recipe = sandbox_spare.Recipe(
            confinement=made_for, places=sandbox_spare.places(argv), cwd=os.getcwd(), files=lambda: files
        )
        spare = sandbox_spare.make(recipe)
        assert spare is not None and spare.fits(made_for, argv, os.getcwd())
        assert spare.fits(used_for, argv, os.getcwd()) is (made_for == used_for)
        finished = run_process(Launch(argv=argv, env=dict(os.environ), confinement=used_for, spare=spare, timeout=30))
        assert spare.consumed and (spare in went) is (made_for == used_for)
        wrote = finished.stdout.text()[0].strip() if finished.returncode == 0 else None
        assert wrote == runs, finished.stderr.text()
        (place / "x").unlink(missing_ok=True)


def test_a_spare_made_before_a_hidden_path_appeared_is_not_used(project: Project, went: list[Any]) -> None:
    secret = Path.home() / ".ssh"
    assert not secret.exists()
    with _executor(project) as executor:
        _primed(executor)
        secret.mkdir()
        (secret / "id_ed25519").write_text("a private key")
        result = executor.call("probe", {"action": "read", "arg": str(secret / "id_ed25519")})
        assert (result.output, went) == ("refused: No such file or directory", [])


@pytest.mark.parametrize("change", ["link repointed", "directory made again", "config replaced by a rename"])
def test_a_spare_made_before_a_hidden_or_protected_path_changed_is_not_used(
    project: Project, went: list[Any], change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cover is a mount on what the path named when the spare's bwrap started: once it names another (a ``~/.ssh``
    link pointed elsewhere, the directory removed and made again, toolexec's ``config.yaml`` replaced by a rename),
    that is uncovered in the spare (it read the new key). The call runs cold, whose bwrap covers what is there now."""
    home = Path.home()
    ssh = home / ".ssh"
    for keys in ("keys-a", "keys-b"):
        (home / keys).mkdir()
        (home / keys / "id_ed25519").write_text(f"PRIVATE KEY {keys}")
    if change == "link repointed":
        ssh.symlink_to("keys-a")
    else:
        ssh.mkdir()
    monkeypatch.chdir(project.root)  # (config.yaml lies in the working directory, which the policy writes)
    policy = {**POLICY, "writes": ["cache", "cwd"]}
    with _executor(project, sandbox_policies={"probe": policy, "other": policy}) as executor:
        _primed(executor)
        if change == "link repointed":
            ssh.unlink()
            ssh.symlink_to("keys-b")
            target = ssh / "id_ed25519"
        elif change == "directory made again":
            ssh.rmdir()
            ssh.mkdir()
            (ssh / "id_ed25519").write_text("PRIVATE KEY made again")
            target = ssh / "id_ed25519"
        else:
            saved = project.config.with_name("config.yaml.new")
            saved.write_text(project.config.read_text())
            saved.rename(project.config)  # (an editor's save): still read-only to the call
            target = project.config
        action = "write" if change == "config replaced by a rename" else "read"
        result = executor.call("probe", {"action": action, "arg": str(target)})
        refused = "Permission denied" if action == "write" else "No such file or directory"  # (covered: hidden)
        assert (result.output, went) == (f"refused: {refused}", []), result
    assert "pwned" not in project.config.read_text()


def test_a_spare_made_in_another_working_directory_is_not_used(
    project: Project, went: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _executor(project) as executor:
        _primed(executor)
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        monkeypatch.chdir(elsewhere)
        assert executor.call("probe", {"action": "ok"}).ok
        assert went == []


def test_the_environment_of_one_call_never_reaches_the_next(
    project: Project, went: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with _executor(project, sandbox_policies={"probe": {**POLICY, "env": ["CALL_ONE_TOKEN"]}, "other": POLICY}) as executor:
        monkeypatch.setenv("CALL_ONE_TOKEN", "secret of call one")
        for _ in range(2):
            assert executor.call("probe", {"action": "env", "arg": "CALL_ONE_TOKEN"}).output == "secret of call one"
        monkeypatch.delenv("CALL_ONE_TOKEN")
        assert _spares(executor).wait_made()
        (spare,) = _spares(executor)._state.ready.values()
        for pid in (spare.pid, *_launchers()):
            with open(f"/proc/{pid}/environ", "rb") as handle:
                assert b"CALL_ONE_TOKEN" not in handle.read()
        result = executor.call("probe", {"action": "env", "arg": "CALL_ONE_TOKEN"})
        assert (result.output, went) == ("<unset>", [spare])


def test_nothing_is_left_after_close_after_collection_and_in_a_fork(project: Project, private_tmpdir: Path) -> None:
    before, zombies = _launchers(), zombies_of()
    executor = _executor(project)
    spare = _primed(executor)
    pid = os.fork()
    if pid == 0:  # a forked child uses none of its parent's spares, and ends none
        code = 1
        try:
            spares = _spares(executor)
            code = 0 if spares.take(("confined", "probe", str(executor.config.path), False)) is None else 2
        finally:
            os._exit(code)
    assert os.waitpid(pid, 0)[1] == 0
    assert spare.alive() and spare.intact()
    executor.close()
    assert not spare.alive()
    assert _launchers() == before
    assert zombies_of() <= zombies  # none of the spares' (an earlier test's are not this one's to judge)
    assert sorted(p.name for p in private_tmpdir.iterdir()) == []
    executor = _executor(project)  # never closed: collected
    _primed(executor)
    del executor
    gc.collect()
    wait_until(lambda: _launchers() == before, "the collected executor's spares to end", timeout=10)
    assert sorted(p.name for p in private_tmpdir.iterdir()) == []


def test_a_killed_toolexec_leaves_no_spare_and_no_call_file(project: Project, tmp_path: Path) -> None:
    project.tool("probe.py", PROBE)
    project.configure(["probe.py"], sandbox_policies={"probe": POLICY})
    script = f"""
import os, sys
from toolexec import Executor
executor = Executor({str(project.config)!r})
for _ in range(2):
    assert executor.call("probe", {{"action": "ok"}}).ok
assert executor.calls._spares.wait_made()
spare, = executor.calls._spares._state.ready.values()
print(spare.pid, *spare.files, flush=True)
os.kill(os.getpid(), 9)
"""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL, done.stderr
    pid, *files = done.stdout.split()
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), "the spare to end with its toolexec", timeout=10)
    wait_until(lambda: not any(os.path.lexists(path) for path in files), "the guard to remove its files", timeout=10)


def test_a_spares_call_starts_with_the_signals_a_cold_one_has(project: Project, went: list[Any]) -> None:
    """The launcher is a Python, which ignores SIGPIPE and SIGXFSZ: the program it execs has them as a cold start
    has them (a Bash tool past its file bound is killed by SIGXFSZ, a writer to a closed pipe by SIGPIPE)."""
    project.tool(
        "sig.sh",
        '#!/usr/bin/env bash\n# @describe Say what is ignored.\nmain() {\n    grep SigIgn /proc/$$/status >>"$LLM_OUTPUT"\n}\n',
    )
    with project.executor(["sig.sh"]) as executor:
        cold = [executor.call("sig", {}).output for _ in range(2)]  # the second orders a spare
        assert _spares(executor).wait_made()
        result = executor.call("sig", {})
        assert (len(went), result.ok) == (1, True)
        assert result.output == cold[0] == cold[1]
        assert result.output.startswith("SigIgn:")


def _waiter(project: Project, tmp_path: Path) -> Path:
    """A Bash tool ``wait`` whose call writes the line it reads from the FIFO returned (its argument ``fifo``)."""
    project.tool(
        "wait.sh",
        "#!/usr/bin/env bash\n# @describe Wait for a line.\n# @option --fifo! Where.\n"
        'main() {\n    read -r line <"$argc_fifo"\n    printf "%s" "$line" >>"$LLM_OUTPUT"\n}\n',
    )
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    return fifo


def test_a_spares_call_outlives_a_wake_of_the_making_thread(project: Project, went: list[Any], tmp_path: Path) -> None:
    """A spare's bwrap dies with the thread that started it (``--die-with-parent`` is the parent *thread*'s death): the
    making thread, woken while a spare it made runs its call with nothing else to make, must not end (it did, and
    the call was killed by signal 9: 1 call in ~100 under 100 calls in flight once spares were not made while busy)."""
    fifo = _waiter(project, tmp_path)
    with project.executor(["wait.sh"]) as executor:
        for _ in range(2):  # the second orders a spare
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(executor.call, "wait", {"fifo": str(fifo)})
                with open(fifo, "w") as handle:
                    handle.write("cold\n")
            assert pending.result().output == "cold"
        spares = _spares(executor)
        assert spares.wait_made()
        state = spares._state
        thread = state.thread
        assert thread is not None
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(executor.call, "wait", {"fifo": str(fifo)})
            with open(fifo, "w") as handle:  # (opened once the tool opens it: its call runs, in the spare)
                # (the spare's go is noted once it has returned: its tool may open the FIFO before)
                wait_until(lambda: len(went) == 1, "the call to start in the spare", timeout=10)
                with state.lock:
                    state.lock.notify_all()  # as another kind's order, or a spare not made, wakes it
                thread.join(timeout=0.5)
                handle.write("warm\n")
            result = pending.result()
        assert (result.ok, result.output, result.error) == (True, "warm", None)


def test_no_spare_is_made_while_the_calls_in_flight_keep_every_cpu_busy(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spare costs a cold start's CPU and its launcher's own start: while as many calls as CPUs are in flight, the
    cores are theirs, and the call that would have taken it starts cold; once they are fewer, spares are made again."""
    monkeypatch.setattr(baseline, "_cpus", [1])  # one CPU: one call in flight keeps it busy
    project.tool("noop.sh", "#!/usr/bin/env bash\n# @describe Nothing.\nmain() {\n    :\n}\n")
    fifo = _waiter(project, tmp_path)
    with project.executor(["noop.sh", "wait.sh"]) as executor:
        assert executor.call("noop", {}).ok
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(executor.call, "wait", {"fifo": str(fifo)})
            with open(fifo, "w") as handle:  # (opened once the tool opens it: its call is in flight)
                assert executor.call("noop", {}).ok  # the second call orders a spare, made while "wait" runs
                spares = _spares(executor)
                assert spares.wait_made()
                assert dict(spares._state.ready) == {}
                assert spares._state.failed == {}
                handle.write("done\n")
            assert waiting.result().output == "done"
        assert executor.call("noop", {}).ok  # nothing else in flight: its order is made
        assert spares.wait_made()
        assert list(spares._state.ready) == [("baseline", "noop", str(executor.config.path))]


def test_a_spare_runs_its_call_with_its_recipe_s_umask_and_only_a_caller_with_that_umask_takes_it(
    tmp_path: Path, went: list[Any]
) -> None:
    """A served call's recipe carries its caller's umask: the server's waiting child (umask 022 here) sets the next
    sandbox up with it (077), so the next such caller's tool runs with 077; a caller with another umask runs cold."""
    files = (str(tmp_path / "call.out"),)
    Path(files[0]).touch()
    confinement = sandbox.Confinement(files=files, processes=64)
    argv = [sys.executable, "-c", "import os; m = os.umask(0); print(f'{m:04o}')"]
    recipe = sandbox_spare.Recipe(
        confinement=confinement, places=sandbox_spare.places(argv), cwd=os.getcwd(), umask=0o077, files=lambda: files
    )
    mask = os.umask(0o022)
    try:
        spare = sandbox_spare.make(recipe)
        assert spare is not None
        assert not spare.fits(confinement, argv, os.getcwd())  # (this process's umask is 022)
        os.umask(0o077)
        assert spare.fits(confinement, argv, os.getcwd())
        finished = run_process(Launch(argv=argv, env=dict(os.environ), confinement=confinement, spare=spare, timeout=30))
    finally:
        os.umask(mask)
    assert (finished.returncode, finished.stdout.text()[0], spare.consumed, spare in went) == (0, "0077\n", True, True)
