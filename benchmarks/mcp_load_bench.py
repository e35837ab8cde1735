"""The MCP server under load and over HTTP keep-alive, side by side with FastMCP (the SDK's ``MCPServer``) in one run.

    python benchmarks/mcp_load_bench.py [ROUNDS] [--http]     # --http: the Streamable HTTP figures only

* stdio, 100 ``tools/call`` of a no-op Bash tool in flight at once: calls/s of ``toolexec mcp`` against FastMCP
  whose tool runs the same script with ``asyncio.create_subprocess_exec`` (``fastmcp_reference.py``), driven by the
  same bare JSON-RPC client, round by round alternately. Target: at least FastMCP's calls/s. Twice: under the default
  sandbox (every call in the baseline's PID namespace) and with ``sandbox: off``, which separates the server's own
  cost from the sandbox's.
* Streamable HTTP, one keep-alive connection: ``tools/list`` (target ≤ 1.2× FastMCP's time), and ``tools/call`` of a
  no-op Python tool at concurrency 1 against FastMCP calling the same function in-process (target ≥ 1.0× its calls/s
  with a warm tool; the tool says ``Warm: true``, which a toolexec without warm tools reads as description), under
  the default sandbox and with ``sandbox: off``; with the CPU time each server process spends per request (ours
  without the tool's own process: the warm server and the forked call are processes of their own).

Both servers are stateless over HTTP and unauthenticated (``--no-token``), on loopback. Medians of each, and the
median of the adjacent pairs' ratios, which a drifting shared machine affects least.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import NOOP_JS, NOOP_SH, NOOP_TS, RUNS, clean_env, paired_ms, write_project
from mcp_bench import StdioServer

HERE = Path(__file__).resolve().parent
IN_FLIGHT = 100
WARM_PY = 'def run(text: str = "") -> str:\n    """Return the text.\n\n    Warm: true\n    """\n    return text\n'
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": "2025-11-25",
}


def burst(server: StdioServer, calls: int = IN_FLIGHT) -> float:
    """Calls/s of ``calls`` ``tools/call`` sent at once, answered in any order (each checked)."""
    call = {"name": "noop_sh", "arguments": {"text": "x"}}
    start = time.perf_counter()
    answers = server.receive({server.submit("tools/call", call) for _ in range(calls)})
    elapsed = time.perf_counter() - start
    wrong = [a for a in answers.values() if a.get("isError") or a["content"][0]["text"] != "x"]
    if wrong:
        raise RuntimeError(f"a call failed: {wrong[0]}")
    return calls / elapsed


def stdio_load(
    config: Path, toolexec: list[str], env: dict[str, str], rounds: int
) -> tuple[float, float, float, float, float, float]:
    """(ours, FastMCP's, the median ratio of adjacent rounds) in calls/s, 100 Bash calls in flight; the CPU time
    each server process spent per call (ms, itself: its tools are the same script); and of ours, the part its event
    loop's thread spent (the rest is the call threads')."""
    script = config.parent / "functions" / "tools" / "noop_sh.sh"
    ours = StdioServer([*toolexec, "--config", str(config), "mcp"], env)
    reference = StdioServer([sys.executable, str(HERE / "fastmcp_reference.py"), "stdio-bash", str(script)], env)
    try:
        for _ in range(2):  # warm: threads, caches, page cache
            burst(ours), burst(reference)
        pairs: list[tuple[float, float]] = []
        cpu = {ours: 0.0, reference: 0.0}
        loop_before = thread_cpu_ms(ours.process.pid)
        for _ in range(rounds):
            rates: dict[StdioServer, float] = {}
            for server in (ours, reference):
                used = cpu_ms(server.process.pid, lambda server=server, rates=rates: rates.__setitem__(server, burst(server)), 1)
                cpu[server] += used / IN_FLIGHT / rounds
            pairs.append((rates[ours], rates[reference]))
        loop = (thread_cpu_ms(ours.process.pid) - loop_before) / IN_FLIGHT / rounds
    finally:
        ours.close()
        reference.close()
    return (
        statistics.median(o for o, _ in pairs),
        statistics.median(r for _, r in pairs),
        statistics.median(o / r for o, r in pairs),
        cpu[ours],
        cpu[reference],
        loop,
    )


def thread_cpu_ms(pid: int) -> float:
    """The CPU time (ms) the main thread of process ``pid`` has used: ``toolexec mcp``'s event loop."""
    fields = Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK") * 1000


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpServer:
    """A server process listening on ``url`` (waited for), stopped by :meth:`close`."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.close()
                    raise RuntimeError(f"{argv[:3]} did not listen on {port}") from None
                time.sleep(0.05)

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def requester(
    client: http.client.HTTPConnection, method: str, params: dict[str, Any], check: Callable[[dict[str, Any]], bool]
) -> Callable[[], None]:
    """One JSON-RPC request over ``client``'s keep-alive connection, its answer (JSON or one SSE event) checked."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()

    def request() -> None:
        try:
            client.request("POST", "/mcp", body=body, headers=HEADERS)
            response = client.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The server closed the connection after its keep-alive time (the other server's turn took longer): again.
            client.close()
            client.request("POST", "/mcp", body=body, headers=HEADERS)
            response = client.getresponse()
        text = response.read().decode()
        if text.startswith("event:") or text.startswith("data:"):
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        answer = json.loads(text)
        if response.status != 200 or "result" not in answer or not check(answer["result"]):
            raise RuntimeError(f"{method}: HTTP {response.status}: {text[:300]}")

    return request


def cpu_ms(pid: int, action: Callable[[], None], runs: int) -> float:
    """The CPU time (user and system) process ``pid`` spends per ``action``: what a busy machine's scheduling
    leaves out of it, unlike wall time."""

    def used() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    before = used()
    for _ in range(runs):
        action()
    return (used() - before) / runs * 1000


def warm_in(describe: Any) -> bool:
    """Whether ``toolexec describe --json`` says the tool is warm (a ``warm`` key set anywhere but its text)."""
    if isinstance(describe, dict):
        return any((key == "warm" and bool(value)) or warm_in(value) for key, value in describe.items() if key != "description")
    if isinstance(describe, list):
        return any(warm_in(item) for item in describe)
    return False


def http_figures(config: Path, toolexec: list[str], env: dict[str, str], runs: int, *, listing: bool = True) -> dict[str, Any]:
    """A Python tools/call at concurrency 1 (and tools/list, with ``listing``) over one keep-alive connection each,
    ours and FastMCP's, with the CPU time each server process spends per request."""
    tool = config.parent / "functions" / "tools" / "noop_py.py"
    described = subprocess.run(
        [*toolexec, "--config", str(config), "describe", "noop_py", "--json"], env=env, capture_output=True, text=True, check=True
    )
    ports = free_port(), free_port()
    ours = HttpServer([*toolexec, "--config", str(config), "mcp", "--http", f"127.0.0.1:{ports[0]}", "--no-token"], ports[0], env)
    try:
        reference = HttpServer(
            [sys.executable, str(HERE / "fastmcp_reference.py"), "http", str(ports[1]), str(tool)], ports[1], env
        )
    except BaseException:
        ours.close()
        raise
    found: dict[str, Any] = {"warm": warm_in(json.loads(described.stdout))}
    try:
        a = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=30)
        b = http.client.HTTPConnection("127.0.0.1", ports[1], timeout=30)
        try:
            if listing:
                listed = lambda result: len(result["tools"]) == 4  # noqa: E731
                ours_list, reference_list = requester(a, "tools/list", {}, listed), requester(b, "tools/list", {}, listed)
                found["list"] = paired_ms(ours_list, reference_list, runs)
                found["list_cpu"] = (
                    cpu_ms(ours.process.pid, ours_list, 10 * runs),
                    cpu_ms(reference.process.pid, reference_list, 10 * runs),
                )
            answered = lambda result: not result.get("isError") and result["content"][0]["text"] == "x"  # noqa: E731
            call = {"name": "noop_py", "arguments": {"text": "x"}}
            ours_call, reference_call = requester(a, "tools/call", call, answered), requester(b, "tools/call", call, answered)
            found["call"] = paired_ms(ours_call, reference_call, runs)
            found["call_cpu"] = cpu_ms(ours.process.pid, ours_call, runs), cpu_ms(reference.process.pid, reference_call, runs)
        finally:
            a.close()
            b.close()
    finally:
        ours.close()
        reference.close()
    return found


