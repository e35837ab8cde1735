"""Every file and cache a call writes is bounded while it runs: the kernel stops a runaway writer at
``max_kept_bytes`` (RLIMIT_FSIZE), and a tool that fills its ``LLM_TOOL_CACHE_DIR`` past ``max_cache_bytes`` is stopped,
then refused until the cache is emptied; each with a typed ``reason``. The caps are small: no test fills a disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import close_warm, marked_processes

KEPT = 100_000  # max_kept_bytes of these tests: not whole KiB, so a Bash bootstrap cannot say it (prlimit(1) starts it)
KEPT_KIB = 100 * 1024  # whole KiB: every bootstrap bounds itself
CACHE = 200_000  # max_cache_bytes of these tests
WRITE = 10 * 1024 * 1024  # what each writer tries: bounded too, so that an unfixed toolexec fills no disk

WRITERS = {
    "out_sh.sh": f'# @describe Write 10 MiB to LLM_OUTPUT.\nmain() {{ head -c {WRITE} /dev/zero | tr "\\\\0" x >>"$LLM_OUTPUT"; }}\n',
    "out_py.py": f'import os\n\n\ndef run() -> None:\n    """Write 10 MiB to LLM_OUTPUT."""\n    with open(os.environ["LLM_OUTPUT"], "a") as out:\n        for _ in range({WRITE // 65536}):\n            out.write("x" * 65536)\n',
    "out_js.js": f'import fs from "node:fs";\n\n/** Write 10 MiB to LLM_OUTPUT. */\nexport function run() {{\n  const fd = fs.openSync(process.env.LLM_OUTPUT, "a");\n  for (let i = 0; i < {WRITE // 65536}; i++) fs.writeSync(fd, "x".repeat(65536));\n  fs.closeSync(fd);\n}}\n',
    "file_py.py": f'import os\n\n\ndef run() -> str:\n    """Write 10 MiB to a file of the cache."""\n    with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "big"), "w") as out:\n        for _ in range({WRITE // 65536}):\n            out.write("x" * 65536)\n    return "written"\n',
    "file_sh.sh": f'# @describe Write 10 MiB to a file of the cache.\nmain() {{ head -c {WRITE} /dev/zero >"$LLM_TOOL_CACHE_DIR/big"; }}\n',
}
# Fills its cache with small files (none near max_kept_bytes), then waits: only the cache bound can stop it.
FILLER = '''import os
import time


def run(files: int = 40, then_wait: bool = True) -> str:
    """Put files of 10 kB in the cache, then wait."""
    cache = os.environ["LLM_TOOL_CACHE_DIR"]
    for n in range(files):
        with open(os.path.join(cache, f"part{n}"), "w") as out:
            out.write("x" * 10_000)
    while then_wait:
        time.sleep(1000)
    return "filled"
'''


# Each reports its RLIMIT_FSIZE as its first line saw it (soft, hard, from /proc/self/limits), whether it could raise
# it, and whether the variable that carried the bound reached it.
SEERS = {
    "seer_py.py": '''import os
import resource

FIRST = resource.getrlimit(resource.RLIMIT_FSIZE)


def run() -> str:
    """Report the file size limit."""
    try:
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        raised = "raised"
    except (ValueError, OSError):
        raised = "kept"
    return f"{FIRST[0]} {FIRST[1]} {raised} {os.environ.get('TOOLEXEC_FILE_LIMIT', 'unset')}"
''',
    "seer_sh.sh": """while read -r line; do [[ $line == "Max file size"* ]] && first=$line; done </proc/self/limits
read -r _ _ _ soft hard _ <<<"$first"
# @describe Report the file size limit.
main() {
    if (ulimit -f unlimited) 2>/dev/null; then raised=raised; else raised=kept; fi
    printf '%s %s %s %s' "$soft" "$hard" "$raised" "${TOOLEXEC_FILE_LIMIT-unset}" >>"$LLM_OUTPUT"
}
""",
    "seer_js.js": """import fs from "node:fs";

const first = fs.readFileSync("/proc/self/limits", "utf8").match(/^Max file size\\s+(\\S+)\\s+(\\S+)/m);

