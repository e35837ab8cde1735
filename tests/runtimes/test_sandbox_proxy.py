"""Network allow-lists, in every language: a confined tool reaches an allowed loopback server BY NAME through its
call's own proxy (plain HTTP and HTTPS through CONNECT, with each language's standard client and the standard proxy
variables), and nothing else: another port, another name for the same server, link-local, a raw socket to loopback
or to the host's own address, another concurrent call's hosts. Nothing of a proxy outlives its call.

Real bwrap, real interpreters, real servers on 127.0.0.1 (plain and TLS, the CA made by trustme). The tools return
one line per URL: ``STATUS BODY`` for an HTTP answer (a refusal is the proxy's 403 naming the policy line), else
``error ...``.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/ns/user"), reason="Linux namespaces only"),
    pytest.mark.warm_modes,  # each call cold, then warm: a Python tool's server has one proxy for all its calls
]

PYTHON = '''
import os, socket, urllib.error, urllib.request


def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return f"{response.status} {response.read().decode().strip()}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read().decode().strip()}"
    except Exception as exc:
        return f"error {type(exc).__name__} {exc}"


def run(action: str, urls: str = "") -> str:
    """A tool that reaches out.

    Args:
        action: get (each URL, through the proxy variables), connect (a raw socket to each host:port) or env
        urls: URLs or host:port, separated by spaces
    Network: localhost
    """
    if action == "env":
        names = ("HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY")
        return " ".join(f"{name}={os.environ.get(name, '<unset>')}" for name in names)
    lines = []
    for url in urls.split():
        if action == "get":
            lines.append(fetch(url))
        else:
            host, port = url.rsplit(":", 1)
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
                lines.append("connected")
            except OSError as exc:
                lines.append(f"error {type(exc).__name__}")
    return "\\n".join(lines)
'''

BASH = r"""#!/usr/bin/env bash
# @describe A tool that reaches out.
# @option --action!
# @option --urls
# @meta network localhost
main() {
    local url body code
    body="$(mktemp)"
    for url in $argc_urls; do
        case "$argc_action" in
            get|tunnel)
                if code="$(curl -s --max-time 10 $([ "$argc_action" = tunnel ] && echo --proxytunnel) -o "$body" -w '%{http_code}' "$url")"; then
                    echo "$code $(cat "$body")" >> "$LLM_OUTPUT"
                else
                    echo "error curl $?" >> "$LLM_OUTPUT"
                fi ;;
            connect)
                if (exec 3>"/dev/tcp/${url%:*}/${url##*:}") 2>/dev/null; then
                    echo connected >> "$LLM_OUTPUT"
                else
                    echo "error bash" >> "$LLM_OUTPUT"
                fi ;;
        esac
    done
    rm -f "$body"
}
eval "$(argc --argc-eval "$0" "$@")"
"""

JAVASCRIPT = """
import http from "node:http";
import net from "node:net";

/**
 * A tool that reaches out.
 * @param {string} action - get (each URL with fetch) or connect (a raw socket to each host:port)
 * @param {string} [urls] - URLs or host:port, separated by spaces
 * @network localhost
 */
