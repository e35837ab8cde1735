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
