"""References inside a JSON Schema: only local ones (``#…``) are ever followed.

Both validators toolexec uses (``fastjsonschema`` and ``jsonschema``) fetch a
``$ref`` that names a URI — over HTTP, or from a ``file:`` path — when they meet
it. A tool's schema is checked here first (at build time by the compilers, and
again before a validator is made), so validation never touches the network.
"""

from __future__ import annotations

from collections.abc import Iterator

TYPE_CHECKING = False  # typing is not imported at run time: a one-shot run pays for every import
if TYPE_CHECKING:
    from typing import Any

# Keywords whose value is data, not a schema: a "$ref" in there is a value, never followed.
_DATA = frozenset({"enum", "const", "default", "examples", "example"})
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")

Path = tuple[str | int, ...]


def references(schema: Any) -> Iterator[tuple[Path, str, str]]:
    """Every reference in ``schema`` as (path to its keyword, keyword, value), iteratively (any depth)."""
    stack: list[tuple[Any, Path]] = [(schema, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if key in _REFERENCES and isinstance(item, str):
                    yield (*path, key), key, item
                elif key == "$id" and isinstance(item, str) and path:
                    yield (*path, key), key, item  # a nested $id moves where "#" points
                elif key not in _DATA:
                    stack.append((item, (*path, key)))
        elif isinstance(value, list):
            stack.extend((item, (*path, index)) for index, item in enumerate(value))


def nonlocal_references(schema: Any) -> list[tuple[Path, str, str]]:
    """The references a validator would fetch (anything not starting with ``#``), and nested ``$id``s."""
    found = [(path, key, ref) for path, key, ref in references(schema) if key == "$id" or not ref.startswith("#")]
    return sorted(found, key=lambda f: [str(p) for p in f[0]])


def resolve_pointer(schema: Any, ref: str) -> Any:
    """What a local reference (``#`` or ``#/a/b``) points at; KeyError when it points at nothing."""
    if ref == "#":
        return schema
    if not ref.startswith("#/"):
        raise KeyError(ref)  # an anchor (#name): resolved by the validators, not checked here
    node = schema
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise KeyError(ref)
    return node


def describe(path: Path) -> str:
    """A reference's place for a message: ``properties/a/$ref``."""
    return "/".join(str(p) for p in path)
