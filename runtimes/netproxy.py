"""The per-call proxy through which a confined tool reaches only the hosts its network allow-list names.

A tool under ``network: api.github.com, localhost:8080`` runs in a network namespace of its own with no
network (bwrap's ``--unshare-net``: only its own loopback). Before the tool starts, a small forwarder
inside the sandbox (:data:`FORWARDER`, toolexec's Python with ``-S -I``) listens on a TCP port of the
namespace's loopback, hands that *listening socket* to this process over a socket pair inherited
through bwrap (``SCM_RIGHTS``), sets the standard proxy variables to it and becomes the tool. From then
on nothing of the forwarder runs: :class:`Proxy`, threads of toolexec's own process, accepts the tool's
connections on that socket and serves them as an HTTP proxy:

- ``CONNECT host:port`` (HTTPS and any TCP protocol through a CONNECT-capable client), and
- absolute-URI requests (``GET http://host:port/path``) for plain HTTP, sent on as origin-form with
  ``Host`` set to the URI's host and ``Connection: close`` (one request per connection, so every request
  is checked).

A host is allowed by the NAME the client asks for, matched against the entries (case-insensitive, a
trailing dot ignored; ``*.example.com`` matches names under it, not ``example.com`` itself). An entry
without a port allows 80 and 443. The proxy resolves the name itself (the tool has no DNS) and connects
to what it resolves to, except that a loopback, link-local, unspecified or multicast address is reached
only through an entry that names it (``localhost``, ``*.localhost``, or the address itself): an allowed
public name that resolves to ``127.0.0.1`` or ``169.254.169.254`` is refused. Anything else is answered
``403`` with a body naming the policy line, e.g. ``network: api.github.com does not allow 10.0.0.1:22``,
and kept in :attr:`Proxy.refusals` for the call's notes.

The socket pair has no name on disk, and the listening socket lives in the tool's own namespace: one
call can never reach another call's proxy, nor any list but its own. :meth:`Proxy.close` ends every
thread, connection and descriptor of it. The module is imported only for a call with an allow-list.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

# The forwarder, run inside the sandbox as ``python -S -I -c FORWARDER FD COMMAND...``: only builtin modules
# (no import of socket, enum or site: ~8 ms), a listener on the namespace's loopback sent over FD, then exec.
FORWARDER = r"""
import _socket, os, sys
listener = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
listener.bind(("127.0.0.1", 0))
listener.listen(128)
channel = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, int(sys.argv[1]))
channel.sendmsg([b"L"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, listener.fileno().to_bytes(4, sys.byteorder))])
url = "http://127.0.0.1:%d" % listener.getsockname()[1]
channel.close()
listener.close()
for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
    os.environ[name] = os.environ[name.lower()] = url
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ""
os.environ["NODE_USE_ENV_PROXY"] = "1"
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write("toolexec: cannot run %s: %s\n" % (sys.argv[2], exc.strerror))
    sys.exit(127)
"""
MAX_CONNECTIONS = 64  # open at once per call; more are answered 503 (a hostile tool cannot exhaust toolexec)
MAX_HEAD = 64 << 10  # bytes of a request line and headers
HEAD_TIMEOUT = 30.0  # seconds for a client to send its request head
CONNECT_TIMEOUT = 10.0  # seconds to reach an allowed host
_CHUNK = 64 << 10
_DROPPED = {"proxy-connection", "proxy-authorization", "connection", "keep-alive", "host"}


def default_ports(port: int | None) -> tuple[int, ...]:
    """The ports an entry allows: its own, else 80 and 443."""
    return (port,) if port is not None else (80, 443)


def split_authority(text: str) -> tuple[str, int | None]:
    """``host[:port]`` or ``[v6][:port]`` as (host lower-cased without a trailing dot, port or None); ValueError."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(text)
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    elif ":" in text:
        raise ValueError(text)
    else:
        host, port_text = text, None
    host = host.lower().rstrip(".")
    if not host or (port_text is not None and not (port_text.isascii() and port_text.isdigit())):
        raise ValueError(text)
    port = int(port_text) if port_text is not None else None
    if port is not None and not 0 < port < 65536:
        raise ValueError(text)
    return host, port


