"""The ``toolexec`` command: parse, call the library, render, map outcomes to exit codes."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from pathlib import Path

from toolexec.errors import ToolexecError
from toolexec.records import DECLARATION_FORMATS
from toolexec.version import __version__

TYPE_CHECKING = False  # typing and argparse are not imported by a one-shot `run`: it pays for every import
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator
    from typing import Any, NoReturn

    from toolexec.runtimes.process import CallControl

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2
EXIT_BROKEN_PIPE = 128 + 13  # 128 + SIGPIPE


def program() -> int:
    """The installed ``toolexec`` command and ``python -m toolexec``: :func:`main` with SIGINT/SIGTERM handled.

    The command's work done, the process ends without the interpreter's teardown of every module it imported
    (a one-shot ``run`` would spend ~5 ms of its ~50 on it), once nothing else can still be running: no other thread.
    """
    code = main(handle_signals=True)
    threading = sys.modules.get("threading")  # not imported: no thread was ever started
    if threading is None or threading.active_count() == 1:
        exit_now(code)
    return code


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` as a normal exit would, minus the teardown: atexit handlers (the process
    helper's guard is stopped), then the standard streams flushed."""
    import atexit
    import os

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def main(argv: list[str] | None = None, *, handle_signals: bool = False) -> int:
    """Run the command ``argv`` (default ``sys.argv[1:]``) and return its exit status.

    Signal handlers are process-wide, so they are installed only with ``handle_signals``
    (:func:`program`): a test or a library calling ``main(argv)`` keeps its own.
    """
    _usable_streams()
    if argv is None:
        argv = sys.argv[1:]
    args = quick_run(argv) or _parse(argv)
    if handle_signals and args.command != "run":
        gc.enable()  # the program started without the cyclic collector (toolexec.entry); only a one-shot run goes on so
    elif handle_signals:
        from toolexec.runtimes import cgroup

        cgroup.leave_to_guard()  # its exit does not wait for its calls' cgroups' removal: its guard removes them
    args.handle_signals = handle_signals
    return dispatch(args)


def dispatch(args: Any) -> int:
    """Run the parsed command ``args`` and return its exit status, every outcome mapped to one (``toolexec serve``'s
    children run a call here, as the local command does)."""
    try:
        code = int(args.handler(args))
        sys.stdout.flush()
        return code
    except ToolexecError as error:
        _say(f"toolexec: {error}")
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader left (`toolexec list | head -1`): quiet, with the status a shell
        _discard_stdout()  # reports for a program that SIGPIPE ended, as git and ls end
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # stdout closed, a full disk (/dev/full): the output could not be written
        _discard_stdout()
        _say(f"toolexec: cannot write the output: {exc.strerror or exc}")
        return EXIT_FAILED


def _usable_streams() -> None:
    """A closed stdout or stderr (``>&-``) becomes /dev/null, so nothing fails on the way to a result."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as the process


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process


def _say(line: str) -> None:
    """One line on stderr, whatever state stderr is in."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


def _json(data: Any, indent: int | None = None) -> str:
    """JSON for stdout: UTF-8 where it can be, escapes where a string holds a lone surrogate."""
    text = json.dumps(data, ensure_ascii=False, indent=indent)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, indent=indent)
    return text


def _asdict(record: Any) -> dict[str, Any]:
    from toolexec.recordtype import asdict

    return asdict(record)


def _stdin_text(what: str) -> str:
    """All of stdin as text; BadRequest when it is not UTF-8."""
    from toolexec.errors import BadRequest

    if sys.stdin is None:
        return ""
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode("utf-8", "surrogateescape")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"{what} on stdin is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


# The options of `run` the quick parser knows, each taking a value, and their attribute names.
_RUN_VALUES = {"--config": "config", "--timeout": "timeout", "--call-id": "call_id", "--confirm": "confirm"}
_CONFIRM_CHOICES = ("destructive", "all")


