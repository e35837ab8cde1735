"""Per-tool caps (``max_concurrency``, ``rate``): enforced in one place for every surface, measured from inside the
tools, and held across processes that share a store (a directory, and Redis)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Project
from tests.executor.tasks_client import redis_server
from toolexec import Executor, ToolCall
from toolexec.compilers import compile_source
from toolexec.config import load_config
from toolexec.errors import CompileError, ConfigError
from toolexec.runtimes.process import CallControl

# Each call marks itself in flight (a file in DIR), looks how many are, and reports the most it saw.
BUSY = '''import os
import time
import uuid


def run(dir: str, seconds: float = 0.3) -> str:
    """Be busy for a while, noting how many calls of this tool are in flight.

    Max concurrency: 2
    """
    mine = os.path.join(dir, uuid.uuid4().hex)  # not its pid: each call has a PID namespace of its own (the baseline)
    open(mine, "w").close()
    most = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        most = max(most, len(os.listdir(dir)))
        time.sleep(0.01)
    os.remove(mine)
    return str(most)
'''
RATED = '#!/usr/bin/env bash\n# @describe Count a call.\n# @meta rate 3/minute\nmain() {\n    echo counted >>"$LLM_OUTPUT"\n}\n'


@pytest.fixture
def capped(project: Project, tmp_path: Path) -> Project:
    project.tool("busy.py", BUSY)
    project.tool("rated.sh", RATED)
    (tmp_path / "inflight").mkdir()
    project.configure(max_parallel=16)
    return project


def busy_calls(directory: Path, n: int, prefix: str = "c") -> list[ToolCall]:
    return [ToolCall(name="busy", arguments={"dir": str(directory)}, call_id=f"{prefix}{i}") for i in range(n)]


def test_ten_concurrent_calls_never_have_more_than_two_in_flight(capped: Project, tmp_path: Path) -> None:
    started = time.monotonic()
    with Executor(capped.config) as ex:
        results = ex.call_many(busy_calls(tmp_path / "inflight", 10))
    elapsed = time.monotonic() - started
    assert [r.ok for r in results] == [True] * 10, results
    seen = [int(r.output) for r in results]
    assert max(seen) == 2 and min(seen) >= 1, seen  # two at a time, never three
    assert elapsed >= 5 * 0.3  # ten calls of 0.3 s, two at a time
    assert list((tmp_path / "inflight").iterdir()) == []


def test_the_mcp_server_holds_the_same_cap(capped: Project, tmp_path: Path) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def scenario() -> list[str]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "toolexec", "--config", str(capped.config), "mcp"], env=dict(os.environ)
        )
        async with Client(stdio_client(params), mode="legacy") as client:
            calls = [client.call_tool("busy", {"dir": str(tmp_path / "inflight")}) for _ in range(10)]
            return [r.content[0].text for r in await asyncio.gather(*calls)]  # type: ignore[union-attr]

    seen = [int(text) for text in asyncio.run(scenario())]
    assert max(seen) == 2 and min(seen) >= 1, seen


def test_a_rate_cap_refuses_with_when_to_retry(capped: Project) -> None:
    with Executor(capped.config) as ex:
        first = [ex.call("rated", {}) for _ in range(3)]
        refused = ex.call("rated", {})
    assert [r.output for r in first] == ["counted\n"] * 3
    assert (refused.ok, refused.status, refused.reason, refused.exit_code) == (False, "refused", "rate_limited", 2)
    assert refused.error is not None
    head, _, wait = refused.error.rpartition("try again in ")
    assert head == "tool 'rated' is limited to 3 calls per minute; that many have started in the last minute: "
    assert wait.endswith(" s") and 55 <= float(wait[:-2]) <= 60


def test_waiting_is_bounded_by_the_calls_timeout_and_ends_on_cancel(capped: Project, tmp_path: Path) -> None:
    directory = tmp_path / "inflight"
    with Executor(capped.config) as ex:
        holders = [ToolCall(name="busy", arguments={"dir": str(directory), "seconds": 3}, call_id=f"h{i}") for i in range(2)]
        control = CallControl()
        try:
            pool = ex.calls.submit(ex.calls.prepare(holders[0]), control)  # type: ignore[arg-type]
            other = ex.calls.submit(ex.calls.prepare(holders[1]), control)  # type: ignore[arg-type]
            time.sleep(0.5)
            late = ex.call("busy", {"dir": str(directory)}, timeout=0.5)
            cancelled = CallControl()
            waiter = ex.calls.submit(ex.calls.prepare(ToolCall(name="busy", arguments={"dir": str(directory)})), cancelled)  # type: ignore[arg-type]
            time.sleep(0.3)
            cancelled.cancel()
            gave_up = waiter.result(timeout=10)
            cancelled.close()
            assert [pool.result(timeout=30).ok, other.result(timeout=30).ok] == [True, True]
        finally:
            control.close()
    assert (late.status, late.reason, late.exit_code) == ("timeout", "timeout", 124)
    assert late.error == (
        "tool 'busy' was not started: it runs at most 2 call(s) at once (max_concurrency) and none of them ended in "
        "the 0.5 s this call could wait (its timeout)"
    )
    assert (gave_up.status, gave_up.reason) == ("cancelled", "cancelled")


def test_config_tool_limits_replace_the_scripts_caps(capped: Project, tmp_path: Path) -> None:
    config = capped.configure(max_parallel=16, tool_limits={"busy": {"max_concurrency": 4}, "rated": {"rate": "1 per hour"}})
    with Executor(config) as ex:
        seen = [int(r.output) for r in ex.call_many(busy_calls(tmp_path / "inflight", 8))]
        assert [ex.call("rated", {}).ok, ex.call("rated", {}).reason] == [True, "rate_limited"]
    assert max(seen) in (3, 4) and max(seen) > 2, seen


# --- across processes ------------------------------------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import json, sys
    from toolexec import Executor, ToolCall

    config, directory, prefix = sys.argv[1:4]
    with Executor(config) as ex:
        busy = ex.call_many([ToolCall(name="busy", arguments={"dir": directory}, call_id=f"{prefix}{i}") for i in range(5)])
        rated = ex.call("rated", {})
    print(json.dumps({"seen": [int(r.output) for r in busy], "rated": rated.reason or "ok"}))
    """
)


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    with redis_server(tmp_path) as url:
        yield url