class AllowList:
    """The entries of one ``network:`` list, and the questions the proxy asks of them."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.line = "network: " + ", ".join(entries)
        self._entries = [(entry, *split_authority(entry)) for entry in entries]

    def entry_for(self, host: str, port: int) -> tuple[str, bool] | None:
        """The entry that allows ``host:port`` and whether it names a local address (loopback, link-local), or None."""
        host = host.lower().rstrip(".")
        for entry, pattern, allowed in self._entries:
            if port not in default_ports(allowed):
                continue
            if pattern == host or (pattern.startswith("*.") and host.endswith(pattern[1:])):
                return entry, _names_local(pattern)
        return None


def _names_local(pattern: str) -> bool:
    if pattern == "localhost" or pattern.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(pattern)
    except ValueError:
        return False
    return True  # an address written out: it is declared, whatever range it is in


def _local(address: str) -> bool:
    found = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(found, ipaddress.IPv6Address) and found.ipv4_mapped is not None:
        found = found.ipv4_mapped
    return found.is_loopback or found.is_link_local or found.is_unspecified or found.is_multicast


def _show(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Refused(Exception):
    def __init__(self, status: str, message: str, *, policy: bool = False) -> None:
        super().__init__(message)
        self.status, self.message, self.policy = status, message, policy


class _Closing(Exception):
    """The proxy is being closed: the thread ends."""


class Proxy:
    """The proxy of one call: start it before the launch, pass :attr:`inside` to the sandbox, close it after."""

    def __init__(self, entries: Sequence[str]) -> None:
        self.allow = AllowList(entries)
        self.refusals: list[str] = []  # the 403 bodies, in order (the call's notes)
        self._outside, inside = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.inside = inside.detach()  # inherited by bwrap (pass_fds), closed here once the launch has it
        self._wake_read, self._wake_write = os.pipe()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._closing = False
        self._closed = False
        self._listener: socket.socket | None = None
        self._serving = threading.Thread(target=self._serve, name="toolexec-proxy", daemon=True)
        self._serving.start()

    def prefix(self, python: str) -> list[str]:
        """The forwarder's argv (run inside the sandbox by ``python``): the command to run follows it."""
        return [python, "-S", "-I", "-c", FORWARDER, str(self.inside)]

    def launched(self) -> None:
        """The sandbox holds its end of the pair now: this process's copy is closed."""
        if self.inside >= 0:
            os.close(self.inside)
            self.inside = -1

    def close(self) -> None:
        """End every thread and connection of this proxy and close every descriptor it holds."""
        with self._lock:
            self._closing = True
            live = list(self._sockets)
        os.write(self._wake_write, b"x")  # never read: every thread's select sees it
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked send
        self._serving.join()
        deadline = time.monotonic() + CONNECT_TIMEOUT  # only a name lookup (getaddrinfo cannot be interrupted) takes longer
        for thread in list(self._threads):
            thread.join(max(0.0, deadline - time.monotonic()))
        self.launched()
        for handle in (self._outside, self._listener):
            if handle is not None:
                handle.close()
        with self._lock:
            self._closed = True
            last = not self._threads
        if last:  # else the last thread, once its lookup returns, closes them
            self._close_wake()

    def _close_wake(self) -> None:
        for fd in (self._wake_read, self._wake_write):
            os.close(fd)

    # -- the threads --------------------------------------------------------------------------------------

    def _serve(self) -> None:
        try:
            listener = self._receive_listener()
            while listener is not None:
                self._wait([listener], None)
                try:
                    client, _ = listener.accept()
                except OSError:
                    continue
                client.setblocking(True)
                thread = threading.Thread(target=self._handle, args=(client,), name="toolexec-proxy", daemon=True)
                with self._lock:
                    if self._closing:
                        client.close()
                        return
                    busy = len(self._threads) >= MAX_CONNECTIONS
                    if not busy:  # started under the lock: close() joins only started threads
                        self._sockets.add(client)
                        self._threads.add(thread)
                        thread.start()
                if busy:
                    with contextlib.suppress(OSError):
                        client.setblocking(False)
                        client.send(_response("503 Service Unavailable", f"more than {MAX_CONNECTIONS} connections at once"))
                        client.shutdown(socket.SHUT_WR)
                        for _ in range(16):  # what it sent already (closing on unread bytes resets), bounded
                            if not client.recv(_CHUNK):
                                break
                    client.close()
        except _Closing:
            return

    def _receive_listener(self) -> socket.socket | None:
        self._wait([self._outside], None)
        try:
            _, fds, _, _ = socket.recv_fds(self._outside, 16, 4)
        except OSError:
            return None
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return None
        try:
            listener = socket.socket(fileno=fds[0])
        except OSError:  # not a socket
            os.close(fds[0])
            return None
        self._listener = listener  # closed by close(), whatever it is
        try:  # only a listening TCP socket on loopback is served
            listening = listener.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            good = listening and listener.family == socket.AF_INET and listener.getsockname()[0] == "127.0.0.1"
        except OSError:
            good = False
        if not good:
            return None
        listener.setblocking(False)
        return listener

    def _wait(self, sockets: Iterable[socket.socket], timeout: float | None, *, write: bool = False) -> list[socket.socket]:
        """The sockets ready (to read, or to write), or _Closing when the proxy closes; [] when ``timeout`` passed.
        (``poll``, not ``select``: toolexec may hold more than 1024 descriptors.)"""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        watched = {}
        for sock in sockets:
            watched[sock.fileno()] = sock
            poller.register(sock, select.POLLOUT if write else select.POLLIN)
        events = poller.poll(None if timeout is None else max(0, int(timeout * 1000)))
        if any(fd == self._wake_read for fd, _ in events):
            raise _Closing
        return [watched[fd] for fd, _ in events]

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            head, rest = self._read_head(client)
            try:
                method, host, port, forward = _request(head)
                upstream = self._connect(host, port)
            except _Refused as refused:
                if refused.policy:
                    with self._lock:
                        self.refusals.append(refused.message)
                client.sendall(_response(refused.status, refused.message))
                self._drain(client)
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n" if method == "CONNECT" else b"")
            if forward or rest:
                upstream.sendall(forward + rest)
            self._relay(client, upstream)
        except (_Closing, OSError):
            pass
        finally:
            with self._lock:
                self._sockets.discard(client)
                if upstream is not None:
                    self._sockets.discard(upstream)
                self._threads.discard(threading.current_thread())
                last = self._closed and not self._threads
            client.close()
            if upstream is not None:
                upstream.close()
            if last:
                self._close_wake()

    def _drain(self, client: socket.socket) -> None:
        """After an answer: read what the client still sends (a request body) for a moment, so that closing
        does not reset the connection before the client has read the answer."""
        client.shutdown(socket.SHUT_WR)
        for _ in range(64):
            if not self._wait([client], 1.0) or not client.recv(_CHUNK):
                return

    def _read_head(self, client: socket.socket) -> tuple[bytes, bytes]:
        data, deadline = b"", time.monotonic() + HEAD_TIMEOUT
        while b"\r\n\r\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or len(data) > MAX_HEAD or not self._wait([client], left):
                raise OSError("no request head")
            chunk = client.recv(_CHUNK)
            if not chunk:
                raise OSError("closed before its request head")
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        if len(head) > MAX_HEAD:
            raise OSError("request head too long")
        return head, rest

    def _connect(self, host: str, port: int) -> socket.socket:
        found = self.allow.entry_for(host, port)
        shown = _show(host, port)
        if found is None:
            raise _Refused("403 Forbidden", f"{self.allow.line} does not allow {shown}", policy=True)
        _, names_local = found
        try:
            addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise _Refused("502 Bad Gateway", f"cannot resolve {host}: {exc.strerror or exc}") from None
        if not names_local:
            local = [str(address[4][0]) for address in addresses if _local(str(address[4][0]))]
            if local:
                raise _Refused(
                    "403 Forbidden",
                    f"{self.allow.line} does not allow {shown}: it resolves to {local[0]}, a loopback or link-local "
                    "address that only an entry naming it (localhost, the address itself) allows",
                    policy=True,
                )
        problem = "no address"
        for family, kind, proto, _, address in addresses:
            sock = socket.socket(family, kind, proto)
            with self._lock:
                if self._closing:
                    sock.close()
                    raise _Closing
                self._sockets.add(sock)
            try:
                sock.setblocking(False)
                error = sock.connect_ex(address)
                if error in (0, _EINPROGRESS) and self._wait([sock], CONNECT_TIMEOUT, write=True):
                    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error == 0:
                        sock.setblocking(True)
                        return sock
                problem = os.strerror(error) if error not in (0, _EINPROGRESS) else "timed out"
            except BaseException:  # the proxy closing mid-connect (_Closing): the half-made socket is closed here
                with self._lock:
                    self._sockets.discard(sock)
                sock.close()
                raise
            with self._lock:
                self._sockets.discard(sock)
            sock.close()
        raise _Refused("502 Bad Gateway", f"cannot reach {shown}: {problem}")

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Bytes both ways until both sides have finished (a half-close is passed on)."""
        other = {client: upstream, upstream: client}
        open_ends = [client, upstream]
        while open_ends:
            for sock in self._wait(open_ends, None):
                try:
                    chunk = sock.recv(_CHUNK)
                except OSError:
                    return
                if chunk:
                    other[sock].sendall(chunk)
                else:
                    open_ends.remove(sock)
                    with contextlib.suppress(OSError):
                        other[sock].shutdown(socket.SHUT_WR)


_EINPROGRESS = 115 if sys.platform.startswith("linux") else 36


def _request(head: bytes) -> tuple[str, str, int, bytes]:
    """(method, host, port, the head to send on: empty for CONNECT) of a proxy request; _Refused when it is none."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise _Refused("400 Bad Request", "not an HTTP request")
    method, target, version = parts
    if method.upper() == "CONNECT":
        try:
            host, port = split_authority(target)
        except ValueError:
            port = None
        if port is None:
            raise _Refused("400 Bad Request", f"CONNECT needs host:port, not {target!r}")
        return "CONNECT", host, port, b""
    scheme, _, rest = target.partition("://")
    if scheme.lower() != "http" or not rest:
        raise _Refused(
            "400 Bad Request",
            f"toolexec's proxy takes CONNECT host:port, or a request for an absolute http:// URI; not {target[:100]!r}",
        )
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:cut].rpartition("@")[2], rest[cut:].partition("#")[0]  # user:password@ is not sent on
    path = path if path.startswith("/") else "/" + path
    try:
        host, port = split_authority(authority)
    except ValueError:
        raise _Refused("400 Bad Request", f"not a host[:port]: {authority[:100]!r}") from None
    port = port or 80
    kept = [line for line in lines[1:] if line.partition(":")[0].strip().lower() not in _DROPPED]
    host_header = _show(host, port) if port != 80 else (f"[{host}]" if ":" in host else host)
    forward = "\r\n".join([f"{method} {path} {version}", f"Host: {host_header}", *kept, "Connection: close", "", ""])
    return method, host, port, forward.encode("latin-1")


def _response(status: str, message: str) -> bytes:
    body = (message + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


def refusal_notes(refusals: Sequence[str], limit: int = 5) -> tuple[str, ...]:
    """The call's notes for its refused connections: the distinct ones, at most ``limit``, then how many more."""
    distinct = list(dict.fromkeys(refusals))
    notes = [f"the sandbox refused a connection: {text}" for text in distinct[:limit]]
    if len(distinct) > limit:
        notes.append(f"… and {len(distinct) - limit} more refused connections")
    return tuple(notes)
