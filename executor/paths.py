"""Where toolexec finds its embedded defaults and the user's config and cache folders."""

from __future__ import annotations

import os
from pathlib import Path


def package_defaults() -> Path:
    """The folder holding the embedded ``config.yaml`` and ``functions/``.

    In a wheel they are bundled as ``toolexec/_default``; in a source checkout
    they are the repository's own top-level files.
    """
    here = Path(__file__).resolve().parent
    bundled = here / "_default"
    return bundled if (bundled / "config.yaml").is_file() else here.parent


def user_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/toolexec`` (``~/.config/toolexec``)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "toolexec"


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/toolexec`` (``~/.cache/toolexec``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "toolexec"
