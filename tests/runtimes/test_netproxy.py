"""The per-call network proxy on its own (no sandbox): how it reads allow-list entries and requests, what a hostile
client can make of it (a flood of connections, a head that never ends, a tunnel that never closes), that closing it
leaves no thread or descriptor, and the forwarder a sandbox starts it with (the end-to-end tests, through bwrap in
every language, are in ``test_sandbox_proxy.py``)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from toolexec.runtimes import netproxy
from toolexec.runtimes.netproxy import FORWARDER, AllowList, Proxy, refusal_notes, split_authority


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("api.github.com", ("api.github.com", None)),
        ("API.GitHub.com.:443", ("api.github.com", 443)),
        ("localhost:8080", ("localhost", 8080)),
        ("[::1]:8080", ("::1", 8080)),
        ("[::1]", ("::1", None)),
        ("10.0.0.1:22", ("10.0.0.1", 22)),
    ],
)
def test_an_authority_is_read_as_host_and_port(text: str, expected: tuple[str, int | None]) -> None:
    assert split_authority(text) == expected


@pytest.mark.parametrize("text", ["", ":80", "host:", "host:0", "host:65536", "host:8o", "::1", "[::1]x", "a:1:2"])
def test_a_bad_authority_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        split_authority(text)


def test_an_allow_list_matches_names_and_ports() -> None:
    allow = AllowList(["api.github.com", "localhost:8080", "*.example.com:443", "[::1]:9000", "10.0.0.1:22"])
    assert allow.line == "network: api.github.com, localhost:8080, *.example.com:443, [::1]:9000, 10.0.0.1:22"
    found = {
        (host, port): allow.entry_for(host, port)
        for host, port in [
            ("api.github.com", 443),
            ("API.GITHUB.COM.", 80),
            ("api.github.com", 22),  # no port written: 80 and 443 only
            ("evil.api.github.com", 443),  # a name is not its subdomains
            ("localhost", 8080),
            ("localhost", 8081),
            ("127.0.0.1", 8080),  # another name for the same host
            ("a.b.example.com", 443),
            ("example.com", 443),  # a wildcard is not its apex
            ("notexample.com", 443),
            ("::1", 9000),
            ("10.0.0.1", 22),
        ]
    }
    assert found == {
        ("api.github.com", 443): ("api.github.com", False),
        ("API.GITHUB.COM.", 80): ("api.github.com", False),
        ("api.github.com", 22): None,
        ("evil.api.github.com", 443): None,
        ("localhost", 8080): ("localhost:8080", True),
        ("localhost", 8081): None,
        ("127.0.0.1", 8080): None,
        ("a.b.example.com", 443): ("*.example.com:443", False),
        ("example.com", 443): None,
        ("notexample.com", 443): None,
        ("::1", 9000): ("[::1]:9000", True),
        ("10.0.0.1", 22): ("10.0.0.1:22", True),
    }


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (
            "GET http://Example.com/a/b?c=d HTTP/1.1\r\nHost: elsewhere\r\nProxy-Connection: keep-alive\r\n"
            "Proxy-Authorization: Basic eA==\r\nAccept: */*\r\nConnection: keep-alive\r\nKeep-Alive: 5",
            ("GET", "example.com", 80, "GET /a/b?c=d HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n"),
        ),
        (
            "POST http://user:pw@localhost:8080?x=1#frag HTTP/1.0\r\nContent-Length: 3",
            (
                "POST",
                "localhost",
                8080,
                "POST /?x=1 HTTP/1.0\r\nHost: localhost:8080\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
            ),
        ),
        (
            "GET http://[::1]:9000/ HTTP/1.1",
            ("GET", "::1", 9000, "GET / HTTP/1.1\r\nHost: [::1]:9000\r\nConnection: close\r\n\r\n"),
        ),
        ("CONNECT api.github.com:443 HTTP/1.1\r\nHost: api.github.com:443", ("CONNECT", "api.github.com", 443, "")),
    ],
)
def test_a_proxy_request_is_read_and_sent_on_in_origin_form(head: str, expected: tuple[str, str, int, str]) -> None:
    method, host, port, forward = netproxy._request(head.encode())
    assert (method, host, port, forward.decode()) == expected


@pytest.mark.parametrize(
    ("head", "message"),
    [
        (
            "GET / HTTP/1.1\r\nHost: localhost",
            "toolexec's proxy takes CONNECT host:port, or a request for an absolute http:// URI; not '/'",
        ),
        (
            "GET https://a.com/ HTTP/1.1",
            "toolexec's proxy takes CONNECT host:port, or a request for an absolute http:// URI; not 'https://a.com/'",
        ),
        ("CONNECT api.github.com HTTP/1.1", "CONNECT needs host:port, not 'api.github.com'"),
        ("GET http://a.com:x/ HTTP/1.1", "not a host[:port]: 'a.com:x'"),
        ("hello", "not an HTTP request"),
        ("GET http://a.com/ b HTTP/1.1", "not an HTTP request"),
    ],
)
def test_what_is_no_proxy_request_is_a_400_saying_so(head: str, message: str) -> None:
    with pytest.raises(netproxy._Refused) as refused:
        netproxy._request(head.encode())
    assert (refused.value.status, refused.value.message, refused.value.policy) == ("400 Bad Request", message, False)


def test_refusal_notes_are_distinct_and_bounded() -> None:
    refusals = [f"network: a does not allow b:{n}" for n in (1, 2, 1, 3, 4, 5, 6, 7)]
    assert refusal_notes(refusals) == (
        *(f"the sandbox refused a connection: network: a does not allow b:{n}" for n in (1, 2, 3, 4, 5)),
        "… and 2 more refused connections",
    )


# -- a proxy without a sandbox: the test plays the forwarder ----------------------------------------------------


class Upstream:
    """A server on 127.0.0.1 that accepts and then, per ``mode``, echoes or never reads nor answers."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.socket.accept()
            except OSError:
                return
            self.accepted.append(conn)
            if self.mode == "echo":
                threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)

    def drop(self) -> None:
        """Close what it accepted (they are this test process's descriptors too)."""
        for conn in self.accepted:
            conn.close()

    def close(self) -> None:
        self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self.thread.join()
        self.drop()


