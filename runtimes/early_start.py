"""The process helper's side of a one-shot run's early start (:mod:`toolexec.early`): what the spare of a call would
be, whether the spare the run started is it, and handing the call to it.

A call's early spare is what its cold start would be, started before toolexec imported itself:

* a JavaScript or TypeScript tool's ``node node_bootstrap.cjs`` (kind ``node``): handed its call as a warm Node spare
  (:func:`toolexec.runtimes.warm_node.adopt_early`);
* a Python tool's interpreter running its bootstrap (kind ``python``), which waits on a socket for the call's stdin,
  progress pipe and environment (``_spare_launcher.receive``) and then goes on as the cold start does;
* a Bash tool's bash running its bootstrap (kind ``bash``), which waits for a byte down a pipe, then reads the
  call's own variables and its request from its stdin, a memfd this process writes them into.

Under the baseline each is bwrap's (``--info-fd``: bwrap says its namespace's init) around the program, as the cold
start's; the call's limits are set on the program from here before its go, as a cold call's are set on its init
(:func:`toolexec.runtimes.baseline._limit`); a root toolexec's pids cgroup is joined by the program itself with its go
(bwrap and its init, which a cold start's shell puts there too, stay outside it: its cap is two tasks lower, so that
the tool's processes get the same room). Never started early: a warm call, a declared policy (its view binds the
call's own files, made per call), the Landlock fallback, a host where the baseline makes no namespace, a call in
another working directory than the command's, a call whose file bound its bootstrap cannot set, a Bash call with a
progress pipe (a one-shot run's have none).
"""

from __future__ import annotations

import contextlib
import os
import select

from toolexec import early
from toolexec.runtimes import _spare_launcher, baseline, process_linux, sandbox
from toolexec.runtimes.environment import command_environment

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Sequence

    from toolexec.runtimes.process import Launch
    from toolexec.runtimes.sandbox import Confinement, Held
    from toolexec.runtimes.warm import WarmProcess

    # the call's process, what it holds, its namespace's init (and when that started)
    Started = tuple[subprocess.Popen[bytes] | WarmProcess | None, Held | None, tuple[int, int | None] | None]

READY_WAIT = 5.0  # seconds a call waits for its spare to say it waits (it started ~30 ms before): then it runs cold
OUTSIDE_TASKS = 2  # bwrap and its namespace's init: in a cold call's pids cgroup, outside an early spare's


def start(
    launch: Launch, confinement: Confinement | None, stdin: int, env: dict[str, str], bound: int | None, progress: int
) -> Started:
    """The call started by the run's early spare when it is what the call's cold start would be: (its process, what it
    holds, its namespace's init); else (None, None, None): the call starts cold (the spare is ended). Either way what
    this call's start is gets written down for the next run (nothing, for a call no spare can take)."""
    argv = list(launch.argv)
    isolated = confinement is not None and confinement.baseline and baseline.usable()
    kind = _kind(argv)
    cwd = launch.cwd or os.getcwd()
    if launch.warm is not None or kind is None or (confinement is not None and not isolated) or cwd != os.getcwd():
        early.remember("", [], {}, env)  # a start no spare can stand in for: none next time
        early.take("", [], env)  # (an unused one ends)
        return None, None, None
    if kind == "node":
        return _node(launch, confinement if isolated else None, stdin, env, bound, progress)
    unbound = bound is not None and not (launch.sets_file_limit and bound % launch.sets_file_limit == 0)
    if unbound or (kind == "bash" and progress >= 0):  # its bound, or its progress pipe, would come another way
        early.remember("", [], {}, env)
        early.take("", [], env)
        return None, None, None
    spare_argv = [*_namespaces(), "--info-fd", early.INFO, "--", *argv] if isolated else argv
    # what a version manager's shim adds (:func:`toolexec.runtimes.interpreter.launcher_for`): a PATH of its own
    additions = {"PATH": env["PATH"]} if "PATH" in env and env["PATH"] != os.environ.get("PATH") else {}
    found = early.take(kind, spare_argv, env, additions, cwd)
    early.remember(kind, spare_argv, additions, env, command_environment())
    if found is None:
        return None, None, None
    call_env = dict(env)
    if bound is not None and not isolated:  # (its bootstrap's: it sets it, before the tool's first line)
        call_env["TOOLEXEC_FILE_LIMIT"] = str(bound)
    if progress >= 0:
        from toolexec.runtimes.process import PROGRESS_VARIABLE

        call_env[PROGRESS_VARIABLE] = f"/dev/fd/{_spare_launcher.PROGRESS_FD}"  # where the spare puts the pipe
    if kind == "bash":
        return _bash(found, confinement if isolated else None, call_env, stdin)
    return _go(found, confinement if isolated else None, argv, call_env, stdin, progress)


