"""The file built-ins against a hostile model: what a path IS decides, never how it is spelt.

Reading: devices, FIFOs, sockets and pseudo-files are refused (never a hang, never an endless read),
files are read as bounded streams, searches are bounded in depth, entries and time. Writing and
removing: toolexec's own config, tools, ``.env`` files and state are out of reach whatever the
spelling, and ``fs_rm`` never removes /, a top-level directory, a home or anything above one.

Each test runs against a private copy of the shipped tools (nothing here can touch the repository).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.functions.test_builtins import failed
from toolexec import Executor

PATCH = "@@ -1,1 +1,1 @@\n-a\n+b\n"
STOP_SLOW = 20  # seconds: a call that would hang or read forever is cut off here, and the test fails


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the shipped config and tools, every tool enabled."""
    root = tmp_path_factory.mktemp("shipped")
    shutil.copytree(REPO / "functions" / "tools", root / "functions" / "tools")
    shutil.copy(REPO / "config.yaml", root / "config.yaml")
    return root


@pytest.fixture
def tools(project: Path) -> Executor:
    shipped = Executor(project / "config.yaml")
    return Executor(dataclasses.replace(shipped.config, enabled_tools=None))


def call(tools: Executor, name: str, **arguments: object):  # type: ignore[no-untyped-def]
    return tools.call(name, arguments, timeout=STOP_SLOW)


def read_arguments(tool: str, path: str) -> dict[str, object]:
    return (
        {"path": path, "pattern": "x"}
        if tool == "fs_grep"
        else {"path": path, "patch": PATCH}
        if tool == "fs_patch"
        else {"path": path}
    )


# --- reading what is not a stored file -------------------------------------------------------


