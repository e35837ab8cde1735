"""Shared fixtures: every test runs against a private HOME, cache and config."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The shared checks in tests/helpers.py (check_case) get pytest's detailed assertion messages too.
pytest.register_assert_rewrite("tests.helpers")

REPO = Path(__file__).resolve().parent.parent

# The suite runs as users run: variables of the machine it happens to run on that users do not have are cleared
# here, before any test (or any interpreter a test starts) reads them. This machine writes no bytecode; users do.
MACHINE_ONLY = ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONWARNINGS")
for _name in MACHINE_ONLY:
    os.environ.pop(_name, None)
sys.dont_write_bytecode = False
# A suite started in the background of a script inherits SIGINT ignored, and so would every interpreter a test
# starts (an ignored signal stays ignored across exec): Ctrl-C works for users, so it does here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from current output")


# How a call's process starts (docs/performance.md): spawned, forked from the tool's warm server, or in its sandbox set
# up ahead (runtimes/sandbox_spare.py: every confined or baseline call). A test marked ``launch_modes`` (a module:
# ``pytestmark = pytest.mark.launch_modes``) runs once in each; one marked ``sandbox_modes`` too (its warm run: a
# Python tool's server lives inside the tool's sandbox, runtimes/_python_confined.py; the other languages run cold).
# A warm pool (and a spare) lives until its executor closes: a test that looks for what its calls left closes them
# first (tests/helpers.py: close_warm), then checks that nothing at all is left.
LAUNCH_MODES = ("cold", "warm", "ahead")
SANDBOX_MODES = ("cold", "ahead", "warm")
WARM_MODES = ("cold", "warm")  # where no sandbox is set up ahead (a network allow-list's calls)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "launch_modes: run the test with cold calls, warm ones (every tool warm) and ones set up ahead"
    )
    config.addinivalue_line(
        "markers", "sandbox_modes: run the test with cold calls, with sandboxes set up ahead and with every tool warm"
    )
    config.addinivalue_line("markers", "warm_modes: run the test with cold calls and with every tool warm")
    config.addinivalue_line(
        "markers", "starts_cold: in the ahead and warm modes, the call's spare or server cannot start it (it runs cold)"
    )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No call cgroup is left behind by this process (its in-process executors): once their removals are done, none
    of its own is there but one that still holds processes (a sandbox set up ahead that an executor left open keeps
    its cgroups until it is closed or collected). A toolexec process a test started leaves its cgroups to its guard
    at its end: tests/runtimes/test_cgroup_guard.py checks those."""
    import gc

    from toolexec.runtimes import cgroup, sandbox

    if not sys.platform.startswith("linux"):
        return
    gc.collect()
    cgroup.drain()
    places = {sandbox._pids_root() if os.geteuid() == 0 else None, (cgroup.memory_parent() or (None,))[0]} - {None}
    mine = f"toolexec-{os.getpid()}-"
    left = []
    for place in places:
        for name in sorted(os.listdir(place)) if os.path.isdir(place) else []:
            path = os.path.join(place, name)
            if name.startswith(mine) and not sandbox._read(os.path.join(path, "cgroup.procs")).strip():
                left.append(path)
    if left:
        print(f"\ncgroups left behind by this test session: {left}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    for marker, modes in (("launch_modes", LAUNCH_MODES), ("sandbox_modes", SANDBOX_MODES), ("warm_modes", WARM_MODES)):
        if metafunc.definition.get_closest_marker(marker) is not None:
            if "launch_mode" not in metafunc.fixturenames:
                metafunc.fixturenames.append("launch_mode")
            metafunc.parametrize("launch_mode", modes)
            return


@pytest.fixture(autouse=True)
def _launch_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The test's ``launch_mode`` parameter applied (an autouse fixture: a fixture only named in a parametrisation
    made at collection is never set up). ``warm``: every Executor and server of the test runs every tool warm that can
    (as ``warm=True``); a one-shot CLI run stays cold, as it is. The pools it leaves open are closed after the test,
    and must leave nothing. ``ahead``: see :func:`_ahead`."""
    callspec = getattr(request.node, "callspec", None)
    mode = callspec.params.get("launch_mode", "cold") if callspec is not None else "cold"
    if mode == "cold":
        yield mode
        return
    from tests import helpers
    from toolexec import calls as calls_module

    made = calls_module.Calls.__init__

    def made_and_kept(self: Any, *args: Any, **options: Any) -> None:
        made(self, *args, **options)
        helpers.surfaces.append(self)

    monkeypatch.setattr(calls_module.Calls, "__init__", made_and_kept)
    try:
        yield from _warm_or_ahead(mode, request, monkeypatch)
    finally:
        helpers.close_warm()
        helpers.surfaces.clear()


def _warm_or_ahead(mode: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    expect_cold = request.node.get_closest_marker("starts_cold") is not None
    if mode == "ahead":
        yield from _ahead(monkeypatch, expect_cold=expect_cold)
        return
    from toolexec import calls, engine
    from toolexec.runtimes import sandbox, warm
    from toolexec.runtimes.warm_fork import running_servers

    before = running_servers()
    monkeypatch.setattr(calls, "runs_warm", lambda config, tool, everything: everything is not False)
    cold: list[str] = []  # calls that were to run warm and ran cold, though their tool can run warm
    asked: list[object] = []  # the confined servers' specs calls were handed to
    spawn = warm.WarmStart.spawn
    run_process = engine.run_process

    def spawn_or_say(self: warm.WarmStart, *args: object) -> object:
        proc = spawn(self, *args)  # type: ignore[arg-type]
        spec = args[1] if len(args) > 1 else self.spec_for(args[0])  # type: ignore[arg-type]
        asked.append(spec)
        if proc is None and not self.pool.closed and self.pool.refused(spec) is None:  # type: ignore[arg-type]
            cold.append(self.spec.tool)
        return proc

    def confined_warm_or_say(launch: Any, control: Any = None) -> Any:
        """A Python call under a declared policy (or strict's) that bwrap confines is handed to the server inside its
        sandbox: not silently spawned cold."""
        confined, start = launch.confinement, launch.warm
        expected = start is not None and start.confines and confined is not None and not confined.baseline
        expected = expected and sandbox.mechanism()[0] == "bwrap" and sandbox.calls_share(confined)
        already = len(asked)
        finished = run_process(launch, control)
        if expected and not any(getattr(spec, "confinement", None) is not None for spec in asked[already:]):
            cold.append(f"{start.spec.tool} (confined)")
        return finished

    monkeypatch.setattr(warm.WarmStart, "spawn", spawn_or_say)
    monkeypatch.setattr(engine, "run_process", confined_warm_or_say)
    yield mode
    for pool in warm.live_pools():
        pool.close()
    assert running_servers() <= before
    assert cold == [] or expect_cold, cold


def _ahead(monkeypatch: pytest.MonkeyPatch, *, expect_cold: bool = False) -> Iterator[str]:
    """Every call of an Executor or server that a sandbox set up ahead can serve (confined, or the baseline; not warm,
    not an allow-list) starts in one made for it just before (with the call's own files): the cold call's behaviour,
    through the spare's go. A call whose spare did not start it fails the test, unless it is marked ``starts_cold``
    (a spare that cannot be made, or is discarded, by design: the call runs cold, and must do as a cold call does)."""
    from toolexec import engine
    from toolexec.recordtype import replace
    from toolexec.runtimes import sandbox_spare

    missed: list[str] = []
    went: list[object] = []
    run_process = engine.run_process
    go = sandbox_spare.Spare.go

    def through_a_spare(launch: Any, control: Any = None) -> Any:
        confined = launch.confinement
        spare = None
        if launch.spare is None and launch.warm is None and sandbox_spare.eligible(confined):
            files = confined.files
            recipe = sandbox_spare.Recipe(
                confinement=confined,
                places=sandbox_spare.places(launch.argv),
                cwd=launch.cwd or os.getcwd(),
                files=lambda: files,
            )
            spare = sandbox_spare.make(recipe, own_files=False)
            if spare is None:
                missed.append(f"{launch.argv}: no spare could be made")
            else:
                launch = replace(launch, spare=spare)
        try:
            return run_process(launch, control)
        finally:
            if spare is not None and spare not in went:
                missed.append(f"{launch.argv}: its spare did not start it")

    def go_and_say(self: Any, *args: Any, **options: Any) -> bool:
        started = go(self, *args, **options)
        if started:
            went.append(self)
        return started

    monkeypatch.setattr(engine, "run_process", through_a_spare)
    monkeypatch.setattr(sandbox_spare.Spare, "go", go_and_say)
    yield "ahead"
    assert missed == [] or expect_cold, missed


@pytest.fixture(scope="session", autouse=True)
def isolated_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """HOME and the XDG dirs of a temporary tree for the whole session too: module-scoped fixtures build before
    :func:`isolated` applies, and must not write toolexec's state into the real user cache either."""
    with pytest.MonkeyPatch.context() as patch:
        home = tmp_path_factory.mktemp("session-home")
        for var, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
            (home / sub).mkdir(exist_ok=True)
            patch.setenv(var, str(home / sub))
        yield


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME, XDG dirs and the working directory at a fresh temporary tree."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".state")):
        (home / sub).mkdir(exist_ok=True)
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)  # the generated MCP token goes under XDG_STATE_HOME
    monkeypatch.delenv("TOOLEXEC_CONFIG", raising=False)
    for name in list(os.environ):
        if name.startswith("LLM_"):
            monkeypatch.delenv(name)
    work = tmp_path_factory.mktemp("work")
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(autouse=True)
def parent_death_guard() -> None:
    """Start the Linux backend's guard before each test: it keeps one descriptor for the life of the process from the
    first call on, and tests compare the descriptors open before and after a call. One an earlier test killed or
    stopped is replaced now, not by the test's first call."""
    from toolexec.runtimes import process_linux

    if process_linux.available():
        process_linux.ensure_guard()


@pytest.fixture(autouse=True)
def private_tmpdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A TMPDIR of our own, so 'no temporary file left' can be checked exactly."""
    import tempfile

    from toolexec.runtimes import warm_bash

    tmp = tmp_path_factory.mktemp("tmpdir")
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(warm_bash, "MEMORY_DIRECTORY", str(tmp))  # a warm Bash server's slots, in memory otherwise
    return tmp


class Project:
    """A config.yaml and functions/tools/ in a temporary directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.tools = root / "functions" / "tools"
        self.tools.mkdir(parents=True)
        self.config = root / "config.yaml"

    def tool(self, file: str, source: str) -> Path:
        path = self.tools / file
        path.write_text(source, encoding="utf-8")
        return path

    def configure(self, visible: list[str] | None = None, **settings: object) -> Path:
        import yaml

        visible = visible if visible is not None else sorted(p.name for p in self.tools.iterdir() if p.is_file())
        self.config.write_text(yaml.safe_dump({"visible_tools": visible, **settings}), encoding="utf-8")
        return self.config

    def executor(self, visible: list[str] | None = None, **settings: object):  # type: ignore[no-untyped-def]
        from toolexec import Executor

        return Executor(self.configure(visible, **settings))


@pytest.fixture(params=["linux", "portable"])
def process_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test through each process backend: pidfd and /proc, then the portable one (a thread and psutil).

    The choice travels in TOOLEXEC_PROCESS_BACKEND, so toolexec processes the test starts use it too.
    """
    from toolexec.runtimes import process

    monkeypatch.setenv(process.BACKEND_VARIABLE, request.param)
    assert process.backend().__name__ == f"toolexec.runtimes.process_{request.param}"
    if request.param == "portable":
        monkeypatch.delattr(os, "pidfd_open")  # proof, in this process, that the portable path never needs it
    return str(request.param)


@pytest.fixture
def warm_calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of the test that could run warm ran in a warm server (else it ran cold)."""
    from toolexec.runtimes import warm

    seen: list[bool] = []
    spawn = warm.WarmStart.spawn

    def noted(self: warm.WarmStart, call: warm.WarmCall) -> warm.WarmProcess | None:
        proc = spawn(self, call)
        seen.append(proc is not None)
        return proc

    monkeypatch.setattr(warm.WarmStart, "spawn", noted)
    return seen


@pytest.fixture
def no_new_zombie() -> Iterator[None]:
    """The test leaves no zombie of this process (a confined server's bwrap and its namespace's init are reaped when
    it ends: retired, refused, closed)."""
    from tests.helpers import zombies_of

    before = zombies_of()
    yield
    assert zombies_of() - before == set()


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "project")