@pytest.mark.parametrize("backend", ["dir", "redis"])
def test_caps_hold_across_two_processes_sharing_a_store(
    capped: Project, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    store = f"dir:{tmp_path / 'shared-store'}" if backend == "dir" else request.getfixturevalue("redis_url")
    config = capped.configure(max_parallel=16, mcp={"task_store": store}, tool_limits={"rated": {"rate": "1/minute"}})
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(config), str(tmp_path / "inflight"), f"p{i}_"], stdout=subprocess.PIPE, text=True
        )
        for i in range(2)
    ]
    reports = [json.loads(worker.communicate(timeout=120)[0]) for worker in workers]
    seen = [n for report in reports for n in report["seen"]]
    assert len(seen) == 10 and max(seen) == 2, seen  # ten calls from two processes: two at a time in all
    assert sorted(report["rated"] for report in reports) == ["ok", "rate_limited"]  # one call per minute, in all


# --- the metadata, in every language -----------------------------------------------------------------------------

SPELLINGS = {
    "python": (
        "t.py",
        'def run() -> str:\n    """Do it.\n\n    Max concurrency: 2\n    Rate: 30 per minute\n    """\n    return "x"\n',
    ),
    "bash": (
        "t.sh",
        "#!/usr/bin/env bash\n# @describe Do it.\n# @meta max-concurrency 2\n# @meta rate 30/minute\nmain() { :; }\n",
    ),
    "typescript": (
        "t.ts",
        '/**\n * Do it.\n * @maxConcurrency 2\n * @rate 30/minute\n */\nexport function run(): string {\n  return "x";\n}\n',
    ),
    "javascript": (
        "t.js",
        'export default { name: "t", description: "Do it.", inputSchema: { type: "object", properties: {} },\n'
        '  maxConcurrency: 2, rate: "30/minute", run() { return "x"; } };\n',
    ),
}


@pytest.mark.parametrize("language", list(SPELLINGS))
def test_every_language_declares_caps(language: str) -> None:
    file, source = SPELLINGS[language]
    tool = compile_source(source, file)
    assert (tool.metadata.max_concurrency, tool.metadata.rate) == (2, "30/minute")
    assert {k: v for k, v in tool.to_dict()["metadata"].items() if k in ("max_concurrency", "rate")} == {
        "max_concurrency": 2,
        "rate": "30/minute",
    }
    bad = (
        source.replace("maxConcurrency: 2", 'maxConcurrency: "none"')
        .replace("2", "none", 1)
        .replace("30/minute", "30/fortnight")
        .replace("30 per minute", "30/fortnight")
    )
    with pytest.raises(CompileError) as refused:
        compile_source(bad, file)
    messages = [problem.message for problem in refused.value.problems]
    assert any("expected a whole number of calls from 1 to 10000, got 'none'" in m for m in messages), messages
    assert any(
        "expected calls per unit such as 30/minute (second, minute, hour or day), got '30/fortnight'" in m for m in messages
    )


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        (
            {"busy": {"max_concurrency": 0}},
            "key 'tool_limits.busy.max_concurrency': expected a whole number of calls from 1 to 10000, got 0",
        ),
        ({"busy": {"rate": "lots"}}, "key 'tool_limits.busy.rate': expected calls per unit such as 30/minute"),
        ({"busy": {"max_concurency": 2}}, "unknown setting 'max_concurency'; did you mean 'max_concurrency'?"),
        ({"busy": 3}, "key 'tool_limits.busy': expected a mapping with max_concurrency and/or rate, got 3"),
    ],
)
def test_bad_tool_limits_are_refused_by_key(capped: Project, limits: Any, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(capped.configure(tool_limits=limits))
    assert str(refused.value).startswith(f"{capped.config}: ") and message in str(refused.value)
