"""Python tools run through a bootstrap that runs the script's source text and calls ``run(**arguments)``.

The bootstrap is handed the very text the declaration was compiled from (the call's snapshot), compiles
it in memory and writes no bytecode: what runs is what was declared, whatever the file's timestamps say,
and no ``__pycache__`` appears beside the user's tools.
"""

from __future__ import annotations

import contextlib
import json
import marshal
from pathlib import Path

from toolexec.records import Kwargs, ToolDeclaration
from toolexec.runtimes.base import Prepared, Site
from toolexec.runtimes.interpreter import launcher_for
from toolexec.state import CODE_TAG

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

    from toolexec.runtimes.warm import WarmSpec

BOOTSTRAP = Path(__file__).with_name("python_bootstrap.py")
ZYGOTE = Path(__file__).with_name("python_zygote.py")
# Starts a request in marshal's format (no JSON text starts with a NUL): the bootstrap reads it with a module every
# interpreter has loaded at start, where JSON would load the C scanner (~0.25 ms of a ~10 ms start).
MARSHALLED = b"\0"


class PythonRuntime:
    """``python python_bootstrap.py TOOL [FUNCTION]`` with ``{"arguments": …, "source": …}`` on stdin."""

    def prepare(self, tool: ToolDeclaration, arguments: dict[str, Any], site: Site) -> Prepared:
        """The bootstrap under the chosen Python, the arguments and source text as :func:`request` makes them."""
        interpreter, env = launcher_for(tool, site)
        tail = [tool.source] if tool.function is None else [tool.source, tool.function]  # one function of a tools.py
        argv = [*interpreter, str(BOOTSTRAP), *tail]
        call = tool.invocation
        enums: list[list[Any]] = []
        if isinstance(call, Kwargs):
            left_out = {name: value for name, value in call.defaults if name not in arguments}
            arguments = {**arguments, **left_out} if left_out else arguments
            enums = [list(each) for each in call.enums if arguments.get(each[0]) is not None]
        warm = _warm_spec(tool, [*interpreter, str(ZYGOTE), *tail], site, env) if site.warm else None
        # A warm call's server has already loaded the tool: its request carries no compiled code
        compiled = _compiled(site.code, tool.source, site) if site.code is not None and warm is None else None
        stdin = request(arguments, site.code, enums, compiled)
        return Prepared(argv=argv, stdin=stdin, env_additions=env, sets_file_limit=1, warm=warm)


def _warm_spec(tool: ToolDeclaration, server: list[str], site: Site, additions: dict[str, str]) -> WarmSpec:
    """A fork server (``server``: its argv, in the environment with the launcher's ``additions``) that has loaded the
    tool's source text (see ``_python_zygote.py``). The same inputs give the same spec, made once: every warm call
    asks for its tool's, and the digest that tells servers apart costs more than the call's own request."""
    from toolexec.runtimes.warm import WarmSpec, server_environment, spec_key

    source = site.code
    if source is None:
        source = Path(tool.source).read_text(encoding="utf-8", errors="surrogateescape")
    env = server_environment({**site.env, **additions})
    cwd = str(site.cwd)
    memo = (tool.name, tuple(server), source, cwd, frozenset(env.items()))
    found = _specs.get(memo)
    if found is not None:
        return found
    payload = MARSHALLED + marshal.dumps({"source": source}, 2)
    spec = WarmSpec(
        kind="python-fork",
        tool=tool.name,
        argv=server,
        payload=payload,
        env=env,
        cwd=cwd,
        key=spec_key(server, payload, env),
    )
    if len(_specs) >= _SPECS_KEPT:
        with contextlib.suppress(StopIteration, RuntimeError, KeyError):  # (another thread's call changed it meanwhile)
            _specs.pop(next(iter(_specs)))  # the oldest
    _specs[memo] = spec
    return spec


_SPECS_KEPT = 64
_specs: dict[tuple[object, ...], WarmSpec] = {}  # the specs made lately, by what they are made of


def _compiled(source: str, path: str, site: Site) -> tuple[str, bytes] | None:
    """The tool's code compiled by this Python (kept in the private state), for a bootstrap running the same version to
    execute instead of compiling (its interpreter would pay ~1.2 ms for its compiler's first use); None where this
    Python cannot compile it (the tool's own interpreter then says why)."""
    try:
        return CODE_TAG, marshal.dumps(site.state.compiled(source, path))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def request(
    arguments: dict[str, Any],
    source: str | None = None,
    enums: list[list[Any]] | None = None,
    compiled: tuple[str, bytes] | None = None,
) -> bytes:
    """``{"arguments": …, "source": …}`` for the bootstrap (``source``: the text to run, None to read the file): in
    marshal's format version 2 (every Python 3 reads it; no shared references, so the tool gets distinct objects as
    from JSON), else JSON for what marshal cannot hold.

    ``enums`` lists ``[parameter, Enum class, each item]`` for the arguments to pass as members of the tool's enum;
    ``compiled`` is ``source`` compiled, with the tag of the Python that compiled it (:data:`toolexec.state.CODE_TAG`):
    a bootstrap of that very version runs it, any other compiles ``source``.
    """
    data: dict[str, Any] = {"arguments": arguments}
    if source is not None:
        data["source"] = source
    if enums:
        data["enums"] = enums
    if compiled is not None:
        data["compiled"] = list(compiled)
    try:
        return MARSHALLED + marshal.dumps(data, 2)
    except ValueError:
        return json.dumps(data).encode("ascii")