def _started(entries: list[str]) -> tuple[Proxy, tuple[str, int]]:
    """A proxy handed a listener as the forwarder hands it one; (the proxy, the address its clients connect to)."""
    proxy = Proxy(entries)
    listener = socket.create_server(("127.0.0.1", 0))
    channel = socket.socket(fileno=os.dup(proxy.inside))
    proxy.launched()
    socket.send_fds(channel, [b"L"], [listener.fileno()])
    channel.close()
    address = listener.getsockname()
    listener.close()
    return proxy, address


def _state() -> tuple[set[str], set[str]]:
    import gc

    from toolexec.runtimes import cgroup

    cgroup.drain()  # the cgroups of calls that are over are removed off their path, by a thread that then ends
    gc.collect()  # a socket held only by a reference cycle (an exception's frames) is closed by the collector
    fds = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            fds.add(f"{fd}:{os.readlink(f'/proc/self/fd/{fd}')}")
    return fds, {f"{thread.name}:{thread.ident}" for thread in threading.enumerate()}


@pytest.fixture
def upstreams() -> Iterator[dict[str, Upstream]]:
    found = {mode: Upstream(mode) for mode in ("echo", "mute")}
    yield found
    for upstream in found.values():
        upstream.close()


def _ask(address: tuple[str, int], request: bytes) -> bytes:
    with socket.create_connection(address, timeout=10) as client:
        client.sendall(request)
        data = b""
        while chunk := client.recv(65536):
            data += chunk
    return data


def test_a_tunnel_carries_any_tcp_both_ways_and_a_refusal_is_a_403_naming_the_policy_line(
    upstreams: dict[str, Upstream],
) -> None:
    echo = upstreams["echo"].port
    proxy, address = _started([f"localhost:{echo}"])
    try:
        with socket.create_connection(address, timeout=10) as client:
            client.sendall(f"CONNECT localhost:{echo} HTTP/1.1\r\n\r\nearly bytes|".encode())
            client.sendall(b"not http at all")
            client.shutdown(socket.SHUT_WR)  # a half-close is passed on: the echo ends, then the tunnel
            data = b""
            while chunk := client.recv(65536):
                data += chunk
        assert data == b"HTTP/1.1 200 Connection established\r\n\r\nearly bytes|not http at all"
        refused = _ask(address, b"CONNECT 10.0.0.1:22 HTTP/1.1\r\n\r\n")
        body = f"network: localhost:{echo} does not allow 10.0.0.1:22\n".encode()
        assert refused == (
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body
        )
    finally:
        proxy.close()
    assert proxy.refusals == [f"network: localhost:{echo} does not allow 10.0.0.1:22"]


def test_an_allowed_name_that_does_not_answer_is_a_502(upstreams: dict[str, Upstream]) -> None:
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    proxy, address = _started([f"localhost:{port}", "no-such-host.invalid:80"])
    try:
        assert (
            _ask(address, f"CONNECT localhost:{port} HTTP/1.1\r\n\r\n".encode())
            .split(b"\r\n\r\n")[1]
            .startswith(f"cannot reach localhost:{port}: ".encode())
        )
        assert _ask(address, b"CONNECT no-such-host.invalid:80 HTTP/1.1\r\n\r\n").split(b"\r\n")[0] == b"HTTP/1.1 502 Bad Gateway"
    finally:
        proxy.close()
    assert proxy.refusals == []  # not the policy's doing: no note


