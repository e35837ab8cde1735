"""Tool metadata declared in a script, read the same way whatever the language.

Each language front-end finds its idiom (docstring fields, JSDoc tags, ``# @meta``
lines, module fields) and feeds the raw values with their positions to a
:class:`MetadataReader`; :meth:`MetadataReader.build` checks them and returns the
:class:`~toolexec.records.Metadata` record. Examples are checked against the tool's own
parameter schema with ``jsonschema`` here, at compile time only: nothing on the
per-call path imports this module.

When a script declares no summary, the summary is the first line of its description,
so every tool has a one-line summary for short listings.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from typing import Any

import tree_sitter

from toolexec import policy
from toolexec.capspec import parse_max_concurrency, parse_rate
from toolexec.compilers.common import Diagnostics
from toolexec.compilers.icon import path_problem
from toolexec.mcp_settings import valid_scope
from toolexec.records import Annotations, Metadata, Sandbox
from toolexec.schemarefs import describe, nonlocal_references

At = tree_sitter.Node | tuple[int, int] | None
ANNOTATIONS = ("read_only", "destructive", "idempotent", "open_world")
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/+-]*")
TASK_SUPPORT = ("optional", "required")
_TRUE, _FALSE = {"", "true", "yes"}, {"false", "no"}


class MetadataReader:
    """Collects one script's metadata, reporting malformed values to the file's diagnostics.

    ``spell`` maps a field (``title``, ``read_only``, ``examples`` …) to how the language
    writes it, for messages: ``{"read_only": "Read-only:"}``.
    """

    def __init__(self, diag: Diagnostics, spell: dict[str, str]) -> None:
        self.diag = diag
        self.spell = spell
        self.title: str | None = None
        self.summary: str | None = None
        self.tags: list[str] = []
        self.examples: list[tuple[dict[str, Any], At]] = []
        self.annotations: dict[str, tuple[bool, At]] = {}
        self.output_schema: dict[str, Any] | None = None
        self.errors: list[str] = []
        self.sandbox: dict[str, Any] = {}
        self.scopes: list[str] = []
        self.icon: str | None = None
        self.task: str | None = None
        self.caps: dict[str, Any] = {}
        self.warm: str | None = None
        self._warm_given = False

    def _name(self, field: str) -> str:
        return self.spell.get(field, field)

    def set_text(self, field: str, value: Any, at: At) -> None:
        """``title`` or ``summary``: one non-empty line of text."""
        if not isinstance(value, str) or not value.strip():
            self.diag.error(at, f"{self._name(field)} needs a line of text", f"write {self._name(field)} followed by the text")
            return
        if "\n" in value.strip():
            self.diag.error(at, f"{self._name(field)} must be one line", "keep it to one line; the description holds the rest")
            return
        setattr(self, field, " ".join(value.split()))

    def add_tags(self, value: Any, at: At) -> None:
        """Tags from ``"a, b"`` text or a list of strings; each a word without spaces."""
        words = value if isinstance(value, list) else value.split(",") if isinstance(value, str) else None
        if words is None or not all(isinstance(w, str) for w in words):
            self.diag.error(at, f"{self._name('tags')} must be a list of words", 'write tags as ["fs", "read"]')
            return
        found = [w.strip() for w in words if w.strip()]
        if not found:
            self.diag.error(at, f"{self._name('tags')} names no tag", f"write {self._name('tags')} fs, read")
        for tag in found:
            if not _TAG.fullmatch(tag):
                self.diag.error(
                    at,
                    f"tag {tag!r} is not a single word",
                    "tags are letters, digits and _ . : / + -, separated by commas: fs, read",
                )
            elif tag not in self.tags:
                self.tags.append(tag)

    def set_flag(self, field: str, value: Any, at: At, *, text: bool = True) -> None:
        """One annotation (``read_only`` …) from a boolean, or (with ``text``) true/false/yes/no (empty means true)."""
        if text and isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            flag = value.strip().lower() in _TRUE
        elif isinstance(value, bool):
            flag = value
        else:
            shown = value if isinstance(value, str) else json.dumps(value)
            self.diag.error(at, f"{self._name(field)} {shown!r} is not true or false", f"write {self._name(field)} true")
            return
        if field in self.annotations:
            self.diag.error(at, f"{self._name(field)} is declared twice", "keep one")
        self.annotations[field] = (flag, at)

    def add_example_text(self, raw: str, at: At) -> None:
        """An example written as JSON text: one object of arguments."""
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            self.diag.error(
                at,
                f"{self._name('examples')} {raw.strip()[:40]!r} is not valid JSON: {exc.msg} (character {exc.pos + 1})",
                'write one JSON object of arguments, e.g. {"path": "."}',
            )
            return
        self.add_example(value, at)

    def add_example(self, value: Any, at: At) -> None:
        """An example as a value: it must be an object of arguments."""
        if not isinstance(value, dict):
            self.diag.error(at, f"{self._name('examples')} must be a JSON object of arguments", 'write it as {"path": "."}')
            return
        self.examples.append((value, at))

    def set_output_schema(self, value: Any, at: At) -> None:
        """An output shape given as a JSON Schema (text or value) of any JSON value: an object, an array, a scalar."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                self.diag.error(
                    at,
                    f"{self._name('output_schema')} is not valid JSON: {exc.msg} (character {exc.pos + 1})",
                    'write a JSON Schema: {"type": "object", "properties": {…}}',
                )
                return
        problem = _schema_problem(value)
        if problem:
            self.diag.error(
                at,
                f"{self._name('output_schema')} {problem}",
                'write a JSON Schema: {"type": "object", "properties": {…}}, {"type": "array", "items": {…}}, …',
            )
            return
        self.output_schema = value

    def add_error(self, value: Any, at: At) -> None:
        """One error mode: a line of text saying when the tool fails."""
        if not isinstance(value, str) or not value.strip():
            self.diag.error(at, f"{self._name('errors')} needs a line of text", "say when the tool fails and why")
            return
        self.errors.append(" ".join(value.split()))

    def add_scopes(self, value: Any, at: At) -> None:
        """OAuth scopes a caller's token must grant: ``"repo:read repo:write"`` (spaces or commas) or a list of strings."""
        words = value if isinstance(value, list) else value.replace(",", " ").split() if isinstance(value, str) else None
        if not words or not all(isinstance(w, str) and valid_scope(w) for w in words):
            self.diag.error(
                at,
                f"{self._name('scopes')} needs OAuth scopes (printable words without quotes or backslashes)",
                f"write {self._name('scopes')} repo:write",
            )
            return
        self.scopes.extend(w for w in words if w not in self.scopes)

    def set_sandbox(self, field: str, value: Any, at: At) -> None:
        """One isolation-policy field (``network``, ``writes``, ``memory`` …, see :mod:`toolexec.policy`)."""
        found = policy.read_field(field, value)
        if isinstance(found, str):
            self.diag.error(at, f"{self._name(field)} {found}", f"see docs/sandbox.md for {self._name(field)}")
        elif field in self.sandbox:
            self.diag.error(at, f"{self._name(field)} is declared twice", "keep one")
        else:
            self.sandbox[field] = found[1]

    def set_icon(self, value: Any, at: At) -> None:
        """The icon's path: relative to the script, inside its folder, an SVG, PNG, JPEG, GIF or WebP file (read later,
        by :mod:`toolexec.compilers.icon`)."""
        name = self._name("icon")
        if not isinstance(value, str) or not value.strip() or "\n" in value.strip():
            self.diag.error(at, f"{name} needs the path of an image file", f"write {name} ./icon.svg")
            return
        problem = path_problem(value.strip())
        if problem is not None:
            self.diag.error(
                at, f"{name} {value.strip()!r} {problem}", f"put the icon beside the script and write {name} ./icon.svg"
            )
            return
        self.icon = value.strip()

    def set_task(self, value: Any, at: At) -> None:
        """``task``: ``optional`` or ``required`` (whether an MCP client may or must run the tool as a task)."""
        word = value.strip().lower() if isinstance(value, str) else None
        if word not in TASK_SUPPORT:
            shown = value if isinstance(value, str) else json.dumps(value)
            self.diag.error(
                at, f"{self._name('task')} {shown!r} is not optional or required", f"write {self._name('task')} optional"
            )
        elif self.task is not None:
            self.diag.error(at, f"{self._name('task')} is declared twice", "keep one")
        else:
            self.task = word

    def set_cap(self, field: str, value: Any, at: At) -> None:
        """``max_concurrency`` (a whole number) or ``rate`` (``30/minute``): a per-tool cap (docs/operations.md)."""
        if field in self.caps:
            self.diag.error(at, f"{self._name(field)} is declared twice", "keep one")
            return
        found: int | str | tuple[str]
        if field == "max_concurrency":
            found = parse_max_concurrency(value)
            problem = found if isinstance(found, str) else None
        else:
            found = parse_rate(value)
            problem = found[0] if isinstance(found, tuple) else None
        if problem is not None:
            example = "2" if field == "max_concurrency" else "30/minute"
            self.diag.error(at, f"{self._name(field)}: {problem}", f"write {self._name(field)} {example}")
            return
        self.caps[field] = found

    def set_warm(self, value: Any, at: At, *, shared: bool = False) -> None:
        """``warm``: true (empty means true) or false; ``shared`` too where the language has a shared worker
        (JavaScript, TypeScript)."""
        word = value.strip().lower() if isinstance(value, str) else value
        choices = "true, false or shared" if shared else "true or false"
        if word in _TRUE or word is True:
            found: str | None = "fork"
        elif word in _FALSE or word is False:
            found = None
        elif word == "shared" and shared:
            found = "shared"
        else:
            shown = repr(value) if isinstance(value, str) else json.dumps(value)
            hint = f"write {self._name('warm')} true" + (" (or shared: one worker serves every call)" if shared else "")
            if word == "shared":
                hint = f"a shared worker is for JavaScript and TypeScript tools; write {self._name('warm')} true"
            self.diag.error(at, f"{self._name('warm')} {shown} is not {choices}", hint)
            return
        if self._warm_given:
            self.diag.error(at, f"{self._name('warm')} is declared twice", "keep one")
            return
        self._warm_given = True
        self.warm = found

    def build(self, parameters: dict[str, Any], description: str) -> Metadata:
        """The checked record: examples validated against ``parameters``; the summary defaulted."""
        self._check_examples(parameters)
        flags = {name: value for name, (value, _) in self.annotations.items()}
        if flags.get("read_only") and flags.get("destructive"):
            self.diag.error(
                self.annotations["destructive"][1],
                f"a tool that is {self._name('read_only')} true cannot be {self._name('destructive')} true",
                "a destructive tool modifies something; drop one of the two",
            )
        summary = self.summary or next((line.strip() for line in description.splitlines() if line.strip()), None)
        return Metadata(
            title=self.title,
            summary=summary,
            tags=tuple(self.tags),
            examples=tuple(example for example, _ in self.examples),
            annotations=Annotations(**flags),
            output_schema=self.output_schema,
            errors=tuple(self.errors),
            sandbox=Sandbox(**self.sandbox) if self.sandbox else None,
            scopes=tuple(self.scopes),
            icon=self.icon,
            task=self.task,  # type: ignore[arg-type]  # checked by set_task
            max_concurrency=self.caps.get("max_concurrency"),
            rate=self.caps.get("rate"),
            warm=self.warm,  # type: ignore[arg-type]  # checked by set_warm
        )

    def _check_examples(self, parameters: dict[str, Any]) -> None:
        if not self.examples:
            return
        import jsonschema  # noqa: PLC0415 - slow (~20 ms): only for a tool that gives examples

        validator = jsonschema.Draft202012Validator(parameters)
        known = set(parameters.get("properties", {}))
        for number, (example, at) in enumerate(self.examples, 1):
            unknown = [key for key in example if key not in known]
            problem = jsonschema.exceptions.best_match(validator.iter_errors(example))
            if unknown:
                message = f"{unknown[0]!r} is not a parameter{did_you_mean(unknown[0], known)}"
            elif problem is not None:
                where = "/".join(str(p) for p in problem.absolute_path)
                message = f"{where + ': ' if where else ''}{problem.message}"
            else:
                continue
            self.diag.error(
                at,
                f"example {number} does not fit the tool's parameters: {message}",
                "an example is the arguments of one call; fix it or the parameters",
            )


