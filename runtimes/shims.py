"""Version-manager shims resolved once to the interpreter they pick.

pyenv, asdf and rbenv-style managers put a script named ``python3`` (or ``node``) in a ``shims`` directory on PATH;
each start of it runs the manager (pyenv: about 30 bash programs, tens of milliseconds) to decide which version's
interpreter to ``exec``. A tool call starting the shim pays that every time, more than the interpreter's own start.

Here a shim is asked once which interpreter it picks and with what ``PATH`` (its manager puts the version's ``bin``
first), and calls start that interpreter directly with that ``PATH``: what runs is exactly what the shim would run.
The answer is kept (in memory, and for one-shot runs in toolexec's private cache) under everything that decides it:
the shim file, the working directory, the environment, and every version file a manager reads (``.python-version``,
``.tool-versions``, ``.node-version``, ``.nvmrc``, ``mise.toml`` in the working directory and its parents and in
``HOME``; the manager's global ``version`` file beside its ``shims``). Change any of them (``pyenv local 3.12``,
``PYENV_VERSION=…``, ``pyenv global``, a rehash) and the shim is asked again.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import zlib
from pathlib import Path

from toolexec.paths import user_cache_dir
from toolexec.state import write_text_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# What each language's interpreter prints when asked: the program it runs as, and its PATH.
PROBES = {
    "python": ["-c", "import json, os, sys; print(json.dumps([sys.executable, os.environ.get('PATH', '')]))"],
    "javascript": ["-e", "console.log(JSON.stringify([process.execPath, process.env.PATH ?? '']))"],
}
PROBES["typescript"] = PROBES["javascript"]
VERSION_FILES = (".python-version", ".tool-versions", ".node-version", ".nvmrc", "mise.toml", ".mise.toml")
# Variables that differ from call to call and decide nothing about the interpreter: left out of the key.
PER_CALL = ("LLM_", "TOOLEXEC_", "TRACEPARENT", "TRACESTATE", "BAGGAGE")
SHELL_KEPT = ("_", "SHLVL", "OLDPWD")  # what the shell that started toolexec leaves: its last command, depth, last cwd
PROBE_TIMEOUT = 30.0
CACHE_FORMAT = 1

_known: dict[str, tuple[str, str] | None] = {}  # key -> (interpreter, PATH), None: the shim could not say
MAX_SHIM_FILES = 256
_shim_files: dict[str, tuple[tuple[int, ...], bool]] = {}  # program -> (its identity when read, whether a shim)
_lock = threading.Lock()


def is_shim(program: str) -> bool:
    """Whether ``program`` (an absolute path) is a version manager's shim script: a ``#!`` script in a directory
    named ``shims``. Its first bytes are read once per file (a call stats it: another file, or one rewritten since,
    is read again)."""
    if os.path.basename(os.path.dirname(program)) != "shims":
        return False
    try:
        status = os.stat(program)
    except OSError:
        return False
    identity = (status.st_dev, status.st_ino, status.st_mtime_ns, status.st_ctime_ns, status.st_size)
    known = _shim_files.get(program)
    if known is not None and known[0] == identity:
        return known[1]
    try:
        with open(program, "rb") as handle:
            found = handle.read(2) == b"#!"
    except OSError:
        return False
    with _lock:
        if len(_shim_files) >= MAX_SHIM_FILES:
            _shim_files.pop(next(iter(_shim_files)))
        _shim_files[program] = (identity, found)
    return found


def unshimmed(program: str, language: str, cwd: str, env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The interpreter ``program`` stands for, and the variables to set for it to run as the shim would run it
    (``PATH``); ``program`` itself and nothing to set when it is no shim, or the shim cannot say."""
    if language not in PROBES or not is_shim(program):
        return program, {}
    key = _key(program, cwd, env)
    with _lock:
        known = _known.get(key, ...)
    if known is ...:
        known = _read(key)
        if known is None:
            known = _ask(program, language, cwd, env)
            if known is not None:
                _write(key, known)
        with _lock:
            _known[key] = known
    if known is None or not os.access(known[0], os.X_OK):  # uninstalled since: the shim itself says what to do
        return program, {}
    interpreter, path = known
    return interpreter, ({"PATH": path} if path != env.get("PATH", "") else {})


def _key(program: str, cwd: str, env: Mapping[str, str]) -> str:
    """Everything the shim's answer depends on, as text."""
    parts = [f"format {CACHE_FORMAT}", program, _stamp(program), cwd]
    kept = (f"{name}={value}" for name, value in env.items() if not name.startswith(PER_CALL) and name not in SHELL_KEPT)
    parts += sorted(kept)
    folders = []
    folder = cwd
    while True:
        folders.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    home = env.get("HOME")
    if home:
        folders.append(home)
    for folder in folders:
        for name in VERSION_FILES:
            stamp = _stamp(os.path.join(folder, name))
            if stamp:
                parts.append(f"{folder}/{name} {stamp}")
    root = os.path.dirname(os.path.dirname(program))  # pyenv's $PYENV_ROOT/version, asdf's own files
    parts.append(f"{root}/version {_stamp(os.path.join(root, 'version'))}")
    return "\0".join(parts)


def _stamp(path: str) -> str:
    try:
        status = os.stat(path)
    except OSError:
        return ""
    return f"{status.st_mtime_ns} {status.st_size} {status.st_ino}"


def _ask(program: str, language: str, cwd: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """What the shim runs, asked of the interpreter it starts."""
    try:
        done = subprocess.run(
            [program, *PROBES[language]],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            cwd=cwd,
            env=dict(env),
            timeout=PROBE_TIMEOUT,
            check=False,
        )
        interpreter, path = json.loads(done.stdout.decode("utf-8", "surrogateescape").strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, TypeError):
        return None
    if done.returncode != 0 or not isinstance(interpreter, str) or not isinstance(path, str):
        return None
    if not os.path.isabs(interpreter) or is_shim(interpreter) or not os.access(interpreter, os.X_OK):
        return None
    return interpreter, path


def _cache_file(key: str) -> str:
    data = key.encode("utf-8", "surrogateescape")
    name = f"{zlib.crc32(data):08x}{zlib.adler32(data):08x}.json"
    return os.path.join(str(user_cache_dir()), "private", "interpreters", name)


def _read(key: str) -> tuple[str, str] | None:
    """The answer kept for ``key`` (its whole text is kept with it and compared: never another key's)."""
    try:
        with open(_cache_file(key), encoding="utf-8", errors="surrogateescape") as handle:
            kept = json.load(handle)
        if kept["key"] == key:
            return str(kept["interpreter"]), str(kept["path"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _write(key: str, answer: tuple[str, str]) -> None:
    path = _cache_file(key)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        text = json.dumps({"key": key, "interpreter": answer[0], "path": answer[1]}, ensure_ascii=False)
        write_text_atomic(Path(path), text)
    except (OSError, UnicodeEncodeError):  # an optimisation: an unwritable cache asks again next run
        pass
