"""Warm JavaScript and TypeScript tools (toolexec.runtimes.warm_node): each call a fresh node, started ahead of need
with the tool imported.

Real node throughout. The cold-call behaviour suites run warm too (``launch_modes``: tests/runtimes/
test_node_runtime.py, tests/executor/test_hostile.py, tests/runtimes/test_baseline.py); here is what only a spare
can get wrong: that it was started before its call, that each call has a process (and module) of its own, the
call's environment and working directory, edits, a tool that no longer loads, back-to-back calls that find no spare
ready, and that nothing outlives the pool.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import Project
from tests.helpers import alive, marked_processes, wait_until
from toolexec.runtimes import baseline, process_linux
from toolexec.runtimes.warm_fork import running_servers

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)")

# Reports when its process started, how often its module was evaluated in it, and what a call must see of its own.
SPARE_TS = """import { appendFileSync, readFileSync, readdirSync } from "node:fs";

let loads = 0;
loads += 1;
const LOADED_WITH = process.env.GREETING ?? "unset";
appendFileSync(process.env.LLM_TOOL_CACHE_DIR + "/loads", "x");

/**
 * Report the call's process.
 * @warm
 */
export function run(text: string): string {
  return JSON.stringify({
    text,
    version: 1,
    loads,
    pid: process.pid,
    started: performance.timeOrigin,
    id: process.env.LLM_TOOL_CALL_ID,
    greeting: process.env.GREETING ?? "unset",
    loadedWith: LOADED_WITH,
    cwd: process.cwd(),
    spare: process.env.TOOLEXEC_NODE_SPARE ?? null,
    stdin: readFileSync(0, "utf8"),
    fds: readdirSync("/proc/self/fd").map(Number).filter((fd) => fd > 2).length,
  });
}
"""


def _spares() -> list[int]:
    """Live spares of this process (registered servers that are node processes or their bwrap)."""
    return [pid for pid in running_servers() if alive(pid)]


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_each_call_is_a_fresh_node_started_before_the_call(
    project: Project, private_tmpdir: Path, sandbox: str, tmp_path: Path
) -> None:
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no PID namespace on this host: the baseline cannot be tested")
    project.tool("spare.ts", SPARE_TS)
    (project.root / "functions" / ".env").write_text("GREETING=hello\n")
    work = tmp_path / "elsewhere"
    work.mkdir()
    descriptors = sorted(os.listdir("/proc/self/fd"))
    with project.executor(sandbox=sandbox) as executor:
        executor.call("spare", {"text": "first"})  # the server starts; its first spare takes this call
        seen = []
        for n in range(3):
            wait_until(lambda: len(_spares()) == 1, "the next spare")
            time.sleep(0.05)
            asked = time.time() * 1000
            here = os.getcwd()
            os.chdir(work)  # each call's own working directory, not the spare's
            try:
                result = executor.call("spare", {"text": f"t{n}"}, call_id=f"call-{n}")
            finally:
                os.chdir(here)
            assert (result.ok, result.stderr) == (True, "")
            seen.append({**json.loads(result.output), "asked": asked})
        assert [(s["text"], s["id"], s["version"], s["loads"]) for s in seen] == [(f"t{n}", f"call-{n}", 1, 1) for n in range(3)]
        assert all(s["started"] < s["asked"] for s in seen)  # started ahead of its call
        assert {(s["greeting"], s["loadedWith"], s["cwd"], s["spare"], s["stdin"]) for s in seen} == {
            ("hello", "hello", str(work), None, "")
        }
        if sandbox == "off":
            assert len({s["pid"] for s in seen}) == 3
        else:  # each in a PID namespace of its own, as a cold call under the baseline
            assert {s["pid"] for s in seen} == {2}
        loads = executor.config.state.tool_cache("spare") / "loads"
        wait_until(lambda: loads.read_text() == "x" * 5, "the spare after the 4th call to load")  # one load per process
    with project.executor(sandbox=sandbox, warm_tools=[]) as executor:
        cold = json.loads(executor.call("spare", {"text": "cold"}).output)
    assert {s["fds"] for s in seen} == {cold["fds"]}  # node's own: nothing of the spare's channels is left open
    assert _spares() == []
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert marked_processes(private_tmpdir) == []


def test_an_edited_tool_runs_its_new_code_and_the_old_spare_ends(project: Project) -> None:
    path = project.tool("spare.ts", SPARE_TS)
    with project.executor(sandbox="off") as executor:
        first = json.loads(executor.call("spare", {"text": "a"}).output)
        wait_until(lambda: len(_spares()) == 1, "the next spare")
        old = _spares()
        path.write_text(SPARE_TS.replace("version: 1", "version: 2"), encoding="utf-8")
        second = json.loads(executor.call("spare", {"text": "b"}).output)
        assert (first["version"], second["version"]) == (1, 2)
        wait_until(lambda: not any(alive(pid) for pid in old), "the old tool's spare to end")


def test_back_to_back_calls_wait_for_their_spare_and_all_succeed(project: Project) -> None:
    project.tool("spare.ts", SPARE_TS)
    with project.executor(sandbox="off") as executor:
        results = [executor.call("spare", {"text": str(n)}) for n in range(6)]
        seen = [json.loads(result.output) for result in results]
    assert [(s["text"], s["loads"]) for s in seen] == [(str(n), 1) for n in range(6)]
    assert len({s["pid"] for s in seen}) == 6
    assert _spares() == []


def test_a_tool_that_no_longer_loads_runs_cold_with_the_cold_error(project: Project) -> None:
    broken = "import './missing.mjs';\n/** Broken. */\nexport function run(): string {\n  return 'x';\n}\n"
    project.tool("broken.ts", broken)
    with project.executor(sandbox="off", warm_tools="all") as warm:
        hot = warm.call("broken", {})
    with project.executor(sandbox="off", warm_tools=[]) as cold:
        expected = cold.call("broken", {})
    assert (hot.ok, hot.exit_code, hot.error) == (expected.ok, expected.exit_code, expected.error)
    assert hot.ok is False and "missing.mjs" in hot.error
    assert _spares() == []


def test_a_warm_call_that_times_out_is_killed_with_its_tree(project: Project, private_tmpdir: Path) -> None:
    project.tool(
        "hang.mjs",
        'import { spawn } from "node:child_process";\n/** Hang. @warm */\nexport function run() {\n'
        '  spawn("sleep", ["300"], { stdio: "ignore" });\n  return new Promise(() => setInterval(() => {}, 1000));\n}\n',
    )
    with project.executor(sandbox="off") as executor:
        result = executor.call("hang", {}, timeout=1)
        assert (result.status, result.exit_code) == ("timeout", 124)
        assert marked_processes(private_tmpdir) == []
    assert _spares() == []


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_progress_of_a_warm_call_and_of_one_that_does_not_listen(project: Project, sandbox: str) -> None:
    from toolexec.runtimes import CallControl

    project.tool(
        "prog.mjs",
        'import { appendFileSync } from "node:fs";\n/** P. @warm */\nexport function run() {\n'
        "  if (!process.env.LLM_PROGRESS) return 'deaf';\n"
        '  appendFileSync(process.env.LLM_PROGRESS, JSON.stringify({ progress: 1, total: 2 }) + "\\n");\n'
        '  appendFileSync(process.env.LLM_PROGRESS, JSON.stringify({ progress: 2, total: 2 }) + "\\n");\n'
        "  return 'ok';\n}\n",
    )
    with project.executor(sandbox=sandbox) as executor:
        for _ in range(2):  # the server's first spare, and a later one
            events: list[dict] = []
            control = CallControl(on_event=events.append)
            try:
                result = executor.call("prog", {}, cancel=control)
            finally:
                control.close()
            assert (result.ok, result.output) == (True, "ok")
            assert [(e["progress"], e["total"]) for e in events if e["event"] == "progress"] == [(1, 2), (2, 2)]
            assert executor.call("prog", {}).output == "deaf"
    assert _spares() == []