def _schema_problem(value: Any) -> str | None:
    if not isinstance(value, dict):  # any shape may be described (MCP 2026-07-28 carries arrays and scalars too)
        return "must be a JSON Schema object"
    import jsonschema  # noqa: PLC0415 - slow (~20 ms): only for a tool that declares a schema of its own

    for path, _, ref in nonlocal_references(value):
        return f"refers to {ref!r} outside itself ({describe(path)}); toolexec never fetches a schema"
    try:
        jsonschema.Draft202012Validator.check_schema(value)
    except jsonschema.exceptions.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    return None


def did_you_mean(word: str, candidates: Any) -> str:
    """'; did you mean 'x'?' for a close candidate (case and separators ignored), or ''."""
    folded = {_fold(c): c for c in candidates}
    match = difflib.get_close_matches(_fold(word), list(folded), n=1, cutoff=0.75)
    return f"; did you mean {folded[match[0]]!r}?" if match else ""


def near_miss(word: str, candidates: Any) -> str | None:
    """The candidate ``word`` was probably meant to be (case and separators ignored), or None."""
    return _near_miss(word, tuple(candidates))


@functools.lru_cache(maxsize=1024)
def _near_miss(word: str, candidates: tuple[str, ...]) -> str | None:
    # Once per word and vocabulary in a build: every tool's @param (or Args:) is looked up against the same tags.
    folded = {_fold(c): c for c in candidates}
    match = difflib.get_close_matches(_fold(word), list(folded), n=1, cutoff=0.75)
    return folded[match[0]] if match else None


def _fold(word: str) -> str:
    return re.sub(r"[\s_-]", "", word).lower()
