"""The Linux half of the process helper: a pidfd for the child's exit, ``/proc`` for the call's processes.

Standard library only (ctypes for ``prctl``): this is the path of every call on Linux, and a
one-shot ``toolexec run`` must not pay for importing psutil.

What a tool cannot shed: while calls are in flight this process is a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``), so a descendant whose parent dies is re-parented here rather
than to init, where the search below finds it cheaply. A process is the call's when it is in the
tool's group or session, carries the call's marker (a value new to this call, inherited at fork),
or descends from one that is. An orphan that shed both (``setsid env -i …``) cannot be told from a
child the host started itself, so it is not taken: a call that runs in a PID namespace of its own
(the sandbox's baseline, docs/sandbox.md) loses it to the kernel instead; an unconfined one does not.
The search repeats until a pass finds nothing alive, so a process that keeps forking loses the race.

Where the subreaper is in effect (and the kernel lists children, ``/proc/PID/task/TID/children``) the
search walks only this process's descendant tree: every process of a call is in it, since an orphan
goes to its nearest subreaper ancestor, which is this process or one of the call's own processes.
Only the subtrees of this process's children that belong to the call are read (another call's tool
or the host's own children cannot have the call's processes below them), so a pass costs a few
reads however many processes the machine runs. Without the subreaper it reads every process in
``/proc``, which also finds a process started outside the tree that carries the call's marker.

Should this process die while calls run (even by SIGKILL), a guard (one process per process: ``/bin/sh``
become ``awk``, started by the first call, in a session of its own) kills the tool groups still in flight and the
processes still carrying their markers, and removes their private files; where it cannot run, each
tool starts under ``setpriv --pdeathsig KILL`` instead. Only this process can instruct it (see
``_GUARD_SCRIPT``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import threading
import time

from toolexec.recordtype import record

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence

PR_SET_DUMPABLE = 4
PIDFD_SIGNAL_PROCESS_GROUP = 4  # <linux/pidfd.h>, Linux 6.9
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
MAX_ROUNDS = 200  # passes over /proc before giving up on a process that forks faster than it is killed

_usable: bool | None = None
_lock = threading.Condition()
_in_flight: dict[int, int] = {}  # tool pid -> its start time (clock ticks since boot): only later processes carry its marker
_announced: dict[int, str] = {}  # tool pid -> what the guard was told of its call (told again to a new guard)
_kept: set[str] = set()  # paths outside any call the guard removes should this process die (remove_at_death)
_pending: dict[str, str] = {}  # marker -> what the guard was told of a call before its tool was spawned (likewise)
_cgroups: dict[str, str] = {}  # where this process makes cgroups -> what the guard was told (it removes them at its end)
_group_signals: bool | None = None  # whether pidfd_send_signal takes PIDFD_SIGNAL_PROCESS_GROUP (None: not tried yet)
_killed: dict[int, int] = {}  # processes a kill pass ended whose parent was not this process yet -> their start
_calls = 0  # calls between enter() and leave()
# Calls between enter() and register(): their tool may already be a child of this process without being
# in _in_flight yet, so a scan must not mistake it for an orphan of another call (and kill it).
_spawning = 0
_subreaper_was_set: bool | None = None  # whether the host had set it before the first call
_subreaper_on = False  # whether this process is a subreaper now (calls in flight, and prctl worked)
_children_listed: bool | None = None  # whether the kernel lists a task's children (CONFIG_PROC_CHILDREN)
_prctl: Callable[..., int] | None = None
_protected = False  # whether protect() made this process undumpable
_setpriv: str | None = None  # its path, or '' when it is not installed


def available() -> bool:
    """Whether this system has both a working ``pidfd_open`` (Linux 5.3+) and a ``/proc`` to scan.

    Decided once; the answer is published in one assignment, so a thread asking while another
    decides never sees a half-made answer (which once sent a concurrent call to the portable path).
    """
    global _usable
    if _usable is None:
        usable = False
        if hasattr(os, "pidfd_open") and os.path.exists("/proc/self/stat"):
            try:  # the call exists in Python but an old kernel or a seccomp filter may refuse it
                os.close(os.pidfd_open(os.getpid()))
                usable = True
            except OSError:
                pass
        _usable = usable
    return _usable


def _libc_prctl() -> Callable[..., int] | None:
    """``prctl`` from the C library, resolved once."""
    global _prctl
    if _prctl is None:
        try:
            import ctypes  # only once a call runs: a one-shot run that calls nothing does not pay for it

            function = ctypes.CDLL(None, use_errno=True).prctl
            function.restype = ctypes.c_int
            _prctl = function
        except (OSError, AttributeError):
            return None
    return _prctl


def protect() -> bool:
    """Make this process undumpable (``PR_SET_DUMPABLE`` 0), once: its ``/proc`` files (``environ``, ``mem``,
    ``fd/*``) become the kernel's, so a tool running as the same user cannot read toolexec's environment or memory
    (where tokens and other calls' arguments are) or open its descriptors. No core dump is written for it either.
    Every process that runs a tool does this before its first tool starts; a tool's own process is dumpable again
    after its ``exec``. False where the system refuses (or has no ``prctl``)."""
    global _protected
    if not _protected:
        prctl = _libc_prctl()
        _protected = prctl is not None and prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0
    return _protected


PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int | None) -> bool:
    """Have the kernel send this process ``sig`` when its parent ends (None: no longer); False where it cannot. For
    a forked helper that only its parent may use (``toolexec serve``'s waiting child)."""
    prctl = _libc_prctl()
    return prctl is not None and prctl(PR_SET_PDEATHSIG, sig or 0, 0, 0, 0) == 0


MADV_POPULATE_WRITE = 23  # Linux 5.14+
PAGE_PRESENT, PAGE_EXCLUSIVE = 1 << 63, 1 << 56  # /proc/PID/pagemap's bits (Documentation/admin-guide/mm/pagemap)
OWN_STEP = 1 << 20  # bytes own_pages copies between two questions to its `until` (~0.4 ms of a loaded machine's CPU)


def own_pages(
    until: Callable[[], bool] | None = None, step: int = OWN_STEP, regions: Sequence[tuple[int, int]] | None = None
) -> int:
    """Copy, now, every page of this process's private writable memory that it still shares with the process it was
    forked from (``madvise(MADV_POPULATE_WRITE)`` over each such mapping, ``step`` bytes at a time), and return how
    many bytes were asked for.

    A forked CPython writes to nearly every page it reads (reference counts), so each page it touches first costs a
    copy-on-write fault: a ``toolexec serve`` child paid ~2.5 ms of its call in them. A spare child does this while it
    waits for a connection, off the call's path. 0 where the kernel or the C library cannot (nothing else changes).

    ``until`` is asked before each step: once it says True the copying stops there (the pages left are copied on
    write, as they would be without it). A spare asks whether a client is waiting: copying all of a server's memory
    takes ~10 ms of CPU, which a call arriving meanwhile would otherwise wait for. ``regions`` (start, length) copies
    those instead of every private mapping: the pages an earlier call wrote (:func:`written_pages`); a part no longer
    mapped is skipped."""
    try:
        import ctypes  # loaded once by the C library's prctl (_libc_prctl) in every process that runs calls

        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        wanted = private_regions() if regions is None else regions
    except (OSError, AttributeError):
        return 0
    asked = 0
    for start, length in wanted:
        end = start + length
        while start < end:
            if until is not None and until():
                return asked
            size = min(step, end - start)
            if madvise(start, size, MADV_POPULATE_WRITE) != 0:
                break
            asked += size
            start += size
    return asked


def private_regions() -> list[tuple[int, int]]:
    """(start, length) of each private writable mapping of this process: anonymous (the allocator's arenas, [heap]) or
    a library's data; not [stack] and the like. OSError when /proc/self/maps cannot be read."""
    found = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if (
                fields[1][:2] != "rw"
                or fields[1][3:4] != "p"
                or (len(fields) > 5 and fields[5].startswith("[") and fields[5] != "[heap]")
            ):
                continue
            start, end = (int(edge, 16) for edge in fields[0].split("-"))
            found.append((start, end - start))
    return found


def written_pages(regions: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The runs (start, length) of ``regions``' pages this process holds alone (``/proc/self/pagemap``'s exclusive
    bit): in a forked child, the pages it wrote since the fork (or was the first to touch). Empty when the kernel does
    not say (no pagemap, or Linux before 4.2)."""
    page = os.sysconf("SC_PAGE_SIZE")
    runs: list[tuple[int, int]] = []
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return runs
    try:
        for start, length in regions:
            count = length // page
            data = os.pread(fd, 8 * count, 8 * (start // page))
            entries = memoryview(data)[: len(data) // 8 * 8].cast("Q")
            first = -1
            for index, entry in enumerate(entries):
                alone = entry & PAGE_EXCLUSIVE and entry & PAGE_PRESENT
                if alone and first < 0:
                    first = index
                elif not alone and first >= 0:
                    runs.append((start + first * page, (index - first) * page))
                    first = -1
            if first >= 0:
                runs.append((start + first * page, (len(entries) - first) * page))
    except (OSError, ValueError):
        return []
    finally:
        os.close(fd)
    return runs


# The guard: started once per process, in its own session, it holds one end of a socket pair whose other end
# only this process holds. A call is announced before its tool is spawned (``P MARK``: the call's marker, ``F MARK
# PATH``: a private file of the call), so that a process dying between the spawn and what follows leaves nothing;
# then, once the tool is started, by its group (``+ PGID MARK``, which links the marker's lines to the group), withdrawn
# when it is over (``- PGID``: the group's lines and its marker's; ``R MARK`` for a spawn that failed). A group
# announced with no call (``+ PGID``: a sandbox started ahead) names its files itself (``f PGID PATH``). Where this
# process makes calls' cgroups, it says so once per place (``C TOKEN PARENT``: its cgroups there are named
# ``toolexec-PID-TOKEN…``, TOKEN this process's own 16 hex digits).
#
# It reads with awk (the shell execs it): a shell must read a socket one byte per read(2) (~450 system calls a call),
# awk reads what has come in one, and keeps what it was told in arrays keyed by group and marker (a withdrawal is one
# deletion, however many calls are in flight, where the shell rebuilt its whole list). End of file means this process
# is gone, however it ended: awk hands what is still announced to a shell (``_GUARD_END``, its child), which kills
# every group still announced, then every process still carrying one of their markers (a tool's escapee, ``setsid``
# and all), then removes the call's files; then, should it have been told of cgroups, it says so down the socket (one
# byte: what this process's exit waits for, see _stop_guard) and removes those of this process still there (this
# process's pid, ``$1``, and the token in their name): what runs in one is killed (``cgroup.kill``, else each of
# ``cgroup.procs``), then the cgroup is removed (``rmdir``: ``rm`` cannot, its control files refuse), tried again while
# the kernel finishes their exits (3 s at most). The kernel takes a grace period (~10 ms) to remove a cgroup: a
# one-shot run leaves its cgroups to its guard (toolexec.runtimes.cgroup.leave_to_guard), so that its exit does not
# wait for it.
#
# No tool can instruct it: a socket, unlike a pipe, cannot be opened through ``/proc/<guard>/fd/0``, and this
# process is undumpable (see protect), so its own end cannot be taken either. Even so, the guard takes only
# well-formed lines: a group is a number above 1 (never 0, 1 or -1, which would reach every process) and not its
# own; a marker is hex; a file is a toolexec call file (``toolexec-…``). It ignores the signals that end a
# toolexec (so does the shell it hands the end to: an ignored signal stays ignored across exec), so it outlives the
# process it guards. Killed itself, its socket closes: this process's next line fails, and a new guard is started.
_GUARD_SCRIPT = r"""trap '' HUP INT QUIT TERM USR1 USR2 ALRM PIPE
GUARD_END=$1; export GUARD_END
exec 3<&0 awk -v me=$$ -v host=$PPID '
function hex(s) { return s != "" && s !~ /[^0-9a-f]/ }
{
  op = $1; group = $2; rest = $0
  sub(/^[ \t]*[^ \t]*[ \t]*[^ \t]*[ \t]*/, "", rest); sub(/[ \t]+$/, "", rest)
  if (op ~ /^[PFRC]$/) { if (length(group) < 16 || !hex(group)) next }
  else if (group !~ /^[1-9][0-9]*$/ || length(group) > 7 || group + 0 <= 1 || group + 0 == me + 0) next
  if (op == "+") {
    if (rest != "" && (length(rest) < 16 || !hex(rest))) next
    lines[group] = lines[group] group " m " rest "\n"
    if (rest != "") mark[group] = rest
  } else if (op == "P") lines[group] = lines[group] group " p " group "\n"
  else if (op == "f" || op == "F") {
    name = rest; sub(/.*\//, "", name)
    if (name ~ /^toolexec-/) lines[group] = lines[group] group " f " rest "\n"
  } else if (op == "C") {
    if (rest ~ /^\// && (rest "/") !~ /\/\.\.?\//) lines[group] = lines[group] group " c " rest "\n"
  } else if (op == "-" || op == "R") {
    if (group in mark) { delete lines[mark[group]]; delete mark[group] }
    delete lines[group]
  }
}
END {
  end = "exec /bin/sh -c \"$GUARD_END\" guard " host
  for (key in lines) printf "%s", lines[key] | end
  close(end)
}'
"""
_GUARD_END = r"""calls=$(cat)
nl='
'
IFS=$nl; set -f
marks=''
for line in $calls; do
  case ${line#* } in
  "m "*) kill -s KILL -- "-${line%% *}" 2>/dev/null
     mark=${line#* m }; [ -z "$mark" ] || marks="${marks}TOOLEXEC_CALL_MARK=$mark$nl" ;;
  "p "*) marks="${marks}TOOLEXEC_CALL_MARK=${line#* p }$nl" ;;
  esac
done
round=0
while [ -n "$marks" ] && [ $round -lt 50 ]; do
  set +f; found=$(grep -lsF -e "${marks%$nl}" /proc/[0-9]*/environ); set -f
  [ -n "$found" ] || break
  for path in $found; do pid=${path#/proc/}; kill -s KILL "${pid%/environ}" 2>/dev/null; done
  round=$((round + 1))
done
for line in $calls; do
  case ${line#* } in "f "*) rm -rf -- "${line#* f }" ;; esac
done
said=''
for line in $calls; do
  case ${line#* } in "c "*) token=${line%% *}; parent=${line#* c } ;; *) continue ;; esac
  [ -n "$said" ] || { printf . >&3; said=1; } 2>/dev/null
  set +f
  for path in "$parent/toolexec-$1-$token"*; do
    [ -f "$path/cgroup.procs" ] || continue
    if [ -f "$path/cgroup.kill" ]; then echo 1 2>/dev/null >"$path/cgroup.kill"
    else
      while read -r pid; do
        case $pid in ''|*[!0-9]*) continue ;; esac
        [ "$pid" -le 1 ] || [ "$pid" = "$$" ] || kill -s KILL "$pid" 2>/dev/null
      done <"$path/cgroup.procs"
    fi
    n=0
    until rmdir -- "$path" 2>/dev/null || [ ! -d "$path" ] || [ $n -ge 300 ]; do sleep 0.01; n=$((n + 1)); done
  done
  set -f
done
"""
GUARD_SHELL = "/bin/sh"
GUARD_PATH = "/usr/bin:/bin"  # where it finds awk, cat, grep, rm, rmdir and sleep


def _guard_argv() -> list[str]:
    """The guard's command line: the shell that becomes awk (the reader), then, at the end, the shell that acts."""
    return [GUARD_SHELL, "-c", _GUARD_SCRIPT, "toolexec-guard", _GUARD_END]


@record(kw_only=False, frozen=False)
class _Guard:
    proc: subprocess.Popen[bytes]
    fd: int  # this process's end of its socket pair (non-blocking, not inherited)
    owner: int  # the process it guards (a forked child must not write to its parent's guard)
    broken: bool = False  # a line went out in part: nothing more is written to it


_guard: _Guard | None = None
_guards: set[int] = set()  # the pids of every guard this process started: never taken for a call's orphan
_servers: set[int] = set()  # the warm servers this process runs (toolexec.runtimes.warm): no call's either


def _start_guard() -> _Guard | None:
    """Start this process's guard; None where it cannot be started (then setpriv, or nothing, is used)."""
    import _socket  # not socket: its import costs a one-shot run milliseconds, and only socketpair is needed
    import subprocess

    if not any(os.access(os.path.join(place, "awk"), os.X_OK) for place in GUARD_PATH.split(":")):
        return None  # (its reader: POSIX has it, but a stripped image may not)
    ours, theirs = (end.detach() for end in _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM))
    try:
        proc = subprocess.Popen(
            _guard_argv(),
            stdin=theirs,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={"PATH": GUARD_PATH},
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        os.close(ours)
        return None
    finally:
        os.close(theirs)
    os.set_blocking(ours, False)
    os.set_inheritable(ours, False)
    if not _guards:
        import atexit

        atexit.register(_stop_guard)
    _guards.add(proc.pid)
    return _Guard(proc, ours, os.getpid())


def _stop_guard() -> None:
    """At exit: close the guard's pipe and wait for it to end, so a process that ends normally leaves no
    guard behind (one that is killed leaves it only as long as the guard takes to kill the tool groups). A guard that
    holds cgroups is waited for until it says it has done the rest (killed, removed the files): their removal, which
    waits a kernel grace period each, goes on after this process has ended, and ends within seconds."""
    global _guard
    with _lock:
        guard, _guard = _guard, None
        holds = bool(_cgroups)
        told = bool(_pending or _announced or _kept)  # what the guard is still to kill or remove, before its word
    if guard is None or guard.owner != os.getpid():
        return
    if holds:
        if not told:  # its word would say nothing: nothing is left for it but the cgroups (see _left_cgroups_only)
            _left_cgroups_only(guard)
            return
        if _said_done(guard):
            return
    else:
        with contextlib.suppress(OSError):
            os.close(guard.fd)
    with contextlib.suppress(Exception):
        _wait_for_exit(guard.proc, 2)


def _left_cgroups_only(guard: _Guard) -> None:
    """End the guard's input, not waiting for it: all it has left is this process's cgroups (no call in flight or being
    started, no file kept), which it removes after its word in any case (what runs in one is killed first). Waiting for
    that word cost a root one-shot run ~2-3 ms (awk starting the shell that acts, which starts ``cat``) and made
    nothing more sure: what comes before it (killing the groups still announced, the processes carrying their markers,
    removing their files) has nothing to do."""
    with contextlib.suppress(OSError):
        os.close(guard.fd)
    guard.proc.returncode = 0  # it is not this process's to wait for (its parent is init's, or a subreaper's, soon)


def _said_done(guard: _Guard) -> bool:
    """End the guard's input (its socket's half: this process's end stays open to read) and wait for its byte (it
    did all but remove cgroups), at most the bound of :func:`_stop_guard`; whether it came. This process's end is
    closed either way."""
    import _socket

    try:
        end = _socket.socket(fileno=guard.fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.close(guard.fd)
        return False
    try:
        end.shutdown(_socket.SHUT_WR)
        end.setblocking(True)
        end.settimeout(2)
        said = end.recv(1) == b"."
    except OSError:
        said = False
    finally:
        end.close()
    if said:
        guard.proc.returncode = 0  # it is not this process's to wait for (its parent is init's, or a subreaper's, soon)
    return said


def _wait_for_exit(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """``proc.wait(timeout)``, woken by the kernel the moment the process ends (its pidfd) rather than by
    ``Popen.wait``'s polling, which sleeps 0.5, 1, 2 ms… between looks: ~1 ms at the end of every one-shot run."""
    try:
        waiter = ExitWaiter(proc)
    except OSError:  # already reaped, or no pidfd: Popen's own wait
        proc.wait(timeout=timeout)
        return
    try:
        select.select([waiter], [], [], timeout)
    finally:
        waiter.close()
    proc.wait(timeout=0)


def ensure_guard() -> None:
    """Start this process's guard unless it has one. A call does it itself; a host (or a test) that compares its
    open descriptors before and after a call does it first, since the guard keeps one for the process's life."""
    with _lock:
        guard = _guard
        if guard is not None and guard.owner == os.getpid() and (guard.broken or guard.proc.poll() is not None):
            _replace_guard()  # (gone: a call would replace it anyway, opening its descriptor then)
        else:
            _ensure_guard()


def _ensure_guard() -> None:
    global _guard
    if _guard is None or _guard.owner != os.getpid():
        _guard = _start_guard()


def _tell_guard(message: str) -> bool:
    """Send lines to the guard, whole; False when it is gone or not reading.

    A message written in part (the socket's buffer full: a stopped guard) leaves a line the guard would read
    joined to the next: this guard is then told nothing more (``broken``), and the next call starts another.
    """
    guard = _guard
    if guard is None or guard.owner != os.getpid() or guard.broken:
        return False
    data = message.encode("utf-8", "surrogateescape")
    try:
        written = os.write(guard.fd, data)
    except OSError:
        written = -1
    if written != len(data):
        guard.broken = written > 0
        return False
    return True


def remove_at_death(path: str, on: bool = True) -> None:
    """Have this process's guard remove ``path`` (a directory named ``toolexec-…``: a pool of call files) should this
    process die; ``on`` False: no longer (this process removed it itself)."""
    with _lock:
        if on:
            _ensure_guard()
            _kept.add(path)
        else:
            _kept.discard(path)
        # the guard forgets this process's lines, then learns those left (this process's pid is no call's group)
        _announce(f"- {os.getpid()}\n{_kept_lines()}")


def _kept_lines() -> str:
    me = os.getpid()
    return "".join(f"f {me} {path}\n" for path in sorted(_kept) if "\n" not in path and "\r" not in path)


def remove_cgroups_at_end(parent: str, token: str) -> bool:
    """Have this process's guard remove, at its end, this process's cgroups under ``parent`` (``toolexec-PID-TOKEN…``,
    ``token`` 16 hex digits of this process's own) that are still there, however this process ends (what runs in one
    is killed first). Told once per place. Whether the guard knows it (False: no guard could start)."""
    if not _one_line(parent) or len(token) != 16:
        return False
    with _lock:
        if parent not in _cgroups or _guard is None or _guard.owner != os.getpid():
            _ensure_guard()
            if _guard is None:
                return False
            _cgroups[parent] = f"C {token} {parent}\n"
            _announce(_cgroups[parent])
        return _guard is not None and not _guard.broken


def removes_cgroups_at_end(parent: str) -> bool:
    """Whether this process's guard is to remove this process's cgroups under ``parent`` at its end
    (:func:`remove_cgroups_at_end`)."""
    with _lock:
        return parent in _cgroups and _guard is not None and _guard.owner == os.getpid() and not _guard.broken


def _forget_guard_after_fork() -> None:
    """In a forked child: the parent's guard is not ours; holding its pipe would keep it from seeing the parent die
    (nor are the paths it removes at the parent's death the child's)."""
    global _guard
    _kept.clear()
    _cgroups.clear()  # (the parent's: its guard removes them)
    if _guard is not None:
        with contextlib.suppress(OSError):
            os.close(_guard.fd)
        _guard = None
    _announced.clear()  # the parent's calls: never told to this process's own guard, which would kill them at its end
    _pending.clear()
    _killed.clear()


os.register_at_fork(after_in_child=_forget_guard_after_fork)


def with_death_signal(argv: list[str]) -> list[str]:
    """``argv`` as it is where this process's guard is running (it kills the tool's group if this process dies,
    with no extra exec per call); else under ``setpriv --pdeathsig KILL`` (util-linux) where it is installed:
    a tool dies with a toolexec that was killed by SIGKILL (the signal comes when the spawning thread ends;
    that thread supervises the call to its end). Without either, or when ``argv[0]`` cannot be found (so
    that the error names it), ``argv`` is returned as it is.
    """
    if _guard is not None and _guard.owner == os.getpid():
        return argv

    from toolexec.runtimes.interpreter import which

    global _setpriv
    if _setpriv is None:
        _setpriv = which("setpriv") or ""
    if not _setpriv or not argv or which(argv[0]) is None:
        return argv
    return [_setpriv, "--pdeathsig", "KILL", "--", *argv]


def enter(mark: str = "", files: tuple[str, ...] = (), *, told: bool = True) -> None:
    """A call is about to start its tool: be a subreaper from before the spawn (first call in flight), and have a guard
    that knows the call's ``mark`` and private ``files`` already: should this process die before :func:`register`, the
    guard still kills every process carrying the mark (a sandbox's init waiting on its parent, which no group names yet)
    and removes the files. ``told=False``: not yet, for a call that may start where the kernel ends it with this
    process (a sealed warm call, see :func:`register`); :func:`tell` tells the guard should it start otherwise."""
    global _subreaper_was_set, _subreaper_on, _calls, _spawning
    with _lock:
        _ensure_guard()  # first: should it raise, no count has changed
        _calls += 1
        _spawning += 1
        if told:
            _tell_pending(mark, files)
        prctl = _libc_prctl()
        if _calls == 1 and prctl is not None:
            if _subreaper_was_set is None:
                import ctypes

                flag = ctypes.c_int(0)
                prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
                _subreaper_was_set = bool(flag.value)
            _subreaper_on = prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 or _subreaper_was_set


def tell(mark: str, files: tuple[str, ...] = ()) -> None:
    """Tell the guard of a call :func:`enter` did not tell it of (``told=False``), before its tool is started."""
    with _lock:
        _tell_pending(mark, files)


def _tell_pending(mark: str, files: tuple[str, ...]) -> None:
    if len(mark) >= 16:
        _pending[mark] = f"P {mark}\n" + "".join(f"F {mark} {path}\n" for path in files if _one_line(path))
        _announce(_pending[mark])


def register(pid: int, mark: str = "", files: tuple[str, ...] = (), *, started_after: int = 0, told: bool = True) -> None:
    """The call's tool is ``pid``: remember when it started (only a later process can carry its marker), and tell the
    guard the call's group, its marker (hex) and its private ``files`` (removed by the guard should this process die).

    ``started_after`` (clock ticks since boot, :func:`boot_ticks`, read before the tool was started) stands for the
    tool's start: a bound no later than it, which spares a read of ``/proc`` per call (and serves a warm call's process,
    which its server may have reaped already). Without it the start is read from ``/proc``.

    ``told=False``: the guard is told nothing of this call (nor of its end, at :func:`leave`): a sealed warm call, every
    process of which is in the PID namespace of a server that bwrap ends with this process (``--die-with-parent``), so
    that the kernel ends the whole call should this process die, whatever the guard knows. Three wake-ups of the guard
    fewer per call (each a shell reading its socket one byte at a time)."""
    global _spawning
    start = started_after or _stat(pid).start
    with _lock:
        _in_flight[pid] = start
        _spawning -= 1
        _lock.notify_all()
        if told:  # the files were told with the marker (``F``), unless the call was not pending: its ``- PGID`` drops both
            _announced[pid] = _announcement(pid, mark, () if mark in _pending else files)
            _announce(_announced[pid])
        elif _pending.pop(mark, None) is not None:
            _announce(f"R {mark}\n")


def _announce(message: str) -> None:
    """Tell the guard ``message`` (under the lock). Should the guard be gone (killed, or stopped with its buffer full),
    a new one takes every call in flight and every call being spawned. The old socket is closed only once its guard
    has ended: a stopped guard that later read the end of file would kill the groups of calls still running."""
    if _guard is not None and not _tell_guard(message):
        _replace_guard()


def _replace_guard() -> None:
    """A new guard for one that is gone or no longer told anything (under the lock): it learns every call in flight
    and every call being spawned."""
    global _guard
    if _guard is not None and _guard.proc.poll() is not None:
        os.close(_guard.fd)
    _guard = _start_guard()
    if _guard is not None:
        for announcement in (*_pending.values(), *_announced.values(), *_cgroups.values()):
            _tell_guard(announcement)
        _tell_guard(_kept_lines())


def boot_ticks() -> int:
    """Now, in the unit of a process's start time in ``/proc`` (clock ticks since boot)."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def exempt(pid: int) -> None:
    """``pid`` is a warm server of this process: a child in a session of its own that is no call's orphan."""
    _servers.add(pid)


def unexempt(pid: int) -> None:
    """``pid`` is no longer a warm server of this process (it has been reaped)."""
    _servers.discard(pid)


def announce(pid: int, files: tuple[str, ...] = ()) -> bool:
    """Tell the guard of a process group this process started ahead of a call (a sandbox set up ahead:
    :mod:`toolexec.runtimes.sandbox_spare`) and of the call files it holds: should this process die, the group is killed
    and the files removed. False where there is no guard (then nothing is started ahead)."""
    with _lock:
        _ensure_guard()
        if _guard is None:
            return False
        _announced[pid] = _announcement(pid, "", files)
        return _tell_guard(_announced[pid])


def withdraw(pid: int) -> None:
    """The group announced by :func:`announce` is gone (or its files are a call's now, announced by :func:`register`)."""
    with _lock:
        if pid not in _in_flight and _announced.pop(pid, None) is not None:
            _tell_guard(f"- {pid}\n")


def wait_quiet(timeout: float) -> bool:
    """Wait (up to ``timeout`` seconds) until no call of this process is in flight; whether none is."""
    with _lock:
        return _lock.wait_for(lambda: _calls == 0, timeout)


def calls_in_flight() -> int:
    """How many calls of this process are in flight now (between their start and their end)."""
    with _lock:
        return _calls


def _announcement(pid: int, mark: str, files: tuple[str, ...]) -> str:
    """The lines that tell the guard about one call (a file whose path would break a line is left out)."""
    lines = [f"+ {pid} {mark}\n"]
    lines += [f"f {pid} {path}\n" for path in files if _one_line(path)]
    return "".join(lines)


def _one_line(path: str) -> bool:
    return "\n" not in path and "\r" not in path


def leave(pid: int | None, mark: str = "") -> None:
    """The call (of tool ``pid``, if one started; of marker ``mark``) is over; the last call in flight stops being a
    subreaper."""
    global _calls, _spawning, _subreaper_on
    with _lock:
        if pid is not None:
            _in_flight.pop(pid, None)
            if _announced.pop(pid, None) is not None:  # (a call registered untold was never announced)
                _tell_guard(f"- {pid}\n")  # (its marker's lines too: the guard linked them to the group at ``+``)
            _pending.pop(mark, None)
        else:  # the spawn failed: it is no longer pending
            _spawning -= 1
            _lock.notify_all()
            if _pending.pop(mark, None) is not None:
                _tell_guard(f"R {mark}\n")
        if _killed:
            _reap_killed(os.getpid())
        _calls -= 1
        if _calls == 0:
            _lock.notify_all()  # (wait_quiet)
        prctl = _libc_prctl()
        if _calls == 0 and not _subreaper_was_set and prctl is not None:
            prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
            _subreaper_on = False


class ExitWaiter:
    """A descriptor that becomes readable when the child exits (a pidfd); it does not reap the child."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._fd = os.pidfd_open(proc.pid)

    def fileno(self) -> int:
        """The pidfd: readable once the child has exited."""
        return self._fd

    def close(self) -> None:
        """Close the pidfd."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


@record(kw_only=False)
class _Proc:
    pid: int
    state: str  # "" once the process is gone
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks since boot


_GONE = _Proc(0, "", 0, 0, 0, 0)


def signal_group(leader: int, pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group that ``leader`` (a pidfd of this process's child started in a session of its own,
    number ``pgid``) leads; whether a process of that group was there to take it (0: whether one is).

    Through the pidfd (Linux 6.9) the kernel signals the group it leads, whatever has become of its number: once the
    leader is reaped (as the call's status is read) and the last process of its group has ended, the number is free,
    and a process started since in a session of its own (another call's tool, the host's own) may have it, which a
    signal by number would reach. A kernel without it takes the number, as before."""
    global _group_signals
    if _group_signals is not False:
        try:
            signal.pidfd_send_signal(leader, sig, None, PIDFD_SIGNAL_PROCESS_GROUP)
        except (ProcessLookupError, PermissionError):
            return False
        except OSError as error:
            if error.errno != errno.EINVAL or _group_signals:
                return False
            _group_signals = False  # this kernel has no process group flag (EINVAL the first time): by number
        else:
            _group_signals = True
            return True
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_marked(marker: str, pgid: int, *, leader: int = -1, reaped: bool = False) -> int:
    """SIGKILL every live process of the call rooted at ``pgid`` until a pass finds none; wait until they are gone.

    A process belongs to the call when it is in the tool's group or session, carries
    ``marker`` (``NAME=value``) in its environment, or descends from one that does: never by
    when it started alone (a child the host starts in the same clock tick as a call, in a session
    of its own, is the host's). Returns how many had left the group.

    ``leader``: a pidfd of the tool (this process's child, reaped once its status was read). The tool's number is
    the call's while its group lives (see :func:`signal_group`), or while no process has it (the call's session may
    outlive its group: a process that moved to a group of its own); once another process has it, a process in group
    or session ``pgid`` or below process ``pgid`` is not taken for the call's (it is a new session that took the
    number, or one of its). Without ``leader`` (a warm call's process, its server's child), the same once the tool is
    ``reaped`` (its status said).
    """
    needle = marker.encode()
    me = os.getpid()
    escaped: set[int] = set()
    deadline = time.monotonic() + 10.0
    for _ in range(MAX_ROUNDS):
        # Under the lock, and once no spawn is pending: a tool another call just started is then either
        # registered in _in_flight or not yet forked, never mistaken for an orphan of this call.
        with _lock:
            _lock.wait_for(lambda: _spawning == 0, timeout=5.0)
            # the number is still the call's
            ours = (leader < 0 and not reaped) or (leader >= 0 and signal_group(leader, pgid, 0)) or not _taken(pgid)
            call_start = _in_flight.get(pgid)
            search = _walk if _subreaper_on and _lists_children() else _scan
            victims, reaped = search(needle, pgid if ours else -1, me, call_start)
        # A pass that reaped an orphan looks again: that orphan's exit may have handed its children
        # to this process after the pass had read its list of children.
        if not victims and not reaped:
            break
        for pid, outside in victims.items():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            if outside:
                escaped.add(pid)
        _wait_gone(victims, deadline)  # SIGKILL is asynchronous: the call is not over until they are gone
        _reap(victims, me)
        if time.monotonic() >= deadline:
            break
    return len(escaped)


def _taken(pid: int) -> bool:
    """Whether a process has the number ``pid`` now (one that could not be looked at counts as one)."""
    try:
        os.close(os.pidfd_open(pid))
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


PIDFD_WAIT_MAX = 64  # victims waited for on their pidfds; a larger tree (a fork bomb's) is looked at every 2 ms


def _alive(pid: int) -> bool:
    return _stat(pid).state not in ("Z", "X", "")


def _wait_gone(victims: dict[int, bool], deadline: float) -> None:
    """Return once every process of ``victims`` has ended (a zombie runs nothing), or at ``deadline``: woken by the
    kernel as each ends (its pidfd), not by reading every victim's ``/proc`` entry every 2 ms, which cost a call
    under the baseline (its namespace's init ending after bwrap) a few reads and milliseconds."""
    alive = [pid for pid in victims if _alive(pid)]
    if len(alive) > PIDFD_WAIT_MAX:
        while time.monotonic() < deadline and any(_alive(pid) for pid in alive):
            time.sleep(0.002)
        return
    waiting: dict[int, int] = {}  # pidfd -> pid
    try:
        for pid in alive:
            with contextlib.suppress(OSError):  # gone meanwhile
                waiting[os.pidfd_open(pid)] = pid
        poller = select.poll()
        for fd in waiting:
            poller.register(fd, select.POLLIN)
        while waiting and (left := deadline - time.monotonic()) > 0:
            for fd, _ in poller.poll(left * 1000):
                poller.unregister(fd)
                os.close(fd)
                del waiting[fd]
    finally:
        for fd in waiting:
            os.close(fd)


def _walk(needle: bytes, pgid: int, me: int, call_start: int | None) -> tuple[dict[int, bool], bool]:
    """One pass over this process's descendant tree (the subreaper is on): the call's live processes, each with
    whether it left the tool's group, and whether a dead process of the call was reaped.

    Of this process's own children only the call's are followed: what belongs to another call or to the
    host cannot have this call's processes below it (an orphan goes up to its nearest subreaper ancestor).
    """
    found: dict[int, bool] = {}
    reaped = False
    stack: list[int] = []
    for pid in _own_children(me):
        info = _stat(pid)
        if not info.state or info.pid in _guards or info.pid in _servers or (info.pid in _in_flight and info.pid != pgid):
            continue  # a guard, a warm server, or another call's tool (this one's is taken: it may still run, at a timeout)
        in_call = info.pgrp == pgid or info.session == pgid
        if info.state in ("Z", "X"):
            if in_call and info.pid != pgid:  # re-parented here from the call's group or session, ended by itself
                with contextlib.suppress(ChildProcessError, OSError):
                    reaped = os.waitpid(info.pid, os.WNOHANG)[0] == info.pid or reaped
            continue
        if in_call or _carries(needle, info, call_start):
            found[info.pid] = info.pgrp != pgid
            stack.append(info.pid)
    # A warm call's tool is a child of its fork server, not of this process: its descendants are followed from it.
    stack.append(pgid)
    while stack:  # whatever descends from one of them is the call's too, whatever it did to its group and environment
        for child in _children(stack.pop()):
            if child not in found:
                info = _stat(child)
                if info.state and info.state not in ("Z", "X"):
                    found[child] = info.pgrp != pgid
                    stack.append(child)
    return found, reaped


def _own_children(me: int) -> set[int]:
    """The children of this process that can be the call's, read twice: the kernel can skip a child in a listing
    when the one listed before it is reaped meanwhile (by another thread, for another call), and a second read
    repairs that.

    Those of two threads, not of all of them: the calling thread's (it started the call's tool) and the main one's,
    to which the kernel re-parents every orphan of a subreaper (the process's first live thread: ``find_new_reaper``
    takes the first thread of the group that is not exiting, and the group leader comes first). Every other thread's
    children are other calls' tools, or the host's. Once the main thread has ended (a host whose main thread left
    while others run calls), the orphans go to another thread: every thread is read then. A server with a hundred
    calls in flight has as many threads, so this is two reads a pass instead of a hundred."""
    if not threading.main_thread().is_alive():
        first = _children(me)
        return first | _children(me)
    tasks = {me, threading.get_native_id()}
    found: set[int] = set()
    for _ in range(2):
        for tid in tasks:
            found.update(_task_children(me, tid))
    return found


def _children(pid: int) -> set[int]:
    """The children of every thread of ``pid`` (empty once it is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return set()
    return {child for tid in tasks for child in _task_children(pid, tid)}


def _task_children(pid: int, tid: int | str) -> set[int]:
    """The children of thread ``tid`` of ``pid`` (empty once it is gone)."""
    return {int(child) for child in _read(f"/proc/{pid}/task/{tid}/children").split()}


def _lists_children() -> bool:
    """Whether this kernel lists a task's children in ``/proc`` (CONFIG_PROC_CHILDREN); decided once."""
    global _children_listed
    if _children_listed is None:
        _children_listed = os.path.exists(f"/proc/self/task/{threading.get_native_id()}/children")
    return _children_listed


def _scan(needle: bytes, pgid: int, me: int, call_start: int | None) -> tuple[dict[int, bool], bool]:
    """One pass over /proc: the call's live processes, each with whether it left the tool's group, and whether a
    dead process of the call re-parented here was reaped."""
    table: dict[int, _Proc] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            info = _stat(int(name))
            if info.state:
                table[info.pid] = info
    found: dict[int, bool] = {}
    reaped = False
    for info in table.values():
        in_call = info.pgrp == pgid or info.session == pgid
        if info.state in ("Z", "X"):
            if in_call and info.ppid == me and info.pid not in _in_flight:
                with contextlib.suppress(ChildProcessError, OSError):  # re-parented here, ended by itself
                    reaped = os.waitpid(info.pid, os.WNOHANG)[0] == info.pid or reaped
            continue
        if in_call:
            found[info.pid] = info.pgrp != pgid
        elif info.pid not in _in_flight and info.pid not in _guards and _carries(needle, info, call_start):
            found[info.pid] = True
    # whatever descends from one of them is the call's too, whatever it did to its group and environment
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    stack = [*found, pgid]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found and table[child].state not in ("Z", "X"):
                found[child] = table[child].pgrp != pgid
                stack.append(child)
    return found, reaped


def _carries(needle: bytes, info: _Proc, call_start: int | None) -> bool:
    """Whether the process's environment holds the call's marker. Only a process started since the tool can (the
    marker is new to this call, and an environment is inherited at fork), so no other environment is read."""
    return (call_start is None or info.start >= call_start) and needle in _read(f"/proc/{info.pid}/environ")


def stopped_in_group(leader: int) -> bool:
    """Whether ``leader`` (a process group's leader), or a descendant of it in its group, is stopped (by a signal, or
    a tracer): what a warm server's host looks at when a call's status is late (see warm_fork.ServerProcess.wake). (A
    warm Bash call's waiter is a grandchild of its server, in the server's group; the call's own group is not
    followed.)"""
    stack = [leader]
    while stack:
        pid = stack.pop()
        info = _stat(pid)
        if pid != leader and info.pgrp != leader:
            continue
        if info.state in ("T", "t"):
            return True
        stack.extend(_children(pid))
    return False


def await_end(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for this process's child ``pid`` to end, without reaping it (while it is a
    zombie its number is its own and its group's: a group leader's group can be killed after its end, no other
    process's); whether it has ended."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        return bool(select.select([pidfd], [], [], timeout)[0])
    finally:
        os.close(pidfd)


def reap_group_orphans(pgid: int) -> None:
    """Reap the children of this process in group ``pgid``, which has just been sent SIGKILL (a warm server's own
    children, re-parented here while this process is a subreaper: calls in flight): each is waited for (killed, it
    ends at once), so that none is left a zombie of this process."""
    for child in _children(os.getpid()):
        if _stat(child).pgrp == pgid:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(child, 0)


def start_of(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None once it is gone."""
    info = _stat(pid)
    return info.start if info.state else None


NAMESPACE_WAIT = 1.0  # seconds a call waits for its namespace's init to end after its tool (it ends at once)


def namespace_ended(pid: int, start: int, timeout: float = NAMESPACE_WAIT) -> bool:
    """Whether the PID namespace whose init is ``pid`` (started at ``start``, clock ticks) is gone, waiting up to
    ``timeout`` seconds for it: the init has ended (no process has its number, another process has it, or a pidfd of
    it says it ended). The kernel ends every other process of a namespace, and waits until they are reaped, before
    its init is marked as ended (``zap_pid_ns_processes``, in the init's exit, before its pidfd is woken): once this
    is True nothing of the namespace is left to hold a file or to search for. False when it cannot tell (then the
    caller searches, as for a call without a namespace). Every True is sound: a number taken again, or never
    looked at, means the init was gone first."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    try:
        if start_of(pid) != start:
            return True  # another process has its number now (or it is gone): the init had ended
        return bool(select.select([fd], [], [], timeout)[0])
    except OSError:
        return False
    finally:
        os.close(fd)


def reap_orphan(pid: int, start: int | None) -> None:
    """Wait for a confined call's namespace init (bwrap does not wait for it) and reap it when it was re-parented
    here: it ends at once, its tool gone. ``start`` tells it from a later process that took its pid."""
    me = os.getpid()
    deadline = time.monotonic() + 5.0
    exited = -1  # a pidfd of the init, readable once it has ended: waited on rather than looked at every millisecond
    try:
        while time.monotonic() < deadline:
            info = _stat(pid)
            if not info.state or info.start != start or info.ppid != me:
                return  # gone, another process now, or reaped by bwrap (or init) instead
            if info.state in ("Z", "X"):
                with contextlib.suppress(ChildProcessError, OSError):
                    os.waitpid(pid, os.WNOHANG)
                return
            if exited < 0:
                try:
                    exited = os.pidfd_open(pid)
                except OSError:
                    return  # gone meanwhile
                continue  # the pid may have been taken by another process before the pidfd was made: look again
            select.select([exited], [], [], max(0.0, deadline - time.monotonic()))
    finally:
        if exited >= 0:
            os.close(exited)


def _reap(victims: dict[int, bool], me: int) -> None:
    """Collect the orphans that were re-parented here (a subreaper must, or they stay zombies). A victim whose parent
    is still another process (a warm call's escapee, killed while the call it left ran) comes here only once that
    parent has ended: it is remembered, and collected when the call is over (:func:`_reap_killed`)."""
    for pid in victims:
        info = _stat(pid)
        if info.state == "Z" and info.ppid == me and pid not in _in_flight:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        elif info.state:
            _killed[pid] = info.start


def _reap_killed(me: int) -> None:
    """Collect the processes a kill pass ended that have been re-parented here since (under the lock)."""
    for pid, start in list(_killed.items()):
        info = _stat(pid)
        if not info.state or info.start != start:  # reaped by its parent (or its number is another process's now)
            del _killed[pid]
        elif info.state == "Z" and info.ppid == me:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            del _killed[pid]


def _stat(pid: int) -> _Proc:
    """State, parent, group, session and start time from /proc, or an empty record once the process is gone."""
    try:
        fields = _read(f"/proc/{pid}/stat", whole=False).rsplit(b")", 1)[1].split()
        return _Proc(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return _GONE


def _read(path: str, *, whole: bool = True) -> bytes:
    """A /proc file's bytes (empty when it cannot be read); with ``whole=False`` one read (a ``stat`` line comes
    whole in one). Plain descriptors, not Python file objects: a pass over /proc reads a file or two per process
    on every call, and buffered file objects made it cost twice as much."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        chunks = [os.read(fd, 65536)]
        while whole and chunks[-1]:
            chunks.append(os.read(fd, 65536))
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(fd)
