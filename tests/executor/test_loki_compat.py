"""Tool folders written for Loki, Coyote and llm-functions, run end to end with real interpreters.

The scripts here are our own, written in those projects' styles: prompt helpers sourced from
``$LLM_PROMPT_UTILS_FILE``, ``LLM_TOOL_RAW_JSON``, values returned after writing ``LLM_OUTPUT``,
argc-built scripts, a ``tsx`` shebang, the values models send, Loki configs and llm-functions
checkouts with ``tools.txt``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, Project
from toolexec.runtimes.environment import PROMPT_UTILS

CASES = REPO / "tests" / "compilers" / "cases" / "bash"

PATCH_TOOL = r"""#!/usr/bin/env bash
set -e
# @describe Apply a unified diff to a file.
# @option --path! The file to patch.
# @option --contents! The patch. Example:
#   --- a/notes.txt
#   +++ b/notes.txt
# \@@ ... @@
#    keep
#   -old
#   +new
source "$LLM_PROMPT_UTILS_FILE"

main() {
  local patched
  patched="$(patch_file "$argc_path" <(printf '%s' "$argc_contents"))"
  guard_path "$argc_path" "Patch '$argc_path'?"
  guard_operation "Apply the changes?"
  printf '%s\n' "$patched" >"$argc_path"
  info "patched $argc_path" >>"$LLM_OUTPUT"
}

eval "$(argc --argc-eval "$0" "$@")"
"""


def test_a_loki_patch_tool_runs_with_the_shipped_prompt_helpers(project: Project, tmp_path: Path) -> None:
    project.tool("fs_patch.sh", PATCH_TOOL)
    target = tmp_path / "notes.txt"
    target.write_text("first\nkeep\nold\nlast\n")
    patch = "--- a/notes.txt\n+++ b/notes.txt\n@@ -2,2 +2,2 @@\n keep\n-old\n+new\n"
    result = project.executor().call("fs_patch", {"path": str(target), "contents": patch})
    assert (result.ok, result.output, result.stderr) == (True, f"INFO: patched {target}\n", "")
    assert target.read_text() == "first\nkeep\nnew\nlast\n"
    declared = project.executor().tools()[0].parameters["properties"]["contents"]["description"]
    assert declared == "The patch. Example:\n  --- a/notes.txt\n  +++ b/notes.txt\n@@ ... @@\n   keep\n  -old\n  +new"


def test_a_patch_that_does_not_apply_fails_the_call(project: Project, tmp_path: Path) -> None:
    project.tool("fs_patch.sh", PATCH_TOOL)
    target = tmp_path / "notes.txt"
    target.write_text("first\n")
    executor = project.executor()
    missing = executor.call("fs_patch", {"path": str(target), "contents": "@@ -1 +1 @@\n-absent\n+new\n"})
    assert (missing.ok, missing.stderr, missing.error) == (
        False,
        "error: unable to apply patch\n",
        "Tool call 'fs_patch' exited with code 1: error: unable to apply patch",
    )
    no_patch = executor.call("fs_patch", {"path": str(target), "contents": "just text\n"})
    assert no_patch.stderr == "error: no patch\n"
    assert target.read_text() == "first\n"


def test_the_users_own_prompt_utils_win(project: Project) -> None:
    utils = project.root / "functions" / "utils"
    utils.mkdir()
    (utils / "prompt-utils.sh").write_text('info() { printf "mine: %s\\n" "$1"; }\n')
    project.tool(
        "hello.sh",
        '# @describe Say hello.\nsource "$LLM_PROMPT_UTILS_FILE"\nmain() { info hello >>"$LLM_OUTPUT"; }\n',
    )
    assert project.executor().call("hello", {}).output == "mine: hello\n"


def _on_a_terminal(script: str, answer: bytes | None, env: dict[str, str]) -> tuple[int, str]:
    """Run ``script`` under bash with a controlling terminal, typing ``answer`` once it asks."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        os.execve(shutil.which("bash") or "/bin/bash", ["bash", "-c", script], env)
    seen = b""
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
            if not ready:
                break
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child has gone: the terminal is closed
                break
            if not chunk:
                break
            seen += chunk
            if answer is not None and b"(y/N)" in seen:
                os.write(fd, answer)
                answer = None
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), seen.decode("utf-8", "replace").replace("\r\n", "\n")


