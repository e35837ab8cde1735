"""Which process backend runs a call: pidfd and /proc where Linux has them, else psutil; TOOLEXEC_PROCESS_BACKEND overrides."""

from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from tests.conftest import Project, toolexec
from toolexec.errors import ToolexecError
from toolexec.runtimes import process, process_linux

ADD = 'def run(a: int) -> int:\n    """Add one."""\n    return a + 1\n'


@pytest.fixture
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget the cached answer of process_linux.available(), so each test probes its own system."""
    monkeypatch.setattr(process_linux, "_usable", None)
    monkeypatch.delenv(process.BACKEND_VARIABLE, raising=False)


@pytest.mark.usefixtures("fresh_probe")
@pytest.mark.parametrize(
    ("value", "module"), [(None, "linux"), ("", "linux"), ("auto", "linux"), ("linux", "linux"), ("portable", "portable")]
)
def test_auto_chooses_linux_here_and_the_variable_overrides(
    monkeypatch: pytest.MonkeyPatch, value: str | None, module: str
) -> None:
    if value is not None:
        monkeypatch.setenv(process.BACKEND_VARIABLE, value)
    assert process.backend().__name__ == f"toolexec.runtimes.process_{module}"


@pytest.mark.usefixtures("fresh_probe")
def test_without_pidfd_open_auto_is_portable_and_linux_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "pidfd_open")
    assert process.backend().__name__ == "toolexec.runtimes.process_portable"
    monkeypatch.setenv(process.BACKEND_VARIABLE, "linux")
    with pytest.raises(ToolexecError) as refused:
        process.backend()
    assert str(refused.value) == "TOOLEXEC_PROCESS_BACKEND=linux needs pidfd_open and /proc, which this system lacks; use auto"


@pytest.mark.usefixtures("fresh_probe")
def test_a_kernel_that_refuses_pidfd_open_gets_the_portable_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS))

    monkeypatch.setattr(os, "pidfd_open", refuse)
    assert process.backend().__name__ == "toolexec.runtimes.process_portable"


def test_an_unknown_backend_is_refused_with_a_clear_message(project: Project) -> None:
    project.tool("add.py", ADD)
    done = toolexec("--config", str(project.configure()), "run", "add", '{"a": 1}', env={process.BACKEND_VARIABLE: "fast"})
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "toolexec: TOOLEXEC_PROCESS_BACKEND must be one of auto, linux, portable; got 'fast'\n",
    )


def test_a_call_on_linux_does_not_import_psutil(project: Project) -> None:
    project.tool("add.py", ADD)
    program = (
        "import sys\nfrom toolexec import Executor\n"
        f"result = Executor({str(project.configure())!r}).call('add', {{'a': 1}})\n"
        "print(result.output, 'psutil' in sys.modules)\n"
    )
    env = {name: value for name, value in os.environ.items() if name != process.BACKEND_VARIABLE}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "2 False\n", "")


def test_threads_asking_while_the_backend_is_decided_all_get_the_linux_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread that asks while another is deciding must not see a half-made answer (it once did:
    a concurrent call then took the portable path, and the Linux path's orphan search killed its tool)."""
    import os
    import threading

    from toolexec.runtimes import process_linux

    if not process_linux.available():
        pytest.skip("needs the Linux path")
    monkeypatch.setattr(process_linux, "_usable", None)
    deciding, asked = threading.Event(), threading.Event()
    real = os.pidfd_open

    calls: list[int] = []

    def slow_pidfd_open(pid: int) -> int:  # the first decision waits until the second thread has asked
        calls.append(pid)
        if len(calls) == 1:  # the second asker decides for itself, at once (waiting here only timed out)
            deciding.set()
            assert asked.wait(timeout=30), "the second thread never got its answer"
        return real(pid)

    monkeypatch.setattr(os, "pidfd_open", slow_pidfd_open)
    answers: list[bool] = []
    first = threading.Thread(target=lambda: answers.append(process_linux.available()))
    first.start()
    assert deciding.wait(timeout=10)
    second = process_linux.available()
    asked.set()
    first.join(timeout=30)
    assert (answers, second) == ([True], True)


OWN_PAGES = """
import os
from toolexec.runtimes import process_linux


def private_dirty():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Private_Dirty:"):
            return int(line.split()[1]) * 1024


ballast = [bytearray(b"x" * 4096) for _ in range(4096)]  # 16 MiB the child shares with this process after the fork
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    before = private_dirty()
    asked = process_linux.own_pages()
    os.write(write, f"{asked} {private_dirty() - before}".encode())
    os._exit(0)
os.close(write)
print(os.read(read, 100).decode(), len(ballast) * 4096, bytes(ballast[-1][:1]).decode())
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="copy-on-write pages are taken with Linux's madvise")
def test_own_pages_copies_what_a_forked_child_shares_with_its_parent() -> None:
    """A forked child that calls own_pages holds its own copy of the memory it shared (its private dirty pages grow
    by at least what it shared), so the call that follows takes no copy-on-write fault; the parent is untouched."""
    done = subprocess.run([sys.executable, "-c", OWN_PAGES], capture_output=True, text=True, timeout=60, check=True)
    asked, grown, shared, mark = done.stdout.split()
    if asked == "0":
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14+)")
    assert int(grown) >= int(shared) and int(asked) >= int(shared)
    assert mark == "x"


OWN_PAGES_UNTIL = """
import os
from toolexec.runtimes import process_linux

ballast = [bytearray(b"x" * 4096) for _ in range(4096)]  # 16 MiB the child shares with this process after the fork
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    asks = []
    asked = process_linux.own_pages(until=lambda: asks.append(1) or len(asks) > 3, step=1 << 16)
    whole = process_linux.own_pages(step=1 << 16)
    os.write(write, f"{asked} {len(asks)} {whole}".encode())
    os._exit(0)
os.close(write)
print(os.read(read, 100).decode(), len(ballast) * 4096)
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="copy-on-write pages are taken with Linux's madvise")
def test_own_pages_stops_copying_once_until_says_so() -> None:
    """own_pages asks ``until`` before each step and stops at the first True (a spare child stops copying once a
    client waits, rather than have its call wait for the rest): three steps of 64 KiB at most were copied, where the
    whole copy asks for at least the 16 MiB the child shares."""
    done = subprocess.run([sys.executable, "-c", OWN_PAGES_UNTIL], capture_output=True, text=True, timeout=60, check=True)
    asked, asks, whole, shared = (int(word) for word in done.stdout.split())
    if whole == 0:
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux 5.14+)")
    assert (asks, 0 < asked <= 3 << 16) == (4, True)
    assert whole >= shared
