"""A running server's word that no tool file changed (:mod:`toolexec.vouch`): ``list`` and a no-change ``build``
stat no file while it vouches, and every change is still seen by the next command.

The server side runs here in a thread (its host, ``toolexec serve``, answers from its selector loop; one test runs
the real command), answering as soon as it is asked: an edit is made, then the next command asks, as a user types.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Project, cli
from tests.executor.test_catalog import CHANGES, tool
from toolexec import catalog
from toolexec.config import load_config
from toolexec.vouch import Vouch, _local, vouch_path, vouched


class Vouching:
    """A :class:`Vouch` of ``config`` answering from a thread until :meth:`stop`."""

    def __init__(self, config: Path) -> None:
        folder = os.path.dirname(vouch_path(str(config)))
        os.makedirs(folder, mode=0o700, exist_ok=True)
        self.vouch = Vouch(str(config))
        self.vouch.open()
        self.vouch.current()
        self._stop_read, self._stop_write = os.pipe()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.vouch.fileno(), selectors.EVENT_READ, "vouch")
            selector.register(self._stop_read, selectors.EVENT_READ, "stop")
            while True:
                for key, _ in selector.select():
                    if key.data == "stop":
                        return
                    self.vouch.answer()

    def stop(self) -> None:
        os.write(self._stop_write, b"x")
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        os.close(self._stop_read)
        os.close(self._stop_write)
        self.vouch.close()
        assert not os.path.exists(self.vouch.path)


@pytest.fixture
def vouching(project: Project) -> Iterator[Callable[[], Vouching]]:
    started: list[Vouching] = []

    def start() -> Vouching:
        started.append(Vouching(project.config))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def no_stat(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every stat-per-file check made in this process (the server's are made with ``links=False``), recorded."""
    made: list[str] = []
    digest = catalog.files_digest

    def recorded(tools_dir: str, files: object, *, links: bool = True) -> str | None:
        if links:
            made.append(tools_dir)
        return digest(tools_dir, files, links=links)  # type: ignore[arg-type]

    monkeypatch.setattr(catalog, "files_digest", recorded)
    return made


def _vouched(config: str | Path) -> str | None:
    loaded = load_config(config)
    return vouched(loaded, loaded.fingerprint()["visible_tools"])


def _listed(capsys: pytest.CaptureFixture[str], config: str) -> dict[str, str]:
    status, out, err = cli(capsys, "--config", config, "list", "--json")
    assert (status, err) == (0, "")
    return {row["name"]: row["description"] or "error" for row in json.loads(out)}


def _copied_with_an_old_mtime(project: Project) -> None:
    source = project.root / "elsewhere.py"
    source.write_text(tool("v2"))
    os.utime(source, ns=(1, 1))
    shutil.copy2(source, project.tools / "t1.py")  # written in place, then given the source's mtime, as `cp -p` does


def _edited_through_a_hard_link(project: Project) -> None:
    os.link(project.tools / "t1.py", project.root / "linked.py")  # (made after the server watched the file)
    with open(project.root / "linked.py", "r+", encoding="utf-8") as handle:
        handle.write(tool("v2"))


VOUCHED_CHANGES = [
    *CHANGES,
    ("copied-with-an-old-mtime", _copied_with_an_old_mtime, {"t1": "Say v2.", "t2": "Say two."}, "v2"),
    ("edited-through-a-hard-link", _edited_through_a_hard_link, {"t1": "Say v2.", "t2": "Say two."}, "v2"),
    ("config-hides-one", lambda p: p.configure(["t1.py"]), {"t1": "Say v1."}, "v1"),
]