@pytest.fixture
def unconfined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Projects of the test write ``sandbox: off`` unless the test says otherwise: for tests of the process helper's
    own search, groups and signals (what an unconfined call relies on), whose tools write their own process ids
    (a PID namespace would give them others). The baseline's namespace is tested in tests/runtimes/test_baseline.py."""
    real = Project.configure

    def configure(self: Project, visible: list[str] | None = None, **settings: object) -> Path:
        return real(self, visible, **{"sandbox": "off", **settings})

    monkeypatch.setattr(Project, "configure", configure)


def wrapper_interpreter(directory: Path, name: str, program: str) -> Path:
    """An executable that marks the environment (VIA_WRAPPER=yes) and runs ``program``: proof of which interpreter ran."""
    import stat

    wrapper = directory / name
    wrapper.write_text(f'#!/bin/sh\nexport VIA_WRAPPER=yes\nexec {program} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def toolexec(*args: str, input: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    """Run the real CLI in a child process, as a user would."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "toolexec", *args],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def cli(capsys: pytest.CaptureFixture[str], *argv: str, input: str = "") -> tuple[int, str, str]:
    """``toolexec ARGV`` in this process through ``main(argv)``, ``input`` on stdin: (exit status, stdout, stderr)."""
    import io
    import sys

    from toolexec.cli import main

    stdin, sys.stdin = sys.stdin, io.StringIO(input)
    try:
        status = main(list(argv))
    finally:
        sys.stdin = stdin
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def ordinary() -> Iterator[Any]:
    """A project an ordinary user owns, with its own HOME and TMPDIR, and how to run a command there as that user
    (:class:`tests.helpers.Ordinary`); removed after the test."""
    import shutil
    import tempfile

    from tests.helpers import Ordinary

    root = Path(tempfile.mkdtemp(prefix="toolexec-ordinary-", dir="/tmp"))  # (pytest's own directory is root's only)
    try:
        yield Ordinary(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
