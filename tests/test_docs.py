"""The documentation ships with the code and cannot drift from it.

* The example blocks of the authoring pages are the golden compiler cases, byte for byte
  (``--update-goldens`` rewrites them).
* Every golden case is shown on its language's authoring page, unless listed in ``LEFT_OUT``.
* No page and not the README points outside the repository or at a file or heading that
  does not exist.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

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


# Every documented config and command: YAML blocks load as configs, `toolexec …` lines parse.
_ANY_BLOCK = re.compile(r"^(`{3,})(\w*)[^\n]*\n(.*?)^\1\s*$", re.DOTALL | re.MULTILINE)
_SPAN = re.compile(r"(?<!`)`(toolexec [^`\n]+)`(?!`)")
# What marks a synopsis rather than a command to type: [optional], alternatives, …, NAME (not ENV_VAR).
_PLACEHOLDER = re.compile(r"\[-|…|(?<![\w'\"])[A-Z][A-Z,]*(?![\w'\"])")
# Blocks in a config-like language that are not toolexec configs, with the reason.
NOT_CONFIGS = {"apiVersion": "a Kubernetes manifest (docs/scale-out.md)"}


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(language, body) for _, language, body in _ANY_BLOCK.findall(page.read_text(encoding="utf-8"))]


def _config_snippets() -> list[tuple[str, str]]:
    found = []
    for page in _user_pages():
        for index, (language, body) in enumerate(_blocks(page)):
            if language in ("yaml", "yml") and not any(key in body for key in NOT_CONFIGS):
                found.append((f"{page.name}:{index}", body))
    return found


@pytest.mark.parametrize("snippet", [pytest.param(body, id=where) for where, body in _config_snippets()])
def test_every_documented_config_loads(snippet: str, tmp_path: Path) -> None:
    import yaml

    from toolexec.config import load_config

    path = tmp_path / "config.yaml"
    path.write_text(snippet, encoding="utf-8")
    config = load_config(path)
    data = yaml.safe_load(snippet)
    for key in ("timeout", "max_output_bytes", "max_parallel", "max_kept_bytes"):
        if key in data:
            assert getattr(config, key) == data[key], key


def test_the_documented_snippets_are_found() -> None:
    assert [where.split(":")[0] for where, _ in _config_snippets()] == [
        "coming-from-loki.md",
        "configuration.md",
        "mcp.md",  # token_env and allowed hosts
        "mcp.md",  # cwd
        "mcp.md",  # OAuth with a JWKS
        "mcp.md",  # OAuth with introspection
        "sandbox.md",
        "scale-out.md",
    ]


def _commands(text: str) -> list[list[str]]:
    """Every ``toolexec …`` simple command in shell text (pipelines, ``&&``, redirections and comments taken apart)."""
    import shlex

    commands: list[list[str]] = []
    for line in text.splitlines():
        lexer = shlex.shlex(line.removeprefix("$ "), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        try:
            tokens = list(lexer)
        except ValueError:  # prose with an apostrophe
            continue
        current: list[str] = []
        for token in [*tokens, ";"]:
            if token and set(token) <= set("|&;<>()"):
                if current[:1] == ["toolexec"]:
                    commands.append(current)
                current = [] if token not in ("<", ">") else ["<redirect>"]
            elif current != ["<redirect>"]:
                current.append(token)
            else:
                current = ["<redirected>"]
    return commands


def _documented_commands() -> tuple[list[tuple[str, list[str]]], list[tuple[str, str]]]:
    """(page, argv) of every concrete command in a code block, and (page, text) of every synopsis."""
    concrete, synopses = [], []
    for page in _user_pages():
        text = page.read_text(encoding="utf-8")
        for language, body in _blocks(page):
            if language not in ("", "sh", "bash", "console", "shell", "text"):
                continue
            for line in body.splitlines():
                if line.startswith("toolexec ") and _PLACEHOLDER.search(line):
                    synopses.append((page.name, line))
                else:
                    concrete += [(page.name, argv[1:]) for argv in _commands(line)]
        spans = [span.replace("\\|", "|").split(" | ")[0] for span in _SPAN.findall(_CODE_BLOCKS.sub("", text))]
        synopses += [(page.name, span) for span in spans]  # a pipeline (`toolexec list | head -1`) ends at its pipe
    return concrete, synopses


_CODE_BLOCKS = re.compile(_FENCED, re.DOTALL | re.MULTILINE)


def test_every_documented_command_line_parses() -> None:
    from toolexec import cli

    concrete, _ = _documented_commands()
    assert len(concrete) >= 15
    refused = []
    for page, argv in concrete:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                cli._parse(argv)
        except SystemExit as exit:
            if exit.code != 0:  # --version and --help exit 0
                refused.append(f"{page}: toolexec {' '.join(argv)}")
    assert refused == []


def _options() -> dict[str, dict[str, Any]]:
    """Per command (and "" for the top level): each option string and its choices (None when free)."""
    import argparse

    from toolexec import cli

    parser = cli._parser()
    top = {s: a.choices for a in parser._actions for s in a.option_strings}
    found = {"": top}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = top | {s: a.choices for a in sub._actions for s in a.option_strings}
    return found


def test_every_documented_option_exists_with_its_choices() -> None:
    options = _options()
    _, synopses = _documented_commands()
    wrong = []
    for page, text in synopses:
        text = text.split(" | ", 1)[0]  # a shell pipe ends toolexec's arguments (choices are written a|b, unspaced)
        words = [w.strip("[]") for w in text.split()[1:]]
        words = words[: words.index("|")] if "|" in words else words  # `toolexec list | head -1`: a pipeline
        command = next((w for w in words if w in options), "")
        if not command and words and words[0].islower() and not words[0].startswith("-"):
            wrong.append(f"{page}: {text}: no command {words[0]!r}")
            continue
        known = options[command]
        for index, word in enumerate(words):
            option = word.split("=")[0]
            if not option.startswith("-"):
                continue
            if option not in known:
                wrong.append(f"{page}: {text}: no option {option} for {command or 'toolexec'}")
                continue
            given = words[index + 1].split("|") if index + 1 < len(words) and "|" in words[index + 1] else []
            choices = known[option]
            if choices is not None and any(value not in choices for value in given):
                wrong.append(f"{page}: {text}: {option} takes {sorted(choices)}")
    assert wrong == []
    assert len(synopses) >= 30


def test_every_config_key_is_documented_with_its_default() -> None:
    from toolexec.config import DEFAULTS, MCP_KEYS

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    table = text[text.index("## Keys") :]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| [^|]* \| ([^|]*) \|", table, re.MULTILINE)}
    assert sorted(rows) == sorted(DEFAULTS)
    for key, value in DEFAULTS.items():
        shown = re.match(r"`([^`]*)`", rows[key])
        if isinstance(value, int | str | dict):
            assert shown is not None and shown.group(1) == (json.dumps(value) if isinstance(value, dict) else str(value)), key
    mcp_row = table[table.index("| `mcp` |") :].split("\n", 1)[0]
    assert [key for key in MCP_KEYS if f"`{key}`" not in mcp_row] == []


def _literal(module: Path, alias: str) -> list[str]:
    """The values of the ``Literal`` type alias ``alias`` in ``module`` (read from the source: it exists only for type checkers)."""
    import ast

    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == alias:
            assert isinstance(node.value, ast.Subscript)
            elements = node.value.slice.elts if isinstance(node.value.slice, ast.Tuple) else [node.value.slice]
            return [ast.literal_eval(element) for element in elements]
    raise LookupError(f"no {alias} in {module}")


def test_every_reason_a_call_fails_is_documented() -> None:
    reasons = _literal(REPO / "executor" / "records.py", "Reason")
    row = next(line for line in (DOCS / "cli.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `reason` |"))
    documented = re.findall(r"`(\w+)`(?= \(|,| \|)", row.split("|")[2])  # each value, then its meaning or the next
    assert documented == reasons
    assert len(reasons) >= 12


def test_the_documented_approval_hook_asks_about_what_confirm_destructive_asks_about() -> None:
    from toolexec.approval import ApprovalRequest, Deny, Rewrite, confirm_on_terminal, needs_confirmation
    from toolexec.records import Annotations, Kwargs, Metadata, ToolDeclaration

    for page, where in ((DOCS / "providers.md", "python"), (REPO / "executor" / "approval.py", "docstring")):
        text = page.read_text(encoding="utf-8")
        if where == "python":
            (example,) = [body for language, body in _blocks(page) if language == "python" and "def before_call" in body]
        else:
            start = text.index("    def before_call")
            example = "\n".join(line.removeprefix("    ") for line in text[start:].split("\n\n")[0].splitlines())
        scope: dict[str, Any] = {"Deny": Deny, "Rewrite": Rewrite}
        exec(compile(example.split("\n\nwith ")[0].replace("Decision", "object"), str(page), "exec"), scope)
        asks = confirm_on_terminal("destructive", terminal="/nonexistent/tty")  # no terminal: asking denies
        for read_only in (None, True, False):
            for destructive in (None, True, False):
                metadata = Metadata(annotations=Annotations(read_only=read_only, destructive=destructive))
                tool = ToolDeclaration(
                    name="t",
                    description="",
                    parameters={},
                    source="t.py",
                    language="python",
                    invocation=Kwargs(),
                    metadata=metadata,
                )
                request = ApprovalRequest(tool=tool, arguments={"path": "a"}, call_id="c1")
                denied_by_example = scope["before_call"](request) is not None
                assert denied_by_example == (asks(request) is not None) == needs_confirmation(tool, "destructive"), (
                    page.name,
                    read_only,
                    destructive,
                )
