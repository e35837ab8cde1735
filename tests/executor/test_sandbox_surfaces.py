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


OPEN = '''
def run(url: str) -> str:
    """Fetch a page.

    Args:
        url: the page

    Network: all
    Open-world: true
    """
    return url
'''


def test_describe_and_mcp_show_the_policy_config_puts_in_place_of_the_scripts(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.tool("fetch.py", OPEN)
    config = project.configure(sandbox_policies={"fetch": {"network": "none", "writes": ["cwd"], "cpu": 5}})
    code, out, _ = cli(capsys, "--config", str(config), "describe", "fetch")
    assert code == 0 and "Sandbox: network none; writes cwd; cpu 5" in out.splitlines()
    with project.executor(sandbox_policies={"fetch": {"network": "none", "writes": ["cwd"], "cpu": 5}}) as executor:
        (declared,) = executor.declarations(format="mcp")
        described = executor.describe("fetch").metadata.sandbox
    assert declared["_meta"] == {"toolexec/sandbox": {"network": "none", "writes": ["cwd"], "cpu": 5}}
    assert declared["annotations"] == {"openWorldHint": False}  # the script says open world; config took its network
    assert described is not None and (described.network, described.writes) == ("none", ("cwd",))


def test_under_strict_a_tool_that_declares_nothing_shows_the_baseline_policy(project: Project) -> None:
    project.tool("plain.py", PLAIN)
    with project.executor(sandbox="strict") as executor:
        (declared,) = executor.declarations(format="mcp")
    assert declared["_meta"] == {"toolexec/sandbox": {"network": "none", "writes": ["cache"]}}
    assert declared["annotations"] == {"openWorldHint": False}


def test_under_off_no_policy_is_shown_not_even_the_scripts(project: Project) -> None:
    project.tool("fetch.py", FETCH)
    with project.executor(sandbox="off") as executor:
        (declared,) = executor.declarations(format="mcp")
    assert "_meta" not in declared and "annotations" not in declared


def test_the_mcp_server_lists_the_enforced_policy(project: Project) -> None:
    from toolexec.mcp import Listing

    project.tool("fetch.py", OPEN)
    with project.executor(sandbox_policies={"fetch": {"network": "none"}}) as executor:
        config, catalog, _ = executor._serving()
        listing = Listing(config, catalog, summaries=False)
    (entry,) = listing.entries
    shown = entry.model_dump(by_alias=True, exclude_none=True)
    assert shown["annotations"] == {"openWorldHint": False}  # the script says open world; config took its network
    assert shown["_meta"] == {"toolexec/sandbox": {"network": "none", "writes": ["cache"]}}


def test_list_and_check_flag_the_tools_that_run_unconfined(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.tool("fetch.py", FETCH)
    project.tool("plain.py", PLAIN)
    config = project.configure(sandbox="declared")
    code, out, _ = cli(capsys, "--config", str(config), "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0 and rows["fetch"]["unconfined"] is None
    assert rows["plain"]["unconfined"].startswith("it declares no sandbox policy (sandbox: declared)")
    code, out, _ = cli(capsys, "--config", str(config), "list")
    flagged = {line.split()[0]: line.endswith("(unconfined: declares no sandbox policy)") for line in out.splitlines()}
    assert flagged == {"fetch": False, "plain": True}
    code, out, err = cli(capsys, "--config", str(config), "check")
    assert code == 0 and "plain runs unconfined: it declares no sandbox policy" in out and "fetch runs" not in out
    assert out.count("runs unconfined") == 1 and f"sandbox_policies.plain in {config}, or sandbox: strict there" in out
    assert "3 warning(s)" in err  # and each tool's "no example"
    code, out, _ = cli(capsys, "--config", str(project.configure(sandbox="strict")), "check")
    assert "runs unconfined" not in out
    code, out, _ = cli(capsys, "--config", str(project.configure(sandbox="off")), "list")
    assert all(line.endswith("(unconfined: sandbox: off)") for line in out.splitlines())
