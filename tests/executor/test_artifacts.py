"""Files as results (``LLM_ARTIFACTS_DIR``) through the Python API: real interpreters write them, the result carries
them, and a hostile directory (links, FIFOs, hard links, floods, odd names) gives up nothing it should not."""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from tests.conftest import Project, toolexec
from toolexec.artifacts import clean_name
from toolexec.mediatype import sniff
from toolexec.records import Artifact

pytestmark = pytest.mark.launch_modes  # every call here runs cold, then warm (tests/conftest.py)


def png(width: int = 3, height: int = 2, seed: int = 0) -> bytes:
    """A real PNG (RGB, one row filter byte per line), different for each ``seed``."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\0" + bytes((seed + x * 40 + y * 90) % 256 for x in range(width * 3)) for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


IMAGE = png()
WAV = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8) + b"data\0\0\0\0"

# One tool per language: copies the file named by its argument into LLM_ARTIFACTS_DIR as plot.png, says "drawn".
WRITERS = {
    "draw_py.py": '''import os
import shutil


def run(source: str) -> str:
    """Draw a plot.

    Args:
        source: the image to return
    """
    shutil.copy(source, os.path.join(os.environ["LLM_ARTIFACTS_DIR"], "plot.png"))
    return "drawn"
''',
    "draw_sh.sh": """#!/usr/bin/env bash
# @describe Draw a plot.
# @option --source! the image to return
main() {
  cp "$argc_source" "$LLM_ARTIFACTS_DIR/plot.png"
  echo drawn >> "$LLM_OUTPUT"
}
""",
    "draw_js.js": """const fs = require("node:fs");
const path = require("node:path");

/**
 * Draw a plot.
 * @typedef {Object} Args
 * @property {string} source - the image to return
 * @param {Args} args
 */
exports.run = function (args) {
  fs.copyFileSync(args.source, path.join(process.env.LLM_ARTIFACTS_DIR, "plot.png"));
  return "drawn";
};
""",
    "draw_ts.ts": """import { copyFileSync } from "node:fs";
import { join } from "node:path";

/**
 * Draw a plot.
 * @param source - the image to return
 */
