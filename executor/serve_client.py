"""A one-shot ``toolexec run`` through a running ``toolexec serve``: the socket's place, the wire, and the client.

The client is what the installed command runs first (:mod:`toolexec.entry`), before anything else of toolexec is
imported, so it imports only ``os``, ``sys`` and one C module (``_socket``): no
``socket`` (its ``enum`` and ``selectors``), no ``json``, no ``pathlib``. It hands the server what a local run would
have had and nothing to interpret: its working directory, umask, environment, the encodings of its standard
streams, its arguments, and the descriptors of stdin, stdout and stderr themselves (``SCM_RIGHTS``), so the server's
forked child prints the result on the caller's own terminal or pipes, byte for byte as the local run prints it, and
reads the arguments from the caller's stdin when the command line has none.

The wire (version 2), on a Unix stream socket:

* client → server: a 4-byte big-endian length, then that many bytes of NUL-terminated fields (see
  :func:`request`), with four descriptors attached to the first bytes: stdin, stdout, stderr and the *token*, the
  read end of a pipe holding one byte, whose write end the client has closed;
* server → client: ``no REASON\n`` (the call will not run: the client runs it locally, as if no server were there),
  or ``ready PID\n`` once the server's child has read the token's byte (the call is the server's from then on);
* client → server: from then on, one byte per signal the client receives (its number), which the server's child
  raises in itself, so a Ctrl-C cancels the call exactly as it cancels a local one;
* server → client: ``exit N\n`` once the result is printed; the client exits with N.

The token decides, with no round trip, who runs a call whose answer is late: one byte can be read only once, so
either the server's child takes it (and runs the call) or the client, tired of waiting, takes it back (and runs
the call locally; the child then finds the pipe empty and ends without running it). Any failure before then (no
socket, a stale one, a server for another config or another version, a slow or busy one) makes the client return
None: the caller runs the call locally, silently. A call never runs twice, and never waits on the client's reply.

The client trusts a socket only when it is one of this user's, itself (``lstat``: not a symbolic link, whose target
``connect`` would reach) and when the process listening on it is this user's too (``SO_PEERCRED``, as the kernel took
it at ``listen``): a server of another user never answers, whatever was put in the folder.
"""

import os
import sys

TYPE_CHECKING = False  # typing is not imported: the client is the first thing a one-shot run pays for
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

PROTOCOL = b"toolexec-serve/2"
# Set to anything but "" or "0": `toolexec run` never tries a server (the benchmarks' cold figures, a debugging user).
NO_SERVER_VARIABLE = "TOOLEXEC_NO_SERVER"
MAX_REQUEST = 8 << 20  # bytes: the environment and the arguments, with room (Linux's ARG_MAX is 2 MiB)
CONNECT_SECONDS = 0.5  # a Unix socket connects at once, or its server is not listening
READY_SECONDS = 3.0  # the server reads the request and checks it: milliseconds, seconds on a loaded machine
TOKEN = b"t"  # the byte whose reader runs the call
UNIX_PATH_MAX = 107  # sun_path's bytes, without the final NUL
# The signals a local `toolexec run` takes as "cancel the call" (toolexec.cli.CANCELLING_SIGNALS), by number.
FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")

__all__ = [
    "NO_SERVER_VARIABLE",
    "PROTOCOL",
    "config_option",
    "fnv1a64",
    "folder_problem",
    "request",
    "socket_folder",
    "socket_name",
    "through_server",
]


# --- where the socket is ------------------------------------------------------------------------------------------


