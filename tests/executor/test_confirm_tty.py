"""``--confirm`` under a real pseudo-terminal: the real CLI in a child whose controlling terminal is a pty.

The child's stdin and stdout stay pipes (``call`` reads its batch from stdin), as when a
model's calls are piped in from a terminal session: the question goes to ``/dev/tty``.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import Project

REMOVE = '''def run(path: str) -> str:
    """Remove a note."""
    return f"removed {path}"
'''
# Opens the pty (becoming its controlling terminal: the child leads a new session) and runs the CLI.
WITH_TERMINAL = "import os, sys; os.close(os.open(sys.argv[1], os.O_RDWR)); os.execv(sys.executable, [sys.executable, '-m', 'toolexec', *sys.argv[2:]])"
QUESTION = b"[y/N] "


class Asked:
    """What happened: the exit status, stdout and stderr, and everything written on the terminal."""

    def __init__(self, code: int, stdout: str, stderr: str, terminal: bytes) -> None:
        self.code, self.stdout, self.stderr, self.terminal = code, stdout, stderr, terminal


def _read_until(master: int, wanted: bytes | None, deadline: float) -> bytes:
    """Read the terminal until ``wanted`` appears (or, with None, until every writer has closed it)."""
    seen = b""
    while wanted is None or wanted not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"nothing more on the terminal after {seen!r}"
        ready, _, _ = select.select([master], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the last descriptor of the terminal's other side was closed
            chunk = b""
        if not chunk:
            assert wanted is None, f"the terminal closed before {wanted!r}; it showed {seen!r}"
            return seen
        seen += chunk
    return seen


def ask(config: Path, answers: list[bytes] | list[tuple[bytes, bytes]], *argv: str, stdin: str = "") -> Asked:
    """Run ``toolexec --config CONFIG ARGV`` with a pty as its controlling terminal, typing each answer when asked
    (an answer given as ``(prompt, answer)`` waits for that prompt rather than ``[y/N] ``)."""
    master, slave = os.openpty()  # the slave stays open here until the child has ended: reads never see EIO early
    try:
        with tempfile.TemporaryFile() as given:
            given.write(stdin.encode())
            given.seek(0)
            child = subprocess.Popen(
                [sys.executable, "-c", WITH_TERMINAL, os.ttyname(slave), "--config", str(config), *argv],
                stdin=given,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    deadline = time.monotonic() + 60
    terminal = b""
    try:
        for turn in answers:
            prompt, answer = turn if isinstance(turn, tuple) else (QUESTION, turn)
            terminal += _read_until(master, prompt, deadline)
            os.write(master, answer)
        stdout, stderr = child.communicate(timeout=60)
        os.close(slave)
        slave = -1
        terminal += _read_until(master, None, deadline)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if stream is not None:
                stream.close()
        os.close(master)
        if slave != -1:
            os.close(slave)
    return Asked(child.returncode, stdout.decode(), stderr.decode(), terminal.replace(b"\r\n", b"\n"))


@pytest.fixture
def config(project: Project) -> Path:
    project.tool("remove.py", REMOVE)
    return project.configure()


@pytest.mark.parametrize("answer", [b"y\n", b"yes\n", b"YES\n", b" Y \n"])
def test_run_asks_on_the_terminal_and_a_yes_runs_the_call(config: Path, answer: bytes) -> None:
    done = ask(config, [answer], "run", "remove", '{"path": "a"}', "--confirm", "destructive")
    assert (done.code, done.stdout, done.stderr) == (0, "removed a", "")
    assert done.terminal == b'toolexec: run remove {"path": "a"}? [y/N] ' + answer.replace(b"\r\n", b"\n")


@pytest.mark.parametrize("answer", [b"n\n", b"\n", b"yess\n", b"\x04"])
def test_anything_but_yes_denies_the_call(config: Path, answer: bytes) -> None:
    done = ask(config, [answer], "run", "remove", '{"path": "a"}', "--confirm", "all")
    assert (done.code, done.stdout) == (2, "")
    assert done.stderr == "toolexec: the call of tool 'remove' was denied: the user declined the call\n"
    assert done.terminal.startswith(b'toolexec: run remove {"path": "a"}? [y/N] ')


def test_call_reads_the_batch_from_stdin_and_asks_each_call_on_the_terminal(config: Path) -> None:
    batch = [
        {"id": f"c{n}", "type": "function", "function": {"name": "remove", "arguments": json.dumps({"path": path})}}
        for n, path in enumerate(["a", "b"])
    ]
    done = ask(config, [b"y\n", b"n\n"], "call", "--confirm", "destructive", stdin=json.dumps(batch))
    assert (done.code, done.stderr) == (0, "")
    answered = {message["tool_call_id"]: message["content"] for message in json.loads(done.stdout)}
    assert answered == {
        "c0": "removed a",
        "c1": "the call of tool 'remove' was denied: the user declined the call",
    } or answered == {
        "c0": "the call of tool 'remove' was denied: the user declined the call",
        "c1": "removed b",
    }  # the calls run concurrently: whichever asked first got the yes
    assert done.terminal.count(b"? [y/N] ") == 2


def test_control_characters_in_the_arguments_do_not_reach_the_terminal(config: Path) -> None:
    done = ask(config, [b"n\n"], "run", "remove", json.dumps({"path": "\x1b[2J\x9b2J\u202eab\x07"}), "--confirm", "all")
    assert done.code == 2
    question = done.terminal.split(b"? [y/N] ")[0].decode()
    assert question == 'toolexec: run remove {"path": "\\u001b[2J\\u009b2J\\u202eab\\u0007"}'


def test_without_a_terminal_call_denies_every_confirmed_call(config: Path) -> None:
    batch = {"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "remove", "arguments": '{"path": "a"}'}}]}
    done = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(config), "call", "--confirm", "all"],
        input=json.dumps(batch),
        capture_output=True,
        text=True,
        start_new_session=True,  # no controlling terminal
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    denied = "the call of tool 'remove' was denied: --confirm all needs a terminal to ask on, and there is none"
    assert json.loads(done.stdout) == [{"role": "tool", "tool_call_id": "c1", "content": denied}]


def test_ctrl_c_at_the_question_cancels_the_call_at_once(config: Path) -> None:
    """Ctrl-C cancels as it does anywhere else (exit 130): nobody declined the call, so it is not "denied"."""
    done = ask(config, [b"\x03"], "run", "remove", '{"path": "a"}', "--confirm", "all")
    assert (done.code, done.stdout) == (130, "")
    assert done.stderr == "toolexec: the call was cancelled while asking; nothing ran\n"


def test_ctrl_c_at_the_first_question_of_a_batch_cancels_every_call_and_answers_them(config: Path) -> None:
    batch = [
        {"id": f"c{n}", "type": "function", "function": {"name": "remove", "arguments": json.dumps({"path": path})}}
        for n, path in enumerate(["a", "b"])
    ]
    done = ask(config, [b"\x03"], "call", "--confirm", "destructive", stdin=json.dumps(batch))
    assert (done.code, done.stderr) == (0, "")
    cancelled = "the call was cancelled while asking; nothing ran"
    assert json.loads(done.stdout) == [
        {"role": "tool", "tool_call_id": "c0", "content": cancelled},
        {"role": "tool", "tool_call_id": "c1", "content": cancelled},
    ]
