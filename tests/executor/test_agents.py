"""Agents of llm-functions (index.yaml) and Loki/Coyote (config.yaml), written for these tests, run for real.

The fixtures (``agent_fixtures/``) hold one agent per language and layout; each has a function
reporting its environment from inside the tool, variables with and without defaults, shared tools,
an ``_instructions`` function and a ``.env``. The declarations are compared, as JSON text (so key
order counts), with the goldens the projects' own generators wrote (``agent_goldens/regenerate.sh``).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli, toolexec
from toolexec import Executor, ToolCall
from toolexec.errors import BadRequest, ConfigError, InstructionsFailed, UnknownAgent

HERE = Path(__file__).parent
FIXTURES = HERE / "agent_fixtures"
GOLDENS = HERE / "agent_goldens"
LLM_FUNCTIONS = ["ledger_sh", "ledger_py", "ledger_js"]
LOKI = ["tally_sh", "tally_py", "tally_ts"]
# The variable without a default, per layout (the other one defaults).
NEEDED = {"llm-functions": ("owner", "Ann"), "loki": ("team", "Blue")}
LAYOUT = {**dict.fromkeys(LLM_FUNCTIONS, "llm-functions"), **dict.fromkeys(LOKI, "loki")}
LANGUAGE = {"sh": "bash", "py": "python", "js": "javascript", "ts": "typescript"}


@pytest.fixture
def trees(tmp_path: Path) -> dict[str, Path]:
    """Both layouts copied into a temporary directory, each with the config its users have."""
    lf, loki = tmp_path / "llm-functions", tmp_path / "loki"
    shutil.copytree(FIXTURES / "llm-functions", lf, symlinks=True)
    shutil.copytree(FIXTURES / "loki", loki, symlinks=True)
    (lf / "config.yaml").write_text("functions_dir: .\n")  # a toolexec config at the root of an llm-functions checkout
    return {"llm-functions": lf, "loki": loki}


def config_of(trees: dict[str, Path], agent: str) -> Path:
    return trees[LAYOUT[agent]] / "config.yaml"


def executor(trees: dict[str, Path], agent: str, **options: Any) -> Executor:
    name, value = NEEDED[LAYOUT[agent]]
    options.setdefault("variables", {name: value})
    return Executor(config_of(trees, agent), agent=agent, **options)


def golden(agent: str) -> list[dict[str, Any]]:
    """What the project's generator wrote, less what toolexec deliberately never offers or writes."""
    declared = json.loads((GOLDENS / LAYOUT[agent] / f"{agent}.json").read_text())
    # "agent": true is aichat's routing mark, not part of a declaration; _instructions is never offered as a tool
    return [{k: v for k, v in d.items() if k != "agent"} for d in declared if d["name"] != "_instructions"]


@pytest.mark.parametrize("agent", LLM_FUNCTIONS + LOKI)
def test_declarations_are_the_generators_own(trees: dict[str, Path], agent: str) -> None:
    with executor(trees, agent) as ex:
        report = ex.build()
        assert report.problems == []
        ours = [tool.to_function() for tool in ex.tools()]
    expected = golden(agent)
    if LAYOUT[agent] == "loki":  # Loki declares the global tools; their declarations are not the agent parser's
        ours = [d for d in ours if d["name"] != "greet"]
    assert json.dumps(ours, indent=2) == json.dumps(expected, indent=2)


@pytest.mark.parametrize("agent", LLM_FUNCTIONS + LOKI)
def test_own_functions_come_first_then_the_shared_tools(trees: dict[str, Path], agent: str) -> None:
    with executor(trees, agent) as ex:
        names = [tool.name for tool in ex.tools()]
    own = {
        "ledger_sh": ["add_entry", "show_env", "total"],
        "ledger_py": ["add_entry", "show_env", "total"],
        "ledger_js": ["add_entry", "show_env", "total"],
        "tally_sh": ["count_batch", "show_env"],
        "tally_py": ["count_batch", "show_env", "countby"],
        "tally_ts": ["count_batch", "show_env", "countby"],
    }[agent]
    shared = [] if agent == "ledger_js" else ["greet"]  # ledger_js has no tools.txt
    assert names == own + shared
    with executor(trees, agent, agent_tools_only=True) as ex:
        assert [tool.name for tool in ex.tools()] == own


