"""Installed the ordinary way (a wheel, not editable) toolexec works from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_wheel_install_uses_the_embedded_defaults(tmp_path: Path) -> None:
    wheels, target, elsewhere = tmp_path / "wheels", tmp_path / "site", tmp_path / "elsewhere"
    elsewhere.mkdir()
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)], check=True, capture_output=True
    )
    (wheel,) = wheels.glob("toolexec-*.whl")
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)], check=True, capture_output=True
    )
    env = {**os.environ, "PYTHONPATH": str(target)}

    def toolexec(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "executor", *args], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=120
        )

    where = subprocess.run(
        [sys.executable, "-c", "import executor; print(executor.__file__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip() == str(target / "executor" / "__init__.py")
    listed = toolexec("list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("demo_py ")
    ran = toolexec("run", "demo_py", '{"text": "installed"}')
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["said"] == "installed"
    # generated files go to the user cache, never into the installed package
    assert not list((target / "executor" / "_default" / "functions").glob("*.json"))
    assert list((Path.home() / ".cache" / "toolexec" / "state").glob("*/functions.json"))
