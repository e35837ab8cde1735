"""Runs inside the tool's own Python: load the script, call ``run(**arguments)``, write the result.

Started by ``python python_bootstrap.py TOOL_PATH [FUNCTION]`` (FUNCTION: one function of an
agent's multi-function ``tools.py``, called instead of ``run``) with ``{"arguments": {...}}`` on
stdin: marshal's format after a NUL byte (what toolexec writes), or JSON text. Kept free
of third-party imports and of syntax newer than 3.8, since the interpreter is whatever
the tool's shebang names.

The tool's source text comes on stdin with the arguments (the text its declaration was compiled
from) and is compiled in memory: no bytecode is read or written for it, so an edit within the same
second at the same size, or a file put back with its old mtime (``cp -p``, ``rsync -t``), never
runs stale code; ``sys.dont_write_bytecode`` keeps the modules it imports from writing
``__pycache__`` beside the user's tools.

Start-up is most of a call's cost, so nothing is imported up front beyond ``os`` and ``sys``
(which every Python start has loaded already): the request is read with ``marshal``, which
every interpreter has loaded too (JSON text with the C scanner behind ``json``; the ``json``
package would bring ``re``), the tool is loaded with the import machinery every interpreter
already holds, ``json`` is imported to render a value that is not text, ``asyncio`` only for
a coroutine ``run`` and ``traceback`` only for a failure.
"""

import os
import sys


def _bound_files():
    """RLIMIT_FSIZE, soft and hard (so that the tool cannot raise it), from TOOLEXEC_FILE_LIMIT: before any line of
    the tool runs, no file it or its children write grows past the call's bound. Exits when the limit cannot be set."""
    limit = os.environ.pop("TOOLEXEC_FILE_LIMIT", None)
    if limit is not None:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
        except (ImportError, OSError, ValueError) as exc:
            sys.stderr.write(f"toolexec: cannot bound the size of the files the tool writes ({exc})\n")
            os._exit(70)


_bound_files()
sys.dont_write_bytecode = True
# Read, then removed from the environment, so that nothing the tool starts inherits it.
_FAILURE_FILE = os.environ.pop("TOOLEXEC_FAILURE_FILE", None)


def _render(value):
    """The text written to LLM_OUTPUT for a returned value (None: nothing)."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, (tuple, set, frozenset)):
        value = list(value)
    if isinstance(value, (dict, list, int, float, bool)):
        import json

        try:
            return json.dumps(value, ensure_ascii=False, default=_fallback, allow_nan=False)
        except TypeError:
            pass
        except (ValueError, RecursionError) as exc:  # NaN, a huge integer, a cycle: no text would be faithful
            raise _NotJSON(f"run() returned a value that cannot be written as JSON: {exc}") from None
    return str(value)


class _NotJSON(ValueError):
    pass


def _fallback(value):
    if isinstance(value, (tuple, set, frozenset)):
        return list(value)
    return str(value)


class _Decoding:
    """What the C JSON scanner reads from its context: json's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


def _parse(data):
    """The request toolexec wrote: marshal's format after a NUL (``marshal`` is loaded at every interpreter start),
    else JSON text, read without importing ``json`` where the C scanner can; ``json`` for anything else."""
    if data[:1] == b"\0":
        import marshal

        return marshal.loads(data[1:])
    text = data.decode("utf-8")
    try:
        from _json import make_scanner

        value, end = make_scanner(_Decoding)(text, 0)
        if not text[end:].strip():
            return value
    except (ImportError, StopIteration, ValueError):
        pass
    import json

    return json.loads(text)


def _load(path, source, compiled=None):
    """The tool's module: ``source`` (its text, as compiled into its declaration; None: the file's) run in memory;
    ``compiled`` (``[tag, marshalled code]``, that text compiled by toolexec) is run instead where this interpreter is
    the Python that made it, which spares it its compiler's first use (~1.2 ms)."""
    tool_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, tool_dir)
    name = os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    try:  # CPython's import machinery, loaded in every interpreter (importlib.util costs an import)
        from _frozen_importlib import ModuleSpec, module_from_spec
    except ImportError:
        from importlib.machinery import ModuleSpec
        from importlib.util import module_from_spec
    if source is None:
        with open(path, "rb") as handle:
            data = handle.read()
    else:
        data = source.encode("utf-8", "surrogateescape")
        _remember(path, source)
    spec = ModuleSpec(name, None, origin=path)
    spec.has_location = True
    module = module_from_spec(spec)
    module.__file__ = path
    sys.modules[name] = module
    code = None
    if source is not None and compiled is not None and compiled[0] == f"{sys.hexversion:x} {sys.implementation.cache_tag}":
        import marshal

        code = marshal.loads(compiled[1])
    if code is None:
        code = compile(data, path, "exec", dont_inherit=True)
    exec(code, module.__dict__)
    return module