@pytest.mark.parametrize("agent", LLM_FUNCTIONS + LOKI)
def test_every_runner_variable_is_seen_inside_the_tool(trees: dict[str, Path], agent: str) -> None:
    root = trees[LAYOUT[agent]]
    with executor(trees, agent) as ex:
        result = ex.call("show_env", "{ }")
    assert result.ok, result
    seen = dict(line.split("=", 1) for line in result.output.splitlines())
    # agents/<a>/bin first (both projects), then llm-functions' bin/ (aichat), each where it exists, then the caller's PATH;
    # an interpreter's launcher may put its own directory in front (pyenv's shims do): those are left out
    bins = [root / "agents" / agent / "bin", *([root / "bin"] if LAYOUT[agent] == "llm-functions" else [])]
    expected_path = [*(str(b) for b in bins if b.is_dir()), *os.environ["PATH"].split(os.pathsep)]
    path = seen.pop("PATH").split(os.pathsep)
    assert [p for p in path if p in expected_path] == expected_path
    variables = (
        {"LLM_AGENT_VAR_OWNER": "Ann", "LLM_AGENT_VAR_CURRENCY": "EUR"}
        if LAYOUT[agent] == "llm-functions"
        else {"LLM_AGENT_VAR_TEAM": "Blue", "LLM_AGENT_VAR_UNIT": "items"}
    )
    own_env = (root / "agents" / agent / ".env").is_file()
    assert seen == {
        "LLM_AGENT_NAME": agent,
        "LLM_AGENT_FUNC": "show_env",
        "LLM_AGENT_ROOT_DIR": str(root / "agents" / agent),
        "LLM_AGENT_CACHE_DIR": str(root / "cache" / agent),
        "LLM_ROOT_DIR": str(root),
        "LLM_AGENT_RAW_JSON": "{ }",
        **variables,
        "ROOT_ENV": "from-root",
        "AGENT_ENV": "from-agent" if own_env else "",
        "SHARED_ENV": "agent" if own_env else "root",
    }


