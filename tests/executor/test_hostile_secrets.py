"""No tool sees toolexec's secrets or memory: not in its environment, not through ``/proc/$PPID``.

Every surface (the CLI, the Python API, the MCP server) runs as an ordinary user here, as users run it:
root may read any process's ``/proc`` files whatever the process does, so under root the tests drop to
``nobody`` for the toolexec process they start (and its tools, which run as the same user).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import Ordinary
from toolexec.runtimes import process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="needs Linux's /proc")

# Each tool reports what it found: toolexec's secret in its own environment, its parent's (toolexec's)
# environment, and whether its parent's memory opens.
PROBES = {
    "probe_py.py": '''import os


def run() -> str:
    """Look for toolexec's secrets."""
    found = [f"env={os.environ.get('MY_TOKEN', '-')}"]
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/environ", "rb") as handle:
            found.append("environ=" + handle.read().decode("utf-8", "replace").replace("\\0", " "))
    except OSError:
        found.append("environ=denied")
    try:
        open(f"/proc/{parent}/mem", "rb").close()
        found.append("mem=open")
    except OSError:
        found.append("mem=denied")
    return "\\n".join(found)
''',
    "probe_sh.sh": """# @describe Look for toolexec's secrets.
main() {
    {
        echo "env=${MY_TOKEN:--}"
        if found=$(tr '\\0' ' ' <"/proc/$PPID/environ" 2>/dev/null); then echo "environ=$found"; else echo "environ=denied"; fi
        if (exec 3<"/proc/$PPID/mem") 2>/dev/null; then echo "mem=open"; else echo "mem=denied"; fi
    } >>"$LLM_OUTPUT"
    truncate -s -1 "$LLM_OUTPUT"
}
""",
    "probe_js.js": """import fs from "node:fs";

/** Look for toolexec's secrets. */
export function run() {
  const found = [`env=${process.env.MY_TOKEN ?? "-"}`];
  try {
    found.push("environ=" + fs.readFileSync(`/proc/${process.ppid}/environ`, "latin1").replaceAll("\\0", " "));
  } catch {
    found.push("environ=denied");
  }
  try {
    fs.closeSync(fs.openSync(`/proc/${process.ppid}/mem`, "r"));
    found.push("mem=open");
  } catch {
    found.push("mem=denied");
  }
  return found.join("\\n");
}
""",
}
NAMES = ["probe_py", "probe_sh", "probe_js"]
NOTHING_FOUND = "env=-\nenviron=denied\nmem=denied"


def nothing_found(found: dict[str, str], sandbox: str) -> bool:
    """Whether no probe found the secret. Unconfined, toolexec (the parent) refuses every look; under the baseline
    the parent is the namespace's init, which holds the tool's own environment and nothing of toolexec's."""
    if sandbox == "off":
        return found == dict.fromkeys(NAMES, NOTHING_FOUND)
    return set(found) == set(NAMES) and all(
        text.startswith("env=-\nenviron=") and TOKEN not in text and "TOOLEXEC_CALL_MARK=" in text for text in found.values()
    )


TOKEN = "tok-" + os.urandom(12).hex()
CONFIG = {"visible_tools": sorted(PROBES), "secret_env": ["MY_TOKEN"], "mcp": {"token_env": "MY_TOKEN"}}

API = """
import json, sys
from toolexec import Executor

with Executor(sys.argv[1]) as executor:
    print(json.dumps({name: executor.call(name, {}).output for name in sys.argv[2:]}))
"""


class Unprivileged(Ordinary):
    """A project in a directory an ordinary user owns, and how to run a command as that user."""

    def __init__(self, root: Path, sandbox: str) -> None:
        super().__init__(root)
        self.sandbox = sandbox
        self.env["MY_TOKEN"] = TOKEN

    def popen(self, *argv: str) -> subprocess.Popen[str]:
        pipe = subprocess.PIPE
        return subprocess.Popen(
            [*self.prefix, *argv], stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, text=True, env=self.env, cwd=self.root
        )


@pytest.fixture(params=["off", "declared"])
def unprivileged(request: pytest.FixtureRequest) -> Iterator[Unprivileged]:
    """Unconfined, the tool's parent is toolexec; under the baseline (``declared``), its PID namespace's init."""
    import yaml

    root = Path(tempfile.mkdtemp(prefix="toolexec-secrets-", dir="/tmp"))
    try:
        project = Unprivileged(root, request.param)
        for name, source in PROBES.items():
            (root / "functions" / "tools" / name).write_text(source)
        project.config.write_text(yaml.safe_dump({**CONFIG, "sandbox": request.param}))
        project.own()
        yield project
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_the_probes_find_the_secret_where_nothing_keeps_it(unprivileged: Unprivileged) -> None:
    """The probes work: a plain parent process holding the token in its environment is found out."""
    script = "import subprocess, sys; sys.exit(subprocess.run(['cat', '/proc/' + str(__import__('os').getpid()) + '/environ']).returncode)"
    done = unprivileged.run(sys.executable, "-c", script)
    assert TOKEN in done.stdout


def test_no_tool_finds_the_secret_through_the_cli(unprivileged: Unprivileged) -> None:
    found = {}
    for name in NAMES:
        done = unprivileged.run(sys.executable, "-m", "toolexec", "--config", str(unprivileged.config), "run", name)
        assert done.returncode == 0, done.stderr
        found[name] = done.stdout
    assert nothing_found(found, unprivileged.sandbox), found


def test_no_tool_finds_the_secret_through_the_api(unprivileged: Unprivileged) -> None:
    done = unprivileged.run(sys.executable, "-c", API, str(unprivileged.config), *NAMES)
    assert done.returncode == 0, done.stderr
    assert nothing_found(json.loads(done.stdout), unprivileged.sandbox), done.stdout


def test_no_tool_finds_the_secret_through_the_mcp_server(unprivileged: Unprivileged) -> None:
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *(
            {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": name, "arguments": {}}}
            for n, name in enumerate(NAMES, 1)
        ),
    ]
    command = [sys.executable, "-m", "toolexec", "--config", str(unprivileged.config), "mcp", "--no-reload"]
    server = unprivileged.popen(*command)
    assert server.stdin is not None and server.stdout is not None
    replies: dict[int, dict] = {}
    try:
        server.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        server.stdin.flush()
        while len(replies) < len(requests) - 1:  # stdin stays open until every call is answered: its end cancels them
            line = server.stdout.readline()
            assert line, "the server ended before answering every request"
            reply = json.loads(line)
            if "id" in reply:
                replies[reply["id"]] = reply
    finally:
        server.stdin.close()
        code = server.wait(timeout=60)
        server.stdout.close()
    assert code == 0
    found = {name: replies[n]["result"]["content"][0]["text"] for n, name in enumerate(NAMES, 1)}
    assert nothing_found(found, unprivileged.sandbox), found


def test_secret_env_patterns_and_the_mcp_token_variable_are_kept_from_tools(tmp_path: Path) -> None:
    from toolexec.config import from_mapping
    from toolexec.runtimes.environment import without_secrets

    config = from_mapping({"secret_env": ["AWS_*", "OPENAI_API_KEY"], "mcp": {"token_env": "MCP_TOKEN"}}, tmp_path / "c.yaml")
    environ = {"AWS_SECRET": "1", "AWS_REGION": "2", "OPENAI_API_KEY": "3", "MCP_TOKEN": "4", "PATH": "/bin", "AWSX": "5"}
    assert without_secrets(environ, config.secret_names()) == {"PATH": "/bin", "AWSX": "5"}


def test_a_dotenv_file_cannot_expand_a_secret_into_a_tool(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """``${NAME}`` in a .env file (which a tool or a model may have written) expands from what the tool gets: never
    from a secret of toolexec's."""
    monkeypatch.setenv("HOST_API_KEY", TOKEN)
    monkeypatch.setenv("HOST_PLAIN", "plain")
    (project.root / "functions").mkdir(parents=True, exist_ok=True)
    project.tool("show.sh", '# @describe Show.\nmain() { printf "%s|%s|%s" "$LEAK" "$HOST_API_KEY" "$SEEN" >>"$LLM_OUTPUT"; }\n')
    (project.root / "functions" / ".env").write_text("LEAK=${HOST_API_KEY}\nSEEN=${HOST_PLAIN}\n")
    result = project.executor(secret_env=["HOST_API_*"]).call("show", {})
    assert (result.status, result.output) == ("ok", "||plain")


# A confined tool looks for toolexec's own files beside its sockets: the MCP bearer token (in the runtime folder, or
# the state folder when there is none), a server's lock and sockets. Each probe prints what it could read.
TOKEN_PROBES = {
    "look_py.py": '''import os, sys


