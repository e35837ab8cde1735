"""The TypeScript transpile cache: ``<private state>/typescript/<key>.mjs``, built by esbuild or by node itself.

A key is the hash of the tool's source and of the recipe; ``<key>.inputs.json`` lists every file the
build read with its stat (taken before the read, and trusted only once older than the build by a tick of the
file system's clock: :func:`toolexec.runtimes.loaded.racy`), so an edit to any of them is never answered with stale code, and the digest
of every module the build wrote: a module changed since (by a tool, say) is built again, never run. Safe under
concurrency: threads of one process build a key once (a lock per key); processes build into private
files and publish each file with an atomic rename, the inputs file last.

esbuild bundles sibling imports into one file. Node's own ``stripTypeScriptTypes`` (Node >= 22.13)
transforms one file at a time, so the tool's relative imports are rewritten to absolute file URLs:
a TypeScript sibling is transpiled too (``<key>.<digest of its path>.mjs``), a JavaScript one is
imported from where it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from toolexec.errors import PreparationFailed
from toolexec.runtimes.loaded import racy
from toolexec.state import path_key, sha256_hex, write_json_atomic

ESBUILD_FLAGS = ("--bundle", "--packages=external", "--format=esm", "--platform=node", "--target=node18", "--log-level=error")
NODE_RECIPE = "node stripTypeScriptTypes transform v1"
# What each way of transpiling is made with: a cached output is used only when it was made the same way.
RECIPES = {"esbuild": " ".join(ESBUILD_FLAGS), "node": NODE_RECIPE}
NODE_TRANSPILER = Path(__file__).with_name("node_transpile.mjs")
UNSUPPORTED = 3  # node_transpile.mjs's exit status when this node has no stripTypeScriptTypes
TS_SUFFIXES = (".ts", ".mts", ".cts")
RESOLVE_SUFFIXES = (".ts", ".mts", ".js", ".mjs", ".cjs", "/index.ts", "/index.js", "/index.mjs")

Inputs = dict[str, list[int] | None]


def transpiled(source: str, esbuild: str, cache: Path) -> Path:
    """The cached esbuild bundle of ``source``, rebuilt when it or anything it imports changed."""

    def build(key: str, output: Path, private: str) -> Inputs:
        metafile, staging = cache / f".{key}.{private}.meta.json", cache / f".{key}.{private}.mjs"
        try:
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
            return inputs
        finally:
            for leftover in (metafile, staging):
                leftover.unlink(missing_ok=True)

    return _cached(source, "esbuild", cache, esbuild, build)


def stripped(source: str, node: str, cache: Path) -> Path | None:
    """The cached JavaScript of ``source`` made by ``node``'s own type stripping, or None when that node cannot.

    Only a cache miss starts node; a node found unable is remembered (by path and stat) so later calls
    go straight to the next fallback.
    """
    key = _key(source, "node")
    if _fresh(cache / f"{key}.mjs", cache / f"{key}.inputs.json", NODE_RECIPE):
        return cache / f"{key}.mjs"
    import hashlib  # the rest runs only when the cache misses

    marker = cache / f"no-strip.{hashlib.sha256(repr((os.path.realpath(node), _stat(Path(node)))).encode()).hexdigest()[:16]}"
    if marker.exists():
        return None

    def build(key: str, output: Path, private: str) -> Inputs:
        files, inputs = _import_graph(Path(source), key, cache, output)
        jobs = [
            {"source": str(path), "code": code, "out": str(cache / f".{target.name}.{private}")}
            for path, (code, target) in files.items()
        ]
        try:
            done = subprocess.run(
                [node, "--no-warnings", str(NODE_TRANSPILER)],
                input=json.dumps(jobs),
                capture_output=True,
                text=True,
                cwd=Path(source).parent,
            )
            if done.returncode == UNSUPPORTED:
                marker.touch()
                raise _Unsupported
            if done.returncode != 0:
                raise PreparationFailed(node, f"could not transpile {source}:\n{done.stderr.strip()}")
            # siblings first, the tool itself last: a process that sees the new tool sees its new siblings
            for _, (_, target) in sorted(files.items(), key=lambda item: item[1][1] == output):
                os.replace(cache / f".{target.name}.{private}", target)
            return inputs
        finally:
            for job in jobs:
                Path(job["out"]).unlink(missing_ok=True)

    try:
        return _cached(source, "node", cache, node, build)
    except _Unsupported:
        return None


class _Unsupported(Exception):
    """This node has no ``stripTypeScriptTypes``."""


def _cached(source: str, recipe: str, cache: Path, program: str, build: Callable[[str, Path, str], Inputs]) -> Path:
    key = _key(source, recipe)
    output, inputs_file = cache / f"{key}.mjs", cache / f"{key}.inputs.json"
    if _fresh(output, inputs_file, RECIPES[recipe]):
        return output
    with _lock(key):
        if _fresh(output, inputs_file, RECIPES[recipe]):  # another thread built it while this one waited
            return output
        try:
            cache.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            cache.mkdir(exist_ok=True)
            built = time.time_ns()  # before any input is read: an input changed since proves nothing (see _fresh)
            inputs = build(key, output, f"{os.getpid()}.{threading.get_ident()}")
            digests = {name: sha256_hex((cache / name).read_bytes()) for name in _outputs(cache, key)}
            made = {"recipe": RECIPES[recipe], "inputs": inputs, "digests": digests, "built": built}
            write_json_atomic(inputs_file, made)
            return output
        except OSError as exc:
            raise PreparationFailed(program, f"could not write its output to {cache}: {exc.strerror or exc}") from None


def _key(source: str, recipe: str) -> str:
    """The cache name of ``source`` transpiled by ``recipe`` (a :data:`RECIPES` name): its path, escaped.

    A call finds its output by this name and checks it by the stats of every input (see :func:`_fresh`),
    so nothing is read or hashed when the cache is fresh.
    """
    return f"{path_key(os.path.abspath(source))}.{recipe}"


def _import_graph(source: Path, key: str, cache: Path, output: Path) -> tuple[dict[Path, tuple[str, Path]], Inputs]:
    """Each TypeScript file reachable from ``source`` by relative imports: its code with those imports
    made absolute, and where its JavaScript goes; plus every file read, for freshness."""
    source = source.resolve()
    targets = {source: output}
    files: dict[Path, tuple[str, Path]] = {}
    inputs: Inputs = {}
    pending = [source]
    while pending:
        path = pending.pop()
        inputs[str(path)] = _stat(path)  # before the read: an edit after it changes the stat
        data = path.read_bytes()
        edits: list[tuple[int, int, bytes]] = []
        for start, end, specifier in _relative_specifiers(data):
            named = _resolve(path.parent, specifier)
            found = named.resolve() if named is not None else None
            if named is not None and named != found:  # a symlink: a new link (or none) is an edit too
                inputs[str(named)] = _stat(named)
            if found is None:
                line = data.count(b"\n", 0, start) + 1
                raise PreparationFailed(
                    "node", f"could not transpile {source}:\n{path}:{line}: cannot find the module {specifier!r}"
                )
            if found.suffix in TS_SUFFIXES:
                if found not in targets:
                    import hashlib  # building only

                    digest = hashlib.sha256(str(found).encode()).hexdigest()[:12]
                    targets[found] = cache / f"{key}.{digest}.mjs"
                    pending.append(found)
                url = targets[found].as_uri()
            else:
                inputs[str(found)] = _stat(found)
                url = found.as_uri()
            edits.append((start, end, url.encode()))
        for start, end, absolute in sorted(edits, reverse=True):
            data = data[:start] + absolute + data[end:]
        files[path] = (data.decode("utf-8"), targets[path])
    return files, inputs


def _relative_specifiers(data: bytes) -> list[tuple[int, int, str]]:
    """(start, end, text) of each ``./`` or ``../`` module specifier: static imports, re-exports, ``import("…")``."""
    import tree_sitter
    import tree_sitter_typescript

    tree = tree_sitter.Parser(tree_sitter.Language(tree_sitter_typescript.language_typescript())).parse(data)
    found = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        string = None
        if node.type in ("import_statement", "export_statement"):
            string = node.child_by_field_name("source")
        elif node.type == "call_expression" and (function := node.child_by_field_name("function")) and function.type == "import":
            arguments = node.child_by_field_name("arguments")
            string = arguments.named_children[0] if arguments and arguments.named_children else None
        if string is None or string.type != "string":
            continue
        start, end = string.start_byte + 1, string.end_byte - 1  # inside the quotes
        text = data[start:end].decode("utf-8")
        if text.startswith(("./", "../")):
            found.append((start, end, text))
    return found


def _resolve(base: Path, specifier: str) -> Path | None:
    """The file a relative specifier names, as TypeScript's resolution finds it (``./x`` and ``./x.js`` may be ``x.ts``),
    by the path it is named by (symlinks kept)."""
    plain = Path(os.path.normpath(base / specifier))
    candidates = [plain, *(Path(f"{plain}{suffix}") for suffix in RESOLVE_SUFFIXES)]
    if plain.suffix in (".js", ".mjs"):
        candidates.insert(0, plain.with_suffix(".ts" if plain.suffix == ".js" else ".mts"))
    return next((c for c in candidates if c.is_file()), None)


def _outputs(cache: Path, key: str) -> list[str]:
    """The modules a build of ``key`` wrote: ``<key>.mjs`` and its transpiled siblings ``<key>.<12 hex>.mjs``."""
    found = []
    for name in os.listdir(cache):
        middle = name[len(key) : -len(".mjs")] if name.startswith(key) and name.endswith(".mjs") else None
        if middle == "" or (
            middle and len(middle) == 13 and middle[0] == "." and all(c in "0123456789abcdef" for c in middle[1:])
        ):
            found.append(name)
    return found


def _fresh(output: Path, inputs_file: Path, recipe: str) -> bool:
    """Whether the cached build is current (every input as it was) and intact (every module as it was written)."""
    try:
        made = json.loads(inputs_file.read_text())
        if made["recipe"] != recipe:
            return False
        if not all(_stat(Path(p)) == stat for p, stat in made["inputs"].items()):
            return False
        # An input stamped this close to the build (or after it) may have changed again in the same tick of the file
        # system's clock, unseen by its stat: that build is made again (runtimes/loaded.py)
        built = made["built"]
        if any(stat is None or racy(stat[0], stat[3], built) for stat in made["inputs"].values()):
            return False
        digests = made["digests"]
        if not isinstance(digests, dict) or output.name not in digests:
            return False
        return all(
            isinstance(name, str) and "/" not in name and sha256_hex((output.parent / name).read_bytes()) == digest
            for name, digest in digests.items()
        )
    except (OSError, ValueError, TypeError, AttributeError, KeyError):
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
    # the inode and ctime too: a file replaced by another with the same size and mtime is still new
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns]
