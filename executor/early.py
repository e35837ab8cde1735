"""A one-shot ``toolexec run`` starts its tool's process first, before toolexec imports itself: one mechanism for
every language.

A cold one-shot call pays Python's start, toolexec's imports and the call's own work (~30-40 ms), then its tool's
start: node's (~25 ms), a Python tool's interpreter (~10-15 ms), and under the sandbox's baseline bwrap's namespaces
(and, for root, the shell that joins the call's pids cgroup). None of that depends on the call: the installed command
(:mod:`toolexec.entry`) starts it at once, as a *spare*, from what the last one-shot run of the same tool, from the
same place, wrote down (a *memo*: the kind of spare, its argv, bwrap's included, and what it adds to the
environment). The two starts then run side by side, on the two cores a machine has at least.

Three kinds of spare, told apart by the memo's first word (its second: the digest of the environment the run that wrote
it had and of the config files it could read, :func:`start_digest`; under the baseline each inside its bwrap):

* ``node``: ``node node_bootstrap.cjs TOOL``, waiting on stdin for its call (``TOOLEXEC_NODE_SPARE`` names its ready
  and progress descriptors): handed its call as a warm Node spare is (:mod:`toolexec.runtimes.warm_node`);
* ``python``: a Python tool's own interpreter running its bootstrap (``TOOLEXEC_EARLY=1``), whose stdin is a socket:
  it says it waits (one byte) and takes its call in one message, as a sandbox set up ahead does
  (:mod:`toolexec.runtimes._spare_launcher`: the call's stdin and progress pipe by ``SCM_RIGHTS``, its environment),
  then goes on as the cold start does;
* ``bash``: a Bash tool's bash running its bootstrap (``TOOLEXEC_EARLY=GO:READY``), whose stdin is a file this
  process holds too (a memfd): it says it waits, and once a byte comes down GO it reads the call's own variables
  and then its request from that file (a bash reads a pipe one byte at a time, a file in blocks).

When the call is launched, the process helper adopts the spare only if it is exactly what a cold start of this call
would have been (:func:`take`, :mod:`toolexec.runtimes.early_start`): the same kind and argv, the same working
directory, and the same environment but for the call's own ``LLM_*`` and toolexec's variables, which the spare takes
with the call, before any line of the tool (:func:`_compatible`). Otherwise the spare is ended, unused, and the call
starts cold; what this call's start would be is written down for the next run (:func:`remember`). A run that
launches nothing ends its spare at exit; a spare whose run dies reads the end of its stdin and ends (under the
baseline bwrap's ``--die-with-parent`` ends it too). The memo is never trusted: it is read only when only this user
could have written it (:func:`_read`), in toolexec's cache (hidden from every confined tool), and what it names is
adopted only when it is what this run computes itself.

This module is imported before the rest of toolexec: the standard library's ``os`` and ``subprocess`` (and what that
imports), ``_socket`` (a C module the run imported already), and :mod:`toolexec.serve_client` (which the run imported
to try a server: how the config is named on the command line, and the digest of the files named after it, are read
the same way by both).
"""

from __future__ import annotations

import _signal  # not signal (enum): the C module every interpreter has loaded already
import _socket  # not socket: its import (enum, selectors, …) costs a one-shot run ~3 ms (serve_client loaded it)
import atexit
import os
import sys

# Not imported before the spare is started (:func:`_spawn`): subprocess (with threading, selectors, locale and re),
# contextlib and signal cost a one-shot run ~5 ms before its spare could start; toolexec imports them right after.
from toolexec.serve_client import config_candidates, config_option, fnv1a64  # (imported already: the run tried a server first)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Mapping, Sequence

