"""Shared fixtures: every test runs against a private HOME, cache and config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from current output")


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME, XDG dirs and the working directory at a fresh temporary tree."""
    home = tmp_path_factory.mktemp("home")
    for var, sub in (("HOME", ""), ("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache")):
        (home / sub).mkdir(exist_ok=True)
        monkeypatch.setenv(var, str(home / sub))
    monkeypatch.delenv("TOOLEXEC_CONFIG", raising=False)
    for name in list(os.environ):
        if name.startswith("LLM_"):
            monkeypatch.delenv(name)
    work = tmp_path_factory.mktemp("work")
    monkeypatch.chdir(work)
    return work


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))