def test_a_flood_of_connections_is_capped_and_closing_ends_every_one(upstreams: dict[str, Upstream]) -> None:
    mute = upstreams["mute"].port
    before = _state()
    proxy, address = _started([f"localhost:{mute}"])
    clients = []
    try:
        # half stuck mid-head, half in a tunnel to a server that never reads nor answers
        for n in range(netproxy.MAX_CONNECTIONS):
            client = socket.create_connection(address, timeout=10)
            client.sendall(b"CONNECT localhost:%d HTTP/1.1\r\n\r\n" % mute if n % 2 else b"GET http://localhost/")
            clients.append(client)
        deadline = time.monotonic() + 10
        while len(upstreams["mute"].accepted) < netproxy.MAX_CONNECTIONS // 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(upstreams["mute"].accepted) == netproxy.MAX_CONNECTIONS // 2
        assert _ask(address, b"CONNECT localhost:1 HTTP/1.1\r\n\r\n").split(b"\r\n")[0] == b"HTTP/1.1 503 Service Unavailable"
        for client in clients[1::2]:  # a tunnel whose far end never reads: the proxy's send blocks
            client.sendall(b"x" * (1 << 20))
    finally:
        started = time.monotonic()
        proxy.close()
        closed_in = time.monotonic() - started
        for client in clients:
            client.close()
        upstreams["mute"].drop()
    assert closed_in < 3
    assert _state() == before
    assert not [thread for thread in threading.enumerate() if thread.name == "toolexec-proxy"]


def test_a_proxy_never_handed_a_listener_closes_cleanly() -> None:
    before = _state()
    proxy = Proxy(["localhost:1"])
    proxy.launched()
    proxy.close()
    assert _state() == before


def test_the_forwarder_hands_over_its_listener_sets_the_proxy_variables_and_becomes_the_command() -> None:
    ours, theirs = socket.socketpair()
    try:
        shown = "; ".join(
            f"{name}=${name}" for name in ("HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY", "NODE_USE_ENV_PROXY")
        )
        done = subprocess.run(
            [sys.executable, "-S", "-I", "-c", FORWARDER, str(theirs.fileno()), "sh", "-c", f'echo "{shown}"; ls /proc/self/fd'],
            pass_fds=(theirs.fileno(),),
            capture_output=True,
            text=True,
            check=True,
        )
        _, fds, _, _ = socket.recv_fds(ours, 16, 4)
        listener = socket.socket(fileno=fds[0])
        with listener:
            host, port = listener.getsockname()
            assert (host, listener.type) == ("127.0.0.1", socket.SOCK_STREAM)
        url = f"http://127.0.0.1:{port}"
        lines = done.stdout.splitlines()
        assert lines[0] == f"HTTP_PROXY={url}; https_proxy={url}; ALL_PROXY={url}; NO_PROXY=; NODE_USE_ENV_PROXY=1"
        assert sorted(lines[1:]) == ["0", "1", "2", "3"]  # the channel is not the command's (3: ls's own listing)
    finally:
        ours.close()
        theirs.close()


def test_a_command_the_forwarder_cannot_run_is_an_exit_127_naming_it() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        done = subprocess.run(
            [sys.executable, "-S", "-I", "-c", FORWARDER, str(theirs.fileno()), "/nonexistent/tool"],
            pass_fds=(theirs.fileno(),),
            capture_output=True,
            text=True,
        )
    assert (done.returncode, done.stderr) == (127, "toolexec: cannot run /nonexistent/tool: No such file or directory\n")


@pytest.mark.parametrize("kind", ["udp", "unlistened", "pipe"])
def test_a_proxy_handed_anything_but_a_loopback_listener_serves_nothing(kind: str) -> None:
    before = _state()
    proxy = Proxy(["localhost:1"])
    channel = socket.socket(fileno=os.dup(proxy.inside))
    proxy.launched()
    read, write = os.pipe()
    kinds = {"udp": socket.SOCK_DGRAM, "unlistened": socket.SOCK_STREAM}
    handed = socket.socket(socket.AF_INET, kinds[kind]) if kind in kinds else None
    try:
        socket.send_fds(channel, [b"L"], [handed.fileno() if handed is not None else read])
        proxy._serving.join(5)
        assert not proxy._serving.is_alive()  # it ended without serving
    finally:
        proxy.close()
        channel.close()
        os.close(read)
        os.close(write)
        if handed is not None:
            handed.close()
    assert _state() == before


def test_a_refused_request_with_a_body_still_gets_its_403_not_a_reset() -> None:
    proxy, address = _started(["localhost:1"])
    body = b"x" * (1 << 20)
    try:
        with socket.create_connection(address, timeout=10) as client:
            client.sendall(b"POST http://elsewhere.example/upload HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
    finally:
        proxy.close()
    assert answer.split(b"\r\n")[0] == b"HTTP/1.1 403 Forbidden"
    assert answer.endswith(b"\r\n\r\nnetwork: localhost:1 does not allow elsewhere.example:80\n")
