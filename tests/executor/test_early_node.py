"""A one-shot ``toolexec run`` of a JavaScript or TypeScript tool starts its node before toolexec imports itself
(toolexec.early), and hands the call to it only when it is what a cold start would have been.

The real command, real node: each run is a process of its own, as a user's. Whether a run's node was that early
spare is read from the node's own start environment (``/proc/self/environ``: a spare starts with
``TOOLEXEC_NODE_SPARE``, a cold start with the call's variables).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Project, toolexec
from tests.helpers import marked_processes
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="the early spare needs pidfd and /proc (Linux)")

WHO_TS = """import { readFileSync } from "node:fs";

/** Report how this call's node started, and what the call sees. */
export function run(text: string): string {
  const started = readFileSync("/proc/self/environ", "latin1").split("\\0");
  return JSON.stringify({
    text,
    spare: started.some((entry) => entry.startsWith("TOOLEXEC_NODE_SPARE=")),
    id: process.env.LLM_TOOL_CALL_ID,
    greeting: process.env.GREETING ?? "unset",
    cwd: process.cwd(),
    toolexec: Object.keys(process.env).filter((name) => name.startsWith("TOOLEXEC_") && name !== "TOOLEXEC_CALL_MARK").sort(),
  });
}
"""
THROWS_TS = '/** Throw. */\nexport function run(): string {\n  throw new TypeError("bad input shape");\n}\n'


def _memos(home: Path) -> list[Path]:
    folder = home / "one-shot"
    return sorted(folder.iterdir()) if folder.exists() else []


def _cache(project: Project) -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "toolexec"


def _node_processes(tool: Path) -> list[int]:
    """Live processes whose command line names ``tool`` (a spare left behind would)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if str(tool).encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("sandbox", ["off", "declared"])
def test_the_second_run_takes_the_node_started_first_and_sees_only_its_call(
    project: Project, private_tmpdir: Path, sandbox: str
) -> None:
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no PID namespace on this host: the baseline cannot be tested")
    project.tool("who.ts", WHO_TS)
    config = str(project.configure(sandbox=sandbox))
    runs = [toolexec("--config", config, "run", "who", json.dumps({"text": f"t{n}"}), "--call-id", f"c{n}") for n in range(3)]
    assert [(r.returncode, r.stderr) for r in runs] == [(0, "")] * 3
    seen = [json.loads(r.stdout) for r in runs]
    assert [(s["text"], s["id"], s["spare"]) for s in seen] == [("t0", "c0", False), ("t1", "c1", True), ("t2", "c2", True)]
    # what the cold run's tool saw of toolexec's variables, the spares' saw too (nothing of the spare's own)
    assert len({(s["greeting"], s["cwd"], tuple(s["toolexec"])) for s in seen}) == 1
    assert (seen[0]["greeting"], seen[0]["cwd"]) == ("unset", os.getcwd())
    assert not {"TOOLEXEC_NODE_SPARE", "TOOLEXEC_NODE_COMPILE_CACHE", "TOOLEXEC_FAILURE_FILE"} & set(seen[1]["toolexec"])
    assert len(_memos(_cache(project))) == 1
    assert marked_processes(private_tmpdir) == []
    assert _node_processes(project.tools / "who.ts") == []


def test_a_failing_tool_gives_the_cold_result_through_its_spare(project: Project) -> None:
    project.tool("throws.ts", THROWS_TS)
    config = str(project.configure(sandbox="off"))
    runs = [toolexec("--config", config, "run", "throws", "{}") for _ in range(2)]
    assert runs[0].returncode == runs[1].returncode == 1
    assert runs[0].stdout == runs[1].stdout == ""
    assert runs[1].stderr == runs[0].stderr
    assert runs[0].stderr.startswith("TypeError: bad input shape\n    at run")


def test_a_spare_the_call_cannot_take_is_ended_and_the_call_runs_cold(project: Project, private_tmpdir: Path) -> None:
    """The call's environment differs from the command's (a .env file): node's start would differ, so no spare is
    taken and none is remembered; a refused call ends the spare started for it."""
    project.tool("who.ts", WHO_TS)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    assert len(_memos(_cache(project))) == 1
    refused = toolexec("--config", config, "run", "who", '{"txt": "a"}')
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "parameter 'text'" in refused.stderr
    (project.root / "functions" / ".env").write_text("GREETING=hello\n")
    run = toolexec("--config", config, "run", "who", '{"text": "b"}')
    assert run.returncode == 0, run.stderr
    assert (json.loads(run.stdout)["spare"], json.loads(run.stdout)["greeting"]) == (False, "hello")
    assert _memos(_cache(project)) == []  # a next run would not match either: nothing is started for it
    assert marked_processes(private_tmpdir) == []
    assert _node_processes(project.tools / "who.ts") == []