@pytest.mark.parametrize(
    ("answer", "auto", "code", "says"),
    [
        (b"y", "", 0, "went"),
        (b"n", "", 1, "Operation aborted!"),
        (None, "1", 0, "went"),  # AUTO_CONFIRM: nothing is asked
    ],
)
def test_confirmations_ask_on_the_controlling_terminal(answer: bytes | None, auto: str, code: int, says: str) -> None:
    env = {"PATH": os.environ["PATH"], "TERM": "dumb", "HOME": os.environ.get("HOME", "/")}
    if auto:
        env["AUTO_CONFIRM"] = auto
    script = f'source "{PROMPT_UTILS}"; guard_operation "Go on?"; echo went'
    status, seen = _on_a_terminal(script, answer, env)
    assert status == code, seen
    assert says in seen
    assert ("Go on? (y/N)" in seen) == (not auto)


def test_without_a_terminal_confirmations_proceed_and_prompts_fail() -> None:
    script = f'source "{PROMPT_UTILS}"; guard_operation; echo "confirm=$(confirm Sure?)"; input Name? || echo "no input"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, start_new_session=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "confirm=1\nno input\n", "")


RAW_TOOLS = {
    "raw_py.py": 'import os\n\ndef run(offset: str = "") -> str:\n    """Raw."""\n    return os.environ["LLM_TOOL_RAW_JSON"]\n',
    "raw_sh.sh": '# @describe Raw.\n# @option --offset\nmain() { printf %s "$LLM_TOOL_RAW_JSON" >>"$LLM_OUTPUT"; }\n',
    "raw_js.js": (
        "/**\n * Raw.\n * @typedef {Object} Args\n * @property {string} [offset]\n * @param {Args} args\n */\n"
        "exports.run = function (args) {\n  return process.env.LLM_TOOL_RAW_JSON;\n};\n"
    ),
}


@pytest.mark.parametrize("file", sorted(RAW_TOOLS))
def test_raw_json_arguments_for_every_language(project: Project, file: str) -> None:
    project.tool(file, RAW_TOOLS[file])
    executor = project.executor()
    name = file.rsplit(".", 1)[0]
    assert executor.call(name, '{ "offset" : 2 }').output == '{ "offset" : 2 }'  # as sent, byte for byte
    assert executor.call(name, {"offset": "x"}).output == '{"offset":"x"}'


WRITE_AND_RETURN = {
    "weather_py.py": (
        "import os\n\ndef run(city: str, quiet: bool = False):\n"
        '    """Weather."""\n'
        '    with open(os.environ["LLM_OUTPUT"], "a") as out:\n'
        '        out.write(f"{city}: sunny")\n'
        '    return None if quiet else f"{city}: sunny"\n'
    ),
    "weather_js.js": (
        'const fs = require("node:fs");\n\n'
        "/**\n * Weather.\n * @typedef {Object} Args\n * @property {string} city\n * @property {boolean} [quiet]\n"
        " * @param {Args} args\n */\n"
        "exports.run = function ({ city, quiet }) {\n"
        "  fs.appendFileSync(process.env.LLM_OUTPUT, `${city}: sunny`);\n"
        "  return quiet ? undefined : `${city}: sunny`;\n};\n"
    ),
}


@pytest.mark.parametrize("file", sorted(WRITE_AND_RETURN))
def test_a_returned_value_replaces_what_the_tool_wrote(project: Project, file: str) -> None:
    project.tool(file, WRITE_AND_RETURN[file])
    executor = project.executor()
    name = file.rsplit(".", 1)[0]
    assert executor.call(name, {"city": "Oslo"}).output == "Oslo: sunny"
    assert executor.call(name, {"city": "Oslo", "quiet": True}).output == "Oslo: sunny"  # None keeps what was written


def test_an_argc_built_script_runs_once_with_exact_arguments(project: Project) -> None:
    project.tool("greet.sh", (CASES / "argc_built.sh").read_text())
    executor = project.executor()
    result = executor.call(
        "greet",
        {"name": "a b=c\n$(x)", "tag": ["-t", "k=v", "plain"], "loud": True, "words": ["-x", "a=b", ""]},
    )
    assert (result.ok, result.stderr) == (True, "")
    assert result.output == "hello a b=c\n$(x) tags=-t k=v plain loud=1 words=-x a=b \n"
    assert executor.call("greet", {"name": "-dash"}).output == "hello -dash tags= loud=0 words=\n"
    patch = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x=1\n+x=2\n"  # fs_patch's patches and fs_write's YAML lists
    assert executor.call("greet", {"name": patch, "tag": ["- a=b"]}).output == f"hello {patch} tags=- a=b loud=0 words=\n"
    refused = executor.call("greet", {"name": "-a=b"})
    assert (refused.status, refused.error) == (
        "refused",
        "parameter 'name' of tool 'greet': '-a=b' cannot reach the tool's own argc parser (an argc-built script): "
        "it starts with '-' and has '=' with no space before the first '=': the parser takes such a word for an "
        "option, and --opt=VALUE keeps only the text after the last '='",
    )


