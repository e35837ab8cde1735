"""What a Python tool's ``run`` receives: Enum members, ``Field`` defaults, None for optional-by-type parameters.

Real interpreters (the test's own Python, which has pydantic through the MCP SDK) and real calls through
the executor: the schema the compiler wrote and the values the bootstrap passes must agree.
"""

from __future__ import annotations

import json
import sys

import pytest

from tests.conftest import REPO, Project

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

CASES = REPO / "tests" / "compilers" / "cases" / "python"

DEFAULTS = '''
from typing import Annotated, Optional, Union

from pydantic import Field


def run(
    a: Optional[str],
    b: int | None,
    c: Annotated[int, Field(default=7, le=10)],
    d: Union[float, None] = Field(None, ge=0),
    e: str = Field(default="east", max_length=5),
    f: list[int] = Field(default=[1, 2]),
) -> dict:
    """Report what run was given."""
    return {"a": a, "b": b, "c": c, "d": d, "e": e, "f": f}
'''


def test_enum_parameters_receive_members(project: Project) -> None:
    project.tool("enums.py", (CASES / "enums.py").read_text(encoding="utf-8"))  # the compiler's golden case
    executor = project.executor(runtimes={"python": sys.executable})
    result = executor.call("enums", {"color": "green", "levels": [3, 1], "unit": 2})
    assert result.ok, result.stderr
    assert json.loads(result.output) == {
        "color": "Color.GREEN",
        "levels": ["Level.HIGH", "Level.LOW"],
        "mode": "Mode.SAFE",
        "unit": "Unit.FOOT",
    }
    result = executor.call("enums", {"color": "red", "levels": [], "mode": "fast", "unit": None})
    assert json.loads(result.output) == {"color": "Color.RED", "levels": [], "mode": "Mode.FAST", "unit": None}
    refused = executor.call("enums", {"color": "blue", "levels": []})
    assert (refused.ok, refused.reason) == (False, "invalid_arguments")
    assert (
        refused.error
        == 'invalid arguments for tool \'enums\':\n- parameter \'color\': expected one of "red", "green", got "blue"'
    )


def test_left_out_parameters_get_their_declared_defaults(project: Project) -> None:
    project.tool("defaults.py", DEFAULTS)
    executor = project.executor(runtimes={"python": sys.executable})
    result = executor.call("defaults", {})
    assert result.ok, result.stderr
    assert json.loads(result.output) == {"a": None, "b": None, "c": 7, "d": None, "e": "east", "f": [1, 2]}
    given = {"a": "x", "b": 1, "c": 10, "d": 0.5, "e": "west", "f": []}
    assert json.loads(executor.call("defaults", given).output) == given
    too_big = executor.call("defaults", {"c": 11})
    assert (too_big.ok, too_big.reason) == (False, "invalid_arguments")