export function run(source: string): string {
  copyFileSync(source, join(process.env.LLM_ARTIFACTS_DIR as string, "plot.png"));
  return "drawn";
}
""",
}

# A Bash tool that runs the shell text it is given inside LLM_ARTIFACTS_DIR.
SHELL = """#!/usr/bin/env bash
# @describe Run shell text in the artifacts directory.
# @option --script! the text
main() {
  cd "$LLM_ARTIFACTS_DIR" && eval "$argc_script"
  echo "ran" >> "$LLM_OUTPUT"
}
"""


def leftovers(tmpdir: Path) -> list[str]:
    return sorted(p.name for p in tmpdir.iterdir())


@pytest.mark.parametrize("file", sorted(WRITERS))
def test_an_image_written_by_a_tool_of_each_language_arrives_in_the_result(
    project: Project, private_tmpdir: Path, file: str
) -> None:
    project.tool(file, WRITERS[file])
    source = project.root / "image.png"
    source.write_bytes(IMAGE)
    with project.executor([file]) as executor:
        result = executor.call(file.rsplit(".", 1)[0], {"source": str(source)})
    assert (result.ok, result.output.strip(), result.notes) == (True, "drawn", ())
    assert result.artifacts == (Artifact(name="plot.png", mime_type="image/png", size=len(IMAGE), data=IMAGE),)
    assert result.artifacts[0].kind == "image"
    assert leftovers(private_tmpdir) == []  # the call's directory is gone, as its other files


def test_past_the_inline_budget_files_are_kept_and_linked_images_first(project: Project) -> None:
    project.tool("shell.sh", SHELL)
    big = os.urandom(3000)
    (project.root / "big.bin").write_bytes(big)
    (project.root / "image.png").write_bytes(IMAGE)
    script = f"cp {project.root}/big.bin a.bin && cp {project.root}/image.png z.png && printf 'id,n\\n1,2\\n' > table.csv"
    with project.executor(["shell.sh"], artifacts={"inline_bytes": 2000}) as executor:
        result = executor.call("shell", {"script": script})
    assert result.ok, result.error
    kept, table, image = result.artifacts
    # In name order; the image went inline before the smaller CSV, and the 3000-byte file did not fit.
    assert image == Artifact(name="z.png", mime_type="image/png", size=len(IMAGE), data=IMAGE)
    assert table == Artifact(name="table.csv", mime_type="text/csv", size=9, data=b"id,n\n1,2\n")
    assert (kept.name, kept.mime_type, kept.size, kept.data) == ("a.bin", "application/octet-stream", 3000, None)
    assert kept.path is not None and Path(kept.path).read_bytes() == big == kept.read_bytes()
    assert Path(kept.path).parent.parent == project.root / "functions" / "cache" / ".artifacts"
    assert oct(Path(kept.path).stat().st_mode & 0o777) == "0o600"


def test_a_file_that_cannot_be_kept_is_left_out_and_the_rest_stands(project: Project) -> None:
    project.tool("shell.sh", SHELL)
    store = project.root / "functions" / "cache" / ".artifacts"
    store.parent.mkdir(parents=True)
    store.write_text("not a directory")
    with project.executor(["shell.sh"], artifacts={"inline_bytes": 3}) as executor:
        result = executor.call("shell", {"script": "printf ab > small.txt && printf abcdef > big.txt"})
    assert (result.ok, result.output, [a.name for a in result.artifacts]) == (True, "ran\n", ["small.txt"])
    assert result.notes == (
        f"big.txt (6 bytes) was not returned: it cannot be kept (cannot write toolexec's state in {store}: File exists; "
        "make it writable, or remove it so that the user cache is used)",
    )


def test_kept_files_are_pruned_after_their_ttl(project: Project) -> None:
    project.tool("shell.sh", SHELL)
    with project.executor(["shell.sh"], artifacts={"inline_bytes": 1, "ttl": 60}) as executor:
        first = executor.call("shell", {"script": "echo one > one.txt"}).artifacts[0]
        assert first.path is not None
        entry = Path(first.path).parent
        os.utime(entry, (0, 0))  # made long ago
        second = executor.call("shell", {"script": "echo two > two.txt"}).artifacts[0]
    assert not entry.exists()
    assert second.path is not None and Path(second.path).read_text() == "two\n"
    with pytest.raises(OSError):
        first.read_bytes()


def test_links_fifos_sockets_directories_and_hard_links_are_refused(project: Project, private_tmpdir: Path) -> None:
    secret = project.root / "secret.txt"
    secret.write_text("the secret")
    project.tool("shell.sh", SHELL)
    script = (
        f"ln -s {secret} link.txt && ln -s {project.root} linkdir && mkfifo pipe && mkdir sub && echo x > sub/inner.txt"
        f" && ln {secret} hard.txt"
        " && python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'"
        " && echo fine > ok.txt"
    )
    with project.executor(["shell.sh"]) as executor:
        result = executor.call("shell", {"script": script})
    assert result.ok, result.error
    assert result.artifacts == (Artifact(name="ok.txt", mime_type="text/plain", size=5, data=b"fine\n"),)
    where = "in LLM_ARTIFACTS_DIR"
    assert sorted(result.notes) == [
        f"hard.txt {where} is a hard link to another file: write a copy instead",
        f"link.txt {where} is a symbolic link: links are not followed, write the file itself",
        f"linkdir {where} is a symbolic link: links are not followed, write the file itself",
        f"pipe {where} is not a regular file (a FIFO or a device): not returned",
        f"sock {where} is a socket, not a regular file: not returned",
        f"sub {where} is a directory: only files at its top level are returned",
    ]
    assert secret.read_text() == "the secret"  # removing the directory removed the links, never their targets
    assert project.root.is_dir()
    assert leftovers(private_tmpdir) == []


def test_count_and_total_size_are_capped_with_one_note_each(project: Project) -> None:
    project.tool("shell.sh", SHELL)
    script = "for i in 1 2 3 4 5 6 7 8 9; do head -c 100 /dev/zero > f$i.bin; done && head -c 1000 /dev/zero > big.bin"
    with project.executor(["shell.sh"], artifacts={"max_files": 6, "max_bytes": 350}) as executor:
        by_size = executor.call("shell", {"script": script})
    with project.executor(["shell.sh"], artifacts={"max_files": 3}) as executor:
        by_count = executor.call("shell", {"script": script})
    assert [a.name for a in by_size.artifacts] == ["f1.bin", "f2.bin", "f3.bin"]
    assert by_size.notes == (
        "7 file(s) of LLM_ARTIFACTS_DIR were not returned (big.bin, 1000 bytes; f4.bin, 100 bytes; f5.bin, 100 bytes; "
        "f6.bin, 100 bytes; f7.bin, 100 bytes; …): the files of one call may total artifacts.max_bytes (350 bytes)",
    )
    assert [a.name for a in by_count.artifacts] == ["big.bin", "f1.bin", "f2.bin"]
    assert by_count.notes == (
        "7 file(s) of LLM_ARTIFACTS_DIR were not returned (f3.bin; f4.bin; f5.bin; f6.bin; f7.bin; …): "
        "at most artifacts.max_files (3) per call",
    )


def test_a_tool_that_replaces_its_directory_with_a_link_gets_a_note_and_nothing_is_followed(
    project: Project, private_tmpdir: Path
) -> None:
    target = project.root / "elsewhere"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    project.tool("shell.sh", SHELL)
    script = f'd="$LLM_ARTIFACTS_DIR"; cd / && rmdir "$d" && ln -s {target} "$d"'
    with project.executor(["shell.sh"]) as executor:
        result = executor.call("shell", {"script": script})
    assert result.artifacts == ()
    assert result.notes == ("the tool replaced LLM_ARTIFACTS_DIR with a symbolic link (not followed): no file was returned",)
    assert (target / "keep.txt").read_text() == "mine"
    assert leftovers(private_tmpdir) == []


def test_a_failed_call_returns_its_files_and_a_timed_out_one_none(project: Project, private_tmpdir: Path) -> None:
    project.tool("shell.sh", SHELL)
    with project.executor(["shell.sh"]) as executor:
        failed = executor.call("shell", {"script": "echo why > trace.txt && exit 3"})
        slow = executor.call("shell", {"script": "echo x > late.txt && sleep 30"}, timeout=0.5)
    assert (failed.ok, failed.reason, [a.name for a in failed.artifacts]) == (False, "tool_failed", ["trace.txt"])
    assert (slow.status, slow.artifacts) == ("timeout", ())
    assert leftovers(private_tmpdir) == []


def test_names_are_sanitised_and_unique() -> None:
    taken: set[str] = set()
    names = [
        clean_name(raw, taken) for raw in ("..hidden", "a\nb.txt", "plot.png", "plot.png", "\udcff.bin", " ", "x" * 300 + ".png")
    ]
    assert names == ["hidden", "a_b.txt", "plot.png", "plot-2.png", "\ufffd.bin", "file", "x" * 124 + ".png"]


@pytest.mark.parametrize(
    ("head", "name", "mime"),
    [
        (IMAGE[:64], "anything", "image/png"),
        (b"\xff\xd8\xff\xe0\0\x10JFIF", "x.bin", "image/jpeg"),
        (b"GIF89a\x01\0", "x", "image/gif"),
        (b"RIFF\0\0\0\0WEBPVP8 ", "x", "image/webp"),
        (WAV[:64], "x", "audio/wav"),
        (b"ID3\x04\0\0", "song", "audio/mpeg"),
        (b"OggS\0\x02", "x", "audio/ogg"),
        (b"fLaC\0\0", "x", "audio/flac"),
        (b"%PDF-1.7\n", "x", "application/pdf"),
        (b"<html>not a png</html>", "fake.png", "text/plain"),  # an image by name only is not sent as an image
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "icon.svg", "image/svg+xml"),
        (b'{"a": 1}', "data.json", "application/json"),
        (b"plain words", "README", "text/plain"),
        (b"\0\1\2\3", "blob", "application/octet-stream"),
    ],
)
def test_mime_types_come_from_the_bytes_for_media_and_the_name_otherwise(head: bytes, name: str, mime: str) -> None:
    assert sniff(head, name) == mime


def test_run_json_carries_the_files(project: Project) -> None:
    project.tool("draw_sh.sh", WRITERS["draw_sh.sh"])
    source = project.root / "image.png"
    source.write_bytes(IMAGE)
    project.configure(["draw_sh.sh"])
    done = toolexec("--config", str(project.config), "run", "draw_sh", json.dumps({"source": str(source)}), "--json")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["artifacts"] == [
        {"name": "plot.png", "mime_type": "image/png", "size": len(IMAGE), "data": base64.b64encode(IMAGE).decode()}
    ]


def test_plain_run_says_where_each_file_is_on_stderr(project: Project) -> None:
    project.tool("shell.sh", SHELL)
    project.configure(["shell.sh"], artifacts={"inline_bytes": 4})
    done = toolexec("--config", str(project.config), "run", "shell", '{"script": "printf ab > a.txt && printf abcdef > b.txt"}')
    kept = next((project.root / "functions" / "cache" / ".artifacts").glob("*/b.txt"))
    assert (done.returncode, done.stdout) == (0, "ran\n")
    assert done.stderr == (
        "toolexec: note: the tool returned a.txt (text/plain, 2 bytes): its bytes are in --json's artifacts\n"
        f"toolexec: note: the tool returned b.txt (text/plain, 6 bytes): kept at {kept}\n"
    )


def test_bad_artifact_settings_are_config_errors(project: Project) -> None:
    project.tool("shell.sh", SHELL)
    for settings, key, message in (
        ({"max_file": 3}, "artifacts.max_file", "unknown setting; did you mean 'max_files'?"),
        ({"max_files": 0}, "artifacts.max_files", "expected a positive whole number up to 1024, got 0"),
        ({"inline_bytes": "big"}, "artifacts.inline_bytes", "expected a positive whole number, got 'big'"),
        ({"ttl": 10**7}, "artifacts.ttl", "expected a positive number of seconds up to 604800 (a week), got 10000000"),
        ("lots", "artifacts", "expected a mapping such as max_files: 32, got 'lots'"),
    ):
        project.configure(["shell.sh"], artifacts=settings)
        done = toolexec("--config", str(project.config), "run", "shell", '{"script": ":"}')
        assert (done.returncode, done.stderr) == (2, f"toolexec: {project.config}: key '{key}': {message}\n")


@pytest.mark.skipif(not os.path.exists("/proc/self/ns/user"), reason="Linux namespaces only")
@pytest.mark.parametrize("file", ["draw_py.py", "draw_sh.sh"])
def test_a_confined_tool_writes_its_files_too(project: Project, private_tmpdir: Path, file: str) -> None:
    """Under the sandbox's private /tmp the call's artifacts directory is still the one toolexec reads back."""
    project.tool(file, WRITERS[file])
    source = project.root / "image.png"
    source.write_bytes(IMAGE)
    with project.executor([file], sandbox="strict", sandbox_policies={file[:-3]: {"reads": [str(project.root)]}}) as executor:
        result = executor.call(file[:-3], {"source": str(source)})
    assert (result.ok, result.error) == (True, None)
    assert result.artifacts == (Artifact(name="plot.png", mime_type="image/png", size=len(IMAGE), data=IMAGE),)
    assert leftovers(private_tmpdir) == []


def test_a_kept_file_is_read_back_by_its_owner_only_and_never_through_a_link(project: Project, tmp_path: Path) -> None:
    from toolexec.artifacts import ArtifactNotFound, bind, read, uri_of
    from toolexec.config import load_config

    project.tool("shell.sh", SHELL)
    with project.executor(["shell.sh"], artifacts={"inline_bytes": 1}) as executor:
        kept = executor.call("shell", {"script": "printf 'a,b\\n' > t.csv"}).artifacts[0]
    state = load_config(project.config).state
    uri = uri_of(kept)
    bind(kept, "owner-a")
    assert read(uri, "owner-a", state, 60) == ("t.csv", "text/csv", b"a,b\n")
    entry = Path(kept.path or "").parent
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "t.csv").write_text("forged")
    (elsewhere / ".owner").write_text((entry / ".owner").read_text())
    forged = entry.with_name("B" * 24)
    forged.symlink_to(elsewhere)
    for owner, asked, ttl in (
        ("owner-b", uri, 60),  # another client
        ("owner-a", uri, 0.000001),  # past its time
        ("owner-a", uri.replace(entry.name, forged.name), 60),  # a link in an entry's place
        ("owner-a", uri.replace("t.csv", "..%2Ft.csv"), 60),
    ):
        with pytest.raises(ArtifactNotFound) as missing:
            read(asked, owner, state, ttl)
        assert str(missing.value) == (
            f"no resource {asked!r}: links of tool results are readable by the client they were returned to, for {ttl:g} seconds"
        )
