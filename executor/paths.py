"""Where toolexec finds its defaults and keeps what it generates."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def package_defaults() -> Path:
    """The folder holding the embedded ``config.yaml`` and ``functions/``.

    In a wheel they are bundled as ``toolexec/_default``; in a source checkout
    they are the repository's own top-level files.
    """
    here = Path(__file__).resolve().parent
    bundled = here / "_default"
    return bundled if (bundled / "config.yaml").is_file() else here.parent


def user_config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "toolexec"


def user_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolexec"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so that a reader never sees half a file, and concurrent writers (threads or
    processes) never share a temporary file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
