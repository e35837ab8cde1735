"""Installed the ordinary way (a wheel into a fresh venv, offline) toolexec is one import package.

The wheels of toolexec's dependencies and of PyPI's unrelated ``executor`` package come from
the wheelhouse that ``make test`` downloads (``$TOOLEXEC_WHEELHOUSE``, default ``.venv/wheelhouse``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

WHEELHOUSE = Path(os.environ.get("TOOLEXEC_WHEELHOUSE", REPO / ".venv" / "wheelhouse"))
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from the checkout as pip builds it."""
    out = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("toolexec-*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel(built: Path) -> Path:
    """The wheel, with the wheelhouse its dependencies install from (offline)."""
    if not (WHEELHOUSE / ".done").exists():
        if os.environ.get("CI"):
            pytest.fail(f"no wheelhouse at {WHEELHOUSE}: run the tests through `make test`")
        pytest.skip(f"no wheelhouse at {WHEELHOUSE}: run the tests through `make test`")
    return built


REPOSITORY = "https://github.com/toolexec/toolexec"


def test_the_package_page_links_to_the_docs_and_no_link_on_it_is_relative(built: Path) -> None:
    import email
    import re

    with zipfile.ZipFile(built) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    assert sorted(metadata.get_all("Project-URL") or []) == [
        f"Changelog, {REPOSITORY}/blob/main/CHANGELOG.md",
        f"Documentation, {REPOSITORY}/tree/main/docs",
        f"Homepage, {REPOSITORY}",
        f"Issues, {REPOSITORY}/issues",
        f"Source, {REPOSITORY}",
    ]
    assert metadata["Description-Content-Type"] == "text/markdown"
    page = metadata.get_payload(decode=True).decode("utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.compile(r"\]\(([^)\s]+)\)")
    assert len(links.findall(page)) == len(links.findall(readme)) > 10
    assert [target for target in links.findall(page) if not target.startswith("https://")] == []
    for relative in links.findall(readme):  # each relative link points at the same file or heading on GitHub
        if relative.startswith("#"):
            assert f"]({REPOSITORY}{relative})" in page
        elif not relative.startswith("https://"):
            assert f"]({REPOSITORY}/blob/main/{relative})" in page
    assert links.sub("", page) == links.sub("", readme)  # nothing but the links changed


def fresh_venv(root: Path, *requirements: str) -> Path:
    """A new venv holding exactly ``requirements`` (installed offline from the wheelhouse)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "--python", str(python)]
    subprocess.run([*pip, "install", "--no-index", "--find-links", str(WHEELHOUSE), *requirements], check=True)
    return root


def test_the_wheel_adds_only_the_toolexec_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    top = {name.split("/", 1)[0] for name in names}
    assert top == {"toolexec", wheel.name.split("-py3")[0] + ".dist-info"}
    assert {"toolexec/py.typed", "toolexec/compilers/__init__.py", "toolexec/runtimes/node_bootstrap.cjs"} <= set(names)
    assert {"toolexec/runtimes/terminfo/d/dumb", "toolexec/runtimes/terminfo/64/dumb"} <= set(names)
    assert "toolexec/_default/config.yaml" in names and "toolexec/_default/functions/tools/demo_py.py" in names
    with zipfile.ZipFile(wheel) as archive:  # the shipped tools keep their executable bit
        mode = archive.getinfo("toolexec/_default/functions/tools/demo_sh.sh").external_attr >> 16
    assert mode & 0o111 == (REPO / "functions" / "tools" / "demo_sh.sh").stat().st_mode & 0o111


def test_installed_beside_pypi_executor_both_work(wheel: Path, tmp_path: Path) -> None:
    venv = fresh_venv(tmp_path / "venv", str(wheel), "executor")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, cwd=elsewhere, capture_output=True, text=True, timeout=120)

    site = next((venv / "lib").glob("python3*/site-packages"))
    where = run(str(venv / "bin" / "python"), "-c", "import toolexec, executor; print(toolexec.__file__, executor.__file__)")
    assert where.stdout.split() == [str(site / "toolexec" / "__init__.py"), str(site / "executor" / "__init__.py")]
    other = run(str(venv / "bin" / "executor"), "--help")
    assert other.returncode == 0 and "Usage: executor" in other.stdout
    api = run(
        str(venv / "bin" / "python"),
        "-c",
        "from toolexec import Executor; print(Executor().call('demo_py', {'text': 'api'}).output)",
    )
    assert json.loads(api.stdout)["said"] == "api", api.stderr

    listed = run(str(venv / "bin" / "toolexec"), "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("demo_py ")
    ran = run(str(venv / "bin" / "toolexec"), "run", "demo_py", '{"text": "installed"}')
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["said"] == "installed"
    module = run(str(venv / "bin" / "python"), "-m", "toolexec", "run", "demo_py", '{"text": "as a module"}')
    assert json.loads(module.stdout)["said"] == "as a module", module.stderr
    # generated files go to the user cache, never into the installed package
    assert not list((site / "toolexec" / "_default" / "functions").glob("*.json"))
    assert list((Path.home() / ".cache" / "toolexec" / "state").glob("*/functions.json"))


def test_with_the_node_extra_typescript_and_javascript_need_no_system_node(wheel: Path, tmp_path: Path) -> None:
    """`pip install 'toolexec[node]'` in a venv whose PATH has no node, npm or npx: TS (with an enum) and JS tools run."""
    venv = fresh_venv(tmp_path / "venv", f"{wheel}[node]")
    project = tmp_path / "project"
    (project / "functions" / "tools").mkdir(parents=True)
    (project / "functions" / "tools" / "convert.ts").write_text(
        'enum Units { C = "c", F = "f" }\n/** Convert. */\nexport function run(units: Units): string {\n'
        '  return `${units === Units.F ? "fahrenheit" : "celsius"} on node ${process.versions.node.split(".")[0]}`;\n}\n'
    )
    (project / "functions" / "tools" / "hello.mjs").write_text(
        "/**\n * Hello.\n * @param {string} name - Name.\n */\nexport function run(name) {\n  return `hello ${name} on ${process.version.split('.')[0]}`;\n}\n"
    )
    (project / "config.yaml").write_text("visible_tools: [convert.ts, hello.mjs]\n")
    path = str(venv / "bin")
    assert [shutil.which(program, path=path) for program in ("node", "npm", "npx")] == [None, None, None]
    env = {**os.environ, "PATH": path}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "toolexec"), *argv], cwd=project, env=env, capture_output=True, text=True, timeout=120
        )

    converted = run("run", "convert", '{"units": "f"}')
    assert (converted.returncode, converted.stdout, converted.stderr) == (0, "fahrenheit on node 24", "")
    hello = run("run", "hello", '{"name": "zoë"}')
    assert (hello.returncode, hello.stdout, hello.stderr) == (0, "hello zoë on v24", "")