def quick_run(argv: list[str]) -> Any:
    """``run`` parsed without argparse (whose import and parser cost a one-shot call ~10 ms), or None.

    Only the plain spellings are taken (``run NAME [ARGS] [--json] [--timeout S] [--call-id ID]
    [--confirm WHO] [--config PATH] [-v]``, ``--opt=value`` too); anything else (help, an
    abbreviation, a bad value, a third positional) returns None, so argparse parses it and
    words any error. The result has the attributes argparse would give (a test compares them).
    """
    from types import SimpleNamespace

    values: dict[str, Any] = dict.fromkeys(("config", "timeout", "call_id", "confirm")) | {
        "verbose": False,
        "json": False,
        "ask": False,
    }
    positionals: list[str] = []
    words = iter(argv)
    seen_run = False
    for word in words:
        if word in ("-v", "--verbose"):
            values["verbose"] = True
        elif word == "--json" and seen_run:
            values["json"] = True
        elif word == "--ask" and seen_run:
            values["ask"] = True
        elif word.startswith("--") and word.split("=", 1)[0] in _RUN_VALUES:
            option, given, value = word.partition("=")
            if not given:
                value = next(words, "-")
            if value.startswith("-") or (option != "--config" and not seen_run):
                return None
            values[_RUN_VALUES[option]] = value
        elif word.startswith("-") and word != "-":
            return None
        elif not seen_run:
            if word != "run":
                return None
            seen_run = True
        else:
            positionals.append(word)
    if not seen_run or not 1 <= len(positionals) <= 2:
        return None
    if values["confirm"] not in (None, *_CONFIRM_CHOICES):
        return None
    if values["timeout"] is not None:
        try:
            values["timeout"] = float(values["timeout"])
        except ValueError:
            return None
    name, arguments = positionals[0], positionals[1] if len(positionals) == 2 else "-"
    return SimpleNamespace(**values, agent=None, variables=[], command="run", name=name, arguments=arguments, handler=_run)


