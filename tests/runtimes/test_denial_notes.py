"""A denied write or connection keeps the tool's own error and adds a note naming the policy line that denied it,
in every language (the hostile tools of test_sandbox.py, policy ``network: none``, ``writes: cache``)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Project
from tests.runtimes import test_sandbox as hostile
from tests.runtimes.test_sandbox import TOOLS, _call

pytestmark = hostile.pytestmark
language = hostile.language  # the fixtures: every language, and a loopback HTTP server
loopback_server = hostile.loopback_server


def test_a_refused_write_keeps_the_tools_error_and_names_the_writes_line(project: Project, language: str) -> None:
    target = Path("/etc/toolexec-planted")
    result = _call(project, language, "write", str(target))
    assert result.status == "error" and not target.exists()
    said = (result.error or "") + result.stderr
    assert "read-only file system" in said.lower()  # the tool's own error, intact
    source = project.tools / TOOLS[language][0]
    assert result.notes == (
        f"sandbox: writing {target} is outside this tool's `writes: cache` (declared in {source}); only those places, "
        "its private /tmp and LLM_OUTPUT are writable",
    )


def test_config_s_policy_is_named_as_the_source(project: Project, language: str) -> None:
    target = Path("/var/toolexec-planted")  # read-only in the sandbox (the tests' HOME is under the private /tmp)
    result = _call(project, language, "write", str(target), granted={"writes": ["cwd"]})
    assert result.status == "error" and not target.exists()
    assert result.notes == (
        f"sandbox: writing {target} is outside this tool's `writes: cwd` (sandbox_policies.hostile in {project.config}); "
        "only those places, its private /tmp and LLM_OUTPUT are writable",
    )


def test_a_refused_connection_names_network_none(project: Project, language: str, loopback_server: int) -> None:
    result = _call(project, language, "connect", f"127.0.0.1:{loopback_server}")
    assert result.status == "error"
    source = project.tools / TOOLS[language][0]
    assert result.notes == (
        f"sandbox: this tool runs under `network: none` (declared in {source}): no connection or name lookup can succeed",
    )


def test_an_allowed_write_or_an_unconfined_failure_gets_no_note(project: Project, language: str) -> None:
    assert _call(project, language, "write", "~/granted", granted={"writes": ["~/"]}).notes == ()
    assert _call(project, language, "read", "/nonexistent/file").notes == ()  # a failure that is no denial
