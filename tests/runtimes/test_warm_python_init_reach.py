"""A warm Python call's init under the sandbox's baseline is out of its tool's reach (runtimes/_python_zygote.py).

The init is process 1 of the call's PID namespace (``_spare``), the tool's process its child. It holds the socket it
says the call's status on (an ordinary user's call), so nothing of it may be the tool's to reach: an ordinary user's
tool is refused each reach of it (tests/runtimes/test_warm_bash_init.py's, listing ``/proc/1/fd`` included, which an
init left dumpable showed); root's reaches it, as a cold call's tool reaches bwrap's init, and finds the one socket its init says the tool's status
to the server on: a word the server takes only once it has killed the init and found nothing of the call left
(tests/runtimes/test_warm_status.py), so the ``X0`` it writes there changes nothing of its call. Each test runs toolexec in a process of its own, as ``nobody`` when this
runs as root, and as root too.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtimes.test_warm_bash_init import CALLS, DENIED, NO_SIGNAL, REACH, REACHED, placed
from tests.runtimes.test_warm_bash_init import Place as BashPlace
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available()), reason="needs bwrap, PID namespaces, pidfd and /proc"
)

TOOL = '''
import contextlib, io, json, os, subprocess

REACH = {reach!r}


def run(token: str) -> str:
    """Reach for my namespace's init.

    Warm: true

    Args:
        token: what my escapee sleeps for (no other process has it)
    """
    with open("/proc/1/cmdline", "rb") as cmdline:
        warm = b"_python_zygote" in cmdline.read() or b"python_zygote" in open("/proc/self/cmdline", "rb").read()
    subprocess.Popen(["setsid", "sleep", token], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)  # an escapee, which outlives the call
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(REACH, "reach", "exec"), {{"__name__": "reach"}})
    return json.dumps({{"warm": warm, "reach": json.loads(out.getvalue())}})
'''


class Place(BashPlace):
    """A project in a fresh folder under /tmp with the reaching Python tool, run as ``nobody`` when ``ordinary``."""

    def __init__(self, root: Path, ordinary: bool) -> None:
        import yaml

        super().__init__(root, ordinary)
        (root / "functions" / "tools" / "reach.py").write_text(TOOL.format(reach=textwrap.dedent(REACH).strip()))
        self.config.write_text(yaml.safe_dump({"visible_tools": ["reach.py"], "sandbox": "declared"}))
        self.own()

    def calls(self, tool: str = "reach") -> list[list]:
        done = self.run("python", "-c", CALLS, str(self.config), self.token, tool)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def place(request: pytest.FixtureRequest) -> Iterator[Place]:
    yield from placed(Place, request.param)


@pytest.mark.parametrize("place", [True], ids=["ordinary"], indirect=True)
def test_an_ordinary_users_warm_python_tool_is_refused_everything_of_its_init(place: Place) -> None:
    (cold, *warm) = place.calls()
    assert cold == ["ok", {"warm": False, "reach": REACHED}, "", []], cold
    assert warm == [["ok", {"warm": True, "reach": {**DENIED, "hijacked": 0, "caught": NO_SIGNAL}}, "", []]] * 2


@pytest.mark.skipif(os.geteuid() != 0, reason="root's own calls")
@pytest.mark.parametrize("place", [False], ids=["root"], indirect=True)
def test_roots_warm_python_tool_reaches_its_init_as_a_cold_one_does_and_its_word_is_not_taken(place: Place) -> None:
    (cold, *warm) = place.calls()
    assert cold == ["ok", {"warm": False, "reach": REACHED}, "", []], cold
    assert warm == [["ok", {"warm": True, "reach": {**REACHED, "hijacked": 1}}, "", []]] * 2
