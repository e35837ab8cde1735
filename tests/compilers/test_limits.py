"""Per-tool call limits declared in the source, one convention per language."""

from __future__ import annotations

import pytest

from tests.conftest import Project
from toolexec.compilers import compile_source
from toolexec.errors import CompileError
from toolexec.records import Limits

DECLARED = {
    "t.py": 'def run():\n    """Doc.\n\n    Timeout: 90\n    Max output bytes: 4096\n    """\n',
    "t.sh": "# @describe Doc.\n# @meta timeout 90\n# @meta max_output_bytes 4096\nmain() { :; }\n",
    "t.ts": "/**\n * Doc.\n * @timeout 90\n * @max_output_bytes 4096\n */\nexport function run() {}\n",
    "t.js": "/**\n * Doc.\n * @typedef {Object} Args\n * @property {string} a - A.\n * @timeout 90\n * @max_output_bytes 4096\n */\nexports.run = function (args) {};\n",
}
WRONG = {
    "t.py": (
        'def run():\n    """Doc.\n\n    Max output bytes: lots\n    """\n',
        "'Max output bytes: lots' is not a whole number of bytes",
    ),
    "t.sh": (
        "# @describe Doc.\n# @meta max_output_bytes 1.5\nmain() { :; }\n",
        "'# @meta max_output_bytes 1.5' is not a whole number of bytes",
    ),
    "t.ts": ("/**\n * Doc.\n * @timeout -3\n */\nexport function run() {}\n", "'@timeout -3' is not a number of seconds"),
}


@pytest.mark.parametrize("path", sorted(DECLARED))
def test_limits_are_read(path: str) -> None:
    assert compile_source(DECLARED[path], path).limits == Limits(timeout=90.0, max_output_bytes=4096)


@pytest.mark.parametrize("path", sorted(WRONG))
def test_wrong_limits_are_errors(path: str) -> None:
    source, message = WRONG[path]
    with pytest.raises(CompileError) as error:
        compile_source(source, path)
    assert [p.message for p in error.value.problems] == [message]


def test_a_tools_own_output_cap_wins_over_config(project: Project) -> None:
    project.tool(
        "chatty.sh", "# @describe Chatty.\n# @meta max_output_bytes 100\nmain() { printf 'x%.0s' {1..1000} >>\"$LLM_OUTPUT\"; }\n"
    )
    result = project.executor(max_output_bytes=1 << 20).call("chatty", {})
    assert result.output == "x" * 50 + "\n[… 900 bytes of output dropped …]\n" + "x" * 50