def _parse(argv: list[str]) -> argparse.Namespace:
    """argparse's reading of ``argv``, with ``run NAME --json ARGS`` accepted (argparse alone takes no positional
    after an option once the first ones were read; the quick parser does, and both parse the same)."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "run" and args.arguments == "-" and len(extra) == 1 and not extra[0].startswith("-"):
        args.arguments = extra[0]
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _shared_options(*, after_command: bool) -> argparse.ArgumentParser:
    import argparse

    """--config and --verbose, accepted before and after the command (there they never reset the first)."""
    options = argparse.ArgumentParser(add_help=False)
    unset: dict[str, Any] = {"default": argparse.SUPPRESS} if after_command else {}
    options.add_argument(
        "--config",
        metavar="PATH",
        help="config file (default: $TOOLEXEC_CONFIG, ./config.yaml, user config, embedded)",
        **({"default": None} | unset),
    )
    options.add_argument(
        "-v", "--verbose", action="store_true", help="say which config file is used and why others were skipped", **unset
    )
    options.add_argument(
        "--agent",
        metavar="NAME",
        help="work with one agent of the config: its own functions, then its shared tools",
        **({"default": None} | unset),
    )
    options.add_argument(
        "--var",
        metavar="NAME=VALUE",
        action="append",
        dest="variables",
        help="a value for one of the agent's variables (repeatable)",
        **({"default": []} | unset),
    )
    return options


def _parser() -> argparse.ArgumentParser:
    import argparse

    parser = argparse.ArgumentParser(
        prog="toolexec",
        description="Compile script tools for LLM agents and run them.",
        parents=[_shared_options(after_command=False)],
    )
    parser.add_argument("--version", action="version", version=f"toolexec {__version__}")
    shared = _shared_options(after_command=True)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add = commands.add_parser

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return add(name, parents=[shared], **kwargs)

    commands.add_parser = command  # type: ignore[method-assign]
    for commands_of in (_project_commands, _call_commands, _authoring_commands, _agent_commands, _serve_commands):
        commands_of(commands)
    return parser


def _project_commands(commands: Any) -> None:
    """init, build, compile, list, describe."""
    init = commands.add_parser("init", help="write a starting config.yaml and functions/tools/ into DIR")
    init.add_argument("dir", nargs="?", default=".")
    init.set_defaults(handler=_init)

    build = commands.add_parser("build", help="compile every visible tool; write functions.json and the catalog")
    build.add_argument("--force", action="store_true", help="recompile unchanged files too")
    build.set_defaults(handler=_build)

    compile_ = commands.add_parser("compile", help="print the declarations of FILEs as one JSON array (no config needed)")
    compile_.add_argument("files", nargs="+", metavar="FILE")
    compile_.set_defaults(handler=_compile)

    list_ = commands.add_parser("list", help="the enabled tools, one line each")
    list_.add_argument("--all", action="store_true", help="every visible tool, not only the enabled ones")
    list_.add_argument("--json", action="store_true")
    list_.add_argument("--tags", metavar="A,B", help="only tools that carry every one of these tags")
    list_.set_defaults(handler=_list)

    describe = commands.add_parser("describe", help="the full declaration and metadata of one tool")
    describe.add_argument("name")
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_describe)


def _call_commands(commands: Any) -> None:
    """run and call."""
    run = commands.add_parser("run", help="call a tool once with a JSON object of arguments")
    run.add_argument("name")
    run.add_argument("arguments", nargs="?", default="-", help="JSON object; '-' or absent reads stdin")
    run.add_argument("--json", action="store_true", help="print one result object instead of the output")
    run.add_argument("--timeout", type=float, metavar="SECONDS", help="override the timeout for this call")
    run.add_argument("--call-id", metavar="ID", help="the LLM_TOOL_CALL_ID to pass (default: generated)")
    _confirm_option(run)
    run.set_defaults(handler=_run)

    call = commands.add_parser(
        "call", help="run a model's tool calls from stdin (OpenAI, Responses API, Anthropic or Gemini shape); answer in kind"
    )
    call.add_argument("--format", choices=["openai", "responses", "anthropic", "gemini"], help="the shape (default: detected)")
    _confirm_option(call)
    call.set_defaults(handler=_call)


def _authoring_commands(commands: Any) -> None:
    """new and check."""
    new = commands.add_parser("new", help="write a documented skeleton tool and add it to visible_tools")
    new.add_argument("name", help="the tool's name (the file is NAME.LANG in the functions' tools/)")
    new.add_argument("--lang", required=True, choices=["py", "sh", "ts", "js"], help="the language of the tool")
    new.set_defaults(handler=_new)

    check = commands.add_parser("check", help="report build errors and authoring warnings; exit 1 on errors only")
    check.add_argument("paths", nargs="*", metavar="PATH", help="tool files or folders (default: every visible tool)")
    check.add_argument("--json", action="store_true", help="print the findings as one JSON array")
    check.set_defaults(handler=_check)


def _agent_commands(commands: Any) -> None:
    """mcp and declarations."""
    mcp = commands.add_parser("mcp", help="serve the enabled tools over MCP (stdio, or Streamable HTTP with --http)")
    mcp.add_argument("--http", metavar="[HOST:]PORT", help="serve Streamable HTTP (stateless) instead of stdio; host 127.0.0.1")
    mcp.add_argument(
        "--token-env",
        metavar="NAME",
        help="environment variable holding the HTTP bearer token (default: mcp.token_env, else a generated token "
        "whose file is printed on stderr)",
    )
    mcp.add_argument(
        "--no-token", action="store_true", help="serve HTTP without a bearer token: anyone who can connect calls the tools"
    )
    mcp.add_argument(
        "--catalog", choices=["full", "summaries"], default="full", help="summaries: one-line entries and a describe_tool tool"
    )
    mcp.add_argument("--page-size", type=int, metavar="N", help="tools per tools/list page (default: mcp.page_size, 100)")
    mcp.add_argument("--no-reload", action="store_true", help="do not watch functions/tools/ and config.yaml for changes")
    mcp.add_argument(
        "--warm", action="store_true", help="run every tool warm: each call forked from a server that loaded the tool once"
    )
    mcp.add_argument(
        "--agent-tools-only",
        action="store_true",
        help="with --agent: offer only the agent's own functions, not its shared tools (also AGENT_TOOLS_ONLY=1)",
    )
    mcp.set_defaults(handler=_mcp)

    declarations = commands.add_parser("declarations", help="the enabled tools declared in one provider's format")
    declarations.add_argument("--format", default="openai", choices=DECLARATION_FORMATS)
    declarations.add_argument(
        "--json-schema", action="store_true", help="gemini: send parametersJsonSchema instead of the OpenAPI subset"
    )
    declarations.set_defaults(handler=_declarations)

    instructions = commands.add_parser("instructions", help="with --agent: the agent's instructions, as its model gets them")
    instructions.set_defaults(handler=_instructions)


def _serve_commands(commands: Any) -> None:
    """serve."""
    import argparse

    serve = commands.add_parser(
        "serve", help="serve one-shot `toolexec run` calls of this config on a private socket, in the foreground (faster runs)"
    )
    serve.add_argument(
        "--max-clients", type=int, default=64, metavar="N", help="calls served at once; past it, runs are local (default 64)"
    )
    serve.add_argument(
        "--warm", action="store_true", help="run every tool warm: each call forked from a server that loaded the tool once"
    )
    # toolexec mcp's own server: it ends when its stdin does (mcp's end), quietly when another serves the config.
    serve.add_argument("--until-stdin-closes", action="store_true", help=argparse.SUPPRESS)
    serve.set_defaults(handler=_serve)


def _serve(args: argparse.Namespace) -> int:
    from toolexec.errors import BadRequest

    if args.max_clients < 1:
        raise BadRequest(f"--max-clients must be a positive whole number, got {args.max_clients}")
    if args.agent is not None or args.variables:
        raise BadRequest("toolexec serve serves the config's own tools: an agent's calls (--agent) run locally")
    from toolexec.serve import serve

    return serve(
        args.config,
        max_clients=args.max_clients,
        for_mcp=args.until_stdin_closes,
        verbose=args.verbose,
        warm=True if args.warm else None,
    )


def _confirm_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--confirm",
        choices=_CONFIRM_CHOICES,
        help="ask on the terminal before running a tool that may modify something (destructive) or any tool (all)",
    )
    command.add_argument(
        "--ask", action="store_true", help="answer the questions tools ask mid-call on the terminal (without it, none are asked)"
    )


def _executor(args: argparse.Namespace, control: CallControl | None = None, *, tools_only: bool = False) -> Any:
    """The executor for the command; with ``--confirm``, its questions end when ``control`` is cancelled."""
    from toolexec.api import Executor

    agent: dict[str, Any] = {"agent": args.agent, "variables": agent_variables(args.variables), "agent_tools_only": tools_only}
    if getattr(args, "ask", False):
        from toolexec.asking_terminal import answer_on_terminal

        agent["on_input"] = answer_on_terminal(wake=control)
    confirm = getattr(args, "confirm", None)
    # One run: a warm server would only cost its start; a run `toolexec serve` took forks from the server's (None:
    # the tools that ask; True: every tool, `serve --warm`).
    warm = getattr(args, "served_warm", False)
    if confirm is not None:
        from toolexec.approval import confirm_on_terminal

        executor = Executor(args.config, before_call=confirm_on_terminal(confirm, wake=control), warm=warm, **agent)
    else:
        executor = Executor(args.config, warm=warm, **agent)
    if args.verbose:
        for line in executor.config.lookup:
            print(f"toolexec: config: {line}", file=sys.stderr)
    from toolexec.records import Caller

    executor.calls.caller = Caller(surface="cli")
    executor.calls.ahead = False  # one run: no second call would use a sandbox set up ahead  # who asks, for the audit log (the OS user is added when it is written)
    from toolexec.runtimes.environment import otel_variables  # (known once per state of os.environ: the call asks too)

    if otel_variables():  # tracing is imported only where it may be configured
        from toolexec.tracing import configure_from_environment

        configure_from_environment()  # OpenTelemetry from the OTEL_* variables
    return executor


def agent_variables(given: list[str] | None) -> dict[str, str] | None:
    """``--var NAME=VALUE`` options as a mapping (None when there are none); BadRequest for one without '='."""
    from toolexec.errors import BadRequest

    values: dict[str, str] = {}
    for item in given or ():
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise BadRequest(f"--var takes NAME=VALUE, got {item!r}; write --var owner=alice")
        values[name.strip()] = value
    return values or None


def _init(args: argparse.Namespace) -> int:
    from toolexec.errors import BadRequest
    from toolexec.paths import package_defaults

    source, target = package_defaults(), Path(args.dir)
    if target.exists() and not target.is_dir():
        raise BadRequest(f"cannot initialise {target}: it is a file, not a directory; name a new or existing directory")
    files = [
        Path("config.yaml"),
        *(p.relative_to(source) for p in sorted((source / "functions" / "tools").iterdir()) if p.is_file()),
    ]
    for relative in files:
        destination = target / relative
        if destination.exists():
            print(f"kept {destination} (already exists)", file=sys.stderr)
            continue
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            import shutil

            shutil.copy2(source / relative, destination)  # keeps the executable bit of the tools
        except OSError as exc:
            raise BadRequest(f"cannot write {destination}: {exc.strerror or exc}") from None
        print(f"wrote {destination}")
    print(f"next: {_next_command(target)}")
    return EXIT_OK


def _next_command(target: Path) -> str:
    """What to type after ``init``: go to the project and write a tool of one's own (listed and enabled)."""
    import shlex

    go = "" if target.resolve() == Path.cwd().resolve() else f"cd {shlex.quote(str(target))} && "
    return f"{go}toolexec new my_tool --lang py   (a tool of your own, listed and enabled in config.yaml)"