def test_a_tool_that_is_no_longer_javascript_forgets_its_spare(project: Project) -> None:
    project.tool("who.ts", WHO_TS)
    config = str(project.configure(sandbox="off", visible=["who.ts"]))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    (project.tools / "who.ts").unlink()
    project.tool("who.py", 'def run(text: str) -> str:\n    """Who."""\n    return text\n')
    config = str(project.configure(sandbox="off", visible=["who.py"]))
    run = toolexec("--config", config, "run", "who", '{"text": "py"}')
    assert (run.returncode, run.stdout) == (0, "py")
    [memo] = _memos(_cache(project))  # the Python tool's own start now (toolexec.runtimes.early_start)
    assert memo.read_bytes().split(b"\0")[0] == b"python"


def test_a_memo_folder_others_may_open_is_not_read(project: Project) -> None:
    project.tool("who.ts", WHO_TS)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    folder = _cache(project) / "one-shot"
    folder.chmod(0o777)
    try:
        run = toolexec("--config", config, "run", "who", '{"text": "b"}')
    finally:
        folder.chmod(0o700)
    assert (run.returncode, json.loads(run.stdout)["spare"]) == (0, False)


def test_a_secret_kept_from_tools_is_never_in_a_spare_that_runs_a_call(project: Project) -> None:
    """A variable toolexec keeps from its tools (``secret_env``) would show in a spare's start environment: a call
    whose command has one is never handed to a spare, and none is remembered for it."""
    project.tool(
        "who.ts",
        WHO_TS.replace("JSON.stringify({", 'JSON.stringify({\n    environ: readFileSync("/proc/self/environ", "latin1"),'),
    )
    config = str(project.configure(sandbox="off", secret_env=["WHO_SECRET"]))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    assert len(_memos(_cache(project))) == 1
    runs = [toolexec("--config", config, "run", "who", '{"text": "b"}', env={"WHO_SECRET": "hunter2"}) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0]
    assert [(json.loads(r.stdout)["spare"], "hunter2" in r.stdout) for r in runs] == [(False, False)] * 2
    assert _memos(_cache(project)) == []


@pytest.mark.parametrize("planted", ["a-link-to-anothers-file", "anothers-file", "writable-by-others", "a-fifo"])
def test_a_planted_memo_starts_nothing(project: Project, tmp_path: Path, planted: str) -> None:
    """The memo names a program that starts before anything is checked: only a regular file of the user's own, that
    only they may write, found in their own folder without following a link, is read. A planted one (a link to a
    file another user wrote, a file of another user's, one others may write, a FIFO that would block the run) starts
    nothing, and the run runs cold."""
    project.tool("who.ts", WHO_TS)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    [memo] = _memos(_cache(project))
    proof = tmp_path / "proof"
    hostile = "\0".join(["node", "/bin/sh", "-c", f"echo ran >{proof}", "", ""]).encode()
    memo.unlink()
    if planted == "a-link-to-anothers-file":
        elsewhere = tmp_path / "elsewhere"
        elsewhere.write_bytes(hostile)
        memo.symlink_to(elsewhere)
    elif planted == "a-fifo":
        os.mkfifo(memo, 0o600)
    else:
        memo.write_bytes(hostile)
        if planted == "anothers-file":
            if os.geteuid() != 0:
                pytest.skip("only root can give a file to another user")
            os.chown(memo, 65534, 65534)
        else:
            memo.chmod(0o622)
    run = toolexec("--config", config, "run", "who", '{"text": "b"}', env={"TOOLEXEC_NO_SERVER": "1"})
    assert (run.returncode, json.loads(run.stdout)["spare"]) == (0, False), run.stderr
    assert not proof.exists()


def test_a_memo_whose_additions_are_not_this_starts_is_never_adopted(project: Project) -> None:
    """The right argv with another environment added (a stale memo's, a hand-edited one's ``NODE_OPTIONS``): the
    spare's start is not this call's, so the call runs cold; the memo is written anew."""
    project.tool("who.ts", WHO_TS)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    [memo] = _memos(_cache(project))
    argv, _, additions = memo.read_bytes().partition(b"\0\0")
    memo.write_bytes(argv + b"\0\0" + additions + b"\0GREETING=planted")
    run = toolexec("--config", config, "run", "who", '{"text": "b"}', env={"TOOLEXEC_NO_SERVER": "1"})
    assert run.returncode == 0, run.stderr
    assert (json.loads(run.stdout)["spare"], json.loads(run.stdout)["greeting"]) == (False, "unset")
    assert b"planted" not in memo.read_bytes()
    again = toolexec("--config", config, "run", "who", '{"text": "c"}', env={"TOOLEXEC_NO_SERVER": "1"})
    assert (json.loads(again.stdout)["spare"], json.loads(again.stdout)["greeting"]) == (True, "unset")
