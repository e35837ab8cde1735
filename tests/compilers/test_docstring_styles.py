"""Docstrings in reST, NumPy and Google style read as pydantic-ai reads them (through griffe).

A differential test: for each docstring, the description and the parameter descriptions
toolexec reads are the ones griffe's parser for the inferred style gives (the first text
section and the parameters sections), up to the one deliberate difference, that a
parameter's continuation lines are joined with a space.
"""

from __future__ import annotations

import logging

import pytest

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