def _build(args: argparse.Namespace) -> int:
    from toolexec.progress import build_progress

    executor = _executor(args)
    with build_progress(len(executor.config.visible_tools)) as on_file:
        report = executor.build(force=args.force, on_file=on_file)
    for line in [*report.warnings, *report.problems]:
        print(line, file=sys.stderr)
    target = executor.config.state_dir / "functions.json"
    print(f"built {report.built} tool(s), {report.failed} failed ({report.compiled} compiled); wrote {target}")
    return EXIT_OK if report.ok else EXIT_FAILED


def _compile(args: argparse.Namespace) -> int:
    from toolexec.compilers import compile_file
    from toolexec.compilers.agent import compile_file_functions, dialect_of
    from toolexec.errors import CompileError

    declarations, status = [], EXIT_OK
    for file in args.files:
        dialect = dialect_of(file)  # an agent's tools file: one declaration per function
        try:
            found = compile_file_functions(file, dialect) if dialect is not None else [compile_file(file)]
        except CompileError as error:
            print(error, file=sys.stderr)
            status = EXIT_FAILED
            continue
        for declaration in found:
            for warning in declaration.warnings:
                print(warning, file=sys.stderr)
            declarations.append(declaration.to_function())
    print(_json(declarations, indent=2))
    return status


