"""Runs inside the tool's own Python: load the script, call ``run(**arguments)``, write the result.

Invoked as ``python python_bootstrap.py TOOL_PATH`` with ``{"arguments": {...}}``
on stdin. Kept free of third-party imports and of syntax newer than 3.8, since
the interpreter is whatever the tool's shebang names.
"""

import asyncio
import importlib.util
import inspect
import json
import os
import sys
import traceback

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


def _load(path):
    tool_dir = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, tool_dir)
    name = os.path.splitext(os.path.basename(path))[0].replace("-", "_")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _report(kind, message, stack=""):
    """Tell toolexec why the call failed, on the private channel it named (never the tool's stderr)."""
    if _FAILURE_FILE:
        with open(_FAILURE_FILE, "w", encoding="utf-8", errors="backslashreplace") as out:
            json.dump({"type": kind, "message": message, "stack": stack}, out)


def main():
    path = sys.argv[1]
    request = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    # The tool gets an empty stdin, like any process run without input.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.argv = [path]
    try:
        value = _load(path).run(**request["arguments"])
        if inspect.isawaitable(value):
            value = asyncio.run(_await(value))
    except SystemExit:
        raise
    except BaseException as exc:  # the tool's failure is reported, not ours
        traceback.print_exc()
        sys.stderr.flush()
        _report(type(exc).__name__, str(exc), traceback.format_exc())
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
        with open(os.environ["LLM_OUTPUT"], "w", encoding="utf-8") as out:
            out.write(text)
    if failed is not None:
        sys.stderr.write(_render(failed) + "\n")
        _report(None, _render(failed))
        return 1
    return 0


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


if __name__ == "__main__":
    try:
        _code = main()
    except SystemExit as exc:  # the tool's own sys.exit()
        if exc.code is None or isinstance(exc.code, int):
            _code = exc.code or 0
        else:
            sys.stderr.write(f"{exc.code}\n")
            _code = 1
    _exit(_code & 0xFF)
