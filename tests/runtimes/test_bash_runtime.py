"""Bash tools end to end with real bash: argc binding, hazards byte for byte, refusals before start."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Project, wrapper_interpreter
from tests.helpers import close_warm

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

ECHO = """#!/usr/bin/env bash
set -eo pipefail
# @describe Write back every value received, NUL-separated.
# @option --text! A value.
# @option --items* Many values.
# @arg rest* Positional values.
main() {
    printf '%s\\0' "$argc_text" "${#argc_items[@]}" "${argc_items[@]}" "$#" "$@" >>"$LLM_OUTPUT"
}
"""
TRAILER = 'eval "$(argc --argc-eval "$0" "$@")"\n'

HAZARDS = [
    "plain",
    'it\'s "quoted"',
    "$(touch /tmp/toolexec-pwned) ${HOME} $HOME",
    "`touch /tmp/toolexec-pwned`",
    "*",
    "line one\nline two\n\n\n",
    "a=b --x=y",
    "-n",
    "--help",
    "",
    " leading and trailing spaces ",
    "tab\tand\\backslash\\n",
    "naïve 日本語 🚀 עברית",
    "%s %d %%",
]


def echo_tool(project: Project, trailer: bool = True) -> None:
    project.tool("echo.sh", ECHO + (TRAILER if trailer else ""))


def values(output: str) -> list[str]:
    assert output.endswith("\0")
    return output[:-1].split("\0")


@pytest.mark.parametrize("trailer", [True, False], ids=["with-argc-trailer", "without-trailer"])
def test_every_hazard_arrives_byte_for_byte(project: Project, trailer: bool) -> None:
    echo_tool(project, trailer)
    executor = project.executor()
    for hazard in HAZARDS:
        result = executor.call("echo", {"text": hazard, "items": [hazard, hazard], "rest": [hazard]})
        assert result.ok, result.error
        assert values(result.output) == [hazard, "2", hazard, hazard, "1", hazard]
    assert not Path("/tmp/toolexec-pwned").exists()


def test_many_megabytes_arrive_intact(project: Project) -> None:
    echo_tool(project)
    big = ("x" * 1023 + "\n") * 8 * 1024  # 8 MiB with newlines, and a trailing one
    result = project.executor(max_output_bytes=64 << 20).call("echo", {"text": big, "items": []})
    assert result.ok, result.error
    assert values(result.output) == [big, "0", "0"]


def test_arrays_empty_one_many(project: Project) -> None:
    echo_tool(project)
    executor = project.executor()
    assert values(executor.call("echo", {"text": "t"}).output) == ["t", "0", "0"]
    assert values(executor.call("echo", {"text": "t", "items": []}).output) == ["t", "0", "0"]
    assert values(executor.call("echo", {"text": "t", "items": ["a"]}).output) == ["t", "1", "a", "0"]
    many = [str(i) for i in range(50)]
    assert values(executor.call("echo", {"text": "t", "items": many}).output) == ["t", "50", *many, "0"]


BINDINGS = """#!/usr/bin/env bash
# @describe Show how argc variables are bound.
# @flag --force Overwrite.
# @flag -q --quiet Quiet.
# @option --csv*, Comma-split values.
# @option --count=3 <INT> A literal default.
# @option --mode[=low|high] A choice default.
# @option --day=`_day` A computed default.
# @option --pick[`_picks`] Computed choices.
# @option --ratio <NUM> A number.
_day() { echo "day-from-function"; }
_picks() { printf '%s\\n' red green; }
main() {
    {
        echo "force=${argc_force-unset} quiet=${argc_quiet-unset}"
        echo "csv=${#argc_csv[@]}:${argc_csv[*]-}"
        echo "count=$argc_count mode=$argc_mode day=$argc_day pick=${argc_pick-unset} ratio=${argc_ratio-unset}"
        echo "zero=$0 fn=$argc__fn"
    } >>"$LLM_OUTPUT"
}
eval "$(argc --argc-eval "$0" "$@")"
"""


def test_flags_defaults_and_splitting(project: Project) -> None:
    project.tool("bind.sh", BINDINGS)
    executor = project.executor()
    path = project.tools / "bind.sh"
    assert executor.call("bind", {}).output == (
        f"force=unset quiet=unset\ncsv=0:\ncount=3 mode=low day=day-from-function pick=unset ratio=unset\nzero={path} fn=main\n"
    )
    assert executor.call(
        "bind", {"force": True, "quiet": False, "csv": ["a,b", "c"], "count": 7, "day": "given", "pick": "green", "ratio": 0.25}
    ).output == (f"force=1 quiet=unset\ncsv=3:a b c\ncount=7 mode=low day=given pick=green ratio=0.25\nzero={path} fn=main\n")


def test_choices_are_refused_with_the_allowed_values(project: Project) -> None:
    project.tool("bind.sh", BINDINGS)
    executor = project.executor()
    static = executor.call("bind", {"mode": "medium"})
    assert (static.status, static.exit_code) == ("refused", 2)
    assert (
        static.error == 'invalid arguments for tool \'bind\':\n- parameter \'mode\': expected one of "low", "high", got "medium"'
    )
    computed = executor.call("bind", {"pick": "blue"})
    assert (computed.ok, computed.exit_code, computed.output) == (False, 2, "")
    assert computed.stderr == "toolexec: parameter 'pick': expected one of red, green, got 'blue'\n"


GUARDED = """#!/usr/bin/env bash
# @describe Refuses to start without its environment.
# @env TOKEN! The access token.
# @env REGION=eu The region.
# @env TIER[=free|paid] The plan.
# @meta require-tools {tools}
main() {{
    touch "$LLM_TOOL_CACHE_DIR/started"
    echo "token=$TOKEN region=$REGION tier=$TIER" >>"$LLM_OUTPUT"
}}
"""


def test_env_and_required_tools_checked_before_start(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.tool("guarded.sh", GUARDED.format(tools="bash,cat"))
    project.tool("needs_tool.sh", GUARDED.format(tools="bash,surely-not-installed-xyz"))
    executor = project.executor()
    started = project.root / "functions" / "cache" / "guarded" / "started"
    refused = executor.call("guarded", {})
    assert (refused.status, refused.exit_code) == ("refused", 2)
    assert (
        refused.error
        == "tool 'guarded' needs the environment variable TOKEN (The access token.); set it in the environment or in functions/.env"
    )
    assert not started.exists()
    monkeypatch.setenv("TOKEN", "t0k")
    assert executor.call("guarded", {}).output == "token=t0k region=eu tier=free\n"
    assert started.exists()
    monkeypatch.setenv("TIER", "gold")
    assert executor.call("guarded", {}).error == "environment variable TIER must be one of free, paid, got 'gold'"
    monkeypatch.setenv("TIER", "paid")
    missing = executor.call("needs_tool", {})
    assert (missing.status, missing.error) == (
        "refused",
        "tool 'needs_tool' needs surely-not-installed-xyz, not found on PATH; install it first",
    )
    assert not (project.root / "functions" / "cache" / "needs_tool" / "started").exists()


MANY_ENV = """# @describe Needs several variables.
# @env API_KEY! The key.
# @env API_HOST!
# @env MODE[=fast|slow] The mode.
# @env COLOR[red|blue] A colour.
# @env LIMIT=10 The limit.
main() { echo "key=$API_KEY host=$API_HOST mode=$MODE limit=$LIMIT" >>"$LLM_OUTPUT"; }
"""


@pytest.mark.parametrize("built", [False, True], ids=["tags", "argc-built"])
def test_every_missing_env_is_named_at_once_and_empty_is_unset(
    project: Project, monkeypatch: pytest.MonkeyPatch, built: bool
) -> None:
    project.tool("needs.sh", MANY_ENV + (BUILT_TRAILER if built else ""))
    executor = project.executor()
    for name in ("API_KEY", "API_HOST", "MODE", "COLOR", "LIMIT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("API_HOST", "")  # argc reads an empty variable as unset
    refused = executor.call("needs", {})
    assert (refused.status, refused.exit_code, refused.error) == (
        "refused",
        2,
        "tool 'needs' needs the environment variables API_KEY (The key.), API_HOST; "
        "set them in the environment or in functions/.env",
    )
    monkeypatch.setenv("API_KEY", "k")
    monkeypatch.setenv("API_HOST", "h")
    monkeypatch.setenv("MODE", "")  # empty: the default applies, as argc does
    monkeypatch.setenv("LIMIT", "")
    assert executor.call("needs", {}).output == "key=k host=h mode=fast limit=10\n"
    monkeypatch.setenv("MODE", "warp")
    monkeypatch.setenv("COLOR", "green")
    assert executor.call("needs", {}).error == (
        "environment variable MODE must be one of fast, slow, got 'warp'; "
        "environment variable COLOR must be one of red, blue, got 'green'"
    )


# What `argc --argc-build` appends, reduced to what the environment check needs: a script that runs main.
BUILT_TRAILER = """# ARGC-BUILD {
# This block was generated by argc (https://github.com/sigoden/argc).
_argc_run() { main; }
_argc_run "$@"
# ARGC-BUILD }
"""


LOKI_STYLE_UTILS = """red=$(tput setaf 1)
default=$(tput sgr0)
bold=$(tput bold)
gray=$(tput setaf 243)
underlined=$(tput smul)
info() { echo -e "${bold}INFO:${default} $1${default}"; }
"""
TERM_TOOL = """#!/usr/bin/env bash
set -e
# @describe Colours its output with tput, as Loki's prompt helpers do.
source "$LLM_ROOT_DIR/utils/prompt-utils.sh"
main() { info "term=$TERM colors=$(tput colors) cols=$(tput cols)" >>"$LLM_OUTPUT"; }
"""


def test_without_a_terminal_type_tools_get_dumb_and_tput_succeeds_silently(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project.root / "functions" / "utils").mkdir()
    (project.root / "functions" / "utils" / "prompt-utils.sh").write_text(LOKI_STYLE_UTILS)
    project.tool("colour.sh", TERM_TOOL)
    project.tool("term_py.py", 'import os\n\ndef run() -> str:\n    """Term."""\n    return os.environ["TERM"]\n')
    executor = project.executor()
    for absent in (None, ""):  # an MCP client starts servers with no TERM, or an empty one
        if absent is None:
            monkeypatch.delenv("TERM", raising=False)
        else:
            monkeypatch.setenv("TERM", absent)
        result = executor.call("colour", {})
        assert (result.ok, result.output, result.stderr) == (True, "INFO: term=dumb colors=-1 cols=80\n", "")
        assert executor.call("term_py", {}).output == "dumb"
    monkeypatch.setenv("TERM", "xterm")  # the caller's terminal type is kept, and its colours with it
    result = executor.call("colour", {})

    def tput(*words: str) -> str:
        return subprocess.run(["tput", *words], capture_output=True, text=True, env={**os.environ, "TERM": "xterm"}).stdout

    bold, plain = tput("bold"), tput("sgr0")
    assert (bold, plain) != ("", "")
    assert result.output == f"{bold}INFO:{plain} term=xterm colors={tput('colors').strip()} cols=80{plain}\n"


def test_failure_keeps_partial_output_and_stderr(project: Project) -> None:
    project.tool(
        "partial.sh",
        "#!/usr/bin/env bash\nset -e\n# @describe Fails halfway.\nmain() {\n"
        '    echo "step 1 done" >>"$LLM_OUTPUT"\n    echo "step 2 failed" >&2\n    false\n    echo never >>"$LLM_OUTPUT"\n}\n'
        + TRAILER,
    )
    result = project.executor().call("partial", {})
    assert (result.ok, result.exit_code, result.output, result.stderr) == (False, 1, "step 1 done\n", "step 2 failed\n")
    assert result.tool_call_error == "Tool call 'partial' exited with code 1"


def test_set_u_still_catches_unset_variables(project: Project) -> None:
    project.tool(
        "strict.sh",
        '#!/usr/bin/env bash\nset -u\n# @describe Strict.\n# @option --name A name.\nmain() {\n    echo "$argc_name"\n}\n',
    )
    result = project.executor().call("strict", {})
    assert (result.ok, result.exit_code) == (False, 1)
    assert "argc_name: unbound variable" in result.stderr


def test_llm_output_default_in_script_never_wins(project: Project) -> None:
    project.tool(
        "stdout_default.sh",
        '#!/usr/bin/env bash\n# @describe Loki style.\n# @env LLM_OUTPUT=/dev/stdout\nmain() {\n    echo "to the result" >>"$LLM_OUTPUT"\n}\n'
        + TRAILER,
    )
    result = project.executor().call("stdout_default", {})
    assert (result.ok, result.output) == (True, "to the result\n")


def test_meta_dotenv_and_nul_refusal(project: Project) -> None:
    (project.tools / "secrets.env").write_text("SECRET=from-dotenv\n")
    project.tool(
        "dot.sh",
        "#!/usr/bin/env bash\n# @describe Reads a dotenv file.\n# @meta dotenv secrets.env\n# @option --text A text.\n"
        'main() {\n    echo "$SECRET" >>"$LLM_OUTPUT"\n}\n',
    )
    executor = project.executor(["dot.sh"])
    assert executor.call("dot", {}).output == "from-dotenv\n"
    refused = executor.call("dot", {"text": "a\0b"})
    assert (refused.status, refused.error) == (
        "refused",
        "parameter 'text' of tool 'dot' contains a NUL character, which a Bash tool cannot receive",
    )


def test_shebang_selects_the_bash(project: Project, tmp_path: Path) -> None:
    wrapper = wrapper_interpreter(tmp_path, "my-bash", "bash")
    body = '# @describe Which bash.\nmain() {\n    echo "${VIA_WRAPPER:-no}" >>"$LLM_OUTPUT"\n}\n'
    project.tool("custom.sh", f"#!{wrapper}\n{body}")
    project.tool("default.sh", f"#!/usr/bin/env bash\n{body}")
    executor = project.executor()
    assert executor.call("custom", {}).output == "yes\n"
    assert executor.call("default", {}).output == "no\n"


def test_no_temporary_file_left(project: Project, private_tmpdir: Path) -> None:
    echo_tool(project)
    executor = project.executor()
    assert executor.call("echo", {"text": "x"}).ok
    assert not executor.call("echo", {"text": [1]}).ok
    close_warm()  # a warm pool keeps its files until the executor closes
    assert os.listdir(private_tmpdir) == []


def test_shipped_bash_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.conftest import REPO
    from toolexec import Executor

    executor = Executor(REPO / "config.yaml")
    (tmp_path / "note.txt").write_text("hello\n")
    (tmp_path / "sub").mkdir()
    assert executor.call("fs_cat", {"path": str(tmp_path / "note.txt")}).output == "hello\n"
    assert executor.call("fs_ls", {"path": str(tmp_path)}).output == "note.txt\nsub/\n"
    missing = executor.call("fs_ls", {"path": str(tmp_path / "nope")})
    assert (missing.ok, missing.stderr) == (False, f"not a directory: {tmp_path / 'nope'}\n")
    refused = executor.call("execute_command", {"command": "echo out"})
    assert (refused.status, refused.exit_code, refused.error) == (
        "refused",
        2,
        f"tool 'execute_command' is visible but not enabled ({REPO / 'config.yaml'}); add it to enabled_tools in your config.yaml",
    )
    everything = Executor(dataclasses.replace(executor.config, enabled_tools=None))
    assert everything.call("execute_command", {"command": "echo out; echo err >&2"}).output == "out\nerr\n"
    demo = executor.call("demo_sh", {"text": "hi", "count": 2, "csv": ["a,b"], "color": "red", "words": ["w"]})
    assert demo.ok, demo.error
    assert demo.output.splitlines()[0] == "hello: hi hi"


@pytest.mark.skipif(shutil.which("tic") is None, reason="tic (ncurses) is not installed")
def test_the_shipped_terminfo_entry_is_its_source_compiled(tmp_path: Path) -> None:
    from toolexec.runtimes.environment import TERMINFO

    subprocess.run(["tic", "-o", str(tmp_path), str(TERMINFO / "dumb.src")], check=True, timeout=60)
    compiled = (tmp_path / "d" / "dumb").read_bytes()
    assert (TERMINFO / "d" / "dumb").read_bytes() == compiled  # Linux's letter directories
    assert (TERMINFO / "64" / "dumb").read_bytes() == compiled  # macOS's hexadecimal ones