def _list(args: argparse.Namespace) -> int:
    from toolexec.errors import BadRequest
    from toolexec.listing import listed, show

    tags = [tag.strip() for tag in (args.tags or "").split(",") if tag.strip()]
    if args.tags is not None and not tags:
        raise BadRequest("--tags names no tag; write --tags fs,read")
    executor = _executor(args)
    config = executor.config
    # the agents' functions, named agent:function (toolexec --agent AGENT runs them)
    agents = _agent_rows(config) if not tags and args.agent is None else []
    text, count = listed(executor, enabled_only=not args.all, tags=tags, as_json=args.json, extra=agents)
    if args.verbose:
        for entry in executor.catalog.entries:
            print(f"toolexec: {entry.name}: {config.enabling(entry.name)[1]}", file=sys.stderr)
    if not count and config.enabled_tools == () and config.foreign and not config.enabled_given:
        print(
            f"toolexec: no tool is enabled: {config.enabling('')[1].removeprefix('not enabled: ')}; name the tools "
            f"under enabled_tools in {config.path} (or write enabled_tools: all); toolexec list --all shows the visible ones",
            file=sys.stderr,
        )
    show(text, sys.stdout)
    return EXIT_OK


def _agent_function(args: argparse.Namespace) -> None:
    """``run AGENT:FUNCTION`` (the name ``list`` shows) is ``--agent AGENT run FUNCTION``, unless a tool has that name."""
    from toolexec.agent_folders import agent_names
    from toolexec.compilers.common import stem_name
    from toolexec.config import load_config

    config = load_config(args.config)
    agent, _, function = args.name.partition(":")
    if agent in agent_names(config) and args.name not in {stem_name(f) for f in config.visible_tools}:
        args.agent, args.name = agent, function


