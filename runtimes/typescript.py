"""TypeScript tools: plain ``node`` on a cached transpile when possible, else tsx.

A shebang or ``runtimes.typescript`` naming another runtime (bun, deno, tsx) gets the ``.ts`` file
itself. For node (by default the Node extra's, else PATH's) the order is: an esbuild bundle, node's
own type stripping (Node >= 22.13), an installed tsx, then tsx fetched by ``npx``. Both transpiles
are cached (:mod:`toolexec.runtimes.transpile`); tsx runs as node's loader with its cache off, so
nothing lands in ``$TMPDIR``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from toolexec.errors import RuntimeUnavailable
from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Context
from toolexec.runtimes.javascript import BOOTSTRAP, JavaScriptRuntime
from toolexec.runtimes.transpile import ESBUILD_FLAGS, stripped, transpiled

__all__ = ["ESBUILD_FLAGS", "TypeScriptRuntime", "find_program"]

# Set before tsx's loader is imported: with its cache off, tsx writes nothing under $TMPDIR.
TSX_NO_CACHE = 'data:text/javascript,process.env.TSX_DISABLE_CACHE="1"'
NPX_TIMEOUT = 300  # seconds for npx to fetch tsx the first time
ADVICE = "install the Node extra (pip install 'toolexec[node]') or set runtimes.typescript in config.yaml"


class TypeScriptRuntime(JavaScriptRuntime):
    def command(self, declaration: ToolDeclaration, interpreter: list[str], context: Context) -> list[str]:
        if len(interpreter) > 1 or Path(interpreter[0]).name != "node":
            return [*interpreter, str(BOOTSTRAP), declaration.source]
        node = interpreter[0]
        cache = context.state_dir / "cache" / ".typescript"
        esbuild = find_program("esbuild", context)
        if esbuild is not None:
            return [node, str(BOOTSTRAP), str(transpiled(declaration.source, esbuild, cache))]
        javascript = stripped(declaration.source, node, cache)
        if javascript is not None:
            return [node, str(BOOTSTRAP), str(javascript)]
        tried = ["esbuild (not found)", f"node's own type stripping ({node} has none; it needs Node >= 22.13)"]
        tsx = find_program("tsx", context)
        if tsx is None:
            tried.append("tsx (not found)")
            tsx = _tsx_from_npx(cache, tried)
        if tsx is None:
            raise RuntimeUnavailable("tsx", f"tried {', '.join(tried)}; {ADVICE}")
        return [*_under_tsx(node, tsx), str(BOOTSTRAP), declaration.source]


def find_program(name: str, context: Context) -> str | None:
    """``name`` from TOOLEXEC_<NAME>, PATH, or a node_modules/.bin of the venv, functions or working directory."""
    candidates = [
        os.environ.get(f"TOOLEXEC_{name.upper()}"),
        shutil.which(name),
        *(str(base / "node_modules" / ".bin" / name) for base in (Path(sys.prefix) / "node", context.functions_dir, context.cwd)),
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def _under_tsx(node: str, tsx: str) -> list[str]:
    """The argv prefix running a script under tsx: ``node`` with tsx's loader when tsx is its npm package."""
    cli = Path(os.path.realpath(tsx))
    loader = cli.with_name("loader.mjs")
    if cli.name == "cli.mjs" and loader.is_file():
        return [node, "--import", TSX_NO_CACHE, "--import", loader.as_uri()]
    return [tsx]  # some other tsx launcher: run it as it is


def _tsx_from_npx(cache: Path, tried: list[str]) -> str | None:
    """tsx as ``npx`` fetches it (once; the path is remembered in the cache), or None saying why in ``tried``."""
    remembered = cache / "npx-tsx.path"
    try:
        known = remembered.read_text().strip()
        if os.access(known, os.X_OK):
            return known
    except OSError:
        pass
    npx = shutil.which("npx")
    if npx is None:
        tried.append("npx tsx (npx not found)")
        return None
    with tempfile.TemporaryDirectory(prefix="toolexec-npx-") as private:  # npm's temporary files go, and go away
        try:
            done = subprocess.run(
                [npx, "--yes", "--package", "tsx", "--call", "command -v tsx"],
                capture_output=True,
                text=True,
                env={**os.environ, "TMPDIR": private},
                stdin=subprocess.DEVNULL,
                timeout=NPX_TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            tried.append(f"npx tsx (npx could not fetch tsx within {NPX_TIMEOUT}s)")
            return None
    found = done.stdout.strip().splitlines()[-1:] if done.returncode == 0 else []
    if not found or not os.access(found[0], os.X_OK):
        lines = [line for line in done.stderr.splitlines() if line.strip() and "complete log" not in line]
        why = next((line for line in lines if " code " in line), lines[-1] if lines else f"exit status {done.returncode}")
        tried.append(f"npx tsx (npx could not fetch tsx: {why.strip()})")
        return None
    try:
        cache.mkdir(parents=True, exist_ok=True)
        remembered.write_text(found[0])
    except OSError:
        pass  # not remembered: the next call asks npx again
    return found[0]