# What a cold start's program finds at their default: Popen's (restore_signals) and the command's cancelling signals
# (toolexec.cli.CANCELLING_SIGNALS), which the CLI handles before it starts a tool: ignored ones (nohup's SIGHUP, a
# background job's SIGINT and SIGQUIT) are not passed on to a tool started cold, so neither to its spare
_DEFAULT_SIGNALS = ("SIGPIPE", "SIGXFZ", "SIGXFSZ", "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
INFO = "{info-fd}"  # where the remembered argv names bwrap's --info-fd: this run's own descriptor
SPARE_VARIABLE = "TOOLEXEC_NODE_SPARE"  # a node spare's ready and progress descriptors
EARLY_VARIABLE = "TOOLEXEC_EARLY"  # a bootstrap waits for its call (Python's: "1", its stdin a socket; Bash's: GO:READY)
KINDS = ("node", "python", "bash")
MAX_MEMO = 1 << 20  # an argv and a few variables: a longer memo is not one toolexec wrote
# What the spare takes with its call (the call's own, or toolexec's): never compared with what it started with.
_PER_CALL_PREFIXES = ("LLM_", "TOOLEXEC_")
_PER_CALL = frozenset({"TRACEPARENT", "TRACESTATE", "BAGGAGE"})


class Early:
    """The spare this run started, and the memo it came from."""

    def __init__(self, memo: str, known: bytes, digest: str = "") -> None:
        self.memo, self.known = memo, known
        self.digest = digest  # this run's start_digest, taken before it read its config
        self.kind = ""
        self.cwd = os.getcwd()  # where it started (the memo is this directory's)
        self.where = _here()  # that directory itself: a path names another once it is moved away and made again
        self.mask = _umask()  # the umask it starts with (a served call's: the server's child stands in the caller's)
        self.argv: list[str] = []  # as remembered (with INFO)
        self.additions: dict[str, str] = {}
        self.env: dict[str, str] = {}  # what it started with (but for the variable that makes it a spare)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = self.info = self.progress = -1
        self.progress_in_spare = -1
        self.control: _socket.socket | None = None  # a python spare's socket (the other end: its stdin)
        self.go = self.file = -1  # a bash spare's: the write end of its GO pipe, and its stdin
        # Tells the parent-death guard the spare's group is no longer to be killed (:func:`guarded`).
        self.withdraw: Callable[[int], None] | None = None
        self.adopted = False  # its spare took the call (:mod:`toolexec.runtimes.early_start`)
        self.written = False  # this run's start was written down (:func:`remember`): the next run may start it early

    def start(self) -> None:
        """Start the remembered spare (nothing when the memo is not one)."""
        fields = self.known.decode("utf-8", "surrogateescape").split("\0")
        if "" not in fields or len(fields) < 2 or fields[0] not in KINDS or fields[1] != self.digest:
            # (another environment, or a config changed since: the spare's program would start with what this run's
            # call may not see, or as this run's config may no longer let it: unconfined, say)
            return
        cut = fields.index("")
        self.kind, self.argv = fields[0], fields[2:cut]
        self.additions = dict(entry.split("=", 1) for entry in fields[cut + 1 :] if "=" in entry)
        if not self.argv:
            return
        self.env = {**os.environ, **self.additions}
        if self.kind == "bash":
            try:
                self.file = os.memfd_create("toolexec-early-call", os.MFD_CLOEXEC)
            except (AttributeError, OSError):  # no memfd here: nothing starts early
                return
        info_read, info_write = os.pipe() if INFO in self.argv else (-1, -1)
        argv = [str(info_write) if word == INFO else word for word in self.argv]
        if self.kind == "node":
            ready_read, ready_write = os.pipe()
            self.progress, progress_write = os.pipe()
            self.progress_in_spare = progress_write
            passed = [ready_write, progress_write]
            env = {**self.env, SPARE_VARIABLE: f"{ready_write}:{progress_write}:lazy"}
            stdin = -1  # a pipe of its own
        elif self.kind == "bash":  # its stdin a file this process writes the call into; a byte down GO lets it go on
            ready_read, ready_write = os.pipe()
            go_read, self.go = os.pipe()
            passed = [ready_write, go_read]
            env = {**self.env, EARLY_VARIABLE: f"{go_read}:{ready_write}"}
            stdin = self.file
        else:  # its stdin a socket: it says it waits, and takes its call in one message
            ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
            ready_read = -1
            passed = []
            env = {**self.env, EARLY_VARIABLE: "1"}
            stdin = theirs.fileno()
        try:
            self.proc = _spawn(argv, env, stdin, (*passed, *([info_write] if info_write >= 0 else [])))
        except OSError:
            for fd in (ready_read, self.progress, info_read):
                _close(fd)
            self.progress = -1
            if self.kind == "python":
                ours.close()
            for name in ("go", "file"):
                _close(getattr(self, name))
                setattr(self, name, -1)
            return
        finally:
            for fd in (*passed, info_write):
                _close(fd)
            if self.kind == "python":
                theirs.close()
        if self.kind == "python":
            self.control = ours
        self.ready, self.info = ready_read, info_read

    def matches(self, kind: str, argv: Sequence[str], env: Mapping[str, str], additions: Mapping[str, str], cwd: str) -> bool:
        """Whether the spare is what a cold start of the ``kind`` with ``argv`` (INFO for bwrap's info descriptor), in
        ``cwd``, with ``env`` makes, ``additions`` being what this start adds to the command's environment (a memo's
        own are never taken on trust: a stale or planted one's would be exempt from the comparison)."""
        return (
            self.proc is not None
            and kind == self.kind
            and list(argv) == self.argv
            and cwd == self.cwd == os.getcwd()
            and self.where is not None
            and self.where == _here()
            and self.mask == _umask()
            and dict(additions) == self.additions
            and _compatible(self.env, env, self.additions)
        )

    def discard(self) -> None:
        """End an unused spare and release what this process holds of it."""
        proc, self.proc = self.proc, None
        if proc is not None and self.withdraw is not None:  # (before it is reaped: its group is still its own)
            self.withdraw(proc.pid)
        if self.control is not None:
            self.control.close()
            self.control = None
        if proc is not None:
            try:  # noqa: SIM105 - contextlib is not imported before the spare starts (see the imports)
                os.killpg(proc.pid, _signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        for name in ("ready", "info", "progress", "go", "file"):
            _close(getattr(self, name))
            setattr(self, name, -1)


_early: Early | None = None


def begin(argv: Sequence[str]) -> None:
    """Start the spare a one-shot ``run`` of ``argv`` (the command's words) remembered, if any (see the module)."""
    global _early
    memo = memo_path(argv)
    if memo is None:
        return
    known = _read(memo)
    _early = Early(memo, known, start_digest(argv))
    if known:
        _early.start()
        atexit.register(_end)


def arrive(argv: Sequence[str]) -> None:
    """A served call of ``argv`` (the command's words) arrived, its process standing where the caller stands (its
    directory and environment; :mod:`toolexec.serve`): from now on this process is that one-shot run. A spare started
    ahead of it (:mod:`toolexec.serve_early`, from the last served call) is kept only when this call's start digest
    (the whole environment and the config files, :func:`start_digest`) and memo are the ones it was started from, else
    ended; what this call's start is gets written down for the next run, as a one-shot run's."""
    global _early
    memo = memo_path(argv)
    found = _early
    if memo is None:
        if found is not None:
            found.discard()
        _early = None
        return
    digest = start_digest(argv)
    if found is None:
        _early = Early(memo, _read(memo), digest)
        return
    here = (os.getcwd(), _here(), _umask())
    if found.memo != memo or found.digest != digest or (found.cwd, found.where, found.mask) != here:
        found.discard()
        found.cwd, found.where, found.mask = here
    found.memo, found.known, found.digest = memo, _read(memo), digest


def remembered() -> tuple[str, bool] | None:
    """The kind of spare this run's start was written down as, for the next run, and whether it starts in bwrap (the
    baseline's); None when none was."""
    if _early is None or not _early.written or not _early.known:
        return None
    fields = _early.known.split(b"\0")
    return fields[0].decode("ascii", "replace"), INFO.encode() in fields


def adopted() -> bool:
    """Whether this run's call started in its spare."""
    return _early is not None and _early.adopted


def end_spare() -> None:
    """End the spare this process started, unused (a served child that waited too long for its call)."""
    _end()


def spare_pid() -> int | None:
    """The process (group) of the spare this run started, if it runs."""
    return _early.proc.pid if _early is not None and _early.proc is not None else None


def guarded(announce: Callable[[int], bool], withdraw: Callable[[int], None]) -> None:
    """Put the started spare under the parent-death guard (``announce`` its group: should this run be killed before its
    call, the group is killed; bwrap's ``--die-with-parent`` alone leaves a sandbox whose setup it cut short waiting
    forever), ``withdraw`` once it is ended; a spare that cannot be guarded is ended at once."""
    pid = spare_pid()
    if _early is None or pid is None:
        return
    if announce(pid):
        _early.withdraw = withdraw
    else:
        _early.discard()


def take(
    kind: str, argv: Sequence[str], env: Mapping[str, str], additions: Mapping[str, str] | None = None, cwd: str = ""
) -> Early | None:
    """The started spare, handed over (once) when it is what a start of the ``kind`` with ``argv`` and ``env`` (with
    ``additions``, what this start adds to the command's environment) in ``cwd`` would be; else None (and an unused
    spare is ended)."""
    early = _early
    if early is None or early.proc is None:
        return None
    if early.matches(kind, argv, env, additions or {}, cwd or os.getcwd()):
        return early
    early.discard()
    return None


def remember(
    kind: str,
    argv: Sequence[str],
    additions: Mapping[str, str],
    env: Mapping[str, str],
    command: Mapping[str, str] | None = None,
) -> None:
    """Write down what this run's start was (its kind, argv with INFO, the environment it added), for the next run:
    only where the next run's spare could be adopted (the call's environment is the command's own, as far as the
    program's start reads it). An empty ``argv``: nothing (a start no spare can stand in for). ``command``: the
    command's environment as text when the caller has it decoded already (else ``os.environ`` is read)."""
    early = _early
    if early is None:
        return
    early.written = True
    wanted = b""
    if argv and kind in KINDS and _compatible({**(os.environ if command is None else command), **additions}, env, additions):
        fields = [kind, early.digest, *argv, "", *(f"{name}={value}" for name, value in additions.items())]
        wanted = "\0".join(fields).encode("utf-8", "surrogateescape")
    if wanted == early.known:
        return
    write_own(early.memo, wanted)
    early.known = wanted


def write_own(memo: str, data: bytes) -> None:
    """Replace the memo at ``memo`` with ``data`` (0600, whole or not at all; removed when ``data`` is empty), its
    folder made 0700 when missing; an error leaves it as it was."""
    try:
        if not data:
            os.unlink(memo)
            return
        os.makedirs(os.path.dirname(memo), mode=0o700, exist_ok=True)
        staging = f"{memo}.{os.getpid()}"
        try:  # noqa: SIM105 - (contextlib: see the imports)
            os.unlink(staging)  # (a crashed run's; never written through: a link there is not followed)
        except FileNotFoundError:
            pass
        fd = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as out:
            out.write(data)
        os.replace(staging, memo)
    except OSError:
        pass


def environ_digest() -> str:
    """The digest of this process's whole environment, names and values, as a memo records it.

    The spare starts before toolexec has read its config, so before it knows which variables no tool may receive
    (``secret_env``): its program (a shebang's interpreter, a venv's ``.pth``: the tool author's code) runs with the
    environment it is given from that moment, adopted or not. A memo is written only by a run whose call had all of
    its command's environment (:func:`remember`); a spare is started only with that same environment, so it never
    starts with a variable, or a value, that run's call did not have (a secret exported since, say)."""
    data = os.environb if hasattr(os, "environb") else {k.encode(): v.encode() for k, v in os.environ.items()}
    entries = sorted(name + b"=" + value for name, value in data.items())
    return format(fnv1a64(b"\0".join(entries)), "016x")


def start_digest(argv: Sequence[str]) -> str:
    """What a memo's start depends on besides its own words, as this run (the command's words ``argv``) finds it
    before it reads its config: :func:`environ_digest`, and what each config file it could read is now (device,
    inode, size, modification and change times; or that it is not there).

    The config says which variables no tool may receive (``secret_env``) and how the tool is confined (``sandbox``),
    and the spare starts before it is read: a start remembered under a config that kept nothing from tools, or left
    the tool unconfined, would start the tool's program so once more after the config was changed to keep a secret
    from it, or to confine it, whether the spare is then adopted or ended. Taken before the run reads its config, so
    that a config changed while the run reads it makes its memo one the next run does not start (never the reverse).
    """
    states = []
    for candidate in config_candidates(config_option(argv)):
        try:
            info = os.stat(candidate)
        except OSError:
            states.append("-")
            continue
        states.append(f"{info.st_dev}:{info.st_ino}:{info.st_size}:{info.st_mtime_ns}:{info.st_ctime_ns}")
    key = ",".join(states).encode("utf-8", "surrogateescape")
    return f"{environ_digest()}-{fnv1a64(key):016x}"


def _read(memo: str) -> bytes:
    """The memo's bytes (:func:`read_own`). What it names starts unchecked."""
    return read_own(memo, MAX_MEMO)


def read_own(memo: str, limit: int) -> bytes:
    """The first ``limit`` bytes of the file at ``memo``, when it is what only this user could have written: a
    regular file of their own that no one else may write, in a folder of theirs that only they may open, neither
    reached through a link (each checked on what was opened, not on a path a swap could change meanwhile); else
    nothing."""
    folder, name = os.path.split(memo)
    try:
        at = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        info = os.fstat(at)
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            return b""
        # (O_NONBLOCK: a FIFO planted there would block the run at its open)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=at)
        with open(fd, "rb") as handle:
            info = os.fstat(fd)
            if info.st_mode & 0o170000 != 0o100000 or info.st_uid != os.getuid() or info.st_mode & 0o022:
                return b""  # not a regular file, another user's, or one others may write
            return handle.read(limit)
    except OSError:
        return b""
    finally:
        os.close(at)


def began() -> bool:
    """Whether this process is a one-shot run that may start a spare (and remembers its start for the next one)."""
    return _early is not None


def memo_path(argv: Sequence[str]) -> str | None:
    """Where the start of a one-shot ``run`` of ``argv`` is remembered: keyed by the working directory, the config
    named (``--config``, ``TOOLEXEC_CONFIG``) and the tool's name, in toolexec's cache (a folder of the user's own
    that only they can open; None when it is not one, or ``argv`` names no tool)."""
    words = list(argv)
    if "run" not in words:
        return None
    rest = words[words.index("run") + 1 :]
    given = config_option(words)
    config = os.environ.get("TOOLEXEC_CONFIG", "") if given is None else given
    name = None
    skip = False
    for word in rest:
        if skip:
            skip = False
        elif word in ("--config", "--timeout", "--call-id", "--confirm"):
            skip = True
        elif not word.startswith("-"):
            name = word
            break
    if name is None:
        return None
    folder = cache_folder("one-shot")
    if folder is None:
        return None
    try:
        here = os.getcwd()
    except OSError:  # a working directory removed: nothing is remembered for it (the run goes on as it would)
        return None
    key = "\0".join((here, config, name))
    return os.path.join(folder, f"{fnv1a64(os.fsencode(key)):016x}")


def cache_folder(name: str) -> str | None:
    """The folder ``name`` of memos in toolexec's cache, when it is a folder of the user's own that only they can
    open, or is not there yet (made by the first :func:`write_own`); else None."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(cache, "toolexec", name)
    try:
        info = os.lstat(folder)
        if info.st_uid != os.getuid() or info.st_mode & 0o077 or not os.path.isdir(folder) or os.path.islink(folder):
            return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return folder


def _compatible(start: Mapping[str, str], call: Mapping[str, str], additions: Mapping[str, str]) -> bool:
    """Whether a spare started with ``start`` stands for one started with ``call``: every variable it started with is
    the call's too, with the same value (so nothing the call may not see, a secret toolexec keeps from its tools, is
    in what the spare's ``/proc/self/environ`` shows), but for what toolexec added to the start (``additions``); and
    the call adds only its own and toolexec's variables, which the spare takes with the call, before the tool's first
    line (anything else, a ``.env`` file's ``NODE_OPTIONS`` or ``PYTHONPATH`` say, the program's start might have
    read)."""
    if any(name not in additions and call.get(name) != value for name, value in start.items()):
        return False
    return all(name in start or name in _PER_CALL or name.startswith(_PER_CALL_PREFIXES) for name in call)


def _here() -> tuple[int, int] | None:
    """The working directory's device and inode (None when it cannot be looked at): what a spare started in stands
    in, whatever path names it now."""
    try:
        info = os.stat(".")
    except OSError:
        return None
    return info.st_dev, info.st_ino


def _umask() -> int:
    """This process's umask (set back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _end() -> None:
    if _early is not None:
        _early.discard()


def _spawn(argv: Sequence[str], env: Mapping[str, str], stdin: int, passed: Sequence[int]) -> subprocess.Popen[bytes]:
    """Start the spare as ``subprocess.Popen(argv, stdin=stdin (-1: a pipe), stdout=PIPE, stderr=PIPE, bufsize=0,
    env=env, start_new_session=True, close_fds=True, pass_fds=passed)`` would, before ``subprocess`` is imported
    (~5 ms of a one-shot run: the spare starts that much earlier); then the process as a ``subprocess.Popen`` of its
    own (:func:`_adopted`). OSError when it cannot be started (its program not found, say), as Popen's.

    A fork and an exec, as Popen's: in the child, a session of its own, the pipes on 0, 1 and 2, every descriptor
    this process inherited open and inheritable (its parent's: a shell's, a CI runner's) closed (every one this
    process opened is close-on-exec already), ``passed`` kept, and the signals Python ignores (``SIGPIPE``,
    ``SIGXFSZ``) back to their default (``restore_signals``). Not ``os.posix_spawn``: glibc's leaves its two internal
    signals ignored in the program it starts, which a cold start's does not. Where this process has threads, or
    descriptors in stdio's places (0, 1 or 2 closed), Popen itself starts it."""
    threads = sys.modules.get("threading")
    if (threads is not None and threads.active_count() > 1) or min(stdin if stdin >= 0 else 3, *passed, 3) <= 2:
        return _popen(argv, env, stdin, passed)
    if not _stdio_open():
        return _popen(argv, env, stdin, passed)
    program = argv[0]
    if "/" not in program:  # (Popen searches the PATH of the environment it is given, as this does)
        found = (os.path.join(place, program) for place in os.get_exec_path(dict(env)))
        program = next((path for path in found if os.access(path, os.X_OK) and not os.path.isdir(path)), program)
    ours: list[int] = []  # this process's ends: its stdin's (a pipe of its own), stdout's, stderr's
    theirs: list[int] = []
    errors = -1
    try:
        if stdin < 0:
            stdin, write = os.pipe()
            ours.append(write)
            theirs.append(stdin)
        for _ in range(2):
            read, write = os.pipe()
            ours.append(read)
            theirs.append(write)
        errors, said = os.pipe()  # (close-on-exec: it reads the end of file once the program runs)
        theirs.append(said)
        closed = [fd for fd in _inherited() if fd not in passed]
        pid = os.fork()
        if pid == 0:  # pragma: no cover - (the child: it becomes the program, or ends)
            _become(program, argv, env, (stdin, theirs[-3], theirs[-2]), closed, passed, said)
        for fd in theirs:
            os.close(fd)
        theirs = []
        try:
            failed = os.read(errors, 32)
        finally:
            os.close(errors)
            errors = -1
        if failed:
            os.waitpid(pid, 0)
            number = int(failed) if failed.isdigit() else 0
            raise OSError(number, os.strerror(number) if number else "the program could not be started", program)
    except BaseException:
        for fd in (*ours, *theirs, errors):
            _close(fd)
        raise
    stdin_ours = ours[0] if len(ours) == 3 else -1
    return _adopted(pid, argv, stdin_ours, ours[-2], ours[-1])


def _become(
    program: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    stdio: tuple[int, int, int],
    closed: Sequence[int],
    passed: Sequence[int],
    said: int,
) -> None:  # pragma: no cover - (runs in the forked child)
    """In the forked child: set up as :func:`_spawn` says, then exec ``program``; its errno down ``said`` if not."""
    try:
        os.setsid()
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)  # (the copy is inheritable)
        for fd in closed:
            os.close(fd)
        for fd in passed:
            os.set_inheritable(fd, True)
        for name in _DEFAULT_SIGNALS:
            if hasattr(_signal, name):
                _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
        os.execve(program, list(argv), dict(env))
    except BaseException as exc:
        try:
            os.write(said, str(getattr(exc, "errno", None) or 0).encode())
        finally:
            os._exit(255)


def _stdio_open() -> bool:
    """Whether this process's descriptors 0, 1 and 2 are all open (so no pipe made here takes one of their places)."""
    try:
        for fd in (0, 1, 2):
            os.fstat(fd)
    except OSError:
        return False
    return True


def _popen(argv: Sequence[str], env: Mapping[str, str], stdin: int, passed: Sequence[int]) -> subprocess.Popen[bytes]:
    """:func:`_spawn` through ``subprocess.Popen`` itself."""
    import subprocess

    return subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if stdin < 0 else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # read by descriptor, as a cold call's
        env=env,
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(passed),
    )


