"""The caller's environment as a call reads it (:func:`caller_environment`): made once per state of ``os.environ``,
yet every change to ``os.environ`` (a new variable, a new value, one removed) is in the next call's."""

from __future__ import annotations

import os

import pytest

from tests.conftest import Project
from toolexec.runtimes import environment
from toolexec.runtimes.environment import caller_environment, otel_variables


def test_every_change_to_os_environ_is_read_and_secrets_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLEXEC_T_KEPT", "one")
    monkeypatch.setenv("TOOLEXEC_T_SECRET", "hidden")
    monkeypatch.setenv("AWS_T_KEY", "hidden too")
    first = caller_environment(("TOOLEXEC_T_SECRET", "AWS_*"))
    assert (first["TOOLEXEC_T_KEPT"], "TOOLEXEC_T_SECRET" in first, "AWS_T_KEY" in first) == ("one", False, False)
    assert caller_environment(("TOOLEXEC_T_SECRET", "AWS_*")) is first  # unchanged: not made again
    assert caller_environment()["TOOLEXEC_T_SECRET"] == "hidden"  # another rule: its own copy
    monkeypatch.setenv("TOOLEXEC_T_KEPT", "two")  # a new value, of the same length
    monkeypatch.setenv("TOOLEXEC_T_NEW", "\udcff")  # a new variable, not UTF-8: as os.environ gives it
    changed = caller_environment(("TOOLEXEC_T_SECRET", "AWS_*"))
    assert (changed["TOOLEXEC_T_KEPT"], changed["TOOLEXEC_T_NEW"]) == ("two", os.environ["TOOLEXEC_T_NEW"])
    monkeypatch.delenv("TOOLEXEC_T_KEPT")
    assert "TOOLEXEC_T_KEPT" not in caller_environment(("TOOLEXEC_T_SECRET", "AWS_*"))
    assert dict(caller_environment()) == dict(os.environ)


def test_otel_variables_follow_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    assert otel_variables() is False
    monkeypatch.setenv("OTEL_T_SERVICE_NAME", "x")
    assert otel_variables() is True
    monkeypatch.delenv("OTEL_T_SERVICE_NAME")
    assert otel_variables() is False


def test_a_variable_set_between_two_calls_reaches_the_second(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    project.tool("show.sh", '#!/usr/bin/env bash\n# @describe Show.\nmain() { printf "%s" "${T_VALUE-unset}" >"$LLM_OUTPUT"; }\n')
    monkeypatch.delenv("T_VALUE", raising=False)
    with project.executor() as executor:
        seen = [executor.call("show", {}).output]
        monkeypatch.setenv("T_VALUE", "first")
        seen.append(executor.call("show", {}).output)
        monkeypatch.setenv("T_VALUE", "again")
        seen.append(executor.call("show", {}).output)
        monkeypatch.delenv("T_VALUE")
        seen.append(executor.call("show", {}).output)
    assert seen == ["unset", "first", "again", "unset"]
    assert environment._seen is not None and environment._seen.raw == os.environ._data  # type: ignore[attr-defined]
