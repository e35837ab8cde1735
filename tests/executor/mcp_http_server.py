"""``toolexec mcp --http`` in a child process for tests, and the raw requests they send it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

from tests.conftest import Project

WAIT = 30.0  # the bound of every wait; none is a synchronisation by sleeping
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def wait_for(check: Any) -> Any:
    """Poll ``check`` until it returns something true; fail after :data:`WAIT` seconds."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.01)
    raise AssertionError(f"still waiting after {WAIT}s")


class Server:
    """``toolexec mcp --http 127.0.0.1:0 *extra`` on ``project``; ``url`` (the MCP endpoint) and ``base`` once it listens."""

    def __init__(self, project: Project, *extra: str, env: dict[str, str] | None = None) -> None:
        self.log = project.root / "http.log"
        self.errors = self.log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", "--http", "127.0.0.1:0", *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.errors,
            env={**os.environ, **(env or {})},
        )
        self.url = wait_for(lambda: re.search(r"serving (http://\S+)", self.log.read_text())).group(1)
        self.base = self.url.removesuffix("/mcp")

    def stop(self) -> int:
        """SIGTERM, and the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            self.errors.close()
