"""The documentation ships with the code and cannot drift from it.

* The example blocks of the authoring pages are the golden compiler cases, byte for byte
  (``--update-goldens`` rewrites them).
* Every golden case is shown on its language's authoring page, unless listed in ``LEFT_OUT``.
* No page and not the README points outside the repository or at a file or heading that
  does not exist.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import doc_goldens

REPO = doc_goldens.REPO
DOCS = doc_goldens.DOCS
LANGUAGES = ("python", "bash", "typescript", "javascript")
REQUIRED_PAGES = (
    "README.md",
    *(f"authoring-{language}.md" for language in LANGUAGES),
    "environment.md",
    "configuration.md",
    "cli.md",
    "installation.md",
    "coming-from-loki.md",
)
# Golden cases deliberately not shown on any page, with the reason.
LEFT_OUT: dict[str, str] = {
    "bash/argc_built": "argc's generated parser is 250 lines; coming-from-loki.md describes built scripts",
    "bash/dotted_options": "argc parity (--foo.bar binds argc_foo_bar), checked against the real argc, not a style to teach",
    "bash/tab_separated": "argc parity (a TAB after a tag), checked against the real argc, not a style to teach",
}


def _user_pages() -> list[Path]:
    return [REPO / "README.md", *doc_goldens.pages()]


@pytest.mark.parametrize("page", doc_goldens.pages(), ids=lambda p: p.name)
def test_golden_blocks_match_the_cases(page: Path, update_goldens: bool) -> None:
    text = page.read_text(encoding="utf-8")
    filled = doc_goldens.fill(text)
    if update_goldens and filled != text:
        page.write_text(filled, encoding="utf-8")
        return
    assert filled == text, f"{page.name} is out of date with tests/compilers/cases: run pytest --update-goldens"


def test_every_golden_case_is_shown_on_its_page() -> None:
    shown = {
        language: doc_goldens.blocks((DOCS / f"authoring-{language}.md").read_text(encoding="utf-8")) for language in LANGUAGES
    }
    missing = [case for case in doc_goldens.case_ids() if case not in shown[case.partition("/")[0]] and case not in LEFT_OUT]
    assert missing == [], "golden cases shown on no authoring page (add a block or list them in LEFT_OUT)"
    assert [case for case in LEFT_OUT if case not in doc_goldens.case_ids()] == []
    for language, cases in shown.items():
        assert len(cases) == len(set(cases)), f"authoring-{language}.md shows a case twice"


def test_the_pages_exist() -> None:
    assert [name for name in REQUIRED_PAGES if not (DOCS / name).is_file()] == []


def test_a_block_naming_an_unknown_case_is_an_error() -> None:
    with pytest.raises(LookupError, match="golden case 'python/no_such_case'"):
        doc_goldens.fill("<!-- golden: python/no_such_case -->\n<!-- /golden -->")


def test_fill_replaces_a_stale_block_and_only_it() -> None:
    stale = "before\n<!-- golden: python/basic -->\nold text\n<!-- /golden -->\nafter\n"
    filled = doc_goldens.fill(stale)
    case = REPO / "tests" / "compilers" / "cases" / "python"
    assert filled == f"before\n{doc_goldens.render('python/basic')}\nafter\n"
    assert (case / "basic.py").read_text(encoding="utf-8") in filled
    assert (case / "basic.json").read_text(encoding="utf-8") in filled


# Markdown links and reference definitions; code is removed first, so examples are not read as links.
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
_FENCED = r"^(`{3,}).*?^\1\s*$"
_CODE = re.compile(rf"{_FENCED}|`[^`\n]+`", re.DOTALL | re.MULTILINE)
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    text = re.sub(_FENCED, "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    anchors: set[str] = set()
    for heading in _HEADING.findall(text):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        repeat = sum(1 for a in anchors if a == slug or re.fullmatch(rf"{re.escape(slug)}-\d+", a))
        anchors.add(f"{slug}-{repeat}" if repeat else slug)
    return anchors


@pytest.mark.parametrize("page", _user_pages(), ids=lambda p: p.name)
def test_links_stay_in_the_repository_and_resolve(page: Path) -> None:
    raw = page.read_text(encoding="utf-8")
    assert "../shared" not in raw and "SPEC-compilers" not in raw, f"{page.name} points outside the repository"
    broken = []
    for match in _LINK.finditer(_CODE.sub("", raw)):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        if not _resolves(page, target):
            broken.append(target)
    assert broken == []


def _resolves(page: Path, target: str) -> bool:
    """A relative link from ``page`` names a file in the repository (and a heading of it, if it has ``#``)."""
    path_part, _, anchor = target.partition("#")
    resolved = (page.parent / path_part).resolve() if path_part else page
    if not resolved.is_relative_to(REPO) or not resolved.exists():
        return False
    return not anchor or resolved.suffix != ".md" or anchor in _anchors(resolved)


def test_the_readme_links_every_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    pages = [p.name for p in doc_goldens.pages() if p.name != "README.md"]
    assert [name for name in pages if f"(docs/{name})" not in readme] == []
    assert [name for name in pages if f"({name})" not in index] == []


# The README's first-run path, run as a newcomer types it: its sections, in order.
FIRST_RUN = ("Quick start", "Writing a Python tool")
_SECTION = re.compile(r"^## (.+)$", re.MULTILINE)
_BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
EXPECTED = "# → "


def first_run_steps(readme: str) -> list[tuple[str, str, list[str]]]:
    """The README's first-run blocks as steps: ("sh", command, expected stdout lines) and ("python", file, source)."""
    starts = [(m.group(1), m.end()) for m in _SECTION.finditer(readme)]
    sections = {title: readme[end : next((s for _, s in starts if s > end), len(readme))] for title, end in starts}
    steps: list[tuple[str, str, list[str]]] = []
    for title in FIRST_RUN:
        for language, body in _BLOCK.findall(sections[title]):
            if language == "python":
                path = body.splitlines()[0].removeprefix("# ")
                steps.append(("python", path, [body]))
                continue
            assert language == "sh", f"README {title!r}: a {language} block in the first-run path"
            for line in body.splitlines():
                if line.startswith(EXPECTED):
                    steps[-1][2].append(line.removeprefix(EXPECTED))
                elif line.strip():
                    steps.append(("sh", line, []))
    return steps


def test_the_readme_first_run_works_verbatim(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    steps = first_run_steps((REPO / "README.md").read_text(encoding="utf-8"))
    assert [kind for kind, _, _ in steps] == ["sh", "sh", "sh", "sh", "python", "sh"]
    installed = Path(sys.executable).parent
    assert (installed / "toolexec").is_file(), "the test runs the installed toolexec command"
    env = {**os.environ, "PATH": f"{installed}{os.pathsep}{os.environ['PATH']}"}
    where = tmp_path
    for kind, what, expected in steps:
        if kind == "python":
            (where / what).write_text(expected[0], encoding="utf-8")
            continue
        script = f'{what}\npwd > "$WHERE_FILE"\n'
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=where,
            env={**env, "WHERE_FILE": str(tmp_path / ".where")},
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, f"{what}: exit {done.returncode}\n{done.stderr}"
        if expected:
            assert done.stdout.rstrip("\n").split("\n") == expected, what
        where = Path((tmp_path / ".where").read_text().strip())
    assert where == tmp_path / "my-tools"
