"""The sandbox policy vocabulary (``toolexec.policy``): values read the same from every language and from config."""

from __future__ import annotations

from typing import Any

import pytest

from toolexec.policy import effective, read_field
from toolexec.records import Sandbox


@pytest.mark.parametrize(
    ("field", "value", "read"),
    [
        ("memory", "256 MiB", 256 << 20),
        ("memory", "256MiB", 256 << 20),
        ("memory", "10MB", 10_000_000),
        ("memory", "1G", 1 << 30),
        ("memory", "1.5 GiB", 3 << 29),
        ("memory", 4096, 4096),
        ("file_size", "2kib", 2048),
        ("cpu", "10 s", 10),
        ("cpu", "2 min", 120),
        ("cpu", 7, 7),
        ("processes", "64", 64),
        ("network", "NONE", "none"),
        ("network", True, "all"),
        ("network", "api.github.com, localhost:8080", ("api.github.com", "localhost:8080")),
        ("network", ["[::1]:8080", "*.example.com"], ("[::1]:8080", "*.example.com")),
        ("writes", "cache,cwd ~/notes /srv/out", ("cache", "cwd", "~/notes", "/srv/out")),
        ("writes", [], ()),
        ("env", "A_1 b", ("A_1", "b")),
    ],
)
def test_values_each_language_writes(field: str, value: Any, read: Any) -> None:
    assert read_field(field, value) == (field, read)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("memory", 0, "must be a size such as 256 MiB, 10MB or a whole number of bytes, not 0"),
        ("memory", True, "must be a size such as 256 MiB, 10MB or a whole number of bytes, not True"),
        ("memory", "12 parsecs", "must be a size such as 256 MiB, 10MB or a whole number of bytes, not '12 parsecs'"),
        ("cpu", "1.5", "must be a whole number of seconds such as 10 or 10 s, not '1.5'"),
        ("processes", -3, "must be a positive whole number such as 64, not -3"),
        ("network", "", "must be none, all, or a list of host[:port] names such as api.github.com, localhost:8080"),
        (
            "network",
            "none, example.com",
            "'none' is not a host[:port] name (write none, all, or names such as api.github.com:443)",
        ),
        ("reads", "cache", "'cache' is not an absolute path or a ~/ path"),
        ("env", "A-B", "'A-B' is not a variable name"),
        ("size", 3, "is not a sandbox field (they are network, writes, reads, env, memory, cpu, processes, file_size)"),
    ],
)
def test_bad_values_say_what_was_expected(field: str, value: Any, problem: str) -> None:
    assert read_field(field, value) == problem


def test_which_policy_a_call_runs_under() -> None:
    declared, configured = Sandbox(network="all"), Sandbox(network="none")
    assert effective("off", {"t": configured}, "t", declared) is None
    assert effective("declared", {}, "t", None) is None
    assert effective("declared", {}, "t", declared) == declared
    assert effective("declared", {"t": configured}, "t", declared) == configured  # config replaces the script
    assert effective("strict", {}, "t", None) == Sandbox()  # the baseline
    assert effective("strict", {}, "t", declared) == declared
