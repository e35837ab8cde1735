"""What one call of a confined warm Python server could leave to, or reach in, another call of the same server,
through what a cold call's bwrap makes per call but the server made once: the IPC namespace (System V shared memory
and message queues, which outlive the process that made them), bwrap's ``/dev`` (a tmpfs: ``/dev/shm`` and ``/dev``
itself writable) and, under ``network: none``, the network namespace (its loopback). Each call now makes its own IPC
namespace, a ``/dev/shm`` of its own over a read-only ``/dev``, and under ``network: none`` its own network namespace
with its own loopback: the next call, and a call running at once, find nothing of it, as cold.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.conftest import Project
from tests.helpers import confined_warm_usable, wait_until
from toolexec import Executor

pytestmark = [
    pytest.mark.skipif(not confined_warm_usable(), reason="needs bwrap, PID namespaces, pidfd and /proc"),
    pytest.mark.usefixtures("no_new_zombie"),  # (a confined server's bwrap and init are reaped when it ends)
]


LEAVES = '''
import ctypes, os, socket, sys

def run(action: str, arg: str = "") -> dict:
    """Leave System V objects and files in /dev; look for them; listen on, or connect to, the loopback.

    Warm: true
    Writes: cache
    Network: none

    Args:
        action: leave, look, listen or connect
        arg: the port to connect to
    """
    said = {"warm": "_python_zygote" in sys.modules}  # (forked from a warm server)
    cache = os.environ["LLM_TOOL_CACHE_DIR"]
    if action == "leave":
        libc = ctypes.CDLL(None, use_errno=True)
        said["shmget"] = libc.shmget(0x5312, 4096, 0o1600) >= 0  # IPC_CREAT | 0600
        said["msgget"] = libc.msgget(0x5312, 0o1600) >= 0
        for where in ("/dev/shm/left-by-a-call", "/dev/left-by-a-call"):
            try:
                open(where, "w").close()
                said[where] = "written"
            except OSError as exc:
                said[where] = exc.strerror
    if action == "listen":  # until the test says it is done: who connected meanwhile
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(0.05)
        with open(os.path.join(cache, "port.tmp"), "w") as handle:
            handle.write(str(listener.getsockname()[1]))
        os.rename(os.path.join(cache, "port.tmp"), os.path.join(cache, "port"))
        said["accepted"] = 0
        while not os.path.exists(os.path.join(cache, "done")):
            try:
                listener.accept()[0].close()
                said["accepted"] += 1
            except socket.timeout:
                pass
        return said
    if action == "connect":
        try:
            socket.create_connection(("127.0.0.1", int(arg)), timeout=5).close()
            return {**said, "connect": "connected"}
        except OSError as exc:
            return {**said, "connect": exc.strerror}
    for kind in ("shm", "msg"):
        with open(f"/proc/sysvipc/{kind}") as handle:
            said[kind] = len(handle.read().splitlines()) - 1  # (a line of headings)
    said["/dev/shm"] = sorted(os.listdir("/dev/shm"))
    said["/dev"] = sorted(name for name in os.listdir("/dev") if "left" in name)
    return said
'''


def _said(result: Any) -> dict[str, Any]:
    assert (result.status, result.stderr) == ("ok", ""), result
    return dict(json.loads(result.output))


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
def test_a_call_leaves_no_system_v_object_nor_file_in_dev_to_the_next(project: Project, warm: bool) -> None:
    """Warm, the next call found the first one's shared memory segment and message queue (the server's IPC
    namespace) and its files in ``/dev/shm`` and ``/dev`` (the server's bwrap ``/dev``), living on after it."""
    project.tool("leaves.py", LEAVES)
    with Executor(project.configure(sandbox="declared"), warm=warm) as executor:
        left = _said(executor.call("leaves", {"action": "leave"}))
        executor.calls.settle()
        after = _said(executor.call("leaves", {"action": "look"}))
    # warm, /dev is read-only but for a /dev/shm of the call's own (a cold call's bwrap /dev is its own, writable)
    dev = "Read-only file system" if warm else "written"
    made = {"shmget": True, "msgget": True, "/dev/shm/left-by-a-call": "written", "/dev/left-by-a-call": dev}
    seen = {"shm": 1, "msg": 1, "/dev/shm": ["left-by-a-call"], "/dev": ["left-by-a-call"] if not warm else []}
    assert left == {"warm": warm, **made, **seen}
    assert after == {"warm": warm, "shm": 0, "msg": 0, "/dev/shm": [], "/dev": []}


def test_calls_at_once_each_have_their_own_loopback(project: Project) -> None:
    """``network: none``: a cold call's loopback is its own. Warm, every call of a server shared the server's, so a
    call reached a listener another call (its hostile arguments) had opened there."""
    project.tool("leaves.py", LEAVES)
    with Executor(project.configure(sandbox="declared"), warm=True) as executor:
        cache = executor.config.state.tool_cache("leaves")
        assert _said(executor.call("leaves", {"action": "look"}))["warm"]  # (its server started: both calls forked)
        listened: list[Any] = []
        listening = threading.Thread(target=lambda: listened.append(executor.call("leaves", {"action": "listen"})))
        listening.start()
        try:
            wait_until(lambda: (cache / "port").exists() or not listening.is_alive(), "the first call to listen")
            port = (cache / "port").read_text()
            connected = _said(executor.call("leaves", {"action": "connect", "arg": port}))
        finally:
            (cache / "done").write_text("")
            listening.join()
    said = {"warm": True}
    assert (connected, _said(listened[0])) == ({**said, "connect": "Connection refused"}, {**said, "accepted": 0})
