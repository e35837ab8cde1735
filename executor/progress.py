"""The progress display of ``toolexec build``: a bar on a terminal when many files compile, else nothing.

Off a terminal (CI logs, pipes) the build prints only its plain lines: each problem, then the summary.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

# Below this many visible files a build is quick enough that a bar would only flicker.
MANY_FILES = 8


@contextlib.contextmanager
def build_progress(total: int, stream: TextIO | None = None) -> Iterator[Callable[[str], None] | None]:
    """A callback that advances a bar per finished file, or None when no bar is wanted."""
    stream = stream if stream is not None else sys.stderr
    if total < MANY_FILES or not stream.isatty():
        yield None
        return
    # slow (rich: ~30 ms): only a build of many files on a terminal shows a bar
    from rich.console import Console  # noqa: PLC0415
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn  # noqa: PLC0415

    columns = (TextColumn("building"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"))
    with Progress(*columns, console=Console(file=stream), transient=True) as progress:
        task = progress.add_task("", total=total)
        yield lambda file: progress.update(task, advance=1, description=file)