@pytest.mark.parametrize("change", VOUCHED_CHANGES, ids=lambda c: c[0])
def test_every_change_is_seen_while_a_server_vouches(
    change: tuple[str, Callable[[Project], None], dict[str, str], str],
    project: Project,
    vouching: Callable[[], Vouching],
    no_stat: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, make, listed, output = change
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = str(project.configure())
    assert cli(capsys, "--config", config, "build")[0] == 0
    vouching()
    for _ in range(2):
        assert _listed(capsys, config) == {"t1": "Say v1.", "t2": "Say two."}
    assert cli(capsys, "--config", config, "build")[0] == 0
    assert no_stat == []  # the server vouched: no command statted the files
    make(project)
    assert _listed(capsys, config) == listed
    assert cli(capsys, "--config", config, "run", "t1", "{}")[:2] == (0, output)
    assert _vouched(config) is not None  # (still vouching after the change)
    no_stat.clear()
    assert _listed(capsys, config) == listed
    assert no_stat == []


def test_a_symbolic_link_among_the_files_is_never_vouched_for(
    project: Project, vouching: Callable[[], Vouching], no_stat: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A link's target may be edited in a folder nobody watches: with one, the files are statted as without a server."""
    target = project.root / "target.py"
    target.write_text(tool("v1"))
    (project.tools / "t1.py").symlink_to(target)
    config = str(project.configure(["t1.py"]))
    vouching()
    assert _vouched(config) is None
    assert _listed(capsys, config) == {"t1": "Say v1."}
    with open(target, "r+", encoding="utf-8") as handle:
        handle.write(tool("v2"))
    assert _listed(capsys, config) == {"t1": "Say v2."}
    assert no_stat


@pytest.mark.parametrize("how", ["renamed", "link-retargeted"])
def test_a_tools_folder_replaced_is_seen(
    how: str, project: Project, vouching: Callable[[], Vouching], capsys: pytest.CaptureFixture[str]
) -> None:
    """The functions folder renamed away (an event of the watched folder itself: watched anew) or a link to it
    retargeted (no event the server counts: the asking side compares the folder's identity with the watched one's)."""
    functions = project.root / "functions"
    if how == "link-retargeted":
        functions.rename(project.root / "a")
        functions.symlink_to("a")
    project.tool("t1.py", tool("v1"))
    config = str(project.configure())
    assert _listed(capsys, config) == {"t1": "Say v1."}
    vouching()
    assert _vouched(config) is not None
    if how == "renamed":
        functions.rename(project.root / "functions.old")
        (functions / "tools").mkdir(parents=True)
    else:
        (project.root / "b" / "tools").mkdir(parents=True)
        functions.unlink()
        functions.symlink_to("b")
    (functions / "tools" / "t1.py").write_text(tool("v2"))
    if how == "link-retargeted":
        assert _vouched(config) is None
    assert _listed(capsys, config) == {"t1": "Say v2."}


@pytest.mark.parametrize(
    "answer",
    [
        b"",
        b"no\n",
        b"vouch\n",
        b"vouch x 1 2\n",
        b"vouch " + b"d" * 64 + b" x y\n",
        b"vouch " + b"d" * 64 + b" 1 2 " + b"e" * 64 + b"\n",  # another folder's, other files' word
        b"\xff" * 300,
        b"vouch " * 100,
    ],
    ids=repr,
)
def test_a_forged_or_broken_answer_is_never_trusted(
    answer: bytes, project: Project, no_stat: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever sits on the socket and says anything but a well-formed word for this very folder: the files are
    statted, and the listing is right."""
    project.tool("t1.py", tool("v1"))
    config = str(project.configure())
    assert _listed(capsys, config) == {"t1": "Say v1."}
    path = vouch_path(os.path.realpath(config))
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(4)

        def answering() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(answer)

        thread = threading.Thread(target=answering)
        thread.start()
        assert _vouched(config) is None
        thread.join(timeout=60)
        os.unlink(path)
    with open(project.tools / "t1.py", "r+", encoding="utf-8") as handle:
        handle.write(tool("v2"))
    assert _listed(capsys, config) == {"t1": "Say v2."}
    assert no_stat


def test_a_server_that_does_not_answer_is_not_waited_on_past_a_second(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from toolexec import vouch

    monkeypatch.setattr(vouch, "ANSWER_SECONDS", 0.05)
    project.tool("t1.py", tool("v1"))
    config = str(project.configure())
    path = vouch_path(os.path.realpath(config))
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(4)  # never accepted: the connection waits in the backlog
        assert _vouched(config) is None
        assert _listed(capsys, config) == {"t1": "Say v1."}
        os.unlink(path)


def test_no_server_is_asked_when_told_not_to(
    project: Project, vouching: Callable[[], Vouching], monkeypatch: pytest.MonkeyPatch
) -> None:
    project.tool("t1.py", tool("v1"))
    config = project.configure()
    vouching()
    assert _vouched(config) is not None
    monkeypatch.setenv("TOOLEXEC_NO_SERVER", "1")
    assert _vouched(config) is None


def test_only_local_file_systems_are_vouched_for(tmp_path: Path) -> None:
    """/proc raises no inotify event for its changes; the temporary folder is on a local disk or tmpfs."""
    assert (_local("/proc/self"), _local(str(tmp_path))) == (False, True)


def test_a_running_serve_vouches_and_sees_an_edit_in_place(project: Project, tmp_path: Path) -> None:
    """The real command: `toolexec serve` answers, a `list` in another process sees a same-size edit at once, and
    the server leaves no socket behind when it stops."""
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = str(project.configure(sandbox="off"))
    command = [sys.executable, "-m", "toolexec", "--config", config]
    assert subprocess.run([*command, "build"], capture_output=True, timeout=120).returncode == 0
    server = subprocess.Popen([*command, "serve"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith(b"toolexec: serving ")
        path = vouch_path(os.path.realpath(config))
        assert _vouched(config) is not None
        listed = subprocess.run([*command, "list"], capture_output=True, timeout=120)
        assert (listed.returncode, listed.stdout.decode().splitlines()) == (
            0,
            ["t1  python      Say v1.  (unconfined: sandbox: off)", "t2  python      Say two.  (unconfined: sandbox: off)"],
        )
        with open(project.tools / "t1.py", "r+", encoding="utf-8") as handle:
            handle.write(tool("v2"))
        listed = subprocess.run([*command, "list"], capture_output=True, timeout=120)
        assert (listed.returncode, listed.stdout.decode().splitlines()) == (
            0,
            ["t1  python      Say v2.  (unconfined: sandbox: off)", "t2  python      Say two.  (unconfined: sandbox: off)"],
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert server.returncode == 0
    assert not os.path.exists(path)


def test_a_server_that_cannot_watch_says_no_and_tries_again_later(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past the watch limit (ENOSPC) the answer is no, kept (a `list` does not wait for 10,000 watches each time) until
    RETRY_SECONDS have passed or something watched changed."""
    import errno

    from toolexec import vouch

    project.tool("t1.py", tool("v1"))
    config = str(project.configure())
    add_watch, computed, limit = vouch._add_watch, [], [True]

    def limited(fd: int, path: str, mask: int) -> int:
        if limit[0] and path.endswith(".py"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return add_watch(fd, path, mask)

    compute = Vouch._compute

    def counted(self: Vouch) -> bytes:
        computed.append(1)
        return compute(self)

    monkeypatch.setattr(vouch, "_add_watch", limited)
    monkeypatch.setattr(Vouch, "_compute", counted)
    server = Vouch(config)
    try:
        assert [server.current() for _ in range(3)] == [vouch.NO] * 3
        assert len(computed) == 1
        limit[0] = False
        assert server.current() == vouch.NO  # (not tried again yet)
        monkeypatch.setattr(vouch, "RETRY_SECONDS", 0.0)
        server._retry_at = 0.0
        assert server.current().startswith(b"vouch ")
        assert len(computed) == 2
    finally:
        server.close()


def test_a_word_for_other_files_is_not_taken(project: Project, vouching: Callable[[], Vouching]) -> None:
    """The server vouches for its config's visible files; a command checking other files (an ``--agent``'s, or a
    config read before an edit) in the same folder takes no word for them."""
    from toolexec.recordtype import replace

    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = project.configure()
    vouching()
    assert _vouched(config) is not None
    fewer = replace(load_config(config), visible_tools=("t1.py",))
    assert vouched(fewer, fewer.fingerprint()["visible_tools"]) is None
    assert vouched(load_config(config), None) is None


REPO = Path(__file__).resolve().parents[2]
# Run in a mount namespace of its own (``unshare -rm``, so that no mount reaches the machine): a server vouches for
# the project, then a file is covered by a bind mount, in the server's namespace or in a child namespace where the
# asking process runs. Prints what the server's word was before and after, and the digest the files' stats give.
MOUNTED = """
import json, subprocess, sys
from pathlib import Path

from tests.executor.test_vouch import Vouching, _vouched

ASK = (
    "import json, sys; from tests.executor.test_vouch import _vouched; from toolexec import catalog; "
    "from toolexec.config import load_config; loaded = load_config(sys.argv[1]); "
    "print(json.dumps([_vouched(sys.argv[1]), catalog.files_digest(str(loaded.tools_dir), list(loaded.visible_tools))]))"
)
config, covered, cover, where = sys.argv[1:]
server = Vouching(Path(config))
try:
    before = _vouched(config)
    ask = [sys.executable, "-c", ASK, config]
    if where == "client":  # the asking process in a mount namespace of its own, where the file is covered
        script = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
        ask = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "-", cover, covered, *ask]
    else:
        subprocess.run(["mount", "--bind", cover, covered], check=True)
    after, actual = json.loads(subprocess.run(ask, check=True, capture_output=True, text=True).stdout)
    print(json.dumps([before, after, actual]))
finally:
    server.stop()
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
@pytest.mark.parametrize("where", ["server", "client"], ids=["in-the-servers-namespace", "in-the-askers-namespace"])
def test_a_file_covered_by_a_bind_mount_is_never_vouched_for_as_it_was(
    where: str, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mount raises no inotify event: a tool file covered by another (``mount --bind``) after the server watched it
    is another file at the same path, whose stats the asking process must get. The server sees its mount table change (it polls /proc/self/mountinfo) and
    stats anew; a process in another mount namespace, whose files may differ from the server's, is not vouched for."""
    project.tool("t1.py", tool("v1"))
    project.tool("t2.py", tool("two"))
    config = str(project.configure())
    assert _listed(capsys, config) == {"t1": "Say v1.", "t2": "Say two."}
    cover = project.root / "cover.py"
    cover.write_text(tool("v2"))
    argv = ["unshare", "-rm", "--propagation", "private", sys.executable, "-c", MOUNTED, config]
    done = subprocess.run(
        [*argv, str(project.tools / "t1.py"), str(cover), where], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    if done.returncode != 0 and "unshare failed" in done.stderr:
        pytest.skip(f"no mount namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    before, after, actual = json.loads(done.stdout)
    assert before is not None and actual is not None and before != actual
    assert after == (actual if where == "server" else None)
