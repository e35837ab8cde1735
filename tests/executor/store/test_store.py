"""The shared store, both backends: each operation, expiry, key rules, and atomic read-modify-writes across processes
(8 processes incrementing one counter lose no increment; a counting semaphore never admits more than its limit)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.executor.tasks_client import redis_server
from toolexec.errors import BadRequest
from toolexec.store import Store, open_store
from toolexec.store.dirstore import DirStore

BACKENDS = ["dir", "redis"]


@pytest.fixture(params=BACKENDS)
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "dir":
        yield f"dir:{tmp_path / 'store'}"
    else:
        with redis_server(tmp_path) as url:
            yield url


@pytest.fixture
def store(spec: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(spec, relative_to=tmp_path)
    yield opened
    opened.close()


def test_each_operation(store: Store) -> None:
    assert store.get("task:a") is None
    assert store.add("task:a", {"n": 1}, 60) is True
    assert store.add("task:a", {"n": 2}, 60) is False  # taken: unchanged
    assert store.get("task:a") == {"n": 1}
    store.put("task:a", {"n": 3}, 60)
    assert store.get("task:a") == {"n": 3}
    assert store.update("task:a", lambda old: {"n": old["n"] + 1} if old else None) == {"n": 4}
    assert store.update("task:b", lambda old: {"new": old is None}, ttl=60) == {"new": True}
    with pytest.raises(ValueError, match="needs a ttl"):
        store.update("task:c", lambda old: {"x": 1})
    store.put("replica:r", {"seen": 1}, 60)
    assert store.keys("task:") == ["task:a", "task:b"]
    assert store.keys("task:[") == []  # a glob character in a prefix is literal
    assert store.update("task:b", lambda old: None) is None  # deleting through update
    store.delete("task:a")
    store.delete("task:never")  # absent is fine
    assert store.keys("task:") == []
    assert store.get("replica:r") == {"seen": 1}


def test_records_expire_and_are_pruned(store: Store, spec: str) -> None:
    store.put("task:short", {"n": 1}, 0.2)
    store.put("task:long", {"n": 2}, 60)
    assert store.update("task:short", lambda old: {**old, "m": 1} if old else None) == {"n": 1, "m": 1}  # keeps its expiry
    deadline = time.monotonic() + 10
    while store.get("task:short") is not None:
        assert time.monotonic() < deadline, "a record outlived its ttl"
        time.sleep(0.05)
    pruned = store.prune()
    assert pruned == (1 if spec.startswith("dir:") else 0)  # Redis expires by itself
    assert store.keys("task:") == ["task:long"]
    assert store.update("task:short", lambda old: old) is None  # expired reads as absent


@pytest.mark.parametrize("key", ["../escape", "/abs", "", "a/b", ".hidden", "x" * 201, "a b", "ü"])
def test_a_key_is_never_a_path(tmp_path: Path, key: str) -> None:
    store = DirStore(tmp_path / "store")
    with pytest.raises(ValueError, match="not a store key"):
        store.put(key, {}, 60)
    with pytest.raises(ValueError, match="not a store key"):
        store.get(key)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_the_directory_is_private(tmp_path: Path) -> None:
    store = DirStore(tmp_path / "store")
    store.put("task:a", {"secret": "output"}, 60)
    assert (tmp_path / "store").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "store" / "task:a.json").stat().st_mode & 0o777 == 0o600
    assert not [p for p in (tmp_path / "store").iterdir() if p.name.endswith(".tmp")]  # no temporary left


def test_a_torn_or_foreign_file_reads_as_absent(tmp_path: Path) -> None:
    store = DirStore(tmp_path / "store")
    for name, content in (
        ("task:torn", '{"expires": 9e99, "val'),
        ("task:list", "[1, 2]"),
        ("task:str", '{"expires": 9e99, "value": "x"}'),
    ):
        (tmp_path / "store" / f"{name}.json").write_text(content)
        assert store.get(name) is None


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ftp://x", "mcp.task_store must be dir:PATH or redis://HOST:PORT/DB, got 'ftp://x'"),
        ("dir:", "mcp.task_store 'dir:' names no directory; write dir:/srv/shared/tasks"),
    ],
)
def test_a_bad_store_name_says_what_to_write(tmp_path: Path, spec: str, message: str) -> None:
    with pytest.raises(BadRequest) as raised:
        open_store(spec, relative_to=tmp_path)
    assert str(raised.value) == message


WORKER = """
import json, sys, time
from pathlib import Path
from toolexec.store import open_store

store = open_store(sys.argv[1], relative_to=Path.cwd())
rounds, log = int(sys.argv[2]), Path(sys.argv[3])

def take(old):
    holders = list((old or {}).get("holders", []))
    if len(holders) >= 2:
        return old or {"holders": []}
    return {"holders": holders + [sys.argv[4]]}

for _ in range(rounds):
    store.update("counter", lambda old: {"n": (old or {"n": 0})["n"] + 1}, ttl=600)
    held = store.update("semaphore", take, ttl=600)
    if sys.argv[4] in held["holders"]:
        with log.open("a") as out:
            out.write(json.dumps(len(held["holders"])) + "\\n")
        store.update("semaphore", lambda old: {"holders": [h for h in old["holders"] if h != sys.argv[4]]})
store.close()
"""


def test_read_modify_writes_are_atomic_across_processes(spec: str, tmp_path: Path) -> None:
    """8 processes × 25 increments of one counter: exactly 200; and a 2-slot semaphore built on update never holds 3."""
    log = tmp_path / "held.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, spec, "25", str(log), f"w{n}"], cwd=tmp_path, env=env) for n in range(8)
    ]
    assert [w.wait(timeout=120) for w in workers] == [0] * 8
    store = open_store(spec, relative_to=tmp_path)
    try:
        assert store.get("counter") == {"n": 200}
        assert store.get("semaphore") == {"holders": []}
    finally:
        store.close()
    held = [json.loads(line) for line in log.read_text().splitlines()]
    assert held and max(held) <= 2