_SOURCES = {}  # type: dict[str, str]  # (3.8 syntax: the bootstrap runs under any Python 3)


def _remember(path, source):
    """Keep the text that runs, so a traceback shows its lines (not those of a file edited since)."""
    _SOURCES[path] = source


def _show_lines():
    """Put the texts that ran into linecache (imported only when a traceback is printed)."""
    if _SOURCES:
        import linecache

        for path, source in _SOURCES.items():
            lines = source.splitlines(True)
            linecache.cache[path] = (len(source), None, lines, path)


def _report(kind, message, stack=""):
    """Tell toolexec why the call failed, on the private channel it named (never the tool's stderr)."""
    if _FAILURE_FILE:
        import json

        with open(_FAILURE_FILE, "w", encoding="utf-8", errors="backslashreplace") as out:
            json.dump({"type": kind, "message": message, "stack": stack}, out)


def main(module=None, data=None):
    """One call: ``module`` is the tool already loaded (by a warm fork server), ``data`` the request it read."""
    path = sys.argv[1]
    function = sys.argv[2] if len(sys.argv) > 2 else "run"
    request = _parse(sys.stdin.buffer.read() if data is None else data)
    # The tool gets an empty stdin, like any process run without input.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.argv = [path]
    try:
        if module is None:
            module = _load(path, request.get("source"), request.get("compiled"))
        arguments = request["arguments"]
        for name, enum, each in request.get("enums", ()):  # the members of the tool's own Enum, as pydantic gives
            kind = getattr(module, enum)
            arguments[name] = [kind(item) for item in arguments[name]] if each else kind(arguments[name])
        value = getattr(module, function)(**arguments)
        if _awaitable(value):
            import asyncio

            value = asyncio.run(_await(value))
    except SystemExit:
        raise
    except BaseException as exc:  # the tool's failure is reported, not ours
        import traceback

        _show_lines()
        stack = "".join(traceback.format_exception(type(exc), exc, _tool_frames(exc.__traceback__)))
        sys.stderr.write(stack)
        sys.stderr.flush()
        _report(type(exc).__name__, str(exc), stack)
        return 130 if isinstance(exc, KeyboardInterrupt) else 1
    failed = None
    if isinstance(value, dict) and isinstance(value.get("ok"), bool) and set(value) <= {"ok", "output", "error"}:
        # The {ok, output, error} convention: ok=false is a failed call.
        failed = None if value["ok"] else (value.get("error") or "the tool reported failure")
        value = value.get("output") if value["ok"] else None
    try:
        text = _render(value)
    except _NotJSON as exc:
        sys.stderr.write(str(exc) + "\n")
        _report("ValueError", str(exc))
        return 1
    if text is not None:  # a returned value replaces what the tool wrote, as Loki's runner does
        try:  # a name read from a non-UTF-8 file system (surrogateescape) goes out as the bytes it came from
            data = text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # any other lone surrogate cannot be UTF-8: U+FFFD in its place
            data = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text).encode("utf-8")
        _write_file(os.environ["LLM_OUTPUT"], data)
    if failed is not None:
        sys.stderr.write(_render(failed) + "\n")
        _report(None, _render(failed))
        return 1
    return 0


def _write_file(path, data):
    """``open(path, "wb").write(data)`` without the io layers (a warm call's process would copy their pages)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _tool_frames(tb):
    """The traceback from the tool's first frame on: this bootstrap (which loads and calls the tool), the
    import machinery and the event loop that awaits a coroutine are toolexec's, not the author's (None when
    nothing of the author's ran, as for a SyntaxError or a call that does not fit ``run``'s signature)."""
    asyncio = getattr(sys.modules.get("asyncio"), "__file__", None)
    ours = ("<frozen importlib", os.path.dirname(asyncio) + os.sep) if asyncio else ("<frozen importlib",)
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not (filename == __file__ or filename.startswith(ours)):
            break
        tb = tb.tb_next
    return tb


def _awaitable(value):
    """What ``inspect.isawaitable`` says, without importing ``inspect`` (~20 ms with its ``ast``)."""
    if hasattr(type(value), "__await__"):
        return True
    code = getattr(value, "gi_code", None)  # a generator made a coroutine by @types.coroutine
    return code is not None and bool(code.co_flags & 0x100)


async def _await(value):
    return await value


def _exit(code):
    """End now: threads the tool left running (non-daemon ones too) do not outlive its result."""
    import atexit

    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:  # noqa: SIM105 - contextlib is not imported by the bootstrap
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def start(module=None, data=None):
    """Run the call and end the process with its exit status (``module``, ``data``: see :func:`main`)."""
    try:
        code = main(module, data)
    except SystemExit as exc:  # the tool's own sys.exit()
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            sys.stderr.write(f"{exc.code}\n")
            code = 1
    _exit(code & 0xFF)
