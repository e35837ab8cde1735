"""TypeScript tools: plain ``node`` on a cached transpile when possible, else tsx.

A shebang or ``runtimes.typescript`` naming another runtime (bun, deno, tsx) gets the ``.ts`` file
itself. For node (by default the Node extra's, else PATH's) the order is: an esbuild bundle, node's
own type stripping (Node >= 22.13), an installed tsx, then tsx fetched by ``npx``. Both transpiles
are cached (:mod:`toolexec.runtimes.transpile`); tsx runs as node's loader with its cache off, so
nothing lands in ``$TMPDIR``.
"""

from __future__ import annotations

import os
from pathlib import Path

from toolexec.errors import RuntimeUnavailable
from toolexec.records import ToolDeclaration
from toolexec.recordtype import replace
from toolexec.runtimes.base import Prepared, Site
from toolexec.runtimes.interpreter import default_node, find_program, is_plain_node, launcher_for, resolve
from toolexec.runtimes.javascript import BOOTSTRAP, awaits_file_limit, compile_cache, request, warm_spec
from toolexec.runtimes.transpile import ESBUILD_FLAGS, stripped, transpiled

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ESBUILD_FLAGS", "TypeScriptRuntime"]

# Set before tsx's loader is imported: with its cache off, tsx writes nothing under $TMPDIR.
TSX_NO_CACHE = 'data:text/javascript,process.env.TSX_DISABLE_CACHE="1"'
NPX_TIMEOUT = 300  # seconds for npx to fetch tsx the first time
# TypeScript runners a shebang may name that toolexec can stand in for when they are not installed.
FALLBACK_RUNNERS = ("tsx", "ts-node", "ts-node-esm")
ADVICE = "install the Node extra (pip install 'toolexec[node]') or set runtimes.typescript in config.yaml"


class TypeScriptRuntime:
    """The JavaScript bootstrap, given the tool's transpiled JavaScript when the interpreter is plain node."""

    def prepare(self, tool: ToolDeclaration, arguments: dict[str, Any], site: Site) -> Prepared:
        """The launch: a named runtime (bun, deno, tsx) gets the ``.ts`` file itself."""
        notes: tuple[str, ...] = ()
        try:
            interpreter, env = launcher_for(tool, site)
        except RuntimeUnavailable:
            if not (tool.shebang and Path(tool.shebang[0]).name in FALLBACK_RUNNERS):
                raise
            # A runner named by the shebang but not installed: Node is right there.
            interpreter, env = launcher_for(replace(tool, shebang=()), site)
            notes = (
                f"the shebang names {tool.shebang[0]}, which is not installed; ran with toolexec's own TypeScript runtime instead",
            )
        if is_plain_node(interpreter):
            argv = _on_node(tool.source, interpreter[0], site)
        else:
            argv = [*(_named_tsx(interpreter, site) or interpreter), str(BOOTSTRAP), tool.source]
        additions = {**compile_cache(argv, site), **env}
        return Prepared(
            argv=argv,
            stdin=request(tool, arguments),
            env_additions=additions,
            notes=notes,
            awaits_file_limit=awaits_file_limit(argv),
            warm=warm_spec(tool, argv, site, additions, runs=argv[-1] if argv[-1] != tool.source else None),
        )


def _on_node(source: str, node: str, site: Site) -> list[str]:
    """Plain node: an esbuild bundle, node's own type stripping, an installed tsx, then tsx from npx."""
    cache = site.state.transpile_dir
    esbuild = find_program("esbuild", site)
    if esbuild is not None:
        return [node, str(BOOTSTRAP), str(transpiled(source, esbuild, cache))]
    javascript = stripped(source, node, cache)
    if javascript is not None:
        return [node, str(BOOTSTRAP), str(javascript)]
    tried = ["esbuild (not found)", f"node's own type stripping ({node} has none; it needs Node >= 22.13)"]
    tsx = find_program("tsx", site)
    if tsx is None:
        tried.append("tsx (not found)")
        tsx = _tsx_from_npx(cache, tried)
    if tsx is None:
        raise RuntimeUnavailable("tsx", f"tried {', '.join(tried)}; {ADVICE}")
    return [*_under_tsx(node, tsx), str(BOOTSTRAP), source]


def _named_tsx(interpreter: list[str], site: Site) -> list[str] | None:
    """tsx named by the shebang or config (``tsx``, ``npx tsx``), as node with tsx's loader and its cache
    off, so that nothing lands in ``$TMPDIR`` (tsx's own CLI always makes ``$TMPDIR/tsx-<uid>/``); an
    ``npx tsx`` that cannot fetch tsx (offline) is unavailable, saying so, never an npm log as a tool
    failure. None for any other runtime, or a tsx that is not the npm package."""
    names = [Path(word).name for word in interpreter]
    if names == ["tsx"]:
        tsx = interpreter[0]
    elif names in (["npx", "tsx"], ["npx", "--yes", "tsx"], ["npx", "-y", "tsx"]):
        tried: list[str] = []
        fetched = _tsx_from_npx(site.state.transpile_dir, tried)
        if fetched is None:
            raise RuntimeUnavailable("tsx", f"tried {', '.join(tried)}; {ADVICE}")
        tsx = fetched
    else:
        return None
    node = resolve(default_node(), "typescript")[0]
    prefix = _under_tsx(node, tsx)
    return prefix if prefix != [tsx] else None


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
    import shutil
    import subprocess
    import tempfile  # npx is the last resort: only it pays for these imports

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