def _kind(argv: Sequence[str]) -> str | None:
    """What kind of spare stands for a cold start of ``argv`` (None: none does)."""
    from toolexec.runtimes import bash, javascript, python

    if argv and os.path.basename(argv[0]) == "node" and str(javascript.BOOTSTRAP) in argv:
        return "node"
    if str(python.BOOTSTRAP) in argv:
        return "python"
    return "bash" if str(bash.BOOTSTRAP) in argv else None


def _namespaces() -> list[str]:
    binary = sandbox.bwrap()
    assert binary is not None
    return baseline._namespaces(binary)


def _node(
    launch: Launch, confinement: Confinement | None, stdin: int, env: dict[str, str], bound: int | None, progress: int
) -> Started:
    """A JavaScript or TypeScript tool's node, started early: handed its call as a warm Node spare is."""
    from toolexec.runtimes.javascript import COMPILE_CACHE_VARIABLE

    argv = list(launch.argv)
    if confinement is not None:
        argv = [*_namespaces(), "--info-fd", early.INFO, "--", *argv]
    additions = {COMPILE_CACHE_VARIABLE: env[COMPILE_CACHE_VARIABLE]} if COMPILE_CACHE_VARIABLE in env else {}
    found = early.take("node", argv, env, additions)
    early.remember("node", argv, additions, env)
    if found is None:
        return None, None, None
    from toolexec.runtimes.process import _isolation
    from toolexec.runtimes.warm import WarmCall
    from toolexec.runtimes.warm_node import adopt_early

    limits, held = _isolation(confinement, own_namespace=True)  # (its node is alone in its bwrap's PID namespace)
    fsize = confinement.file_size if confinement is not None else bound
    call = WarmCall(stdin=stdin, env=env, cwd=launch.cwd or os.getcwd(), file_limit=fsize, progress=progress, isolated=limits)
    proc = adopt_early(found, call, confinement is not None)
    if proc is None and held is not None:
        sandbox.release(held)
        held = None
    return proc, held, None


def _go(
    found: early.Early,
    confinement: Confinement | None,
    argv: Sequence[str],
    env: dict[str, str],
    stdin: int,
    progress: int,
) -> Started:
    """Hand the call (``argv``, ``env``, ``stdin``, ``progress``) to a Python spare, which takes it in one message,
    once it says it waits; under the baseline (``confinement``) its cgroup first (while it may still be starting),
    then its limits. (None, None, None) when it cannot take it: it is ended, the call runs cold."""
    control = found.control
    assert control is not None
    held: Held | None = None
    try:
        env, held = _ahead(confinement, env)
        control.settimeout(READY_WAIT)
        if control.recv(1) != _spare_launcher.READY:  # (it could not start: its argv names no program, say)
            raise OSError("the early spare did not start")
        init = _limited(found, confinement)
    except OSError:
        return _failed(found, held, None)
    try:
        _spare_launcher.send(control, argv, env, stdin, progress)
    except OSError:
        return _failed(found, held, init)
    return _handed(found, held, init)