def test_the_environment_wins_over_env_files(trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARED_ENV", "process")
    with executor(trees, "ledger_sh") as ex:
        seen = dict(line.split("=", 1) for line in ex.call("show_env", {}).output.splitlines())
    assert seen["SHARED_ENV"] == "process"


EXPECTED_ENTRY = {
    "bash": "item=-x=y\namount=250\ncategory=food\ntags=a b,c\nrefund=1\nmode=strict\n",
    "python": {"item": "-x=y", "amount": 250, "category": "food", "tags": ["a", "b,c"], "refund": True},
    "javascript": {"item": "-x=y", "amount": 250, "category": "food", "tags": ["a", "b,c"], "refund": True},
}


@pytest.mark.parametrize("agent", LLM_FUNCTIONS)
def test_a_function_gets_its_arguments(trees: dict[str, Path], agent: str) -> None:
    language = LANGUAGE[agent.rsplit("_", 1)[1]]
    key = "tag" if language == "bash" else "tags"
    arguments = {"item": "-x=y", "amount": 250, "category": "food", key: ["a", "b,c"], "refund": True}
    with executor(trees, agent) as ex:
        result = ex.call("add_entry", arguments)
    assert result.ok, result
    expected = EXPECTED_ENTRY[language]
    assert (result.output if language == "bash" else json.loads(result.output)) == expected


@pytest.mark.parametrize("agent", LOKI)
def test_a_loki_function_gets_its_arguments(trees: dict[str, Path], agent: str) -> None:
    key = "note" if agent == "tally_sh" else "notes"
    arguments = {"label": "--crate=1", "size": 3, "weight": 1.5, "kind": "used", key: ["x"], "rush": True}
    with executor(trees, agent) as ex:
        result = ex.call("count_batch", arguments)
    assert result.ok, result
    if agent == "tally_sh":
        assert result.output == "label=--crate=1\nsize=3\nweight=1.5\nkind=used\nnotes=x\nrush=1\n"
    else:
        assert json.loads(result.output) == {**arguments, "notes": ["x"]}


@pytest.mark.parametrize("agent", ["ledger_sh", "ledger_py", "tally_sh", "tally_py", "tally_ts"])
def test_shared_tools_run_with_the_agents_variables(trees: dict[str, Path], agent: str) -> None:
    with executor(trees, agent) as ex:
        result = ex.call("greet", {"who": "Eve"})
    assert result.ok, result
    root = trees[LAYOUT[agent]]
    if LAYOUT[agent] == "llm-functions":  # run as bin/greet runs it: a tool of the checkout
        assert result.output == f"hello Eve (owner Ann)\nroot {root}\ncache {root / 'cache' / 'greet'}\nagent none\n"
        assert (root / "cache" / "greet").is_dir()
    else:  # Loki runs an agent's global tools from the agent's folder
        folder = root / "agents" / agent
        assert result.output == f"hello Eve (owner Blue)\nroot {folder}\ncache {folder / 'cache' / 'greet'}\nagent none\n"


def test_variables_come_from_the_caller_the_environment_the_config_or_the_default(
    trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def currency(**options: Any) -> str:
        with executor(trees, "ledger_py", **options) as ex:
            return ex.call("total", {}).output

    assert currency() == "total: 0 EUR\n"  # the definition's default
    config = config_of(trees, "ledger_py")
    config.write_text(config.read_text() + "agent_variables:\n  ledger_py:\n    currency: GBP\n")
    assert currency() == "total: 0 GBP\n"
    monkeypatch.setenv("LLM_AGENT_VAR_CURRENCY", "CHF")
    assert currency() == "total: 0 CHF\n"
    assert currency(variables={"owner": "Ann", "currency": "USD"}) == "total: 0 USD\n"


@pytest.mark.parametrize("agent", LLM_FUNCTIONS + LOKI)
def test_a_variable_without_value_or_default_is_refused_by_name(trees: dict[str, Path], agent: str) -> None:
    name, _ = NEEDED[LAYOUT[agent]]
    with Executor(config_of(trees, agent), agent=agent) as ex:
        result = ex.call("show_env", {})
        with pytest.raises(Exception) as refused:
            ex.instructions()
    assert (result.ok, result.status, result.reason, result.exit_code) == (False, "refused", "precondition", 2)
    definition = "index.yaml" if LAYOUT[agent] == "llm-functions" else "config.yaml"
    description = "Whose ledger this is" if name == "owner" else "The team being counted"
    assert result.error == (
        f"agent {agent!r} needs a value for the variable: {name} ({description}); pass --var {name}=VALUE, "
        f"set LLM_AGENT_VAR_{name.upper()}, or give it a default in {trees[LAYOUT[agent]] / 'agents' / agent / definition}"
    )
    assert str(refused.value) == result.error


INSTRUCTIONS = {
    "ledger_sh": "You keep the ledger of Ann, in EUR.\n",  # dynamic: _instructions ran
    "ledger_py": "You keep the ledger of Ann in EUR; unknown stays {{unknown}}.\n<tools>\n"
    "1. add_entry: Add an expense to the ledger.\n2. show_env: Report what the ledger's functions see of their environment.\n"
    "3. total: Total of the ledger\n4. greet: Greet someone by name.\n</tools>\nos: linux\n",
    "ledger_js": "You keep the ledger of Ann in EUR.",
    "tally_sh": "You count items for team Blue.\n",
    "tally_py": "You count items for team Blue.\nTools:\n1. count_batch: Count a batch of things.\n"
    "2. show_env: Report what the tally's functions see of their environment.\n3. countby: Count by keys.\n"
    "4. greet: Greet someone by name.\n",
    "tally_ts": "You count items for team Blue.\nTools:\n1. count_batch: Count a batch of things.\n"
    "2. show_env: Report what the tally's functions see of their environment.\n3. countby: Count by keys.\n"
    "4. greet: Greet someone by name.\n",
}


@pytest.mark.parametrize("agent", LLM_FUNCTIONS + LOKI)
def test_instructions_are_filled_in_and_dynamic_ones_run(trees: dict[str, Path], agent: str) -> None:
    if sys.platform != "linux" and agent == "ledger_py":
        pytest.skip("the fixture's instructions name the OS")
    with executor(trees, agent) as ex:
        assert ex.instructions() == INSTRUCTIONS[agent]


def test_failing_dynamic_instructions_say_why(trees: dict[str, Path]) -> None:
    tools = trees["llm-functions"] / "agents" / "ledger_sh" / "tools.sh"
    tools.write_text(tools.read_text().replace("_instructions() {\n", "_instructions() {\n    echo 'no ledger' >&2; exit 3\n"))
    with executor(trees, "ledger_sh") as ex, pytest.raises(InstructionsFailed) as failed:
        ex.instructions()
    assert str(failed.value) == "ledger_sh's _instructions failed: Tool call '_instructions' exited with code 3: no ledger"


def test_unknown_agents_and_variables_are_refused(trees: dict[str, Path]) -> None:
    config = config_of(trees, "ledger_sh")
    with pytest.raises(UnknownAgent) as unknown:
        Executor(config, agent="ledger_shh")
    agents = trees["llm-functions"] / "agents"
    assert (
        str(unknown.value)
        == f"unknown agent 'ledger_shh'; did you mean 'ledger_sh'?; agents in {agents}: ledger_js, ledger_py, ledger_sh"
    )
    with pytest.raises(BadRequest) as variable:
        Executor(config, agent="ledger_sh", variables={"ownr": "x"})
    assert str(variable.value) == "agent 'ledger_sh' has no variable 'ownr'; did you mean 'owner'?; it has owner, currency"
    with pytest.raises(BadRequest) as lone:
        Executor(config, variables={"owner": "x"})
    assert str(lone.value) == "variables are given to an agent's functions: name the agent too (agent=NAME, --agent NAME)"


def test_a_broken_definition_names_the_file_and_key(trees: dict[str, Path]) -> None:
    definition = trees["loki"] / "agents" / "tally_sh" / "config.yaml"
    definition.write_text(definition.read_text().replace("global_tools:\n  - greet.sh", "global_tools: greet.sh"))
    with pytest.raises(ConfigError) as broken:
        Executor(config_of(trees, "tally_sh"), agent="tally_sh")
    assert str(broken.value) == f"{definition}: key 'global_tools': expected a list of tool file names, got 'greet.sh'"


def test_agents_dir_in_config(trees: dict[str, Path], tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    shutil.move(trees["loki"] / "agents", moved)
    config = config_of(trees, "tally_py")
    with pytest.raises(UnknownAgent):
        Executor(config, agent="tally_py")
    config.write_text(config.read_text() + f"agents_dir: {moved}\n")
    with Executor(config, agent="tally_py", variables={"team": "Blue"}) as ex:
        assert [t.name for t in ex.tools()] == ["count_batch", "show_env", "countby", "greet"]
        seen = dict(line.split("=", 1) for line in ex.call("show_env", {}).output.splitlines())
    assert seen["LLM_AGENT_ROOT_DIR"] == str(moved / "tally_py")
    assert seen["LLM_ROOT_DIR"] == str(tmp_path)  # the folder holding agents/ (here: elsewhere/)


def test_the_agent_catalog_is_kept_and_rebuilt_on_an_edit(trees: dict[str, Path]) -> None:
    with executor(trees, "ledger_py") as ex:
        assert ex.build().compiled == 2  # the tools file and the shared tool
        assert ex.build().compiled == 0
        tools = trees["llm-functions"] / "agents" / "ledger_py" / "tools.py"
        tools.write_text(tools.read_text() + '\n\ndef audit():\n    """Audit the ledger."""\n    return "ok"\n')
        assert [t.name for t in ex.tools()][-2:] == ["audit", "greet"]
        assert ex.call("audit", {}).output == "ok"
    with Executor(config_of(trees, "ledger_py")) as plain:  # the agent's catalog is its own
        assert [t.name for t in plain.tools()] == ["greet"]


def test_a_tools_file_that_declares_nothing_is_a_build_error(trees: dict[str, Path]) -> None:
    tools = trees["llm-functions"] / "agents" / "ledger_js" / "tools.js"
    working = tools.read_text()
    tools.write_text("exports.helper = function () { return 1; };\n")
    problem = (
        f"{tools}:1:1: this agent tools file declares no function a model can call\n"
        "  hint: give each exported function a /** Description */ JSDoc block right above it"
    )
    with executor(trees, "ledger_js") as ex:
        report = ex.build()
        assert (report.problems, ex.tools()) == ([problem], [])
        result = ex.call("add_entry", {})
        assert (result.status, result.reason) == ("refused", "unknown_tool")
        tools.write_text(working)
        assert [t.name for t in ex.tools()] == ["add_entry", "show_env", "total"]
        tools.write_text("exports.helper = function () { return 1; };\n")
        report = ex.build()  # broken by an edit: the build says why, and the last declarations that built are still served
        assert report.problems == [problem]
        assert [t.name for t in ex.tools()] == ["add_entry", "show_env", "total"]
        result = ex.call("total", {})  # the text of the version that built, as for any tool whose edit broke it
    assert (result.ok, result.output) == (True, "total: 0 EUR\n")
    assert result.notes == (f"total: the file no longer builds ({problem.splitlines()[0]}); ran its last good version",)


# --- the command line -------------------------------------------------------------------------


def test_cli_list_run_declarations_instructions(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config = str(config_of(trees, "ledger_sh"))
    agent = ["--config", config, "--agent", "ledger_sh", "--var", "owner=Ann"]
    status, out, err = cli(capsys, *agent, "list")
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "add_entry  bash        Add an expense to the ledger.  (unconfined: declares no sandbox policy)",
        "show_env   bash        Report what the ledger's functions see of their environment.  (unconfined: declares no sandbox policy)",
        "total      bash        Total of the ledger  (unconfined: declares no sandbox policy)",
        "greet      bash        Greet someone by name.  (unconfined: declares no sandbox policy)",
    ]
    assert cli(capsys, *agent, "run", "total", "{}") == (0, "total: 0 EUR\n", "")
    assert cli(capsys, "run", "total", "{}", *agent[:2], "--agent", "ledger_sh", "--var", "currency=JPY", "--var", "owner=A")[
        :2
    ] == (
        0,
        "total: 0 JPY\n",
    )
    status, out, err = cli(capsys, *agent, "declarations", "--format", "openai")
    assert status == 0
    assert [d["function"]["name"] for d in json.loads(out)] == ["add_entry", "show_env", "total", "greet"]
    assert cli(capsys, *agent, "instructions") == (0, "You keep the ledger of Ann, in EUR.\n", "")
    # the name list shows without --agent runs the agent's function too
    assert cli(capsys, "--config", config, "run", "ledger_sh:total", "{}", "--var", "owner=Ann") == (0, "total: 0 EUR\n", "")


def test_cli_refusals(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config = str(config_of(trees, "ledger_sh"))
    status, out, err = cli(capsys, "--config", config, "--agent", "ledger_sh", "run", "total", "{}")
    assert (status, out) == (2, "")
    assert err.startswith("toolexec: agent 'ledger_sh' needs a value for the variable: owner (Whose ledger this is)")
    assert cli(capsys, "--config", config, "instructions") == (
        2,
        "",
        "toolexec: instructions belong to an agent: name one with --agent NAME\n",
    )
    assert cli(capsys, "--config", config, "--agent", "ledger_sh", "--var", "owner", "list") == (
        2,
        "",
        "toolexec: --var takes NAME=VALUE, got 'owner'; write --var owner=alice\n",
    )
    status, _, err = cli(capsys, "--config", config, "--agent", "nobody", "list")
    assert (status, err.splitlines()[0].split(";")[0]) == (2, "toolexec: unknown agent 'nobody'")


def test_cli_compile_reads_an_agents_tools_file(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    tools = trees["llm-functions"] / "agents" / "ledger_sh" / "tools.sh"
    status, out, err = cli(capsys, "compile", str(tools))
    assert (status, err) == (0, "")
    assert json.dumps(json.loads(out)) == json.dumps([d for d in golden("ledger_sh") if d["name"] != "greet"])


def test_cli_in_a_child_process(trees: dict[str, Path]) -> None:
    done = toolexec(
        "--agent",
        "tally_sh",
        "--var",
        "team=Red",
        "run",
        "show_env",
        "{}",
        cwd=trees["loki"],
        env={"TOOLEXEC_CONFIG": str(config_of(trees, "tally_sh"))},
    )
    assert done.returncode == 0, done.stderr
    assert "LLM_AGENT_VAR_TEAM=Red\n" in done.stdout


# --- MCP --------------------------------------------------------------------------------------


def test_mcp_serves_an_agent_with_its_instructions(trees: dict[str, Path]) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    config = str(config_of(trees, "ledger_sh"))

    async def scenario(*extra: str) -> tuple[str | None, list[str], str]:
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "toolexec",
                "--config",
                config,
                "--agent",
                "ledger_sh",
                "--var",
                "owner=Ann",
                "mcp",
                "--no-reload",
                *extra,
            ],
            env=dict(os.environ),
            cwd=str(trees["llm-functions"]),
        )
        async with Client(stdio_client(params, errlog=sys.stderr)) as client:
            listed = await client.list_tools()
            called = await client.call_tool("add_entry", {"item": "tea", "amount": 3})
            text = called.content[0].text if called.content else ""
            return client.instructions, [t.name for t in listed.tools], text

    instructions, names, text = anyio.run(scenario)
    assert instructions == "You keep the ledger of Ann, in EUR.\n"
    assert names == ["add_entry", "show_env", "total", "greet"]
    assert text == "item=tea\namount=3\ncategory=\ntags=\nrefund=0\nmode=strict\n"
    _, names, _ = anyio.run(scenario, "--agent-tools-only")
    assert names == ["add_entry", "show_env", "total"]


def test_cli_list_without_agent_names_agent_functions(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = cli(capsys, "--config", str(config_of(trees, "tally_sh")), "list")
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "greet                 bash        Greet someone by name.  (unconfined: declares no sandbox policy)",
        "tally_py:count_batch  python      Count a batch of things.",
        "tally_py:show_env     python      Report what the tally's functions see of their environment.",
        "tally_py:countby      python      Count by keys.",
        "tally_sh:count_batch  bash        Count a batch of things.",
        "tally_sh:show_env     bash        Report what the tally's functions see of their environment.",
        "tally_ts:count_batch  typescript  Count a batch of things.",
        "tally_ts:show_env     typescript  Report what the tally's functions see of their environment.",
        "tally_ts:countby      typescript  Count by keys.",
    ]
    definition = trees["loki"] / "agents" / "tally_py" / "config.yaml"
    definition.write_text("variables: 3\n")
    status, out, _ = cli(capsys, "--config", str(config_of(trees, "tally_sh")), "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["tally_py"] == {
        "name": "tally_py",
        "language": "agent",
        "description": None,
        "source": None,
        "error": f"{definition}: key 'variables': expected a list of variables (name, description, default), got 3",
        "title": None,
        "summary": None,
        "tags": [],
        "annotations": None,
        "agent": "tally_py",
        "enabled": True,
        "enabled_why": "a function of agent tally_py (toolexec --agent tally_py)",
    }
    assert rows["tally_sh:show_env"]["agent"] == "tally_sh"


def test_cli_check_an_agents_tools_file(trees: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    tools = trees["llm-functions"] / "agents" / "ledger_py" / "tools.py"
    tools.write_text(tools.read_text() + "\n\ndef undocumented(x: str):\n    return x\n")
    status, out, err = cli(capsys, "check", str(tools))
    assert (status, err) == (0, "checked 1 file(s): 0 error(s), 1 warning(s)\n")
    line = tools.read_text().splitlines().index("def undocumented(x: str):") + 1
    assert out == (
        f"{tools}:{line}:1: warning: function 'undocumented' has no docstring description: not declared (as llm-functions' "
        "generator)\n"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("  - name: owner\n", "key 'variables[0]': expected a name of letters, digits, '_' and '-', got 'own=er'"),
        (
            "    default: EUR\n",
            "key 'variables[1].default': a default may not contain a NUL character (it becomes an environment variable)",
        ),
    ],
)
def test_hostile_definitions_are_refused_by_key(trees: dict[str, Path], edit: str, message: str) -> None:
    definition = trees["llm-functions"] / "agents" / "ledger_py" / "index.yaml"
    replacement = {"  - name: owner\n": "  - name: own=er\n", "    default: EUR\n": '    default: "E\\0R"\n'}[edit]
    definition.write_text(definition.read_text().replace(edit, replacement))
    with pytest.raises(ConfigError) as refused:
        Executor(config_of(trees, "ledger_py"), agent="ledger_py")
    assert str(refused.value) == f"{definition}: {message}"


def test_hostile_values_and_names(trees: dict[str, Path]) -> None:
    config = config_of(trees, "ledger_py")
    with pytest.raises(BadRequest) as nul:
        Executor(config, agent="ledger_py", variables={"owner": "A\0nn"})
    assert str(nul.value) == "the value of agent variable 'owner' must be text without NUL characters, got 'A\\x00nn'"
    with pytest.raises(BadRequest):
        Executor(config, agent="ledger_py", variables={"owner": 3})  # type: ignore[dict-item]
    for name in ("../llm-functions", "ledger_py/../ledger_sh", ".", "", "agents"):
        with pytest.raises(UnknownAgent):
            Executor(config, agent=name)
    shared = trees["llm-functions"] / "agents" / "ledger_py" / "tools.txt"
    shared.write_text("../../etc/passwd\n")
    with pytest.raises(ConfigError) as escape:
        Executor(config, agent="ledger_py")
    assert str(escape.value) == f"{shared}: '../../etc/passwd' is not a file name in {trees['llm-functions'] / 'tools'}"


def test_the_tools_file_each_project_would_run(trees: dict[str, Path]) -> None:
    """With several tools files, llm-functions runs tools.sh, then tools.js, then tools.py (its LANG_CMDS order)."""
    agent = trees["llm-functions"] / "agents" / "ledger_js"
    shutil.copy(trees["llm-functions"] / "agents" / "ledger_py" / "tools.py", agent / "tools.py")
    with executor(trees, "ledger_js") as ex:
        assert {t.source for t in ex.tools()} == {str(agent / "tools.js")}


def test_the_api_runs_agent_function_names_as_list_shows_them(trees: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """``Executor.call("AGENT:FUNCTION")`` (and ``acall``, ``call_many``, a toolkit) without ``agent=``: as ``--agent`` runs it."""
    monkeypatch.setenv("LLM_AGENT_VAR_TEAM", "Blue")
    loki = trees["loki"]
    with Executor(config_of(trees, "tally_ts")) as ex:
        direct = ex.call("tally_ts:count_batch", {"label": "x", "size": 2})
        awaited = asyncio.run(ex.acall("tally_py:show_env", {}))
        many = ex.call_many(
            [
                ToolCall(name="tally_sh:count_batch", arguments={"label": "b", "size": 1}),
                ToolCall(name="greet", arguments={"who": "Eve"}),
            ]
        )
        unknown_function = ex.call("tally_py:count", {})
        unknown_agent = ex.call("tally_zz:count_batch", {})
        invalid = ex.call("tally_py:count_batch", {"size": "x"})
    assert (direct.ok, json.loads(direct.output)) == (True, {"label": "x", "size": 2, "kind": "new", "notes": [], "rush": False})
    seen = dict(line.split("=", 1) for line in awaited.output.splitlines())
    assert (seen["LLM_AGENT_NAME"], seen["LLM_AGENT_FUNC"], seen["LLM_AGENT_VAR_TEAM"]) == ("tally_py", "show_env", "Blue")
    assert seen["LLM_AGENT_ROOT_DIR"] == str(loki / "agents" / "tally_py")
    assert [(r.ok, r.output) for r in many] == [
        (True, "label=b\nsize=1\nweight=\nkind=\nnotes=\nrush=0\n"),
        (
            True,
            f"hello Eve (owner Blue)\nroot {loki / 'functions'}\ncache {loki / 'functions' / 'cache' / 'greet'}\nagent none\n",
        ),
    ]
    assert (unknown_function.status, unknown_function.reason, unknown_function.error) == (
        "refused",
        "unknown_tool",
        "unknown tool 'tally_py:count': agent 'tally_py' has no function 'count'; did you mean 'countby'?; "
        "it has count_batch, show_env, countby, greet",
    )
    assert (unknown_agent.reason, unknown_agent.error) == ("unknown_tool", "unknown tool 'tally_zz:count_batch'")
    assert (invalid.reason, invalid.error) == (
        "invalid_arguments",
        "invalid arguments for tool 'count_batch':\n- missing required parameter 'label' (a string)\n"
        "- parameter 'size': expected an integer, got a string \"x\"",
    )
