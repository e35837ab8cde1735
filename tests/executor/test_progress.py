"""The build's progress bar: only on a terminal, only for many files."""

from __future__ import annotations

import io

from toolexec.progress import MANY_FILES, build_progress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_on_a_terminal_for_many_files() -> None:
    stream = _Terminal()
    with build_progress(MANY_FILES, stream) as on_file:
        assert on_file is not None
        for n in range(MANY_FILES):
            on_file(f"tool_{n}.py")
    assert f"{MANY_FILES}/{MANY_FILES}" in stream.getvalue()


def test_no_bar_off_a_terminal_or_for_few_files() -> None:
    plain = io.StringIO()
    with build_progress(100, plain) as on_file:
        assert on_file is None
    with build_progress(MANY_FILES - 1, _Terminal()) as on_file:
        assert on_file is None
    assert plain.getvalue() == ""