def _bash(found: early.Early, confinement: Confinement | None, env: dict[str, str], stdin: int) -> Started:
    """Hand the call to a Bash spare once it says it waits: its own variables (those its start did not have: only the
    call's and toolexec's, :func:`toolexec.early._compatible`), then its request, written to the file that is its
    stdin (ahead: it reads the file only once it has its go); then a byte down its GO pipe."""
    from toolexec.runtimes.process import read_all

    held: Held | None = None
    try:
        env, held = _ahead(confinement, env)
        own = [f"{name}={value}" for name, value in env.items() if found.env.get(name) != value]
        items = [str(len(own)), *own]
        head = b"".join(os.fsencode(item) + b"\0" for item in items)
        os.pwrite(found.file, head + read_all(stdin), 0)
        ready, _, _ = select.select([found.ready], [], [], READY_WAIT)
        if not ready or os.read(found.ready, 1) != b"R":
            raise OSError("the early spare did not start")
        init = _limited(found, confinement)
    except OSError:
        return _failed(found, held, None)
    try:
        os.write(found.go, b"G")
    except OSError:
        return _failed(found, held, init)
    return _handed(found, held, init)


def _ahead(confinement: Confinement | None, env: dict[str, str]) -> tuple[dict[str, str], Held | None]:
    """What needs no word from the spare, made while it may still be starting: under the baseline, a root toolexec's
    pids cgroup, which the program joins itself with its go (the ``env`` it gets names it: a process moved from
    outside waits ~10 ms). bwrap and its namespace's init are in a cold start's cgroup too, so this one's cap is two
    tasks lower, and the tool's processes get the same room."""
    if confinement is None or confinement.processes is None or os.geteuid() != 0:
        return env, None if confinement is None else sandbox.Held()
    if baseline.pid_max_capped():  # the program sets its namespace's pid_max itself, inside it, with its go
        return {
            **env,
            os.fsdecode(_spare_launcher.PID_MAX_VARIABLE): str(baseline.pid_max(confinement.processes)),
        }, sandbox.Held()
    path = sandbox._cgroup(max(1, confinement.processes - OUTSIDE_TASKS))
    if path is None:
        return env, sandbox.Held()
    from toolexec.runtimes.cgroup import join_file

    return {**env, os.fsdecode(_spare_launcher.CGROUP_VARIABLE): join_file(path)}, sandbox.Held(cgroups=[path])


def _limited(found: early.Early, confinement: Confinement | None) -> tuple[int, int | None] | None:
    """Under the baseline, once the spare says it waits: its program found in its namespace and the call's limits set
    on it (best effort, as a cold start's); its init. OSError when it cannot be found."""
    if confinement is None:
        return None
    init = _init(found.info)
    children = process_linux._task_children(init[0], init[0])
    if len(children) != 1:
        found.discard()
        process_linux.reap_orphan(*init)
        raise OSError("the early spare is not its init's one child")
    (program,) = children
    baseline._limit(program, confinement, (), strict=False)
    return init


def _failed(found: early.Early, held: Held | None, init: tuple[int, int | None] | None) -> Started:
    """End a spare that did not take its call (and what was made for it): the call runs cold."""
    found.discard()
    sandbox.release(held)  # (its cgroup, once the spare is gone)
    if init is not None:
        process_linux.reap_orphan(*init)
    return None, None, None


def _handed(found: early.Early, held: Held | None, init: tuple[int, int | None] | None) -> Started:
    """The spare's process, the call's now (the process helper supervises and reaps it); what this process held of
    the spare is released."""
    proc, found.proc = found.proc, None
    found.adopted = True
    if found.control is not None:
        found.control.close()
        found.control = None
    for name in ("info", "ready", "go", "file"):
        _close(getattr(found, name))
        setattr(found, name, -1)
    return proc, held, init


def _init(info: int) -> tuple[int, int | None]:
    """bwrap's namespace init, from what bwrap wrote to its ``--info-fd`` (OSError: it said none)."""
    pid = baseline.info_child(info)
    if pid is None:
        raise OSError("bwrap did not say its namespace's init")
    return pid, process_linux.start_of(pid)


def _close(fd: int) -> None:
    if fd >= 0:
        with contextlib.suppress(OSError):
            os.close(fd)