export async function run(action, urls = "") {
  const lines = [];
  for (const url of urls.split(" ").filter(Boolean)) {
    if (action === "http-get") {  // node:http, not fetch
      lines.push(await new Promise((done) => {
        http.get(url, (response) => {
          let body = "";
          response.on("data", (chunk) => { body += chunk; });
          response.on("end", () => done(`${response.statusCode} ${body.trim()}`));
        }).on("error", (error) => done(`error ${error.code}`));
      }));
    } else if (action === "get") {
      try {
        const response = await fetch(url, { signal: AbortSignal.timeout(10000) });
        lines.push(`${response.status} ${(await response.text()).trim()}`);
      } catch (error) {
        lines.push(`error ${error.cause?.code ?? ""} ${error.cause?.message ?? error.message}`);
      }
    } else {
      const at = url.lastIndexOf(":");
      lines.push(await new Promise((done) => {
        const socket = net.connect(Number(url.slice(at + 1)), url.slice(0, at), () => { socket.end(); done("connected"); });
        socket.on("error", (error) => done(`error ${error.code}`));
      }));
    }
  }
  return lines.join("\\n");
}
"""
TYPESCRIPT = JAVASCRIPT.replace(
    'export async function run(action, urls = "")',
    'export async function run(action: string, urls: string = ""): Promise<string>',
).replace("const lines = [];", "const lines: string[] = [];")
TYPESCRIPT = TYPESCRIPT.replace("@param {string} action", "@param action").replace("@param {string} [urls]", "@param urls")
TYPESCRIPT = TYPESCRIPT.replace("await new Promise((done)", "await new Promise<string>((done)").replace(
    "(error) => done(", "(error: any) => done("
)
TYPESCRIPT = TYPESCRIPT.replace("} catch (error) {", "} catch (error: any) {").replace("(response) =>", "(response: any) =>")
TYPESCRIPT = TYPESCRIPT.replace("(chunk) =>", "(chunk: any) =>")

TOOLS = {"python": ".py", "bash": ".sh", "javascript": ".js", "typescript": ".ts"}
SOURCES = {"python": PYTHON, "bash": BASH, "javascript": JAVASCRIPT, "typescript": TYPESCRIPT}
# What a tool needs to trust the test's CA, whatever its language (urllib: SSL_CERT_FILE; curl: CURL_CA_BUNDLE; Node).
CA_VARIABLES = ["SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"]


@pytest.fixture(params=sorted(TOOLS))
def language(request: pytest.FixtureRequest) -> str:
    if request.param in ("javascript", "typescript"):
        from toolexec.runtimes.interpreter import default_node, which

        if which(default_node()[0]) is None:
            pytest.skip("node is not installed")
    if request.node.callspec.params.get("launch_mode") == "warm" and request.param != "python":
        pytest.skip("only a Python tool's warm server lives inside its sandbox: the others' confined calls run cold")
    return str(request.param)


class Hello(BaseHTTPRequestHandler):
    """Answers ``hello from PORT PATH HOST``; ``/slow`` after a second."""

    def do_GET(self) -> None:
        if self.path.startswith("/slow"):
            time.sleep(1)
        body = f"hello from {self.server.server_address[1]} {self.path} {self.headers.get('Host')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Servers:
    def __init__(self) -> None:
        self._running: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(self, host: str = "127.0.0.1", context: ssl.SSLContext | None = None) -> int:
        server = ThreadingHTTPServer((host, 0), Hello)
        server.daemon_threads = True
        if context is not None:
            server.socket = context.wrap_socket(server.socket, server_side=True)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self._running.append((server, thread))
        return int(server.server_address[1])

    def stop(self) -> None:
        for server, thread in self._running:
            server.shutdown()
            server.server_close()
            thread.join()


@pytest.fixture
def servers() -> Iterator[Servers]:
    found = Servers()
    yield found
    found.stop()


class Reach:
    """The project's tools (``reach`` and its copies) and calls of them under a policy given per tool in config."""

    def __init__(self, project: Project, language: str) -> None:
        self.project, self.language = project, language

    def executor(self, policies: dict[str, dict[str, Any]]) -> Any:
        files = []
        for name in policies:
            file = name + TOOLS[self.language]
            self.project.tool(file, SOURCES[self.language])
            files.append(file)
        return self.project.executor(files, timeout=30, sandbox_policies=policies)


def _lines(result: Any) -> list[str]:
    assert result.status == "ok", (result.error, result.stderr)
    return result.output.strip().splitlines()


def _expect(language: str, found: list[str], expected: list[str]) -> None:
    """The tool's lines are ``expected``; Node's fetch tunnels plain HTTP through CONNECT too, so where the others
    get the proxy's 403 and its body, Node's fetch fails (the refusal is in the call's notes either way)."""
    if language in ("javascript", "typescript"):
        expected = ["error" if line.startswith("403 ") else line for line in expected]
        found = ["error" if line.startswith("error ") else line for line in found]
    assert found == expected


def _refusal(policy: str, target: str) -> str:
    return f"network: {policy} does not allow {target}"


