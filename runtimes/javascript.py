"""JavaScript tools run under node (the Node extra's, else PATH's; or the shebang's runtime) through one bootstrap (CommonJS, loading the tool with import())."""

from __future__ import annotations

import json
from pathlib import Path

from toolexec.records import Module, Positional, ToolDeclaration
from toolexec.runtimes.base import Prepared, Site
from toolexec.runtimes.interpreter import launcher_for

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

    from toolexec.runtimes.warm import WarmSpec

BOOTSTRAP = Path(__file__).with_name("node_bootstrap.cjs")
# Names the directory of node's compile cache (V8 code of the modules a tool loads, kept between calls); the
# bootstrap enables it and removes the variable before the tool runs.
COMPILE_CACHE_VARIABLE = "TOOLEXEC_NODE_COMPILE_CACHE"


class JavaScriptRuntime:
    """``node node_bootstrap.cjs TOOL`` with the arguments and the calling convention on stdin."""

    def prepare(self, tool: ToolDeclaration, arguments: dict[str, Any], site: Site) -> Prepared:
        """The bootstrap under the chosen runtime (node, bun, deno…)."""
        interpreter, env = launcher_for(tool, site)
        argv = [*interpreter, str(BOOTSTRAP), tool.source]
        additions = {**compile_cache(argv, site), **env}
        return Prepared(
            argv=argv,
            stdin=request(tool, arguments),
            env_additions=additions,
            awaits_file_limit=awaits_file_limit(argv),
            warm=warm_spec(tool, argv, site, additions),
        )


def warm_spec(
    tool: ToolDeclaration, argv: list[str], site: Site, additions: dict[str, str], runs: str | None = None
) -> WarmSpec | None:
    """How a call of ``tool`` runs warm (:mod:`toolexec.runtimes.warm_node`: a spare started ahead, the tool imported),
    when the site asks for it and the program is node itself (bun and deno run cold): the spare is ``argv`` as a cold
    call runs it, keyed by the tool's source text as the call's snapshot holds it, or by the text of ``runs`` (what
    node runs instead: a TypeScript tool's transpile, which an esbuild bundle makes of its siblings too; the spare
    does not list that file among those it loaded, its text being its key)."""
    if not site.warm or not awaits_file_limit(argv):
        return None
    from toolexec.runtimes.warm import WarmSpec, server_environment, spec_key

    env = {**server_environment({**site.env, **additions}), **compile_cache(argv, site)}
    if runs is not None:
        payload = Path(runs).read_bytes()
    else:
        payload = (site.code if site.code is not None else Path(tool.source).read_text(errors="surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )
    return WarmSpec(
        kind="node-spare",
        tool=tool.name,
        argv=argv,
        payload=payload,
        env=env,
        cwd=str(site.cwd),
        key=spec_key(argv, payload, env),
    )


def awaits_file_limit(argv: list[str]) -> bool:
    """Whether the bootstrap can wait for its file size bound (node has no setrlimit; the bootstrap reads
    ``/proc/self/limits`` until toolexec has set it): under node itself, not bun or deno (whose permissions may
    refuse the read), which start under prlimit(1)."""
    return Path(argv[0]).name == "node"


def compile_cache(argv: list[str], site: Site) -> dict[str, str]:
    """Where node keeps the compiled code of a tool's modules between calls (``module.enableCompileCache``): in the
    private state directory, which a confined tool sees read-only (so its cache entries come only from unconfined runs,
    which could write anything there anyway). A tool that imports large libraries starts ~10% sooner; a small one is
    unchanged. Node only: bun and deno have their own caches."""
    if Path(argv[0]).name != "node":
        return {}
    return {COMPILE_CACHE_VARIABLE: str(site.state.private_dir / "node-compile-cache")}


def request(tool: ToolDeclaration, arguments: dict[str, Any]) -> bytes:
    """What the bootstrap reads on stdin: the arguments, the convention, the positional order, the export."""
    invocation = tool.invocation
    if invocation.kind == "object":
        # llm-functions' `@property {T} [name=default]`: the JSDoc is the only place the default is
        # written, so toolexec fills it in (Python and positional tools get theirs from the signature).
        properties = tool.parameters.get("properties", {})
        defaults = {name: p["default"] for name, p in properties.items() if "default" in p and name not in arguments}
        arguments = {**arguments, **defaults}
    data = {
        "arguments": arguments,
        "convention": invocation.kind,
        "order": list(invocation.order) if isinstance(invocation, Positional) else [],
        "export": invocation.export if isinstance(invocation, Module) else "named",
        "function": tool.function,
    }
    return json.dumps(data).encode("ascii")
