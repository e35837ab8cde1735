"""TypeScript tools: plain ``node`` on a cached esbuild transpile when possible, else tsx.

A shebang or ``runtimes.typescript`` naming another runtime (bun, deno, tsx) gets
the ``.ts`` file itself. The transpile is keyed by the source's hash and checked
against every input esbuild read (sibling imports are inlined), so an edit to
any of them is never answered with stale code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from toolexec.errors import PreparationFailed, RuntimeUnavailable
from toolexec.paths import write_json_atomic
from toolexec.records import ToolDeclaration
from toolexec.runtimes.base import Context
from toolexec.runtimes.javascript import BOOTSTRAP, JavaScriptRuntime

ESBUILD_FLAGS = ("--bundle", "--packages=external", "--format=esm", "--platform=node", "--target=node18", "--log-level=error")


class TypeScriptRuntime(JavaScriptRuntime):
    def command(self, declaration: ToolDeclaration, interpreter: list[str], context: Context) -> list[str]:
        if len(interpreter) > 1 or Path(interpreter[0]).name != "node":
            return [*interpreter, str(BOOTSTRAP), declaration.source]
        esbuild = find_program("esbuild", context)
        if esbuild is not None:
            cache = context.state_dir / "cache" / ".typescript"
            return [*interpreter, str(BOOTSTRAP), str(transpiled(declaration.source, esbuild, cache))]
        tsx = find_program("tsx", context)
        if tsx is not None:
            return [tsx, str(BOOTSTRAP), declaration.source]
        npx = shutil.which("npx")
        if npx is None:
            raise RuntimeUnavailable("npx", "install Node.js with npm, or esbuild (npm install esbuild), to run TypeScript tools")
        return [npx, "--yes", "tsx", str(BOOTSTRAP), declaration.source]


def find_program(name: str, context: Context) -> str | None:
    """``name`` from TOOLEXEC_<NAME>, PATH, or a node_modules/.bin of the venv, functions or working directory."""
    candidates = [
        os.environ.get(f"TOOLEXEC_{name.upper()}"),
        shutil.which(name),
        *(str(base / "node_modules" / ".bin" / name) for base in (Path(sys.prefix) / "node", context.functions_dir, context.cwd)),
    ]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


def transpiled(source: str, esbuild: str, cache: Path) -> Path:
    """The cached JavaScript for ``source``, rebuilt when it or anything it imports changed.

    Safe under concurrency: threads of one process build a key once (a lock per key); processes
    build into private files and publish each file with an atomic rename.
    """
    key = hashlib.sha256(Path(source).read_bytes() + " ".join(ESBUILD_FLAGS).encode()).hexdigest()[:32]
    output, inputs_file = cache / f"{key}.mjs", cache / f"{key}.inputs.json"
    if _fresh(output, inputs_file):
        return output
    with _lock(key):
        if _fresh(output, inputs_file):  # another thread built it while this one waited
            return output
        private = f"{os.getpid()}.{threading.get_ident()}"
        metafile, staging = cache / f".{key}.{private}.meta.json", cache / f".{key}.{private}.mjs"
        try:
            cache.mkdir(parents=True, exist_ok=True)
            done = subprocess.run(
                [esbuild, source, *ESBUILD_FLAGS, f"--outfile={staging}", f"--metafile={metafile}"],
                capture_output=True,
                text=True,
                cwd=Path(source).parent,
            )
            if done.returncode != 0:
                raise PreparationFailed(esbuild, f"could not transpile {source}:\n{done.stderr.strip()}")
            read = json.loads(metafile.read_text())["inputs"]
            base = Path(source).parent
            inputs = {str((base / p).resolve()): _stat((base / p).resolve()) for p in read}
            os.replace(staging, output)
            write_json_atomic(inputs_file, inputs)
            return output
        except OSError as exc:
            raise PreparationFailed(esbuild, f"could not write its output to {cache}: {exc.strerror or exc}") from None
        finally:
            for leftover in (metafile, staging):
                leftover.unlink(missing_ok=True)


def _fresh(output: Path, inputs_file: Path) -> bool:
    try:
        inputs = json.loads(inputs_file.read_text())
        return output.exists() and all(_stat(Path(p)) == stat for p, stat in inputs.items())
    except (OSError, ValueError, TypeError, AttributeError):
        return False


_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]
