"""The interpreter a script names on its first line, as an argv prefix."""

from __future__ import annotations

import shlex


def read_shebang(source: str) -> tuple[str, ...]:
    """``#!/usr/bin/env -S deno run -A`` → ``('deno', 'run', '-A')``; no shebang → ``()``."""
    if not source.startswith("#!"):
        return ()
    line = source[2:].split("\n", 1)[0].strip()
    try:
        words = shlex.split(line)
    except ValueError:
        words = line.split()
    if words and words[0].rsplit("/", 1)[-1] == "env":
        words = words[1:]
        while words and (words[0].startswith("-") or "=" in words[0]):
            words = words[1:]  # env's own options (-S, -i) and VAR=value assignments
    return tuple(words)
