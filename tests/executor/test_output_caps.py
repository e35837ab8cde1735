"""max_output_bytes: head and tail kept with a marker, never splitting UTF-8; the whole kept in a file."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.conftest import Project

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)

WRITER = '''
import os, sys

def run(where: str, repeat: int) -> None:
    """Write 'ab✓' repeat times to LLM_OUTPUT, stdout or stderr."""
    chunk = "ab\\u2713" * repeat
    if where == "file":
        with open(os.environ["LLM_OUTPUT"], "w") as f:
            f.write(chunk)
    elif where == "stdout":
        sys.stdout.write(chunk)
    elif where == "both":  # a short result in LLM_OUTPUT, and a flood of progress on stdout
        with open(os.environ["LLM_OUTPUT"], "w") as f:
            f.write("the result")
        sys.stdout.write(chunk)
    else:
        sys.stderr.write(chunk)
'''


def test_llm_output_beyond_the_cap(project: Project) -> None:
    project.tool("writer.py", WRITER)
    result = project.executor(max_output_bytes=1001).call("writer", {"where": "file", "repeat": 100_000}, call_id="big1")
    full = "ab\u2713" * 100_000
    assert result.ok
    head, marker, tail = result.output.split("\n")
    # 500 bytes of head and 501 of tail, each cut back to whole characters
    assert full.startswith(head) and full.endswith(tail)
    assert len(head.encode()) <= 500 and len(tail.encode()) <= 501 and len(head.encode()) >= 497
    dropped = len(full.encode()) - len(head.encode()) - len(tail.encode())
    assert marker == f"[… {dropped} bytes of output dropped …]"
    # named by the call id (made safe) and a random suffix: a call id never becomes a path
    kept = Path(result.output_file)
    assert kept.parent == project.root / "functions" / "cache" / ".outputs"
    assert re.fullmatch(r"big1-[0-9a-f]{8}\.output", kept.name)
    assert Path(result.output_file).read_text() == full
    assert result.notes == (
        f"output was longer than max_output_bytes (1001); the middle was dropped; all of it is in {result.output_file}",
    )


def test_stdout_and_stderr_beyond_the_cap_spill_to_files(project: Project) -> None:
    project.tool("writer.py", WRITER)
    executor = project.executor(max_output_bytes=64)
    printed = executor.call("writer", {"where": "stdout", "repeat": 50_000})
    assert printed.output_file is not None and Path(printed.output_file).read_text() == "ab\u2713" * 50_000
    assert "bytes of output dropped" in printed.output
    noisy = executor.call("writer", {"where": "stderr", "repeat": 50_000})
    assert noisy.output == "" and noisy.output_file is None
    assert noisy.stderr_file is not None and Path(noisy.stderr_file).read_text() == "ab\u2713" * 50_000
    assert len(noisy.stderr.encode()) < 200


def test_stdout_that_is_not_the_result_leaves_no_file(project: Project) -> None:
    project.tool("writer.py", WRITER)
    result = project.executor(max_output_bytes=64).call("writer", {"where": "both", "repeat": 50_000})
    assert (result.ok, result.output, result.output_file, result.notes) == (True, "the result", None, ())
    assert list((project.root / "functions" / "cache" / ".outputs").iterdir()) == []


def test_full_outputs_older_than_a_day_are_pruned(project: Project) -> None:
    project.tool("writer.py", WRITER)
    outputs = project.root / "functions" / "cache" / ".outputs"
    outputs.mkdir(parents=True)
    old, recent = outputs / "call_old.output", outputs / "call_recent.output"
    for path, age_hours in ((old, 25), (recent, 23)):
        path.write_text("kept from an earlier call")
        then = time.time() - age_hours * 3600
        os.utime(path, (then, then))
    result = project.executor(max_output_bytes=64).call("writer", {"where": "file", "repeat": 1000}, call_id="new")
    names = sorted(p.name for p in outputs.iterdir())
    assert names[0] == "call_recent.output" and len(names) == 2 and re.fullmatch(r"new-[0-9a-f]{8}\.output", names[1])
    assert result.output_file == str(outputs / names[1])


def test_within_the_cap_nothing_is_kept(project: Project) -> None:
    project.tool("writer.py", WRITER)
    result = project.executor(max_output_bytes=1 << 20).call("writer", {"where": "file", "repeat": 10})
    assert (result.output, result.output_file, result.notes) == ("ab\u2713" * 10, None, ())
    assert not (project.root / "functions" / "cache" / ".outputs").exists()


def test_invalid_utf8_is_replaced_and_said(project: Project) -> None:
    project.tool(
        "binary.py",
        'import os\n\ndef run():\n    """Bytes."""\n    with open(os.environ["LLM_OUTPUT"], "wb") as f:\n        f.write(b"ok \\xff\\xfe done")\n',
    )
    result = project.executor().call("binary", {})
    assert (result.ok, result.output) == (True, "ok \ufffd\ufffd done")
    assert result.notes == ("output was not valid UTF-8; invalid bytes were replaced with U+FFFD",)


def test_a_replacement_character_the_tool_wrote_is_not_called_invalid(project: Project) -> None:
    project.tool("writer.py", WRITER.replace("ab\\u2713", "ab\\ufffd"))
    small = project.executor().call("writer", {"where": "file", "repeat": 3})
    capped = project.executor(max_output_bytes=64).call("writer", {"where": "file", "repeat": 1000})
    assert (small.output, small.notes) == ("ab\ufffd" * 3, ())
    assert capped.notes == (
        f"output was longer than max_output_bytes (64); the middle was dropped; all of it is in {capped.output_file}",
    )
