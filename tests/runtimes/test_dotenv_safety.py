"""A ``.env`` file never makes a shell or an interpreter run code before the tool: the variables that
would (BASH_ENV, NODE_OPTIONS, PYTHONPATH, LD_PRELOAD, ...) are dropped from every ``.env`` toolexec reads,
in every language, while ordinary variables still arrive."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Project
from toolexec.runtimes.environment import UNSAFE_DOTENV_VARIABLES, without_unsafe

SHOW = ["GREETING", "BASH_ENV", "NODE_OPTIONS", "PYTHONPATH", "LD_PRELOAD", "BASH_FUNC_x%%"]


def _plant(tmp_path: Path) -> dict[str, str]:
    """Code each unsafe variable would run, every piece leaving a marker file when it runs."""
    marker = tmp_path / "ran"
    (tmp_path / "evil.sh").write_text(f"echo bash_env >>{marker}\n")
    (tmp_path / "evil.cjs").write_text(f"require('fs').appendFileSync({str(marker)!r}, 'node_options\\n')\n")
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'a').write('pythonpath\\n')\n")
    return {
        "GREETING": "hello",
        "BASH_ENV": str(tmp_path / "evil.sh"),
        "ENV": str(tmp_path / "evil.sh"),
        "NODE_OPTIONS": f"--require {tmp_path / 'evil.cjs'}",
        "PYTHONPATH": str(tmp_path / "py"),
        "LD_PRELOAD": str(tmp_path / "missing.so"),
    }


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*UNSAFE_DOTENV_VARIABLES, "LD_PRELOAD", "GREETING"]:
        monkeypatch.delenv(name, raising=False)


def _tools(project: Project) -> None:
    project.tool(
        "show_sh.sh",
        "#!/usr/bin/env bash\n# @describe Shows variables.\nmain() {\n"
        + "".join(f'    echo "{n}=${{{n}:-}}" >>"$LLM_OUTPUT"\n' for n in SHOW[:5])
        + "}\n",
    )
    project.tool(
        "show_py.py",
        'import os\n\ndef run() -> str:\n    """Shows variables."""\n'
        f"    return ''.join(f'{{n}}={{os.environ.get(n, \"\")}}\\n' for n in {SHOW[:5]!r})\n",
    )
    project.tool(
        "show_js.js",
        "/**\n * Shows variables.\n * @typedef {Object} Args\n * @param {Args} args\n */\n"
        "export function run() {\n"
        f"  return {SHOW[:5]!r}.map((n) => `${{n}}=${{process.env[n] ?? ''}}\\n`).join('');\n}};\n",
    )


@pytest.mark.parametrize("where", [".env", "tools/.env"])
def test_dotenv_files_never_start_code_before_the_tool(project: Project, tmp_path: Path, clean: None, where: str) -> None:
    values = _plant(tmp_path)
    (project.root / "functions" / where).write_text(
        "".join(f"{k}={v}\n" for k, v in values.items()) + "BASH_FUNC_x%%=() { :; }\n"
    )
    _tools(project)
    executor = project.executor()
    expected = "GREETING=hello\nBASH_ENV=\nNODE_OPTIONS=\nPYTHONPATH=\nLD_PRELOAD=\n"
    for tool in ("show_sh", "show_py", "show_js"):
        result = executor.call(tool, {})
        assert (result.ok, result.output, result.stderr) == (True, expected, ""), (tool, result.error)
    assert not (tmp_path / "ran").exists()


def test_meta_dotenv_never_starts_code_before_the_tool(project: Project, tmp_path: Path, clean: None) -> None:
    values = _plant(tmp_path)
    (project.tools / "tool.env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    project.tool(
        "dot.sh",
        "#!/usr/bin/env bash\n# @describe Reads a dotenv file.\n# @meta dotenv tool.env\n"
        'main() {\n    echo "$GREETING ${BASH_ENV:-none} ${LD_PRELOAD:-none}" >>"$LLM_OUTPUT"\n}\n',
    )
    result = project.executor().call("dot", {})
    assert (result.ok, result.output, result.stderr) == (True, "hello none none\n", "")
    assert not (tmp_path / "ran").exists()


def test_without_unsafe_keeps_ordinary_variables() -> None:
    given = {
        "API_KEY": "k",
        "HTTP_FETCH_ALLOW_HOSTS": "localhost",
        "LD_LIBRARY_PATH": "/x",
        "DYLD_INSERT_LIBRARIES": "/y",
        "IFS": "x",
    }
    assert without_unsafe(given) == {"API_KEY": "k", "HTTP_FETCH_ALLOW_HOSTS": "localhost"}
