"""Where a tool's sandbox policy is shown: ``describe`` (text and JSON), MCP declarations (``_meta`` and
``openWorldHint``), and the policy config gives in place of the script's."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project, cli

FETCH = '''
def run(url: str) -> str:
    """Fetch a page.

    Args:
        url: the page

    Network: none
    Writes: cache, ~/notes
    Env: GITHUB_TOKEN
    Memory: 256 MiB
    File size: 10 MiB
    """
    return url
'''
PLAIN = '''
def run() -> str:
    """Say hello."""
    return "hello"
'''


def test_describe_shows_the_policy(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.tool("fetch.py", FETCH)
    config = project.configure()
    code, out, _ = cli(capsys, "--config", str(config), "describe", "fetch")
    assert code == 0
    assert (
        "Sandbox: network none; writes cache, ~/notes; env GITHUB_TOKEN; memory 268435456; file size 10485760" in out.splitlines()
    )
    code, out, _ = cli(capsys, "--config", str(config), "describe", "fetch", "--json")
    assert json.loads(out)["metadata"]["sandbox"] == {
        "network": "none",
        "writes": ["cache", "~/notes"],
        "reads": [],
        "env": ["GITHUB_TOKEN"],
        "memory": 256 << 20,
        "cpu": None,
        "processes": None,
        "file_size": 10 << 20,
    }


def test_mcp_declarations_carry_the_policy(project: Project) -> None:
    project.tool("fetch.py", FETCH)
    project.tool("plain.py", PLAIN)
    with project.executor() as executor:
        declared = {d["name"]: d for d in executor.declarations(format="mcp")}
    assert declared["fetch"]["annotations"] == {"openWorldHint": False}
    assert declared["fetch"]["_meta"] == {
        "toolexec/sandbox": {
            "network": "none",
            "writes": ["cache", "~/notes"],
            "env": ["GITHUB_TOKEN"],
            "memory": 256 << 20,
            "file_size": 10 << 20,
        }
    }
    assert "_meta" not in declared["plain"] and "annotations" not in declared["plain"]


def test_a_tool_that_declares_nothing_has_no_policy_in_its_record(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.tool("plain.py", PLAIN)
    code, out, _ = cli(capsys, "--config", str(project.configure()), "describe", "plain", "--json")
    assert code == 0 and "sandbox" not in json.loads(out)["metadata"]
    assert "Sandbox" not in cli(capsys, "--config", str(project.config), "describe", "plain")[1]