@pytest.fixture
def specials(tmp_path: Path) -> Iterator[dict[str, tuple[str, str]]]:
    """Paths that are not regular files, with how the refusal names them."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "zero-link").symlink_to("/dev/zero")
    device = "is a character device, not a regular file; the file tools read only regular files"
    found = {
        "dev-zero": ("/dev/zero", device),
        "link-to-dev-zero": (str(tmp_path / "zero-link"), device),
        "fifo": (str(fifo), "is a FIFO (named pipe), not a regular file; the file tools read only regular files"),
        "socket": (str(tmp_path / "sock"), "is a socket, not a regular file; the file tools read only regular files"),
        "proc": ("/proc/self/environ", "is on proc, a pseudo file system (not a stored file); the file tools do not read it"),
        "proc-kmsg-like": (
            "/proc/self/task/../stat",
            "is on proc, a pseudo file system (not a stored file); the file tools do not read it",
        ),
        "sys": (
            "/sys/kernel/uevent_seqnum",
            "is on sysfs, a pseudo file system (not a stored file); the file tools do not read it",
        ),
    }
    yield found
    sock.close()


@pytest.mark.parametrize("tool", ["fs_cat", "fs_read", "fs_grep", "fs_patch"])
@pytest.mark.parametrize("kind", ["dev-zero", "link-to-dev-zero", "fifo", "socket", "proc", "proc-kmsg-like", "sys"])
def test_file_tools_refuse_what_is_not_a_regular_file(
    tools: Executor, specials: dict[str, tuple[str, str]], tool: str, kind: str
) -> None:
    path, why = specials[kind]
    if not os.path.exists(path):
        pytest.skip(f"{path} does not exist here")
    assert failed(call(tools, tool, **read_arguments(tool, path))) == f"{path} {why}\n"


def test_fs_grep_skips_what_is_not_a_regular_file_in_a_tree(tools: Executor, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "a.txt").write_text("the needle\n")
    os.mkfifo(tree / "b.fifo")
    (tree / "c.txt").symlink_to("/dev/zero")
    (tree / "d").symlink_to("/proc/self")
    assert call(tools, "fs_grep", pattern="needle", path=str(tree)).output == f"{tree / 'a.txt'}:1:the needle\n"
    assert failed(call(tools, "fs_grep", pattern="needle", path="/proc")) == (
        "/proc is on a pseudo file system (such as /proc or /sys); the file tools do not search it\n"
    )


def test_fs_cat_returns_a_bounded_part(tools: Executor, tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x" * (2 * 1024 * 1024))
    assert call(tools, "fs_cat", path=str(big)).output == (
        "x" * 262144 + f"\n[… cut: {big} is longer than 262144 bytes; read on with fs_read (offset, limit)]\n"
    )


def test_fs_read_streams_with_a_bound(tools: Executor, tmp_path: Path) -> None:
    # Text up front, then 300 MiB of nothing stored (a sparse file): one line, never held whole in memory.
    sparse = tmp_path / "sparse.log"
    with sparse.open("wb") as out:
        out.write(b"a" * 8192)
        out.truncate(300 * 1024 * 1024)
    assert call(tools, "fs_read", path=str(sparse)).output == (
        "1\t" + "a" * 2000 + " [… line cut at 2000 characters]\n"
        "[showing lines 1-1 of at least 1 (only the first 268435456 bytes are read)]\n"
    )
    assert call(tools, "fs_read", path=str(sparse), offset=2).output == (
        f"[offset 2 is past line 1, where the first 268435456 bytes of {sparse} end; fs_read reads no further]\n"
    )


def test_fs_grep_stops_a_catastrophic_pattern(tools: Executor, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FS_GREP_TIME_LIMIT", "1")
    (tmp_path / "a.txt").write_text("fine\n" + "a" * 48 + "!\n")
    (tmp_path / "b.txt").write_text("never searched\n")
    assert call(tools, "fs_grep", pattern="(a+)+$", path=str(tmp_path)).output == (
        f"[search stopped after 1 s at {tmp_path / 'a.txt'}:2, 1 file(s) searched: narrow the path, "
        "or simplify the pattern (nested repeats such as (a+)+ can take exponential time)]\n"
    )


def test_fs_glob_is_bounded_in_depth_and_does_not_follow_links(tools: Executor, tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "loop").symlink_to(tmp_path)
    deep = tmp_path / "deep"
    deep.joinpath(*["d"] * 70).mkdir(parents=True)
    deep.joinpath(*["d"] * 70, "far.py").write_text("")
    stopped_in = "deep/" + "/".join(["d"] * 63)
    assert call(tools, "fs_glob", pattern="**/*.py", path=str(tmp_path)).output == (
        f"a.py\n[** goes at most 64 directories deep; not searched below {stopped_in}]\n"
    )
    assert call(tools, "fs_glob", pattern="loop/loop/*.py", path=str(tmp_path)).output == "loop/loop/a.py\n"


# --- what toolexec trusts is out of the write tools' reach -----------------------------------


def _trusted(project: Path) -> dict[str, tuple[str, str]]:
    """Spellings of a path toolexec trusts, each with the trusted path the refusal names."""
    functions = str((project / "functions").resolve())
    config_home = Path(os.environ["XDG_CONFIG_HOME"]).resolve() / "toolexec"
    return {
        "functions-dotenv": (f"{project}/functions/.env", functions),
        "tools-dotenv": (f"{project}/functions/tools/.env", functions),
        "a-tool": (f"{project}/functions/tools/fs_ls.sh", functions),
        "the-state": (f"{project}/functions/cache/x", functions),
        "dotdot": (f"{project}/functions/tools/../.env", functions),
        "the-config": (f"{project}/config.yaml", str((project / "config.yaml").resolve())),
        "user-config": (f"{config_home}/config.yaml", str(config_home)),
        "working-dir-config": (f"{os.getcwd()}/config.yaml", os.path.realpath("config.yaml")),
    }


def refusal(path: str, trusted: str, how: str = "") -> str:
    where = "" if os.path.realpath(path) == trusted else "inside "
    return (
        f"refused: {path} is {where}{trusted}{how}, which toolexec trusts (its config, tools, .env files or state); "
        "the file tools do not change it: edit it yourself\n"
    )


@pytest.mark.parametrize("tool", ["fs_write", "fs_patch", "fs_mkdir", "fs_rm"])
@pytest.mark.parametrize(
    "what",
    ["functions-dotenv", "tools-dotenv", "a-tool", "the-state", "dotdot", "the-config", "user-config", "working-dir-config"],
)
def test_write_tools_refuse_what_toolexec_trusts(tools: Executor, project: Path, tool: str, what: str) -> None:
    path, trusted = _trusted(project)[what]
    existed = os.path.lexists(path)
    before = Path(path).read_bytes() if existed and os.path.isfile(path) else None
    arguments = {"fs_write": {"contents": "BASH_ENV=/tmp/evil\n"}, "fs_patch": {"patch": PATCH}, "fs_rm": {"recursive": True}}
    made = tool == "fs_rm" and not existed
    if made:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("a\n")
        before, existed = b"a\n", True
    try:
        result = call(tools, tool, path=path, **arguments.get(tool, {}))
        assert failed(result) == refusal(path, trusted)
        assert os.path.lexists(path) == existed
        if before is not None:
            assert Path(path).read_bytes() == before
    finally:
        if made:
            os.unlink(path)


def test_write_tools_refuse_through_a_symlink(tools: Executor, project: Path, tmp_path: Path) -> None:
    (tmp_path / "innocent").symlink_to(project / "functions")
    (tmp_path / "note.txt").symlink_to(project / "functions" / "tools" / "fs_ls.sh")
    functions = str((project / "functions").resolve())
    for tool, arguments in (("fs_write", {"contents": "X=1\n"}), ("fs_mkdir", {})):
        path = str(tmp_path / "innocent" / ".env")
        assert failed(call(tools, tool, path=path, **arguments)) == refusal(path, functions)
    path = str(tmp_path / "note.txt")
    assert failed(call(tools, "fs_write", path=path, contents="echo owned")) == refusal(path, functions)
    assert "owned" not in (project / "functions" / "tools" / "fs_ls.sh").read_text()
    assert not (project / "functions" / ".env").exists()


def test_a_hard_link_never_changes_the_trusted_file(tools: Executor, project: Path, tmp_path: Path) -> None:
    dotenv = project / "functions" / "tools" / ".env"
    dotenv.write_text("KEPT=1\n")
    try:
        os.link(dotenv, tmp_path / "alias")
        for tool, arguments in (
            ("fs_write", {"contents": "BASH_ENV=/tmp/evil\n"}),
            ("fs_patch", {"patch": "@@ -1 +1 @@\n-KEPT=1\n+X=2\n"}),
        ):
            call(tools, tool, path=str(tmp_path / "alias"), **arguments)
            assert dotenv.read_text() == "KEPT=1\n"
    finally:
        dotenv.unlink()


def test_a_hard_link_to_the_config_is_refused(tools: Executor, project: Path, tmp_path: Path) -> None:
    config = project / "config.yaml"
    before = config.read_bytes()
    os.link(config, tmp_path / "notes.yaml")
    path = str(tmp_path / "notes.yaml")
    assert failed(call(tools, "fs_write", path=path, contents="enabled_tools: all\n")) == (
        f"refused: {path} is {config.resolve()} (under another name), which toolexec trusts (its config, tools, "
        ".env files or state); the file tools do not change it: edit it yourself\n"
    )
    assert config.read_bytes() == before


def test_a_refused_dotenv_cannot_open_private_addresses(tools: Executor, project: Path) -> None:
    dotenv = project / "functions" / ".env"
    assert not call(tools, "fs_write", path=str(dotenv), contents="HTTP_FETCH_ALLOW_HOSTS=127.0.0.0/8\n").ok
    assert not dotenv.exists()
    assert failed(call(tools, "http_fetch", url="http://127.0.0.1:9/")).startswith("refused: 127.0.0.1 resolves to 127.0.0.1")


def _bind(source: Path, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(source), str(target)], capture_output=True).returncode:
        pytest.skip("bind mounts need root and mount(8)")


def _unbind(target: Path) -> None:
    subprocess.run(["umount", str(target)], capture_output=True, check=True)


def test_write_tools_refuse_a_bind_mount_of_what_toolexec_trusts(tools: Executor, project: Path, tmp_path: Path) -> None:
    alias = tmp_path / "elsewhere"
    _bind(project / "functions", alias)
    try:
        path = str(alias / ".env")
        assert failed(call(tools, "fs_write", path=path, contents="X=1\n")) == refusal(
            path, str((project / "functions").resolve()), " (under another name)"
        )
        assert not (project / "functions" / ".env").exists()
    finally:
        _unbind(alias)


# --- fs_rm never removes a home, anything above it, / or a top-level directory ---------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory two levels down in the test's own folder (as /home/me is under /home)."""
    home = tmp_path / "users" / "me"
    (home / "work").mkdir(parents=True)
    (home / "notes.txt").write_text("keep me\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def test_fs_rm_never_removes_a_directory_above_home(tools: Executor, home: Path, tmp_path: Path) -> None:
    (tmp_path / "link-to-users").symlink_to(home.parent)
    for spelling in (str(home.parent), f"{home}/..", f"{home}/work/../..", f"{tmp_path}/link-to-users/me/.."):
        assert failed(call(tools, "fs_rm", path=spelling, recursive=True)) == (
            f"refused: will not remove {home.parent} (a directory holding your home directory)\n"
        )
    assert (home / "notes.txt").read_text() == "keep me\n"
    assert failed(call(tools, "fs_rm", path=f"{home}/work/..", recursive=True)) == (
        f"refused: will not remove {home} (your home directory)\n"
    )


def test_fs_rm_removes_a_symlink_not_its_target(tools: Executor, home: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(home)
    assert call(tools, "fs_rm", path=str(tmp_path / "link"), recursive=True).ok
    assert not (tmp_path / "link").exists() and (home / "notes.txt").exists()


@pytest.mark.parametrize(("path", "shown"), [("/proc/", "/proc"), ("/proc/self/..", "/proc"), ("/usr/lib/../../proc", "/proc")])
def test_fs_rm_never_removes_a_top_level_directory(tools: Executor, path: str, shown: str) -> None:
    assert (
        failed(call(tools, "fs_rm", path=path, recursive=True))
        == f"refused: will not remove {shown} (a top-level system directory)\n"
    )


def test_fs_rm_refuses_a_bind_mount_of_home_and_a_tree_holding_one(tools: Executor, home: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    alias = tree / "inner" / "mounted-home"
    _bind(home, alias)
    try:
        assert failed(call(tools, "fs_rm", path=str(alias), recursive=True)) == (
            f"refused: {alias} is {home} (your home directory) under another name; will not remove it\n"
        )
        assert failed(call(tools, "fs_rm", path=str(tree), recursive=True)) == (
            f"refused: {tree} holds the mount point {alias}; unmount it first or remove what is inside it\n"
        )
        assert (home / "notes.txt").read_text() == "keep me\n"
    finally:
        _unbind(alias)


def test_toolexec_names_what_it_trusts_to_every_tool(tools: Executor, project: Path) -> None:
    named = call(tools, "execute_command", command='printf %s "$TOOLEXEC_PROTECTED_PATHS"').output.split(os.pathsep)
    config_home, cache_home = Path(os.environ["XDG_CONFIG_HOME"]), Path(os.environ["XDG_CACHE_HOME"])
    assert named == [
        str((project / "config.yaml").resolve()),
        str(Path.cwd() / "config.yaml"),
        str((project / "functions").resolve()),
        str(tools.config.state.root),
        str(config_home / "toolexec"),
        str(cache_home / "toolexec"),
    ]
