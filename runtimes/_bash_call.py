"""The script a warm Bash call's process sources before its tool's code runs (``bash_warm.sh``'s call code).

It sets the call's environment with one ``export`` (every pair a single-quoted word: nothing in a name or value is
expanded or run; ``SHLVL`` one more than the environment's, as the bash a cold call starts sets it), joins the call's pids cgroup (best effort, as a cold call's shell does) and enters the call's
working directory (exit status 70 when it cannot). One builtin and one redirection per call where reading
NUL-separated pairs took a ``read`` and a redirection per variable (~0.6 ms for 50 variables).

Imported by the host (:mod:`toolexec.runtimes.warm_bash`, sandbox off) and, as a sibling module, by the warm Bash
server of the sandbox's baseline (``_bash_zygote.py``, which runs with no package): it imports nothing.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def call_script(env: Mapping[str, str], cwd: str, join: str = "", base: Mapping[str, str] | None = None) -> bytes:
    """The call's script (bytes, as bash reads them): ``env`` a mapping of names to values, ``cwd`` the directory,
    ``join`` the ``cgroup.procs`` (or v1 ``tasks``) file to move into ("": none).

    ``base``: the environment the bash that runs the call started with, before it sourced the tool. Only what the
    call's environment changes of it is set (and what it lacks unset): a variable both share keeps what the tool's
    top level made of it (``PATH="$PATH:..."``, ``unset X``), as a cold call's top level, run on that same value,
    leaves it for ``main``. Without ``base``, every variable is set.

    ``command export`` keeps a name bash refuses (not an identifier, or read-only as ``UID``) from ending the call
    in POSIX mode; it is left out of the call's environment, as it is of a cold call's shell variables."""
    # SHLVL as a cold call's bash sets it at its start (one more than the environment's), not the server's own
    level = shell_level(env.get("SHLVL")) if base is None or env.get("SHLVL") != base.get("SHLVL") else None
    gone = [] if base is None else [name for name in base if name not in env and name != "SHLVL"]
    if base is not None:
        env = {name: value for name, value in env.items() if base.get(name) != value}
    if level is not None:
        env = {**env, "SHLVL": level}
    # Every pair quoted at once: joined by NUL, which no name or value holds (an environment's strings end at one),
    # each ' made '\'' and each NUL the end of one word and the start of the next (half the time of a word each).
    words = "\0".join([f"{name}={value}" for name, value in env.items()]).replace("'", "'\\''").replace("\0", "' '")
    lines = [f"command export -- '{words}' 2>/dev/null"] if env else []
    if gone:
        lines.append(" ".join(["command unset -v --", *(_quote(name) for name in gone)]) + " 2>/dev/null")
    if join:
        lines.append(f"{{ echo 0 >{_quote(join)}; }} 2>/dev/null")
    lines.append(f"cd -- {_quote(cwd)} || exit 70")
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


def shell_level(inherited: str | None) -> str:
    """The ``SHLVL`` a bash started with ``inherited`` in its environment gives itself (bash's ``adjust_shell_level``):
    one more than a whole number, 1 for anything else; 0 below zero; 1, from 1000 on."""
    text = (inherited or "").strip()
    digits = text[1:] if text[:1] in ("+", "-") else text
    if text and not (digits.isascii() and digits.isdigit()):
        return "1"
    level = int(text or "0") + 1
    return "0" if level < 0 else "1" if level >= 1000 else str(level)


def _quote(text: str) -> str:
    """``text`` as one single-quoted bash word."""
    return "'" + text.replace("'", "'\\''") + "'"
