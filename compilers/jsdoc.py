"""JSDoc blocks: the description and the ``@param`` / ``@property`` / other tags."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Tags whose text may itself start with "{" (a JSON object), so it is not read as a {type}.
_UNTYPED = {"example", "outputSchema"}
_NAME = re.compile(r"^(\[)?\s*([A-Za-z_$][\w$.]*)(\?)?\s*(?:=\s*([^\]]*))?\s*(\])?")


@dataclass
class Tag:
    """One JSDoc tag: its name, type, parameter name, optional flag, default and text."""

    tag: str
    type: str | None = None
    name: str | None = None
    optional: bool = False
    default: str | None = None
    text: str = ""
    line: int = 0  # 0-based line within the block
    col: int = 0  # 0-based column of the '@' within its line of the block


@dataclass
class JSDoc:
    """A parsed ``/** … */`` block: the description and its tags."""

    description: str
    tags: list[Tag] = field(default_factory=list)
    origin: tuple[int, int] = (0, 0)  # 0-based (row, column) of the block's "/**" in the file

    def find(self, tag: str) -> list[Tag]:
        """The tags named ``name``, in order."""
        return [t for t in self.tags if t.tag == tag]

    def at(self, tag: Tag) -> tuple[int, int]:
        """0-based (row, column) of a tag in the file."""
        row, col = self.origin
        return (row + tag.line, tag.col + (col if tag.line == 0 else 0))


def is_jsdoc(comment: str) -> bool:
    """Whether a comment node is a ``/** … */`` block."""
    return comment.startswith("/**") and not comment.startswith("/***")


def parse_jsdoc(comment: str, origin: tuple[int, int] = (0, 0)) -> JSDoc:
    """Parse the text of a ``/** … */`` block."""
    body = comment[3:-2] if comment.endswith("*/") else comment[3:]
    raw_lines = body.split("\n")
    lines = [re.sub(r"^\s*\*? ?", "", line) for line in raw_lines]
    description: list[str] = []
    tags: list[Tag] = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("@"):
            tag = _tag(stripped, index)
            tag.col = raw_lines[index].find(stripped) + (3 if index == 0 else 0)
            tags.append(tag)
        elif tags:
            tags[-1].text = f"{tags[-1].text} {stripped}".strip() if stripped else tags[-1].text
        else:
            description.append(line.rstrip())
    return JSDoc(description="\n".join(description).strip(), tags=tags, origin=origin)


def _tag(line: str, index: int) -> Tag:
    name, _, rest = line[1:].partition(" ")
    tag = Tag(tag=name, line=index)
    rest = rest.strip()
    if rest.startswith("{") and name not in _UNTYPED:
        depth, end = 0, len(rest) - 1
        for index, char in enumerate(rest):
            depth += (char == "{") - (char == "}")
            if depth == 0:
                end = index
                break
        tag.type, rest = rest[1:end].strip(), rest[end + 1 :].strip()
    if name in ("param", "arg", "argument", "property", "prop", "typedef"):
        found = _NAME.match(rest)
        if found and found.group(2):
            bracketed = bool(found.group(1) and found.group(5))
            tag.name = found.group(2)
            tag.optional = bracketed or bool(found.group(3))
            tag.default = found.group(4).strip() if bracketed and found.group(4) is not None else None
            rest = rest[found.end() :].strip()
    # "@param name - text": the dash separates a name from its text; elsewhere it is content.
    tag.text = (re.sub(r"^-\s*", "", rest) if tag.name else rest).strip()
    return tag
