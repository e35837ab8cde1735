"""``toolexec list``'s kept text: printed again only while everything it was rendered from is the same."""

from __future__ import annotations

import pytest

from tests.conftest import Project, cli
from toolexec.config import load_config
from toolexec.listing import KEPT_FILE

TOOL = 'def run() -> str:\n    """Say {0}."""\n    return "{0}"\n'


def _kept(project: Project) -> str:
    return (load_config(project.config).state.private_dir / KEPT_FILE).read_text()


@pytest.mark.parametrize("options", [[], ["--json"], ["--all"], ["--tags", "x"]], ids=" ".join)
def test_a_kept_listing_is_what_rendering_prints(
    options: list[str], project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.tool("a.py", TOOL.format("a"))
    project.tool("b.py", TOOL.format("b").replace('"""Say b."""', '"""Say b.\n\n    Tags: x\n    """'))
    config = str(project.configure(enabled_tools=["a", "b"]))
    first = cli(capsys, "--config", config, "list", *options)
    assert first[0] == 0 and first[1]
    assert cli(capsys, "--config", config, "list", *options) == first  # from the kept text
    assert _kept(project).split("\n", 1)[1] == first[1]
    (load_config(config).state.private_dir / KEPT_FILE).unlink()
    assert cli(capsys, "--config", config, "list", *options) == first  # rendered anew


# (a config change, and the line of tool b `toolexec list` then prints)
CONFIG_CHANGES = [
    ({"enabled_tools": ["a"]}, "b  python      (not enabled) Say b."),
    ({"sandbox": "off"}, "b  python      Say b.  (unconfined: sandbox: off)"),
    ({"enabled_tools": ["a", "both"], "mapping_tools": {"both": "a,b"}}, "b  python      Say b."),
]


@pytest.mark.parametrize("change", CONFIG_CHANGES, ids=lambda c: ",".join(c[0]))
def test_a_config_change_renders_the_listing_anew(
    change: tuple[dict[str, object], str], project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.tool("a.py", TOOL.format("a"))
    project.tool("b.py", TOOL.format("b"))
    settings = {"enabled_tools": ["a", "b"], "sandbox": "strict"}
    config = str(project.configure(**settings))
    for _ in range(2):
        assert cli(capsys, "--config", config, "list", "--all")[1].splitlines()[1] == "b  python      Say b."
    project.configure(**{**settings, **change[0]})
    assert cli(capsys, "--config", config, "list", "--all")[1].splitlines()[1] == change[1]


@pytest.mark.parametrize(
    "kept", ["", "\n", "x", "0" * 64 + " 1\nforged\n", "\udcff", "0" * 64 + " x\nforged\n"], ids=lambda k: repr(k[:8])
)
def test_a_kept_listing_under_another_key_is_never_printed(
    kept: str, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.tool("a.py", TOOL.format("a"))
    config = str(project.configure())
    first = cli(capsys, "--config", config, "list")
    path = load_config(config).state.private_dir / KEPT_FILE
    path.write_bytes(kept.encode("utf-8", "surrogateescape"))
    assert cli(capsys, "--config", config, "list") == first
    assert path.read_text().split("\n", 1)[1] == first[1]  # kept again, under its key


@pytest.mark.parametrize("kind", ["fifo", "directory", "link"])
def test_a_kept_listing_that_is_not_a_regular_file_is_never_waited_on(
    kind: str, project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    project.tool("a.py", TOOL.format("a"))
    config = str(project.configure())
    first = cli(capsys, "--config", config, "list")
    path = load_config(config).state.private_dir / KEPT_FILE
    real = path.read_text()
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        (project.root / "forged.txt").write_text(real.replace("Say a.", "forged"))  # under the right key
        path.symlink_to(project.root / "forged.txt")
    descriptors = sorted(os.listdir("/proc/self/fd"))
    assert cli(capsys, "--config", config, "list") == first
    assert sorted(os.listdir("/proc/self/fd")) == descriptors  # (not one left open, not even to the collector)


@pytest.mark.parametrize("encoding", ["utf-8", "latin-1", "ascii"])
def test_kept_text_is_printed_as_the_stream_encodes_it(encoding: str) -> None:
    """Kept bytes go to a UTF-8 stream as they are, and to any other stream as the text they hold would."""
    import io

    from toolexec.listing import show

    text = "t\u00e9  python      Caf\u00e9 \u2603\n"
    for given in (text, text.encode("utf-8")):
        stream = io.TextIOWrapper(io.BytesIO(), encoding=encoding, errors="replace")
        stream.write("before\n")
        show(given, stream)
        stream.flush()
        assert stream.buffer.getvalue() == ("before\n" + text).encode(encoding, "replace")  # type: ignore[attr-defined]