def run() -> str:
    """Look for toolexec's token."""
    found = []
    for path in sys.argv[1:] or os.environ["PROBE_PATHS"].split(":"):
        try:
            with open(path) as handle:
                found.append("read " + handle.read().strip())
        except OSError:
            found.append("denied")
    return " ".join(found)
''',
    "look_sh.sh": """# @describe Look for toolexec's token.
main() {
    local path found=()
    IFS=: read -ra paths <<<"$PROBE_PATHS"
    for path in "${paths[@]}"; do
        if text=$(cat "$path" 2>/dev/null); then found+=("read $text"); else found+=(denied); fi
    done
    printf '%s' "${found[*]}" >>"$LLM_OUTPUT"
}
""",
}


@pytest.mark.parametrize("tool", ["look_py", "look_sh"])
@pytest.mark.parametrize("runtime_dir", [True, False], ids=["runtime-dir", "state-dir"])
def test_a_confined_tool_cannot_read_the_mcp_token_or_the_servers_folder(
    project: Project, monkeypatch: pytest.MonkeyPatch, tool: str, runtime_dir: bool
) -> None:
    """The generated MCP bearer token lets whoever reads it call every tool over HTTP: no confined tool reads it, in
    either place it is kept (``$XDG_RUNTIME_DIR/toolexec`` or ``$XDG_STATE_HOME/toolexec``)."""
    from toolexec.mcp_http import token_file
    from toolexec.serve_client import socket_folder

    home = Path(os.environ["HOME"])
    if runtime_dir:
        runtime = home / "run"  # (not under /tmp, which a confined tool sees a private one of)
        runtime.mkdir(mode=0o700)
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    token = token_file()
    token.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    token.write_text(TOKEN)
    lock = Path(socket_folder()) / "serve-0123456789abcdef.lock"
    lock.write_text("4242")
    assert token.parent == lock.parent
    monkeypatch.setenv("PROBE_PATHS", f"{token}:{lock}")
    for name, source in TOKEN_PROBES.items():
        project.tool(name, source)
    executor = project.executor(sandbox="strict", sandbox_policies={tool: {"env": ["PROBE_PATHS"]}})
    with executor:
        result = executor.call(tool, {})
    assert (result.status, result.output) == ("ok", "denied denied")
    with project.executor(sandbox="off") as unconfined:  # the probe reads what is there when nothing hides it
        assert unconfined.call(tool, {}).output == f"read {TOKEN} read 4242"
