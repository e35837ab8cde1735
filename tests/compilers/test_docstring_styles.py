"""Docstrings in reST, NumPy and Google style read as pydantic-ai reads them (through griffe).

A differential test: for each docstring, the description and the parameter descriptions
toolexec reads are the ones griffe's parser for the inferred style gives (the first text
section and the parameters sections), up to the one deliberate difference, that a
parameter's continuation lines are joined with a space.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolexec.compilers.docstring import Style, docstring_style, parse_docstring

griffe = pytest.importorskip("griffe")

CASES: list[tuple[Style, str]] = [
    (
        "sphinx",
        """Copy a file.

        :param source: Where to copy from.
        :param destination: Where to copy to,
            created when missing.
        :param bool overwrite: Replace an existing file.
        :returns: The destination path.
        """,
    ),
    (
        "sphinx",
        """
        Resize an image, keeping its aspect ratio.

        The image is read and written in place.

        :arg width: The new width in pixels.
        :type width: int
        :keyword quality: JPEG quality, 1 to 100.
        :raises ValueError: when the width is not positive.
        :rtype: None
        """,
    ),
    (
        "sphinx",
        """Look a word up.
        :param word: The word.
        :param word: A second entry for the same word is ignored.
        :param lang: The language
            code, such as "fr".
        """,
    ),
    (
        "numpy",
        """Compute a moving average.

        Parameters
        ----------
        values : list of float
            The series.
        window : int, optional
            How many points each average covers;
            at least 1.
        mode : {'valid', 'same'}
            What to do at the edges.

        Returns
        -------
        list of float
            The averages.
        """,
    ),
    (
        "numpy",
        """Send a message.

        Delivery is best effort.

        Parameters
        ----------
        to, cc : str
            Addresses.
        body
            The text.

        Other Parameters
        ----------------
        retries : int, default 3
            How often to retry.

        See Also
        --------
        receive : the other direction.
        """,
    ),
    (
        "google",
        """Rename a branch.

        Args:
            old: The current name.
            new (str): The new name, which must not
                exist yet.

        Raises:
            KeyError: when the branch is missing.
        """,
    ),
    ("google", """Ping a host, with no sections at all."""),
]


def _theirs(raw: str, style: Style) -> tuple[str, dict[str, str]]:
    docstring = griffe.Docstring(raw, lineno=1, parser=style)
    logger = logging.getLogger("griffe")
    level, logger.level = logger.level, logging.CRITICAL  # griffe warns that there is no signature to compare with
    try:
        sections = docstring.parse()
    finally:
        logger.level = level
    kinds = griffe.DocstringSectionKind
    text = next((s.value for s in sections if s.kind is kinds.text), "")
    params: dict[str, str] = {}
    for section in sections:
        if section.kind in (kinds.parameters, kinds.other_parameters):
            for param in section.value:
                params.setdefault(param.name, " ".join(param.description.split()))
    return text.strip(), params


@pytest.mark.parametrize(("style", "raw"), CASES, ids=[f"{s}-{i}" for i, (s, _) in enumerate(CASES)])
def test_read_as_griffe_reads_it(style: Style, raw: str) -> None:
    assert docstring_style(raw) == style
    ours = parse_docstring(raw)
    assert (ours.description, {name: arg.description for name, arg in ours.args.items()}) == _theirs(raw, style)


def test_types_written_in_the_docstring() -> None:
    sphinx = parse_docstring(CASES[0][1])
    assert [(n, a.type) for n, a in sphinx.args.items()] == [("source", None), ("destination", None), ("overwrite", "bool")]
    assert {n: a.type for n, a in parse_docstring(CASES[1][1]).args.items()} == {"width": "int", "quality": None}
    numpy = parse_docstring(CASES[3][1])
    assert {n: (a.type, a.optional) for n, a in numpy.args.items()} == {
        "values": ("list of float", False),
        "window": ("int", True),
        "mode": ("Literal['valid', 'same']", False),
    }
    assert {n: a.type for n, a in parse_docstring(CASES[4][1]).args.items()} == {
        "to": "str",
        "cc": "str",
        "body": None,
        "retries": "int",
    }


_WORDS = st.sampled_from(["the", "path", "file", "count", "of", "lines", "to", "read", "a", "value,", "more.", "42", "x-y"])
_TEXT = st.lists(st.lists(_WORDS, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=3)
_NAMES = st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True), max_size=4, unique=True)
_TYPES = st.sampled_from([None, "int", "str", "float", "bool"])


def _render(style: Style, summary: list[str], params: list[tuple[str, str | None, list[str]]], returns: list[str]) -> str:
    lines = [*summary, ""]
    if style == "sphinx":
        for name, kind, text in params:
            lines += [f":param {kind + ' ' if kind else ''}{name}: {text[0]}", *(f"    {t}" for t in text[1:])]
        lines += [f":returns: {returns[0]}", *(f"    {t}" for t in returns[1:])] if returns else []
    elif style == "numpy":
        if params:
            lines += ["Parameters", "----------"]
            for name, kind, text in params:
                lines += [f"{name} : {kind}" if kind else name, *(f"    {t}" for t in text), ""]
        lines += ["Returns", "-------", "int", *(f"    {t}" for t in returns)] if returns else []
    else:
        if params:
            lines.append("Args:")
            for name, kind, text in params:
                lines += [f"    {name}{f' ({kind})' if kind else ''}: {text[0]}", *(f"        {t}" for t in text[1:])]
        lines += ["", "Returns:", *(f"    {t}" for t in returns)] if returns else []
    return "\n    ".join(lines) + "\n    "


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    style=st.sampled_from(["sphinx", "numpy", "google"]),
    summary=_TEXT,
    names=_NAMES,
    data=st.data(),
    returns=st.one_of(st.just([]), _TEXT),
)
def test_generated_docstrings_read_as_griffe_reads_them(
    style: Style, summary: list[str], names: list[str], data: st.DataObject, returns: list[str]
) -> None:
    params = [(name, data.draw(_TYPES), data.draw(_TEXT)) for name in names]
    raw = _render(style, summary, params, returns)
    inferred = docstring_style(raw)
    ours = parse_docstring(raw)
    assert (ours.description, {name: arg.description for name, arg in ours.args.items()}) == _theirs(raw, inferred)
    if params:
        assert inferred == style
        assert {name: arg.type for name, arg in ours.args.items()} == {name: kind for name, kind, _ in params}