/** Report the file size limit. */
export function run() {
  return `${first[1]} ${first[2]} kept ${process.env.TOOLEXEC_FILE_LIMIT ?? "unset"}`;
}
""",
}


@pytest.fixture(params=[KEPT, KEPT_KIB], ids=["bytes", "kib"])
def kept(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def bounded(project: Project, kept: int):  # type: ignore[no-untyped-def]
    for name, source in {**WRITERS, **SEERS}.items():
        project.tool(name, source)
    project.tool("filler.py", FILLER)
    return project.executor(max_output_bytes=4096, max_kept_bytes=kept, max_cache_bytes=CACHE, timeout=60)


@pytest.mark.parametrize("tool", ["out_sh", "out_py", "out_js"])
def test_a_runaway_llm_output_is_stopped_at_max_kept_bytes(bounded, kept: int, tool: str, private_tmpdir: Path) -> None:  # type: ignore[no-untyped-def]
    result = bounded.call(tool, {})
    assert (result.ok, result.status, result.reason) == (False, "error", "file_limit")
    assert result.tool_call_error == f"Tool call '{tool}' was stopped: it wrote a file past max_kept_bytes ({kept} bytes)"
    assert result.output_file is not None and os.path.getsize(result.output_file) == kept  # the whole of what was kept
    assert result.output.startswith("x" * 2048) and "bytes of output dropped" in result.output  # head and tail, marked
    close_warm(bounded)  # (a long-lived executor keeps its cold calls' file sets, in a directory of its own, until then)
    assert marked_processes(private_tmpdir) == [] and list(private_tmpdir.iterdir()) == []


@pytest.mark.parametrize("tool", ["file_py", "file_sh"])
def test_any_file_a_tool_writes_is_bounded_by_max_kept_bytes(bounded, kept: int, tool: str) -> None:  # type: ignore[no-untyped-def]
    result = bounded.call(tool, {})
    cache = Path(bounded.config.state.tool_cache(tool))
    assert (result.ok, result.reason, (cache / "big").stat().st_size) == (False, "file_limit", kept)


@pytest.mark.parametrize("tool", ["seer_py", "seer_sh", "seer_js"])
def test_the_file_bound_holds_from_the_tools_first_line_and_cannot_be_raised(bounded, kept: int, tool: str) -> None:  # type: ignore[no-untyped-def]
    """However the launch sets it (the bootstrap itself, toolexec while node's bootstrap waits, prlimit(1) where a
    bootstrap cannot say the number), soft and hard are the bound before the tool's code runs."""
    result = bounded.call(tool, {})
    assert (result.ok, result.output) == (True, f"{kept} {kept} kept unset")


def test_a_tool_filling_its_cache_is_stopped_and_then_refused_until_it_is_emptied(bounded) -> None:  # type: ignore[no-untyped-def]
    stopped = bounded.call("filler", {})
    assert (stopped.ok, stopped.status, stopped.reason) == (False, "error", "cache_limit")
    assert stopped.tool_call_error == f"Tool call 'filler' was stopped: LLM_TOOL_CACHE_DIR passed max_cache_bytes ({CACHE} bytes)"
    cache = Path(bounded.config.state.tool_cache("filler"))
    refused = bounded.call("filler", {"files": 0, "then_wait": False})
    assert (refused.status, refused.exit_code, refused.reason) == ("refused", 2, "cache_limit")
    assert refused.error is not None and refused.error.startswith(
        f"tool 'filler' was not started: its cache directory {cache} holds "
    )
    assert refused.error.endswith(
        f"more than max_cache_bytes ({CACHE}); remove files from it, or raise max_cache_bytes in config.yaml"
    )
    for part in cache.iterdir():
        part.unlink()
    assert bounded.call("filler", {"files": 2, "then_wait": False}).output == "filled"


def test_a_bash_bootstrap_in_posix_mode_counts_its_blocks_of_512_bytes(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POSIXLY_CORRECT", "1")  # bash starts in POSIX mode, where `ulimit -f` counts 512-byte blocks
    project.tool("seer_sh.sh", SEERS["seer_sh.sh"])
    result = project.executor(max_kept_bytes=KEPT_KIB).call("seer_sh", {})
    assert (result.ok, result.output) == (True, f"{KEPT_KIB} {KEPT_KIB} kept unset")