def call_row(figures: dict[str, Any], sandbox: str) -> Any:
    """The row of the HTTP ``tools/call`` figures (see :func:`http_figures`)."""
    from run import Row

    call, cpu = figures["call"], figures["call_cpu"]
    kind = "warm" if figures["warm"] else "cold (no warm tools on this branch)"
    return Row(
        f"MCP HTTP keep-alive, concurrency 1, {kind} Python tool{sandbox}",
        f"{1000 / call.ours:.0f} calls/s",
        f"FastMCP, the function in-process: {1000 / call.bare:.0f} calls/s",
        f"{1 / call.ratio:.2f}x",
        "≥ 1.0x (warm)",
        1 / call.ratio >= 1.0 if figures["warm"] else None,
        f"{call.ours:.1f} ms against {call.bare:.1f} ms per call; server CPU per call {cpu[0]:.2f} ms against {cpu[1]:.2f} ms "
        "(ours without the tool's own process)",
    )


def project(root: Path, **settings: object) -> Path:
    """The project both servers serve: the four no-op tools (the Python one marked warm)."""
    tools = {"noop_py.py": WARM_PY, "noop_sh.sh": NOOP_SH, "noop_ts.ts": NOOP_TS, "noop_js.js": NOOP_JS}
    return write_project(root, tools, **settings)