def _agent_rows(config: Any) -> list[dict[str, Any]]:
    from toolexec.agent_folders import agent_names

    if not agent_names(config):  # (then neither the agents' module nor the builder it imports is loaded)
        return []
    from toolexec.agents import agent_functions

    rows = []
    for name, tool, error in agent_functions(config):
        agent = name.split(":", 1)[0]
        about: dict[str, Any] = {"title": None, "summary": None, "tags": [], "annotations": None, "agent": agent}
        about |= {"enabled": True, "enabled_why": f"a function of agent {agent} (toolexec --agent {agent})"}
        if tool is None:
            rows.append({"name": name, "language": "agent", "description": None, "source": None, "error": error, **about})
        else:
            rows.append(
                {
                    "name": name,
                    "language": tool.language,
                    "description": tool.description,
                    "source": tool.source,
                    "error": None,
                    **about,
                }
            )
    return rows


def _describe(args: argparse.Namespace) -> int:
    executor = _executor(args)
    declaration = executor.describe(args.name)
    for broken in executor.broken(enabled_only=False):
        if broken["name"] == declaration.name:  # shown is the last good version: say why the file is not
            error = broken["error"].split("\n", 1)[0]
            print(
                f"toolexec: {declaration.name}: the file no longer builds ({error}); calls run this last good version",
                file=sys.stderr,
            )
    if args.json:
        print(_json(declaration.to_dict(), indent=2))
        return EXIT_OK
    print("\n".join(describe_text(declaration, warm=_warm_text(executor.config, declaration))))
    return EXIT_OK


def _warm_text(config: Any, tool: Any) -> str:
    """Whether the tool runs warm where servers are kept (docs/performance.md), and why not when it asks to."""
    from toolexec.calls import runs_warm
    from toolexec.policy import effective

    if not runs_warm(config, tool, None):
        return ""
    policy = effective(config.sandbox, config.sandbox_policies, tool.name, tool.metadata.sandbox)
    if policy is not None:
        from toolexec.runtimes import baseline, sandbox

        cold = "no: its sandbox policy is applied to each call's own start, so it runs cold"
        if tool.language != "python":  # (a network allow-list too: its proxy is the server's, for all its calls)
            return cold
        if sandbox.mechanism()[0] != "bwrap" or not baseline.usable():
            return cold.replace("start, so", "start (no bwrap here for its server's sandbox), so")
        if not baseline.nests():
            return cold.replace("start, so", "start (nothing in a sandbox here may make the namespaces its server needs), so")
        if policy.writes == () and policy.network != "all":  # (runtimes.sandbox.calls_share)
            return (
                "no: its policy lets no call keep anything for the next (writes: none, no open network), and the calls "
                "of a warm server share what the tool's top level keeps in it, so it runs cold"
            )
        if policy.network != "all":  # its places as its calls would find them now (runtimes.sandbox.calls_share)
            from toolexec.confine import confinement
            from toolexec.errors import SandboxUnavailable

            try:
                shares = sandbox.calls_share(confinement(config, tool.name, policy, ()))
            except SandboxUnavailable:
                return cold
            if not shares:
                return (
                    "no: no place its policy writes can be written now (not there, hidden, or not yours to write), so "
                    "no call can keep anything for the next, and the calls of a warm server share what the tool's top "
                    "level keeps in it, so it runs cold"
                )
        return (
            "yes: each call is a process forked from a server that loaded the tool once inside its sandbox, in a PID "
            "namespace of its own (Executor, toolexec mcp)"
        )
    yes = "yes: each call is a process forked from a server that loaded the tool once (Executor, toolexec mcp)"
    if tool.language in ("javascript", "typescript"):
        yes = "yes: each call is a fresh node started ahead of it with the tool imported (Executor, toolexec mcp)"
        if tool.metadata.warm == "shared":
            yes += "; a shared worker is not built: `shared` runs so too"
    if config.sandbox == "off":
        return yes
    from toolexec.runtimes import baseline

    if not baseline.usable():
        return "no: this host makes no PID namespace (bwrap) for the sandbox baseline to give each call, so it runs cold"
    if tool.language == "bash":  # (a bash can make no namespace: runtimes/_bash_zygote.py makes them ahead)
        return "yes: each call runs in a bash that sourced the tool ahead of it, in a PID namespace of its own (Executor, toolexec mcp)"
    return yes.replace("once", "once, in a PID namespace of its own").replace("it with", "it in a PID namespace of its own with")