def test_an_allowed_host_is_reached_by_name_and_nothing_else(project: Project, language: str, servers: Servers) -> None:
    allowed, other = servers.start(), servers.start()
    line = f"localhost:{allowed}"
    with Reach(project, language).executor({"reach": {"network": [line]}}) as executor:
        urls = [
            f"http://localhost:{allowed}/path?q=1",
            f"http://localhost:{other}/",  # another port of an allowed name
            f"http://127.0.0.1:{allowed}/",  # the same server by another name
            "http://169.254.169.254/latest/meta-data/",  # link-local (cloud metadata)
            f"http://LOCALHOST.:{allowed}/",  # the same name, spelled otherwise
        ]
        result = executor.call("reach", {"action": "get", "urls": " ".join(urls)})
    found = _lines(result)
    assert found[-1].startswith(f"200 hello from {allowed} / "), found  # Host as the client wrote it, through CONNECT
    _expect(
        language,
        found[:-1],
        [
            f"200 hello from {allowed} /path?q=1 localhost:{allowed}",
            f"403 {_refusal(line, f'localhost:{other}')}",
            f"403 {_refusal(line, f'127.0.0.1:{allowed}')}",
            f"403 {_refusal(line, '169.254.169.254:80')}",
        ],
    )
    assert result.notes == tuple(
        f"the sandbox refused a connection: {_refusal(line, target)}"
        for target in (f"localhost:{other}", f"127.0.0.1:{allowed}", "169.254.169.254:80")
    )


