"""A tool's icon in each language's idiom: read beside the script into a ``data:`` URI; a path out of the script's
folder is a compile error, a missing, oversize or mistyped file a warning (the tool builds without an icon)."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tests.executor.test_artifacts import IMAGE
from toolexec.compilers import compile_file
from toolexec.compilers.icon import ICON_LIMIT
from toolexec.errors import CompileError

SVG = b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 8 8"><circle cx="4" cy="4" r="3"/></svg>\n'

SOURCES = {
    "python": ("tool.py", 'def run() -> str:\n    """Has an icon.\n\n    Icon: {icon}\n    """\n    return "x"\n', "Icon:"),
    "bash": ("tool.sh", "#!/usr/bin/env bash\n# @describe Has an icon.\n# @meta icon {icon}\nmain() {{ :; }}\n", "@meta icon"),
    "typescript": (
        "tool.ts",
        "/**\n * Has an icon.\n * @icon {icon}\n */\nexport function run(): string {{\n  return 'x';\n}}\n",
        "@icon",
    ),
    "javascript": (
        "tool.js",
        "/**\n * Has an icon.\n * @icon {icon}\n */\nexport function run() {{\n  return 'x';\n}}\n",
        "@icon",
    ),
    "module": (
        "tool.mjs",
        'export default {{\n  name: "tool",\n  description: "Has an icon.",\n  icon: "{icon}",\n  run: () => "x",\n}};\n',
        "icon",
    ),
}
LINE = {"python": 4, "bash": 3, "typescript": 3, "javascript": 3, "module": 4}


def script(folder: Path, language: str, icon: str) -> Path:
    file, text, _ = SOURCES[language]
    path = folder / file
    path.write_text(text.format(icon=icon), encoding="utf-8")
    return path


@pytest.mark.parametrize("language", sorted(SOURCES))
@pytest.mark.parametrize(("name", "data", "mime"), [("icon.svg", SVG, "image/svg+xml"), ("img/logo.png", IMAGE, "image/png")])
def test_an_icon_becomes_a_data_uri(tmp_path: Path, language: str, name: str, data: bytes, mime: str) -> None:
    (tmp_path / name).parent.mkdir(exist_ok=True)
    (tmp_path / name).write_bytes(data)
    declaration = compile_file(script(tmp_path, language, f"./{name}"))
    assert declaration.metadata.icon == f"data:{mime};base64,{base64.b64encode(data).decode()}"
    assert declaration.warnings == ()


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_a_missing_oversize_or_mistyped_icon_is_a_warning(tmp_path: Path, language: str) -> None:
    (tmp_path / "big.png").write_bytes(IMAGE + b"\0" * ICON_LIMIT)
    (tmp_path / "fake.png").write_bytes(b"<html>not a picture</html>")
    (tmp_path / "dir.svg").mkdir()
    for icon, why in (
        ("./nothere.svg", "is not there"),
        ("big.png", f"is {len(IMAGE) + ICON_LIMIT} bytes, over the {ICON_LIMIT} an icon may be"),
        ("./fake.png", "is not a image/png file (by its bytes)"),
        ("./dir.svg", "is not a regular file"),
    ):
        path = script(tmp_path, language, icon)
        declaration = compile_file(path)
        assert declaration.metadata.icon is None
        assert declaration.warnings == (
            f"{path}:{LINE[language]}:1: warning: icon {icon!r} {why}; the tool has no icon\n  hint: fix the file or the path",
        )


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_an_icon_outside_the_scripts_folder_is_an_error(tmp_path: Path, language: str) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    secret = tmp_path / "secret.png"
    secret.write_bytes(IMAGE)
    os.symlink(secret, folder / "link.png")
    spelled = SOURCES[language][2]
    for icon, why in (
        ("../secret.png", "must stay inside the script's folder (no '..')"),
        (str(secret), "must be a path relative to the script"),
        ("~/x.png", "must be a path relative to the script"),
        ("./icon.exe", "is not an SVG, PNG, JPEG, GIF or WebP file (by its extension)"),
    ):
        with pytest.raises(CompileError) as raised:
            compile_file(script(folder, language, icon))
        problems = [p.message for p in raised.value.problems]
        assert problems == [f"{spelled} {icon!r} {why}"]
    with pytest.raises(CompileError) as raised:
        compile_file(path := script(folder, language, "./link.png"))
    assert str(raised.value) == (
        f"{path}:{LINE[language]}:1: icon './link.png' is a link out of the script's folder\n  hint: copy the image beside the script"
    )