def test_a_missing_tsx_shebang_falls_back_to_toolexecs_typescript(project: Project) -> None:
    project.tool(
        "hi.ts",
        "#!/usr/bin/env ts-node\n/**\n * Greet.\n * @param name Who.\n */\n"
        "export function run(name: string): string {\n  return `hi ${name}`;\n}\n",
    )
    project.tool(
        "other.ts", "#!/usr/bin/env no-such-runner\n/**\n * Other.\n */\nexport function run(): string {\n  return 'x';\n}\n"
    )
    executor = project.executor()
    result = executor.call("hi", {"name": "Ann"})
    assert (result.ok, result.output, result.notes) == (
        True,
        "hi Ann",
        ("the shebang names ts-node, which is not installed; ran with toolexec's own TypeScript runtime instead",),
    )
    other = executor.call("other", {})
    assert (other.status, other.reason) == ("unavailable", "unavailable")
    assert other.error is not None and other.error.startswith("interpreter 'no-such-runner' not found")


OFFSET_TOOL = """# @describe Read part of a file.
# @option --offset=0 Where to start.
# @option --mode Which mode.
# @option --count <INT> How many.
# @option --names* Names.
main() { printf '%s|%s|%s|%s' "$argc_offset" "${argc_mode-unset}" "${argc_count-unset}" "${argc_names[*]-}" >>"$LLM_OUTPUT"; }
"""


def test_what_models_send_is_accepted_as_loki_accepts_it(project: Project) -> None:
    project.tool("read_part.sh", OFFSET_TOOL)
    project.tool(
        "echo_py.py",
        'def run(text: str, note: str = "none") -> str:\n    """Echo."""\n    return f"{text!r} {note!r}"\n',
    )
    executor = project.executor()
    assert executor.call("read_part", {"offset": 2, "mode": True}).output == "2|true|unset|"
    assert executor.call("read_part", {"offset": 2.5, "names": [1, False, "x"]}).output == "2.5|unset|unset|1 false x"
    assert executor.call("read_part", {"offset": None, "mode": None, "count": None}).output == "0|unset|unset|"
    assert executor.call("echo_py", '{"text": 7, "note": null}').output == "'7' 'none'"
    wrong = executor.call("read_part", {"count": "3"})
    assert (wrong.status, wrong.error) == (
        "refused",
        "invalid arguments for tool 'read_part':\n- parameter 'count': expected an integer, got a string \"3\"",
    )
    required_null = executor.call("echo_py", {"text": None})
    assert required_null.error == "invalid arguments for tool 'echo_py':\n- parameter 'text': expected a string, got null"


LOKI_CONFIG = """model: openai:gpt-4o
temperature: null
stream: true
function_calling: true
mapping_tools:
  fs: 'fs_cat'
enabled_tools: fs
visible_tools:
  - fs_cat.sh
#  - fs_rm.sh
clients:
  - type: openai
    api_key: '{{OPENAI_API_KEY}}'
rag_top_k: 5
"""


def test_a_loki_config_works_as_it_is(tmp_path: Path) -> None:
    from toolexec import Executor
    from toolexec.cli import main
    from toolexec.errors import ConfigError

    loki = tmp_path / "loki"
    (loki / "functions" / "tools").mkdir(parents=True)
    (loki / "functions" / "tools" / "fs_cat.sh").write_text(
        '# @describe Print a file.\n# @option --path! The file.\nmain() { cat "$argc_path" >>"$LLM_OUTPUT"; }\n'
    )
    (tmp_path / "note.txt").write_text("hello\n")
    config = loki / "config.yaml"
    config.write_text(LOKI_CONFIG)
    executor = Executor(config)
    assert executor.config.functions_dir == loki / "functions"
    assert executor.call("fs_cat", {"path": str(tmp_path / "note.txt")}).output == "hello\n"
    assert (
        "ignored settings of Loki, Coyote and AIChat (toolexec does not use them): "
        "clients, function_calling, model, rag_top_k, stream, temperature"
    ) in executor.config.lookup
    config.write_text(LOKI_CONFIG + "frobnicate: 1\n")
    with pytest.raises(ConfigError, match="key 'frobnicate': unknown setting: neither toolexec, Loki, Coyote nor AIChat has it"):
        Executor(config)
    config.write_text(LOKI_CONFIG)
    assert main(["--config", str(config), "--verbose", "list"]) == 0


