"""The ``toolexec`` command: parse, call the library, render, map outcomes to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from toolexec.errors import ToolexecError
from toolexec.version import __version__

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    _usable_streams()
    args = _parser().parse_args(argv)
    try:
        code = int(args.handler(args))
        sys.stdout.flush()
        return code
    except ToolexecError as error:
        _say(f"toolexec: {error}")
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # stdout closed, a full disk (/dev/full), a broken pipe: the output could not be written
        _discard_stdout()
        _say(f"toolexec: cannot write the output: {exc.strerror or exc}")
        return EXIT_FAILED


def _usable_streams() -> None:
    """A closed stdout or stderr (``>&-``) becomes /dev/null, so nothing fails on the way to a result."""
    import os

    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - lives as long as the process


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush cannot fail again."""
    import os

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


def _shared_options(*, after_command: bool) -> argparse.ArgumentParser:
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
    return options


def _parser() -> argparse.ArgumentParser:
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
    list_.set_defaults(handler=_list)

    describe = commands.add_parser("describe", help="the full declaration and metadata of one tool")
    describe.add_argument("name")
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_describe)

    run = commands.add_parser("run", help="call a tool once with a JSON object of arguments")
    run.add_argument("name")
    run.add_argument("arguments", nargs="?", default="-", help="JSON object; '-' or absent reads stdin")
    run.add_argument("--json", action="store_true", help="print one result object instead of the output")
    run.add_argument("--timeout", type=float, metavar="SECONDS", help="override the timeout for this call")
    run.add_argument("--call-id", metavar="ID", help="the LLM_TOOL_CALL_ID to pass (default: generated)")
    run.set_defaults(handler=_run)

    call = commands.add_parser("call", help="run a batch of OpenAI tool_calls or Anthropic tool_use blocks from stdin")
    call.set_defaults(handler=_call)
    return parser


def _executor(args: argparse.Namespace) -> Any:
    from toolexec.api import Executor

    executor = Executor(args.config)
    if args.verbose:
        for line in executor.config.lookup:
            print(f"toolexec: config: {line}", file=sys.stderr)
    return executor


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
            shutil.copy2(source / relative, destination)  # keeps the executable bit of the tools
        except OSError as exc:
            raise BadRequest(f"cannot write {destination}: {exc.strerror or exc}") from None
        print(f"wrote {destination}")
    return EXIT_OK


def _build(args: argparse.Namespace) -> int:
    executor = _executor(args)
    report = executor.build(force=args.force)
    for line in [*report.warnings, *report.problems]:
        print(line, file=sys.stderr)
    built = len(report.catalog.tools)
    failed = len(report.catalog.entries) - built
    target = executor.config.state_dir / "functions.json"
    print(f"built {built} tool(s), {failed} failed ({report.compiled} compiled); wrote {target}")
    return EXIT_OK if report.ok else EXIT_FAILED


def _compile(args: argparse.Namespace) -> int:
    from toolexec.compilers import compile_file
    from toolexec.errors import CompileError

    declarations, status = [], EXIT_OK
    for file in args.files:
        try:
            declaration = compile_file(file)
        except CompileError as error:
            print(error, file=sys.stderr)
            status = EXIT_FAILED
            continue
        for warning in declaration.warnings:
            print(warning, file=sys.stderr)
        declarations.append(declaration.to_function())
    print(_json(declarations, indent=2))
    return status


def _list(args: argparse.Namespace) -> int:
    executor = _executor(args)
    rows = [
        {"name": t.name, "language": t.language, "description": t.description, "source": t.source, "error": None}
        for t in executor.tools(enabled_only=not args.all)
    ]
    rows += [{**broken, "description": None} for broken in executor.broken(enabled_only=not args.all)]
    if args.json:
        print(_json(rows, indent=2))
        return EXIT_OK
    width = max((len(row["name"]) for row in rows), default=0)
    for row in rows:
        if row["error"] is None:
            summary = row["description"].strip().split("\n", 1)[0]
        else:
            summary = "FAILED TO BUILD: " + row["error"].split("\n", 1)[0]
        print(f"{row['name']:<{width}}  {row['language']:<10}  {summary}")
    return EXIT_OK


def _describe(args: argparse.Namespace) -> int:
    declaration = _executor(args).describe(args.name)
    if args.json:
        print(_json(declaration.to_dict(), indent=2))
        return EXIT_OK
    print(f"{declaration.name}  ({declaration.language}, {declaration.source})\n")
    print(declaration.description + "\n")
    schema = declaration.parameters
    required = set(schema.get("required", []))
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type", "any")
        extras = [
            f"one of {prop['enum']}" if "enum" in prop else "",
            f"default {json.dumps(prop['default'])}" if "default" in prop else "",
        ]
        flags = ", ".join(x for x in ["required" if name in required else "optional", *extras] if x)
        print(f"  {name}: {kind if isinstance(kind, str) else '|'.join(kind)} ({flags})")
        if prop.get("description"):
            print(f"      {prop['description']}")
    return EXIT_OK


# Every signal that would end toolexec and that it can catch: each one cancels the call instead.
CANCELLING_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")


def _cancel_on_signals() -> Any:
    """A Cancellation set by any terminating signal (a closed terminal too), so the tool's tree ends,
    its files are removed, and a result is still printed where it can be."""
    import signal

    from toolexec.runtimes.process import Cancellation

    cancel = Cancellation()
    for name in CANCELLING_SIGNALS:
        sig = getattr(signal, name, None)
        if sig is not None:
            signal.signal(sig, lambda *_: cancel.cancel())
    return cancel


def _call(args: argparse.Namespace) -> int:
    from toolexec.batch import parse_batch, result_messages, run_batch
    from toolexec.errors import BadRequest

    text = _stdin_text("the batch")
    if not text.strip():
        raise BadRequest("the batch on stdin is empty: expected OpenAI tool_calls or Anthropic tool_use blocks as JSON")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the batch on stdin is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    executor = _executor(args)
    batch = parse_batch(data)
    cancel = _cancel_on_signals()
    results = run_batch(
        batch, lambda c: executor.call(c.name, c.arguments, call_id=c.call_id, cancel=cancel), executor.config.max_parallel
    )
    print(_json(result_messages(batch, results)))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    raw = args.arguments
    if raw == "-":
        raw = "" if sys.stdin is None or sys.stdin.isatty() else _stdin_text("the arguments")
    executor = _executor(args)
    result = executor.call(args.name, raw, call_id=args.call_id, timeout=args.timeout, cancel=_cancel_on_signals())
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
            print(f"toolexec: {result.error}", file=sys.stderr)
        for note in result.notes:
            print(f"toolexec: note: {note}", file=sys.stderr)
    sys.stdout.flush()
    return int(result.exit_code or 0)
