"""The audit log (``audit_log:``): exactly one JSON line per call, from every surface and any number of processes,
with the arguments' digest (the arguments only when configured), the outcome, the sandbox policy and who asked."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tests.conftest import Project, cli
from tests.executor.test_mcp import HttpServer
from toolexec import Executor
from toolexec.config import load_config
from toolexec.errors import ConfigError

ECHO = '#!/usr/bin/env bash\n# @describe Echo.\n# @option --text! The text.\nmain() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
OFFLINE = (
    "#!/usr/bin/env bash\n# @describe Echo, offline.\n# @meta network none\n# @option --text! The text.\n"
    'main() {\n    printf "%s" "$argc_text" >>"$LLM_OUTPUT"\n}\n'
)


def digest(arguments: Any) -> str:
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timing(line: dict[str, Any]) -> dict[str, Any]:
    assert line["time"].endswith("Z") and line["time"][10] == "T"
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0
    return {k: v for k, v in line.items() if k not in ("time", "duration_ms")}


@pytest.fixture
def audited(project: Project) -> Project:
    project.tool("echo.sh", ECHO)
    project.tool("offline.sh", OFFLINE)
    return project


def test_eight_processes_write_exactly_one_line_per_call(audited: Project) -> None:
    log = audited.root / "audit.jsonl"
    config = audited.configure(audit_log=str(log))
    script = textwrap.dedent(
        """
        import sys
        from toolexec import Executor, ToolCall

        process = sys.argv[2]
        with Executor(sys.argv[1]) as ex:
            calls = [ToolCall(name="echo", arguments={"text": f"{process}-{i}" * 50}, call_id=f"p{process}_{i}") for i in range(12)]
            results = ex.call_many(calls)
        assert all(r.ok for r in results), results
        """
    )
    workers = [subprocess.Popen([sys.executable, "-c", script, str(config), str(p)]) for p in range(8)]
    assert [worker.wait(timeout=120) for worker in workers] == [0] * 8
    written = lines(log)
    assert len(written) == 96
    expected = {f"p{p}_{i}": {"text": f"{p}-{i}" * 50} for p in range(8) for i in range(12)}
    assert {line["call_id"] for line in written} == set(expected)
    for line in written:
        assert without_timing(line) == {
            "tool": "echo",
            "call_id": line["call_id"],
            "arguments_digest": digest(expected[line["call_id"]]),
            "outcome": "ok",
            "reason": None,
            "exit_code": 0,
            "caller": {"surface": "api"},
        }
    assert (log.stat().st_mode & 0o777) == 0o600


def test_a_cli_call_with_arguments_and_its_refusals(audited: Project, capsys: pytest.CaptureFixture[str]) -> None:
    log = audited.root / "logs" / "audit.jsonl"
    log.parent.mkdir()
    config = audited.configure(audit_log={"path": "logs/audit.jsonl", "arguments": True})
    assert cli(capsys, "--config", str(config), "run", "echo", '{"text": "hi"}', "--call-id", "c1")[:2] == (0, "hi")
    assert cli(capsys, "--config", str(config), "run", "echo", "{}", "--call-id", "c2")[0] == 2
    assert cli(capsys, "--config", str(config), "run", "nope", "{}", "--call-id", "c3")[0] == 2
    me = {"surface": "cli", "user": pwd.getpwuid(os.getuid()).pw_name}
    assert [without_timing(line) for line in lines(log)] == [
        {
            "tool": "echo",
            "call_id": "c1",
            "arguments_digest": digest({"text": "hi"}),
            "arguments": {"text": "hi"},
            "outcome": "ok",
            "reason": None,
            "exit_code": 0,
            "caller": me,
        },
        {
            "tool": "echo",
            "call_id": "c2",
            "arguments_digest": digest({}),
            "arguments": {},
            "outcome": "refused",
            "reason": "invalid_arguments",
            "exit_code": 2,
            "caller": me,
        },
        {
            "tool": "nope",
            "call_id": "c3",
            "arguments_digest": digest({}),
            "arguments": {},
            "outcome": "refused",
            "reason": "unknown_tool",
            "exit_code": 2,
            "caller": me,
        },
    ]


def test_the_effective_sandbox_policy_is_recorded(audited: Project) -> None:
    log = audited.root / "audit.jsonl"
    config = audited.configure(audit_log=str(log), sandbox_policies={"echo": {"network": "none", "writes": ["cache"]}})
    with Executor(config) as ex:
        assert ex.call("offline", {"text": "a"}).output == "a"
        assert ex.call("echo", {"text": "b"}).output == "b"
    first, second = lines(log)
    assert (first["tool"], first["sandbox"]) == ("offline", {"network": "none"})
    assert (second["tool"], second["sandbox"]) == ("echo", {"network": "none", "writes": ["cache"]})


@pytest.mark.parametrize("era", ["legacy", "2026-07-28"])
def test_an_mcp_call_names_the_client_and_the_token(audited: Project, era: str) -> None:
    """A 2026-07-28 client names itself on every request; a handshake-era one over stateless HTTP said it only in
    its initialize, which this server (keeping no per-client state) does not remember."""
    log = audited.root / "audit.jsonl"
    audited.configure(audit_log=str(log))
    server = HttpServer(audited)
    try:

        async def scenario() -> str:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.types import Implementation

            async with (
                server.client() as http,
                Client(
                    streamable_http_client(server.url, http_client=http),
                    mode=era,
                    client_info=Implementation(name="audit-test", version="1.2"),
                ) as client,
            ):
                result = await client.call_tool("echo", {"text": "over http"})
            return result.content[0].text  # type: ignore[union-attr]

        assert anyio.run(scenario) == "over http"
    finally:
        assert server.stop() == 0
    (line,) = lines(log)
    named = {"client": "audit-test 1.2"} if era != "legacy" else {}
    assert line["caller"] == {"surface": "mcp", **named, "subject": "static token"}
    assert (line["tool"], line["outcome"], "arguments" in line) == ("echo", "ok", False)


def test_an_unwritable_audit_log_leaves_the_call_alone(audited: Project, capsys: pytest.CaptureFixture[str]) -> None:
    missing = audited.root / "no-such-dir" / "audit.jsonl"
    config = audited.configure(audit_log=str(missing))
    status, out, err = cli(capsys, "--config", str(config), "run", "echo", '{"text": "still"}')
    assert (status, out) == (0, "still")
    assert err == f"toolexec: cannot append to the audit log {missing}: No such file or directory\n"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (3, "expected a file path (or {path: FILE, arguments: true}), got 3"),
        ({"path": "a.log", "arguments": "yes"}, "arguments: expected true or false, got 'yes'"),
        ({"path": "a.log", "argument": True}, "unknown setting 'argument'; it has path and arguments"),
        (".", "is a directory; name the file the audit lines are appended to"),
    ],
)
def test_bad_audit_settings_are_refused_by_key(audited: Project, value: Any, message: str) -> None:
    config = audited.configure(audit_log=value)
    with pytest.raises(ConfigError) as refused:
        load_config(config)
    assert "audit_log" in str(refused.value) and message in str(refused.value)


def test_hostile_arguments_are_audited_as_sent(audited: Project) -> None:
    """Arguments nested past what Python's JSON reader can read, or not JSON at all: refused, and audited as the
    text that was sent (the observation never fails the call)."""
    log = audited.root / "audit.jsonl"
    config = audited.configure(audit_log={"path": str(log), "arguments": True})
    deep, broken = "[" * 100_000 + "]" * 100_000, '{"text": '
    with Executor(config) as ex:
        results = [ex.call("echo", deep), ex.call("echo", broken)]
    assert [r.reason for r in results] == ["bad_request", "bad_request"]
    assert [(line["arguments"], line["arguments_digest"], line["reason"]) for line in lines(log)] == [
        (deep, digest(deep), "bad_request"),
        (broken, digest(broken), "bad_request"),
    ]


def test_a_confined_tool_cannot_read_the_audit_log(audited: Project) -> None:
    log = Path.home() / "audit.jsonl"  # HOME stays visible to a confined tool (its /tmp is a private one)
    audited.tool(
        "peek.sh",
        '#!/usr/bin/env bash\n# @describe Peek.\n# @meta network none\n# @option --path! A file.\nmain() {\n    cat "$argc_path" >>"$LLM_OUTPUT" 2>&1 || echo "refused" >>"$LLM_OUTPUT"\n}\n',
    )
    config = audited.configure(audit_log={"path": str(log), "arguments": True})
    with Executor(config) as ex:
        assert ex.call("echo", {"text": "a secret argument"}).ok
        peeked = ex.call("peek", {"path": str(log)})
    assert "a secret argument" in log.read_text()
    assert peeked.ok and "a secret argument" not in peeked.output, peeked