def test_the_verbose_flag_lists_the_ignored_loki_settings(tmp_path: Path) -> None:
    (tmp_path / "functions" / "tools").mkdir(parents=True)
    (tmp_path / "config.yaml").write_text("model: x\nvisible_tools: []\nenabled_tools: all\n")
    done = subprocess.run(
        [os.sys.executable, "-m", "toolexec", "--config", str(tmp_path / "config.yaml"), "--verbose", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "toolexec: config: ignored settings of Loki, Coyote and AIChat (toolexec does not use them): model\n" in done.stderr


def test_an_llm_functions_checkout_with_tools_txt(tmp_path: Path) -> None:
    from toolexec import Executor

    checkout = tmp_path / "llm-functions"
    (checkout / "tools").mkdir(parents=True)
    (checkout / "utils").mkdir()
    (checkout / "scripts").mkdir()
    (checkout / "utils" / "greeting.sh").write_text("greeting() { printf 'hello %s' \"$1\"; }\n")
    (checkout / "scripts" / "shout.py").write_text("import sys\nprint(sys.argv[1].upper(), end='')\n")
    (checkout / "tools" / "greet.sh").write_text(
        "#!/usr/bin/env bash\nset -e\n# @describe Greet.\n# @option --name! Who.\n"
        'source "$LLM_ROOT_DIR/utils/greeting.sh"\nmain() { greeting "$argc_name" >>"$LLM_OUTPUT"; }\n'
        'eval "$(argc --argc-eval "$0" "$@")"\n'
    )
    (checkout / "tools" / "shout.py").write_text(
        "import os, subprocess, sys\n\n"
        "def run(text: str) -> str:\n"
        '    """Shout."""\n'
        '    script = os.path.join(os.environ["LLM_ROOT_DIR"], "scripts", "shout.py")\n'
        "    return subprocess.run([sys.executable, script, text], capture_output=True, text=True).stdout\n"
    )
    (checkout / "tools" / "hidden.sh").write_text("# @describe Not listed.\nmain() { :; }\n")
    (checkout / "tools.txt").write_text("greet.sh\n# hidden.sh\nshout.py\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"functions_dir: {checkout}\n")
    executor = Executor(config)
    assert executor.config.visible_tools == ("greet.sh", "shout.py")
    assert [t.name for t in executor.tools()] == ["greet", "shout"]
    assert executor.call("greet", {"name": "Ann"}).output == "hello Ann"
    assert executor.call("shout", {"text": "hey"}).output == "HEY"


# A stock Loki config: the functions folder beside it, Loki's own settings, and no enabled_tools.
STOCK_LOKI = """model: openai:gpt-4o
function_calling_support: true
mcp_server_support: true
mapping_tools:
  fs: 'fs_cat,fs_ls'
visible_tools:
  - fs_cat.sh
  - execute_command.sh
{enabled}"""


def test_a_loki_config_without_enabled_tools_enables_no_tool_as_loki_does(tmp_path: Path) -> None:
    from tests.conftest import toolexec

    tools = tmp_path / "loki" / "functions" / "tools"
    tools.mkdir(parents=True)
    (tools / "fs_cat.sh").write_text('# @describe Print a file.\n# @option --path! The file.\nmain() { cat "$argc_path"; }\n')
    (tools / "execute_command.sh").write_text(
        '# @describe Run a shell command.\n# @option --command! The command.\nmain() { eval "$argc_command"; }\n'
    )
    config = tmp_path / "loki" / "config.yaml"
    for enabled in ("", "enabled_tools: null\n"):
        config.write_text(STOCK_LOKI.format(enabled=enabled))
        listed = toolexec("--config", str(config), "list")
        assert (listed.returncode, listed.stdout) == (0, "")
        assert listed.stderr == (
            "toolexec: no tool is enabled: a Loki and Coyote config with no enabled_tools enables none, as there; "
            f"name the tools under enabled_tools in {config} (or write enabled_tools: all); "
            "toolexec list --all shows the visible ones\n"
        )
        ran = toolexec("--config", str(config), "run", "execute_command", '{"command": "echo pwned"}')
        assert (ran.returncode, ran.stdout) == (2, "")
        assert ran.stderr == (
            f"toolexec: tool 'execute_command' is visible but not enabled ({config}: a Loki and Coyote config with no "
            "enabled_tools enables none, as there); add it to enabled_tools in your config.yaml\n"
        )
        offered = toolexec("--config", str(config), "declarations", "--format", "mcp")
        assert (offered.returncode, json.loads(offered.stdout)) == (0, [])
    everything = toolexec("--config", str(config), "--verbose", "list", "--all")
    none = "not enabled: a Loki and Coyote config with no enabled_tools enables none, as there"
    assert everything.stdout.splitlines() == [
        "fs_cat           bash        (not enabled) Print a file.  (unconfined: declares no sandbox policy)",
        "execute_command  bash        (not enabled) Run a shell command.  (unconfined: declares no sandbox policy)",
    ]
    assert f"toolexec: fs_cat: {none}\ntoolexec: execute_command: {none}\n" in everything.stderr
    config.write_text(STOCK_LOKI.format(enabled="enabled_tools: fs\n"))
    rows = json.loads(toolexec("--config", str(config), "list", "--all", "--json").stdout)
    assert [(row["name"], row["enabled"], row["enabled_why"]) for row in rows] == [
        ("fs_cat", True, "enabled by enabled_tools, through the mapping_tools alias 'fs'"),
        ("execute_command", False, "not enabled: not in enabled_tools"),
    ]


LOKI_PROMPT_UTILS = """red=$(tput setaf 1)
default=$(tput sgr0)
bold=$(tput bold)
info() { echo -e "${bold}INFO:${default} $1${default}"; }
"""
GUARDED_WRITE = """#!/usr/bin/env bash
set -e
# @describe Write a file, as Loki's fs_write does.
# @option --path! Where.
# @option --contents! What.
source "$LLM_ROOT_DIR/utils/prompt-utils.sh"
main() { printf '%s' "$argc_contents" >"$argc_path"; info "wrote $argc_path" >>"$LLM_OUTPUT"; }
"""


@pytest.mark.slow
def test_an_mcp_client_with_no_terminal_gets_what_the_loki_config_enables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import anyio
    import mcp_types as types
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    functions = tmp_path / "loki" / "functions"
    (functions / "tools").mkdir(parents=True)
    (functions / "utils").mkdir()
    (functions / "utils" / "prompt-utils.sh").write_text(LOKI_PROMPT_UTILS)
    (functions / "tools" / "fs_write.sh").write_text(GUARDED_WRITE)
    (functions / "tools" / "execute_command.sh").write_text(
        '# @describe Run a shell command.\n# @option --command! The command.\nmain() { eval "$argc_command"; }\n'
    )
    config = tmp_path / "loki" / "config.yaml"
    settings = "model: openai:gpt-4o\nfunction_calling_support: true\nvisible_tools: [fs_write.sh, execute_command.sh]\n"
    target = tmp_path / "post.md"
    front_matter = "---\ntitle: a=b\ntags:\n- x=1\n---\nbody\n"
    monkeypatch.delenv("TERM", raising=False)  # the SDK passes its own TERM on to the server, as a desktop client has none
    no_terminal = {name: value for name, value in os.environ.items() if name != "TERMINFO_DIRS"}

    async def listed_and_called() -> tuple[list[str], types.CallToolResult | None]:
        params = StdioServerParameters(
            command=os.sys.executable, args=["-m", "toolexec", "--config", str(config), "mcp"], env=no_terminal
        )
        async with Client(stdio_client(params)) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            if "fs_write" not in names:
                return names, None
            return names, await client.call_tool("fs_write", {"path": str(target), "contents": front_matter})

    config.write_text(settings)  # a stock Loki config: no enabled_tools, so nothing is offered
    assert anyio.run(listed_and_called) == ([], None)
    config.write_text(settings + "enabled_tools: fs_write\n")
    names, result = anyio.run(listed_and_called)
    assert names == ["fs_write"] and result is not None
    assert (result.is_error, [c.text for c in result.content if isinstance(c, types.TextContent)]) == (
        False,
        [f"INFO: wrote {target}\n"],
    )
    assert target.read_text() == front_matter