def socket_folder() -> str:
    """``$XDG_RUNTIME_DIR/toolexec`` when that runtime folder is the user's own (0700), else
    ``$XDG_STATE_HOME/toolexec`` (``~/.local/state/toolexec``): where the MCP token is kept too."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and folder_problem(runtime) is None:
        return os.path.join(runtime, "toolexec")
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "toolexec")


def folder_problem(folder: str) -> str | None:
    """Why ``folder`` may not hold a server's socket (it must be a folder of this user's that only they can open:
    no link, mode 0700 or stricter), or None when it may."""
    import stat

    try:
        info = os.lstat(folder)
    except OSError as error:
        return f"{folder}: {error.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder"
    if info.st_uid != os.getuid():
        return f"{folder} belongs to uid {info.st_uid}, not to you (uid {os.getuid()})"
    if info.st_mode & 0o077:
        return f"{folder} has mode {stat.S_IMODE(info.st_mode):o}: others may open it (chmod 700 {folder})"
    return None


def socket_name(config_path: str) -> str:
    """The socket's file name for the config file at ``config_path`` (resolved): a digest of the path, so that two
    configs never share a server and the path stays within a Unix socket's 107 bytes.

    The digest is 64-bit FNV-1a, computed here in a few microseconds: a hash module (``_sha256``, ``zlib``) is a
    shared library the client would load for this alone. Names need no secrecy and little collision resistance (the
    folder is the user's alone, and a server refuses a call whose config is not its own: the client runs it locally)."""
    return f"serve-{fnv1a64(os.fsencode(config_path)):016x}.sock"


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of ``data``: the digest of the files named after a config (this socket, the one-shot run's
    early start memo of :mod:`toolexec.early`), where loading a hash module would cost more than hashing."""
    digest = 0xCBF29CE484222325
    for byte in data:
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return digest


def config_candidates(explicit: str | None) -> "Iterator[str]":
    """The config files a local run could use, in :func:`toolexec.config.locate`'s order. Which one it does use is
    the server's to check (it runs ``locate`` in the caller's place); a server for a later one refuses a call whose
    local run would use an earlier one."""
    given = explicit or os.environ.get("TOOLEXEC_CONFIG")
    if given:
        yield os.path.expanduser(given)
        return
    yield "config.yaml"
    yield os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config"), "toolexec", "config.yaml"
    )
    here = os.path.dirname(os.path.realpath(__file__))  # toolexec.paths.package_defaults(), without pathlib
    bundled = os.path.join(here, "_default", "config.yaml")
    yield bundled if os.path.isfile(bundled) else os.path.join(os.path.dirname(here), "config.yaml")


def config_option(argv: "Sequence[str]") -> str | None:
    """The last ``--config PATH`` (or ``--config=PATH``) of ``argv``, as the quick parser reads it."""
    found = None
    for index, word in enumerate(argv):
        if word == "--config" and index + 1 < len(argv):
            found = argv[index + 1]
        elif word.startswith("--config="):
            found = word.partition("=")[2]
    return found


# --- the wire -----------------------------------------------------------------------------------------------------


def request(argv: list[str], *, version: str) -> bytes:
    """The request of a call: the fields the server's child needs to stand where the caller stands.

    ``PROTOCOL``, toolexec's version, the working directory, the umask, ``encoding:errors`` of stdin, stdout and
    stderr, the number of arguments, the arguments, then the environment (``NAME=value``), each ending in NUL.
    """
    mask = os.umask(0o022)
    os.umask(mask)
    streams = [f"{getattr(s, 'encoding', None) or 'utf-8'}:{getattr(s, 'errors', None) or 'strict'}" for s in _streams()]
    fields = [PROTOCOL, version.encode(), os.getcwdb(), str(mask).encode(), *(s.encode() for s in streams)]
    fields += [str(len(argv)).encode(), *(os.fsencode(word) for word in argv)]
    fields += [name + b"=" + value for name, value in os.environb.items()]
    body = b"".join(field + b"\0" for field in fields)
    return len(body).to_bytes(4, "big") + body


def _streams() -> tuple[object, object, object]:
    return (sys.stdin, sys.stdout, sys.stderr)


# --- the client ---------------------------------------------------------------------------------------------------


def through_server(argv: list[str], version: str) -> int | None:
    """Run ``toolexec ARGV`` through the running server of its config and return the exit status, or None when no
    server takes it (the caller then runs it locally, as if none were there)."""
    if os.environ.get(NO_SERVER_VARIABLE, "") not in ("", "0") or "run" not in argv:
        return None
    for fd in (0, 1, 2):  # a closed stream is the local run's to handle (it becomes /dev/null there)
        try:
            os.fstat(fd)
        except OSError:
            return None
    folder = socket_folder()
    if folder_problem(folder) is not None:
        return None
    payload = b""
    tried = set()
    for candidate in config_candidates(config_option(argv)):
        try:
            if not os.path.isfile(candidate):
                continue
            path = os.path.join(folder, socket_name(os.path.realpath(candidate)))
        except (OSError, ValueError):
            continue
        if path in tried or len(os.fsencode(path)) > UNIX_PATH_MAX or not _our_socket(path):
            continue  # (the request is made only once a socket is there: a run with no server pays for a stat)
        tried.add(path)
        if not payload:
            try:
                payload = request(argv, version=version)
            except (OSError, ValueError):  # a removed working directory, an unencodable word: the local run says what
                return None
            if len(payload) > MAX_REQUEST:
                return None
        answer = _call(path, payload)
        if isinstance(answer, int):
            return answer
        if answer not in ("absent", "config"):  # a server that did not take it: no other will either
            return None
    return None  # (a server for a later candidate refuses a call whose local run would use an earlier config)


def _our_socket(path: str) -> bool:
    """Whether ``path`` is a socket of this user's, itself: not a symbolic link to one (which ``connect`` would
    follow), not a file of another user's that the folder's owner let in."""
    import stat  # (imported by os already: no cost)

    try:
        info = os.lstat(path)
    except (OSError, ValueError):
        return False
    return stat.S_ISSOCK(info.st_mode) and info.st_uid == os.getuid()


def _call(path: str, payload: bytes) -> int | str:
    """The exit status of the call through the server at ``path``, or why there is none: the server's reason (a
    word) when it refused, ``absent`` when no server listens there (no socket, a stale one), ``slow`` when it did
    not answer in time (and the token was taken back: the server will not run it)."""
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    token = -1
    try:
        try:
            sock.settimeout(CONNECT_SECONDS)
            sock.connect(path)
        except (FileNotFoundError, ConnectionRefusedError):
            return "absent"
        except OSError:
            return "slow"
        try:  # the listener's credentials, as the kernel took them when it listened: a server of this user's only
            peer = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid
            if int.from_bytes(peer[4:8], sys.byteorder) != os.getuid():
                return "uid"
        except (OSError, AttributeError):  # (no SO_PEERCRED: no server either, `toolexec serve` needs it)
            return "uid"
        try:
            token, filled = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            os.write(filled, TOKEN)
            os.close(filled)
            sock.settimeout(READY_SECONDS)
            fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2, token))
            sent = sock.sendmsg([payload[:65536]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
            if sent < len(payload):  # (a request is usually sent whole by sendmsg: no poll and empty send then)
                sock.sendall(payload[sent:])
            line = _line(sock)
        except (OSError, ValueError):  # timed out, reset, a garbled answer
            line = b""
        if line.startswith(b"ready ") or not _took_back(token):  # the server's child has the token: the call is its
            return _follow(sock, line)
        if not line:
            return "slow"
        reason = line.removeprefix(b"no ").split(b":", 1)[0].strip()
        return reason.decode("ascii", "replace") or "unknown"
    finally:
        sock.close()
        if token >= 0:
            os.close(token)


def _took_back(token: int) -> bool:
    """Whether the client has the token again (it read the byte the server's child did not): then the call is the
    client's to run locally. False when the child took it first (or no pipe was made)."""
    if token < 0:
        return True  # no token made: nothing was sent either
    try:
        return os.read(token, 1) == TOKEN
    except OSError:
        return False


def _line(sock: object) -> bytes:
    """What the server said up to the end of a line (at most 4 KiB, within the socket's deadline): its first line,
    and maybe more (a quick call's ``exit N`` line comes with ``ready PID``)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096 - len(data))  # type: ignore[attr-defined]
        if not chunk or len(data) + len(chunk) >= 4096:
            raise ValueError("no answer")
        data += chunk
    return data


def _follow(sock: object, data: bytes = b"") -> int:
    """Wait for the call's exit status (``data``: what the server said already); every cancelling signal is handed
    to the server while it runs."""
    import _signal as signal  # not `signal`, whose enums cost a one-shot run `enum`

    forwarded: list[int] = []

    def forward(number: int, _frame: object) -> None:
        forwarded.append(number)
        try:  # noqa: SIM105 - contextlib is not imported on the client's path
            sock.send(bytes([number]))  # type: ignore[attr-defined]
        except OSError:
            pass

    previous = {}
    for name in FORWARDED:
        number = getattr(signal, name, None)
        if number is not None:
            previous[number] = signal.signal(number, forward)
    try:
        sock.settimeout(None)  # type: ignore[attr-defined]
        chunk = b"-"
        while True:
            last = data.rsplit(b"\n", 2)[-2:]  # (a `ready PID` line may come first, when it was late)
            if len(last) == 2 and last[0].startswith(b"exit ") and not last[1]:
                try:
                    return int(last[0][5:])
                except ValueError:
                    break
            if not chunk or len(data) > 8192:
                break
            try:
                chunk = sock.recv(4096)  # type: ignore[attr-defined]
            except OSError:
                chunk = b""
            data += chunk
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if forwarded:  # the server's child ended by the signal itself (before the call began): so does this process
        signal.signal(forwarded[-1], signal.SIG_DFL)
        os.kill(os.getpid(), forwarded[-1])
    return _lost()


def _lost() -> int:
    """The status of a call the server took and did not see to its end (its child was killed)."""
    sys.stderr.write("toolexec: the server ended during the call; its result is unknown\n")
    return 1