def describe_text(tool: Any, *, warm: str = "") -> list[str]:
    """The lines ``toolexec describe`` prints: the declaration, then whatever metadata the script declares (``warm``:
    whether it runs warm, as :func:`_warm_text` says)."""
    meta = tool.metadata
    lines = [f"{tool.name}  ({tool.language}, {tool.source})", ""]
    if meta.title:
        lines += [meta.title, ""]
    lines += [tool.description, ""]
    schema = tool.parameters
    required = set(schema.get("required", []))
    properties = schema.get("properties", {})
    if properties:
        lines.append("Parameters:")
    for name, prop in properties.items():
        kind = prop.get("type", "any")
        extras = [
            f"one of {prop['enum']}" if "enum" in prop else "",
            f"default {json.dumps(prop['default'])}" if "default" in prop else "",
        ]
        flags = ", ".join(x for x in ["required" if name in required else "optional", *extras] if x)
        lines.append(f"  {name}: {kind if isinstance(kind, str) else '|'.join(kind)} ({flags})")
        if prop.get("description"):
            lines.append(f"      {prop['description']}")
    hints = {"read_only": "read-only", "destructive": "destructive", "idempotent": "idempotent", "open_world": "open-world"}
    declared = {hints[k]: v for k, v in _asdict(meta.annotations).items() if v is not None}
    limits = {k.replace("_", " "): v for k, v in _asdict(tool.limits).items() if v is not None}
    rows = [
        ("Summary", meta.summary),
        ("Tags", ", ".join(meta.tags)),
        ("Behaviour", ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in declared.items())),
        ("Limits", ", ".join(f"{k} {v:g}" for k, v in limits.items())),
        ("Sandbox", _policy_text(meta.sandbox)),
        (
            "Task",
            {
                "optional": "optional (an MCP client may run it as a task)",
                "required": "required (MCP clients run it as a task)",
            }.get(meta.task or ""),
        ),
        ("Warm", warm),
    ]
    lines += [f"{label}: {value}" for label, value in rows if value]
    if meta.examples:
        lines += ["Examples:", *(f"  {json.dumps(e, ensure_ascii=False)}" for e in meta.examples)]
    if meta.errors:
        lines += ["Errors:", *(f"  {e}" for e in meta.errors)]
    if meta.output_schema is not None:
        shown = json.dumps(meta.output_schema, indent=2, ensure_ascii=False)
        lines += ["Output:", *(f"  {line}" for line in shown.splitlines())]
    return lines


def _policy_text(policy: Any) -> str:
    """``network none; writes cache, cwd; memory 268435456`` for describe (empty when none is declared)."""
    if policy is None:
        return ""
    from toolexec.policy import describe

    shown = describe(policy)
    return "; ".join(f"{k.replace('_', ' ')} {', '.join(v) if isinstance(v, list) else v}" for k, v in shown.items())


def _new(args: argparse.Namespace) -> int:
    from toolexec.authoring import new_tool

    created = new_tool(_executor(args).config, args.name, args.lang)
    listed = "visible_tools and enabled_tools" if created.enabled else "visible_tools"
    print(f"wrote {created.tool}")
    print(f"added {created.tool.name} to {listed} in {created.config}")
    print(f'try it: toolexec run {args.name} \'{{"text": "hello", "count": 2}}\'')
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from toolexec.check import check_paths, summary

    config = None  # given paths are checked as files alone; the config's tools also as that config runs them
    if args.paths:
        paths = list(args.paths)
    else:
        config = _executor(args).config
        paths = [config.tools_dir / file for file in config.visible_tools]
    findings, files = check_paths(paths, config)
    if args.json:
        print(json.dumps([f.to_dict() for f in findings], indent=2, ensure_ascii=False))
    else:
        for finding in findings:
            print(finding)
        print(summary(findings, files), file=sys.stderr)
    return EXIT_FAILED if any(f.severity == "error" for f in findings) else EXIT_OK


def _mcp(args: argparse.Namespace) -> int:
    from toolexec.errors import BadRequest

    if args.page_size is not None and args.page_size < 1:
        raise BadRequest(f"--page-size must be a positive whole number, got {args.page_size}")
    from toolexec.mcp import ServeOptions, main  # the SDK is imported only by this command

    if args.verbose:
        _executor(args)  # prints the config lookup trail
    tools_only = args.agent_tools_only or os.environ.get("AGENT_TOOLS_ONLY") in ("1", "true")
    if tools_only and args.agent is None:
        raise BadRequest(
            "--agent-tools-only (AGENT_TOOLS_ONLY) serves an agent's own functions: name the agent with --agent NAME"
        )
    options = ServeOptions(
        catalog=args.catalog,
        page_size=args.page_size,
        reload=not args.no_reload,
        agent=args.agent,
        variables=agent_variables(args.variables),
        agent_tools_only=tools_only,
        warm=True if args.warm else None,
    )
    return main(args.config, http=args.http, token_env=args.token_env, no_token=args.no_token, options=options)