def mcp_load_rows(b: Any) -> list[Any]:
    """The rows of ``make bench``'s "MCP under load" section (see run.py); a failure is a row saying so."""
    from run import Row

    try:
        return measured_rows(b)
    except Exception as exc:  # the hook must never stop the rest of the suite
        return [Row("MCP under load", "", note=f"measurement failed: {exc}")]


def measured_rows(b: Any) -> list[Any]:
    from run import Row, ratio_row

    config = project(b.root / "mcp-load")
    toolexec = [b.toolexec]
    subprocess.run([*toolexec, "--config", str(config), "build"], env=b.env, check=True, capture_output=True)
    unconfined = project(b.root / "mcp-load-off", sandbox="off")
    subprocess.run([*toolexec, "--config", str(unconfined), "build"], env=b.env, check=True, capture_output=True)
    found = []
    for where, sandbox in ((config, ""), (unconfined, ", `sandbox: off`")):
        ours, reference, ratio, ours_cpu, reference_cpu, loop = stdio_load(where, toolexec, b.env, max(5, RUNS // 4))
        found.append(
            Row(
                f"calls/s through `toolexec mcp` (stdio), {IN_FLIGHT} Bash calls in flight{sandbox}",
                f"{ours:.0f} calls/s",
                f"FastMCP + asyncio subprocess: {reference:.0f} calls/s",
                f"{ratio:.2f}x",
                "≥ 1.0x",
                ratio >= 1.0,
                f"the same script and client, rounds alternating; server CPU per call {ours_cpu:.2f} ms (event loop "
                f"{loop:.2f} ms, call threads {ours_cpu - loop:.2f} ms) against {reference_cpu:.2f} ms; load average "
                f"{os.getloadavg()[0]:.1f}",
            )
        )
    figures = http_figures(config, toolexec, b.env, RUNS)
    cpu = figures["list_cpu"]
    note = f"4 tools, stateless; server CPU per request {cpu[0]:.2f} ms against FastMCP's {cpu[1]:.2f} ms"
    found.append(ratio_row("`tools/list` over Streamable HTTP keep-alive", figures["list"], "FastMCP", 1.2, note))
    found.append(call_row(figures, ""))
    found.append(call_row(http_figures(unconfined, toolexec, b.env, RUNS, listing=False), ", `sandbox: off`"))
    return found


def main() -> None:
    http_only = "--http" in sys.argv[1:]  # only the Streamable HTTP figures
    numbers = [arg for arg in sys.argv[1:] if arg != "--http"]
    rounds = int(numbers[0]) if numbers else 11
    env = clean_env()
    with tempfile.TemporaryDirectory() as tmp:
        config = project(Path(tmp) / "default")
        unconfined = project(Path(tmp) / "off", sandbox="off")
        toolexec = [sys.executable, "-m", "toolexec"]
        print(f"load average {os.getloadavg()[0]:.2f}")
        for where, sandbox in ((config, "default sandbox"), (unconfined, "sandbox: off")):
            subprocess.run([*toolexec, "--config", str(where), "build"], env=env, check=True, capture_output=True)
            if http_only:
                continue
            ours, reference, ratio, ours_cpu, reference_cpu, loop = stdio_load(where, toolexec, env, rounds)
            print(
                f"stdio, {IN_FLIGHT} Bash calls in flight ({sandbox}): toolexec {ours:.0f} calls/s, FastMCP {reference:.0f} calls/s, "
                f"ratio {ratio:.2f}x (target ≥ 1.0x); server CPU per call {ours_cpu:.2f} ms (event loop {loop:.2f} ms, "
                f"call threads {ours_cpu - loop:.2f} ms) against {reference_cpu:.2f} ms"
            )
        for where, sandbox in ((config, "default sandbox"), (unconfined, "sandbox: off")):
            figures = http_figures(where, toolexec, env, RUNS)
            listing, call = figures["list"], figures["call"]
            print(
                f"HTTP keep-alive tools/list ({sandbox}): toolexec {listing.ours:.2f} ms, FastMCP {listing.bare:.2f} ms, "
                f"ratio {listing.ratio:.2f}x (target ≤ 1.2x); server CPU per request {figures['list_cpu'][0]:.2f} ms "
                f"against {figures['list_cpu'][1]:.2f} ms"
            )
            print(
                f"HTTP keep-alive tools/call, {'warm' if figures['warm'] else 'cold'} Python tool, concurrency 1 ({sandbox}): "
                f"toolexec {1000 / call.ours:.0f} calls/s ({call.ours:.2f} ms), FastMCP in-process {1000 / call.bare:.0f} "
                f"calls/s ({call.bare:.2f} ms), ratio {1 / call.ratio:.2f}x (target ≥ 1.0x warm); server CPU per call "
                f"{figures['call_cpu'][0]:.2f} ms against {figures['call_cpu'][1]:.2f} ms"
            )
        print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
