"""``toolexec serve``'s waiting children copy ahead the pages a call writes, as learning children found them
(toolexec.serve_pages): what a child tells is kept only whole and well typed; the kernel's answer is read right."""

from __future__ import annotations

import ast
import marshal
import subprocess
import sys

import pytest

from toolexec.serve_pages import FIRST, RELEARN, HotPages, union, within


def test_runs_are_merged_and_cut_to_the_regions() -> None:
    assert union([(0, 10), (20, 5)], [(5, 10), (30, 1), (25, 2)]) == [(0, 15), (20, 7), (30, 1)]
    assert within([(0, 10), (15, 10), (40, 5)], [(5, 12), (20, 30)]) == [(5, 5), (15, 2), (20, 5), (40, 5)]
    assert within([(0, 4)], []) == []


def test_the_first_children_and_one_in_relearn_learn_and_none_once_the_kernel_cannot_say() -> None:
    pages = HotPages()
    try:
        learning = []
        for _ in range(2 * RELEARN + 1):
            pages.forking()
            learning.append(pages.learning)
        assert [n for n, learns in enumerate(learning) if learns] == [*range(FIRST), RELEARN, 2 * RELEARN]
        pages.blind = True
        pages.forking()
        assert pages.learning is False
    finally:
        pages.close()


@pytest.mark.parametrize(
    "message",
    [b"", b"junk", marshal.dumps({"a": 1}), marshal.dumps([(1, 2, 3)]), marshal.dumps([(-1, 4)]), marshal.dumps([(0, 0)])],
)
def test_what_a_child_tells_is_kept_only_whole_and_well_typed(message: bytes) -> None:
    pages = HotPages()
    try:
        pages.runs = [(4096, 4096)]
        if message:
            pages._tell.send(message)
        pages.receive()
        assert (pages.runs, pages.blind) == ([(4096, 4096)], False)
    finally:
        pages.close()


def test_the_runs_children_tell_are_kept_together_and_none_means_the_kernel_cannot_say() -> None:
    pages = HotPages()
    try:
        pages._tell.send(marshal.dumps([(0, 8192)]))
        pages._tell.send(marshal.dumps([(8192, 4096), (65536, 4096)]))
        pages.receive()
        assert (pages.runs, pages.blind) == ([(0, 12288), (65536, 4096)], False)
        pages._tell.send(marshal.dumps([]))
        pages.receive()
        assert (pages.runs, pages.blind) == (None, True)
    finally:
        pages.close()


WRITTEN = """
import ctypes, mmap, os
from toolexec.runtimes import process_linux

size, page = 16 << 20, mmap.PAGESIZE
memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
memory.write(b"x" * size)  # every page present, shared with the child after the fork
address = ctypes.addressof(ctypes.c_char.from_buffer(memory))
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    for offset in range(0, 1 << 20, page):  # the child writes the first MiB, and reads the rest
        memory[offset] = ord("y")
    sum(memory[offset] for offset in range(1 << 20, size, page))
    runs = process_linux.written_pages([(address, size)])
    os.write(write, repr([(start - address, length) for start, length in runs]).encode())
    os._exit(0)
os.close(write)
print(os.read(read, 4096).decode())
os.waitpid(pid, 0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/pagemap is Linux's")
def test_a_forked_child_holds_alone_the_pages_it_wrote_and_only_those() -> None:
    done = subprocess.run([sys.executable, "-c", WRITTEN], capture_output=True, text=True, timeout=60, check=True)
    runs = ast.literal_eval(done.stdout)
    if runs == []:
        pytest.skip("this kernel does not say which pages a process holds alone (Linux 4.2+)")
    assert runs == [(0, 1 << 20)]