# Every signal that would end toolexec and that it can catch: each one cancels the call instead.
CANCELLING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")


@contextlib.contextmanager
def _call_control(args: argparse.Namespace) -> Iterator[CallControl]:
    """The control of the command's calls; run as the program, every terminating signal cancels it, so the
    tool's tree ends and a result is still printed. Handlers and descriptors are released afterwards."""
    import signal

    from toolexec.runtimes.process import CallControl

    control = CallControl()
    previous = {}
    try:
        if args.handle_signals:
            for name in CANCELLING_SIGNALS:
                sig = getattr(signal, name, None)
                if sig is not None:
                    previous[sig] = signal.signal(sig, lambda *_: control.cancel())
        yield control
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        control.close()


def _instructions(args: argparse.Namespace) -> int:
    from toolexec.errors import BadRequest

    if args.agent is None:
        raise BadRequest("instructions belong to an agent: name one with --agent NAME")
    text = _executor(args).instructions()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return EXIT_OK


def _declarations(args: argparse.Namespace) -> int:
    executor = _executor(args)
    declared = executor.declarations(args.format, json_schema=args.json_schema)
    if args.verbose:
        for note in declared.notes:
            print(f"toolexec: {note}", file=sys.stderr)
    print(_json(declared, indent=2))
    return EXIT_OK


def _call(args: argparse.Namespace) -> int:
    from toolexec.errors import BadRequest

    text = _stdin_text("the batch")
    if not text.strip():
        raise BadRequest(
            "the batch on stdin is empty: expected a model's tool calls as JSON (OpenAI, Responses API, Anthropic, Gemini)"
        )
    from toolexec.providers import parse_batch_text

    data = parse_batch_text(text)
    with _call_control(args) as control:
        executor = _executor(args, control)
        batch = executor.parse_calls(data, args.format)
        if not batch.entries:
            shape = "" if data in (None, []) else f" (read as {batch.provider}'s shape)"
            _say(f"toolexec: note: the input holds no tool calls{shape}; nothing ran")
        answer = executor.answer(batch, cancel=control)
    print(_json(answer))
    return EXIT_OK


def _unrepeated(result: Any) -> str:
    """The error of a failed call, without the detail it quotes from the tool's stderr when that was just printed."""
    head, detail = result.tool_call_error, str(result.error).removeprefix(f"{result.tool_call_error}: ")
    if head and result.error != head and detail in result.stderr.splitlines():
        return str(head)
    return str(result.error)


def _run(args: argparse.Namespace) -> int:
    raw = args.arguments
    if raw == "-":
        raw = "" if sys.stdin is None or sys.stdin.isatty() else _stdin_text("the arguments")
    if args.agent is None and ":" in args.name:
        _agent_function(args)
    with _call_control(args) as control:
        executor = _executor(args, control)
        result = executor.call(args.name, raw, call_id=args.call_id, timeout=args.timeout, cancel=control)
    if args.json:
        print(_json(result.to_dict()))
    else:
        if result.output:
            sys.stdout.write(result.output)
            if sys.stdout.isatty() and not result.output.endswith("\n"):
                sys.stdout.write("\n")
        if result.stderr:
            sys.stderr.write(result.stderr if result.stderr.endswith("\n") else result.stderr + "\n")
        if not result.ok:
            print(f"toolexec: {_unrepeated(result)}", file=sys.stderr)
        for note in result.notes:
            print(f"toolexec: note: {note}", file=sys.stderr)
        for file in result.artifacts:  # stdout carries only the output: say where each file is
            where = f"kept at {file.path}" if file.path else "its bytes are in --json's artifacts"
            print(
                f"toolexec: note: the tool returned {file.name} ({file.mime_type}, {file.size} bytes): {where}", file=sys.stderr
            )
    sys.stdout.flush()
    return int(result.exit_code or 0)