def _inherited() -> list[int]:
    """This process's descriptors above 2 that a program it starts would inherit (open, not close-on-exec)."""
    found = []
    for name in os.listdir("/proc/self/fd"):  # (its own descriptor, closed by now, is skipped as not open)
        fd = int(name)
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    found.append(fd)
            except OSError:
                pass
    return found


def _adopted(pid: int, argv: Sequence[str], stdin: int, stdout: int, stderr: int) -> subprocess.Popen[bytes]:
    """The started process ``pid`` as a ``subprocess.Popen`` (so the process helper supervises, waits for and reaps
    it as any other), holding this process's ends of its pipes (``stdin`` -1: none)."""
    import subprocess

    class Adopted(subprocess.Popen[bytes]):
        # Popen's own start with the two steps that would start another process made to take this one.
        def _get_handles(self, *_: object) -> tuple[int, int, int, int, int, int]:
            return -1, stdin, stdout, -1, stderr, -1

        def _execute_child(self, *_: object) -> None:
            self.pid = pid
            self._child_created = True

    return Adopted(
        list(argv), stdin=subprocess.PIPE if stdin >= 0 else None, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0
    )


def _close(fd: int) -> None:
    if fd >= 0:
        try:  # noqa: SIM105 - (contextlib: see the imports)
            os.close(fd)
        except OSError:
            pass
