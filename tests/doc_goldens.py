"""The example blocks of ``docs/authoring-*.md``, rendered from the compiler golden cases.

A page marks a block with ``<!-- golden: python/defaults -->`` … ``<!-- /golden -->``;
everything between the two markers is generated from
``tests/compilers/cases/python/defaults.py`` and its ``.json`` (the declaration),
``.err`` (the compile error) or ``.warn`` (build warnings), and the metadata of its
``.record.json`` when the case declares any. ``tests/test_docs.py``
fails when a page differs from the case files; ``pytest --update-goldens`` (or
``python -m tests.doc_goldens``) rewrites the blocks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
CASES = REPO / "tests" / "compilers" / "cases"
SOURCE_SUFFIXES = (".py", ".sh", ".ts", ".js", ".mjs", ".cjs")
FENCE_LANGUAGE = {".py": "python", ".sh": "bash", ".ts": "ts", ".js": "js", ".mjs": "js", ".cjs": "js"}

# A whole block, markers included; the case id is everything up to " -->".
BLOCK = re.compile(r"<!-- golden: (?P<case>[^>\n]+?) -->\n.*?<!-- /golden -->", re.DOTALL)


def case_ids() -> list[str]:
    """Every golden case as ``<language>/<stem>``."""
    return sorted(
        f"{p.parent.name}/{p.stem}" for p in CASES.rglob("*") if p.suffix in SOURCE_SUFFIXES and "node_modules" not in p.parts
    )


def source_of(case: str) -> Path:
    """The source file of ``<language>/<stem>``; a clear error when there is none."""
    language, _, stem = case.partition("/")
    found = [p for p in (CASES / language).glob(f"{glob_escape(stem)}.*") if p.suffix in SOURCE_SUFFIXES]
    if len(found) != 1:
        raise LookupError(f"golden case {case!r}: expected one source file in {CASES / language}, found {len(found)}")
    return found[0]


def glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def _fenced(text: str, language: str) -> str:
    """``text`` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text if text.endswith(chr(10)) else text + chr(10)}{fence}\n"


def render(case: str) -> str:
    """The generated text of one block, markers included."""
    source = source_of(case)

    def read(suffix: str) -> str:
        return source.with_suffix(suffix).read_text(encoding="utf-8")

    parts = [f"<!-- golden: {case} -->\n", f"`{source.name}`:\n\n", _fenced(read(source.suffix), FENCE_LANGUAGE[source.suffix])]
    if source.with_suffix(".err").exists():
        parts += ["\ndoes not compile; `toolexec build` and `toolexec compile` report:\n\n", _fenced(read(".err"), "text")]
    else:
        parts += ["\ncompiles to:\n\n", _fenced(read(".json"), "json")]
    metadata = _declared_metadata(source)
    if metadata:
        parts += ["\nwith this metadata (`toolexec describe` shows it; unset fields left out):\n\n"]
        parts.append(_fenced(json.dumps(metadata, indent=2, ensure_ascii=False), "json"))
    if source.with_suffix(".warn").exists():
        parts += ["\nwith these warnings in the build report:\n\n", _fenced(read(".warn"), "text")]
    parts.append("<!-- /golden -->")
    return "".join(parts)


def _declared_metadata(source: Path) -> dict[str, Any]:
    """The metadata a case declares beyond the default summary, with unset fields left out."""
    record = source.with_suffix(".record.json")
    if not record.exists():
        return {}
    metadata = json.loads(record.read_text(encoding="utf-8"))["metadata"]
    metadata["annotations"] = {k: v for k, v in metadata["annotations"].items() if v is not None}
    shown = {k: v for k, v in metadata.items() if v not in (None, [], {})}
    return shown if set(shown) - {"summary"} else {}


def fill(text: str) -> str:
    """``text`` with every golden block regenerated from the case files."""
    return BLOCK.sub(lambda m: render(m.group("case")), text)


def blocks(text: str) -> list[str]:
    """The case ids of the golden blocks in ``text``, in page order."""
    return [m.group("case") for m in BLOCK.finditer(text)]


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def update() -> list[Path]:
    """Rewrite every page whose golden blocks are stale; return the pages changed."""
    changed = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        filled = fill(text)
        if filled != text:
            page.write_text(filled, encoding="utf-8")
            changed.append(page)
    return changed


if __name__ == "__main__":
    for path in update():
        print(f"rewrote {path.relative_to(REPO)}")