def test_https_goes_through_connect_and_only_to_an_allowed_name(
    project: Project, language: str, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    trustme = pytest.importorskip("trustme")
    authority = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("localhost", "127.0.0.1").configure_cert(context)
    ca = Path.home() / "ca.pem"  # seen by the tool (its /tmp is its own)
    authority.cert_pem.write_to_path(str(ca))
    for name in CA_VARIABLES:
        monkeypatch.setenv(name, str(ca))
    allowed, other = servers.start(context=context), servers.start(context=context)
    line = f"localhost:{allowed}"
    with Reach(project, language).executor({"reach": {"network": [line], "env": CA_VARIABLES}}) as executor:
        urls = [f"https://localhost:{allowed}/secure", f"https://localhost:{other}/", f"https://127.0.0.1:{allowed}/"]
        result = executor.call("reach", {"action": "get", "urls": " ".join(urls)})
    found = _lines(result)
    assert found[0] == f"200 hello from {allowed} /secure localhost:{allowed}"
    assert [text.startswith("error") for text in found[1:]] == [True, True], found  # the tunnel was refused
    assert result.notes == (
        f"the sandbox refused a connection: {_refusal(line, f'localhost:{other}')}",
        f"the sandbox refused a connection: {_refusal(line, f'127.0.0.1:{allowed}')}",
    )


def test_a_connection_that_bypasses_the_proxy_goes_nowhere(project: Project, language: str, servers: Servers) -> None:
    everywhere = servers.start("0.0.0.0")
    targets = [f"127.0.0.1:{everywhere}", f"localhost:{everywhere}"]
    own = _own_address()
    if own is not None:
        targets.append(f"{own}:{everywhere}")
    policies = {"reach": {"network": [f"localhost:{everywhere}"]}, "open": {"network": "all"}}
    with Reach(project, language).executor(policies) as executor:
        direct = executor.call("reach", {"action": "connect", "urls": " ".join(targets)})
        granted = executor.call("open", {"action": "connect", "urls": " ".join(targets)})
    assert [text.startswith("error") for text in _lines(direct)] == [True] * len(targets), direct
    assert _lines(granted) == ["connected"] * len(targets)


def test_the_same_tool_under_network_all_reaches_everything_directly(project: Project, language: str, servers: Servers) -> None:
    one, two = servers.start(), servers.start()
    with Reach(project, language).executor({"reach": {"network": "all"}}) as executor:
        urls = f"http://127.0.0.1:{one}/ http://localhost:{two}/x"
        result = executor.call("reach", {"action": "get", "urls": urls})
    assert _lines(result) == [f"200 hello from {one} / 127.0.0.1:{one}", f"200 hello from {two} /x localhost:{two}"]
    assert result.notes == ()


def test_one_calls_list_never_serves_another_concurrent_call(project: Project, language: str, servers: Servers) -> None:
    first, second = servers.start(), servers.start()
    policies = {"reach_a": {"network": [f"localhost:{first}"]}, "reach_b": {"network": [f"localhost:{second}"]}}
    results: dict[str, Any] = {}
    with Reach(project, language).executor(policies) as executor:
        executor.call("reach_a", {"action": "get", "urls": ""})  # warm: both calls then start at once
        executor.call("reach_b", {"action": "get", "urls": ""})
        # each holds its own allowed server for a second, then asks for the other's while the other call runs
        plans = {
            "reach_a": f"http://localhost:{first}/slow http://localhost:{second}/",
            "reach_b": f"http://localhost:{second}/slow http://localhost:{first}/",
        }
        threads = [
            threading.Thread(
                target=lambda name=name, urls=urls: results.update({name: executor.call(name, {"action": "get", "urls": urls})})
            )
            for name, urls in plans.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    _expect(
        language,
        _lines(results["reach_a"]),
        [f"200 hello from {first} /slow localhost:{first}", f"403 {_refusal(f'localhost:{first}', f'localhost:{second}')}"],
    )
    _expect(
        language,
        _lines(results["reach_b"]),
        [f"200 hello from {second} /slow localhost:{second}", f"403 {_refusal(f'localhost:{second}', f'localhost:{first}')}"],
    )
    for name, other in (("reach_a", second), ("reach_b", first)):
        assert results[name].notes == (
            f"the sandbox refused a connection: {_refusal(policies[name]['network'][0], f'localhost:{other}')}",
        )


def test_nothing_of_a_proxy_outlives_its_call(project: Project, language: str, servers: Servers, tmp_path: Path) -> None:
    port = servers.start()
    with Reach(project, language).executor({"reach": {"network": [f"localhost:{port}"]}}) as executor:
        executor.call("reach", {"action": "get", "urls": f"http://localhost:{port}/"})  # warm: build, transpile
        executor.calls.settle()  # a call's files are given back off its path: kept (or made afresh) once settled
        before = _descriptors(), _threads(), _children(), _files(tmp_path)
        for _ in range(2):
            result = executor.call("reach", {"action": "get", "urls": f"http://localhost:{port}/ http://localhost:1/"})
            assert _lines(result)[0] == f"200 hello from {port} / localhost:{port}"
        executor.calls.settle()
        after = _descriptors(), _threads(), _children(), _files(tmp_path)
    # (a warm call's files are given back off its path: a call that comes before the last one's set is back takes
    # a new set, and the pool keeps both for the tool's next calls until it closes, as the check below sees)
    assert (*after[:3], _unpooled(after[3])) == (*before[:3], _unpooled(before[3]))
    assert _unpooled(_files(tmp_path)) == _files(tmp_path)  # the executor closed: every kept set removed
    assert not [thread for thread in threading.enumerate() if thread.name == "toolexec-proxy"]


def test_the_proxy_variables_a_confined_tool_gets(project: Project, servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://toolexecs-own-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "*")
    with Reach(project, "python").executor({"reach": {"network": ["localhost:1"]}, "open": {"network": "all"}}) as executor:
        proxied = executor.call("reach", {"action": "env"}).output.split()
        open_ = executor.call("open", {"action": "env"}).output.split()
    url = proxied[0].removeprefix("HTTP_PROXY=")
    assert url.startswith("http://127.0.0.1:") and url.rsplit(":", 1)[1].isdigit()
    assert proxied == [
        f"HTTP_PROXY={url}",
        f"https_proxy={url}",
        f"ALL_PROXY={url}",
        "NO_PROXY=",
        "no_proxy=",
        "NODE_USE_ENV_PROXY=1",
    ]
    # toolexec's own proxy settings never reach a confined tool
    assert open_ == [
        f"{name}=<unset>" for name in ("HTTP_PROXY", "https_proxy", "ALL_PROXY", "NO_PROXY", "no_proxy", "NODE_USE_ENV_PROXY")
    ]


def test_python_requests_honours_the_proxy(project: Project, servers: Servers) -> None:
    pytest.importorskip("requests")
    allowed, other = servers.start(), servers.start()
    source = PYTHON.replace(
        'if action == "get":\n            lines.append(fetch(url))',
        'if action == "get":\n            import requests\n'
        "            response = requests.get(url, timeout=10)\n"
        '            lines.append(f"{response.status_code} {response.text.strip()}")',
    )
    project.tool("reach.py", source)
    with project.executor(["reach.py"], sandbox_policies={"reach": {"network": [f"localhost:{allowed}"]}}) as executor:
        result = executor.call("reach", {"action": "get", "urls": f"http://localhost:{allowed}/ http://localhost:{other}/"})
    assert _lines(result) == [
        f"200 hello from {allowed} / localhost:{allowed}",
        f"403 {_refusal(f'localhost:{allowed}', f'localhost:{other}')}",
    ]


@pytest.mark.parametrize("language", ["javascript", "typescript"])
def test_nodes_http_module_honours_the_proxy_too(project: Project, language: str, servers: Servers) -> None:
    from toolexec.runtimes.interpreter import default_node, which

    if which(default_node()[0]) is None:
        pytest.skip("node is not installed")
    allowed, other = servers.start(), servers.start()
    with Reach(project, language).executor({"reach": {"network": [f"localhost:{allowed}"]}}) as executor:
        result = executor.call("reach", {"action": "http-get", "urls": f"http://localhost:{allowed}/n http://localhost:{other}/"})
    assert _lines(result) == [
        f"200 hello from {allowed} /n localhost:{allowed}",
        f"403 {_refusal(f'localhost:{allowed}', f'localhost:{other}')}",
    ]


def test_curl_tunnels_plain_tcp_through_connect(project: Project, servers: Servers) -> None:
    allowed, other = servers.start(), servers.start()
    with Reach(project, "bash").executor({"reach": {"network": [f"localhost:{allowed}"]}}) as executor:
        result = executor.call("reach", {"action": "tunnel", "urls": f"http://localhost:{allowed}/t http://localhost:{other}/"})
    assert _lines(result) == [f"200 hello from {allowed} /t localhost:{allowed}", "error curl 56"]
    assert result.notes == (f"the sandbox refused a connection: {_refusal(f'localhost:{allowed}', f'localhost:{other}')}",)


def test_an_allowed_name_that_resolves_to_loopback_or_link_local_is_refused(
    project: Project, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = servers.start()
    real = socket.getaddrinfo

    def rebinding(host: Any, *args: Any, **kwargs: Any) -> Any:  # the proxy resolves in this process
        addresses = {
            "api.example.com": "127.0.0.1",
            "metadata.example.com": "169.254.169.254",
            "mapped.example.com": "::ffff:127.0.0.1",
        }
        return real(addresses.get(host, host), *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    names = [f"api.example.com:{port}", "metadata.example.com:80", f"mapped.example.com:{port}"]
    with Reach(project, "python").executor({"reach": {"network": names}}) as executor:
        urls = f"http://api.example.com:{port}/ http://metadata.example.com/ http://mapped.example.com:{port}/"
        result = executor.call("reach", {"action": "get", "urls": urls})
    line = ", ".join(names)
    assert _lines(result) == [
        f"403 {_refusal(line, f'{target}')}: it resolves to {address}, a loopback or link-local address that only an "
        "entry naming it (localhost, the address itself) allows"
        for target, address in (
            (f"api.example.com:{port}", "127.0.0.1"),
            ("metadata.example.com:80", "169.254.169.254"),
            (f"mapped.example.com:{port}", "::ffff:127.0.0.1"),
        )
    ]


def _own_address() -> str | None:
    """This host's address on its outward interface (no packet is sent), or None without one."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def _descriptors() -> set[str]:
    return {f"{fd}:{_target(fd)}" for fd in os.listdir("/proc/self/fd")}


def _target(fd: str) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return "?"


def _threads() -> set[str]:
    """This process's threads, once the cgroups of calls that are over are removed (off the calls' path, by a thread
    that ends when none is left: toolexec's own, not the call's)."""
    from toolexec.runtimes import cgroup

    cgroup.drain()
    return {f"{thread.name}:{thread.ident}" for thread in threading.enumerate()}


def _children() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                found.add(int(entry))
    return found


def _unpooled(files: set[str]) -> set[str]:
    """``files`` but the call files a pool keeps for the tool's next calls (in a ``toolexec-calls-`` or a warm
    pool's ``toolexec-warm-`` directory)."""
    return {
        path for path in files if not any(part.startswith(("toolexec-calls-", "toolexec-warm-")) for part in Path(path).parts)
    }


def _files(root: Path) -> set[str]:
    places = [root, Path(os.environ.get("TMPDIR", "/tmp"))]
    return {str(path) for place in places for path in place.rglob("*") if not path.is_dir() and "functions" not in path.parts}


def test_a_call_without_an_allow_list_pays_nothing_for_the_proxy(project: Project, servers: Servers) -> None:
    import json
    import subprocess
    import sys

    port = servers.start()
    project.tool("reach.py", PYTHON)
    imported = {}
    for network in ("none", [f"localhost:{port}"]):
        config = project.configure(["reach.py"], sandbox_policies={"reach": {"network": network}})
        arguments = json.dumps({"action": "get", "urls": f"http://localhost:{port}/"})
        command = [sys.executable, "-X", "importtime", "-m", "toolexec", "--config", str(config), "run", "reach", arguments]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        found = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        imported[str(network)] = ("toolexec.runtimes.netproxy" in found, done.stdout.split(" ")[0])
    assert imported == {"none": (False, "error"), f"['localhost:{port}']": (True, "200")}
