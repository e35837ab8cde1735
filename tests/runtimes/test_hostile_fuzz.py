"""Random argument values through every language's runtime: a result or a refusal, never an
exception out of ``Executor.call``, never a process, descriptor or temporary file left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import Project
from tests.helpers import marked_processes

TOOLS = {
    "py_any.py": 'def run(v: dict, n: int = 0, s: str = "") -> str:\n    """Anything."""\n    return "ok"\n',
    "sh_any.sh": '# @describe Anything.\n# @option --s A string.\n# @option --n <INT> A number.\nmain() { echo ok >>"$LLM_OUTPUT"; }\n',
    "js_any.js": "/**\n * Anything.\n * @param {object} v - V.\n * @param {integer} [n] - N.\n */\nexport function run(v, n) {\n  return 'ok';\n}\n",
    "ts_any.ts": "/**\n * Anything.\n * @param v V.\n * @param n N.\n */\nexport function run(v: object, n?: number): string {\n  return 'ok';\n}\n",
}
HOSTILE_FLOATS = st.sampled_from([float("nan"), float("inf"), -float("inf"), 3.0, 1e308, -0.0])
HOSTILE_INTS = st.sampled_from([53, -63, 5000, 0]).map(
    lambda k: 0 if k == 0 else (1 if k > 0 else -1) * (2 if k != 5000 else 10) ** abs(k) + 1
)
HOSTILE_TEXT = st.sampled_from(["\ud800", "a\0b", "\udcff", "x" * 10_000, "", "\u202e", "$(reboot)"])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), HOSTILE_FLOATS, HOSTILE_INTS, HOSTILE_TEXT
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
ARGUMENTS = st.one_of(
    st.dictionaries(st.sampled_from(["v", "n", "s", "zz"]), VALUES, max_size=3),
    st.text(max_size=30),
    st.sampled_from(['{"n": NaN}', '{"n": 1e400}', '{"v": ' + "[" * 120 + "]" * 120 + "}", "\ud800", "[1]"]),
)


@pytest.fixture(scope="module")
def fuzz_project(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    project = Project(tmp_path_factory.mktemp("fuzz") / "project")
    for name, source in TOOLS.items():
        project.tool(name, source)
    executor = project.executor(list(TOOLS), timeout=30)
    report = executor.build()
    assert report.ok, report.problems
    return executor


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(tool=st.sampled_from(["py_any", "sh_any", "js_any", "ts_any"]), arguments=ARGUMENTS)
def test_random_arguments_give_a_result_or_a_refusal(fuzz_project, tool: str, arguments: object) -> None:  # type: ignore[no-untyped-def]
    tmpdir = Path(os.environ["TMPDIR"])
    before = set(os.listdir(tmpdir))
    descriptors = sorted(os.listdir("/proc/self/fd"))
    result = fuzz_project.call(tool, arguments)  # never raises
    assert result.status in ("ok", "refused"), result.error
    assert (result.exit_code == 0) == (result.status == "ok")
    if result.status == "refused":
        assert result.exit_code == 2 and result.error
    else:
        assert result.output.strip() == "ok"
    assert marked_processes(tmpdir) == []
    assert sorted(os.listdir("/proc/self/fd")) == descriptors
    assert set(os.listdir(tmpdir)) == before


# Every way into a call a caller or a model controls: the name, the arguments, the call id, the timeout, an approval
# hook's answer (or its exception), a progress callback that fails, and tools whose output cannot be read, whose
# interpreter is missing, or whose progress lines are hostile.
EDGE_TOOLS = {
    "fifo.sh": '# @describe Replace LLM_OUTPUT with a FIFO.\nmain() { rm "$LLM_OUTPUT"; mkfifo "$LLM_OUTPUT"; }\n',
    "noint.py": '#!/nonexistent/python9\ndef run() -> str:\n    """Missing interpreter."""\n    return "never"\n',
    "progress.sh": (
        "# @describe Hostile progress lines.\nmain() {\n"
        '    [ -n "$LLM_PROGRESS" ] && python3 -c \'import sys; sys.stdout.write("[" * 30000 + "\\n" + "{\\"progress\\": 1e999}\\n" + "\\xff\\n")\' >>"$LLM_PROGRESS"\n'
        '    echo ok >>"$LLM_OUTPUT"\n}\n'
    ),
    "py_any.py": TOOLS["py_any.py"],
}
NAMES = st.one_of(
    st.sampled_from(["fifo", "noint", "progress", "py_any", "nope", "", "\ud800", "x" * 5000, "a\0b"]),
    st.none(), st.integers(), st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)  # fmt: skip
ANYTHING = st.one_of(VALUES, st.builds(object), st.binary(max_size=20), st.sampled_from([b"\xff", float("nan"), 10**5000]))


class Boom(Exception):
    pass


def raising_hook(request):  # type: ignore[no-untyped-def]
    raise Boom("the hook failed")


async def async_hook(request):  # type: ignore[no-untyped-def]
    return None


HOOKS = st.sampled_from(
    [None, raising_hook, async_hook, lambda r: True, lambda r: False, lambda r: 42, lambda r: object(), lambda r: {"v": 1}]
)


@pytest.fixture(scope="module")
def edge_project(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    project = Project(tmp_path_factory.mktemp("edges") / "project")
    for name, source in EDGE_TOOLS.items():
        project.tool(name, source)
    executor = project.executor(list(EDGE_TOOLS), timeout=30)
    executor.build()
    return executor


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(name=NAMES, arguments=ANYTHING, call_id=ANYTHING, timeout=ANYTHING, hook=HOOKS, listen=st.booleans())
def test_executor_call_never_raises(edge_project, name, arguments, call_id, timeout, hook, listen) -> None:  # type: ignore[no-untyped-def]
    from toolexec import ToolResult
    from toolexec.runtimes.process import CallControl

    def failing_listener(event: dict) -> None:
        raise Boom("the progress callback failed")

    edge_project.before_call = hook
    control = CallControl(on_event=failing_listener) if listen else None
    try:
        result = edge_project.call(name, arguments, call_id=call_id, timeout=timeout, cancel=control)
    finally:
        edge_project.before_call = None
        if control is not None:
            control.close()
    assert isinstance(result, ToolResult)
    assert result.ok == (result.status == "ok") and (result.exit_code == 0) == result.ok
    assert result.reason != "internal", result.error  # every path is a result of its own kind, not the safety net's


@pytest.mark.parametrize(
    ("name", "status", "reason"),
    [("fifo", "error", "tool_failed"), ("noint", "unavailable", "unavailable"), ("progress", "ok", None)],
)
@pytest.mark.parametrize("hook", [None, raising_hook, async_hook], ids=["no-hook", "raising-hook", "async-hook"])
def test_each_edge_tool_ends_in_its_own_result(edge_project, name: str, status: str, reason: str | None, hook) -> None:  # type: ignore[no-untyped-def]
    from toolexec.runtimes.process import CallControl

    def failing_listener(event: dict) -> None:
        raise Boom("the progress callback failed")

    edge_project.before_call = hook
    control = CallControl(on_event=failing_listener)
    try:
        result = edge_project.call(name, {}, cancel=control)
    finally:
        edge_project.before_call = None
        control.close()
    if hook is raising_hook:  # a failing hook denies
        assert (result.status, result.reason) == ("refused", "denied")
    else:
        assert (result.status, result.reason) == (status, reason), result.error
