"""The fast validators: generated from what validation reads of a schema, once per shape in a process."""

from __future__ import annotations

import pytest

from toolexec.errors import InvalidArguments
from toolexec.validation import _code_for, compile_validator, validator_code


def shape(description: str) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": description, "title": "Path", "examples": ["/tmp"]},
            "description": {"type": "integer", "default": 3, "description": description},  # a parameter so named
            "mode": {"enum": [{"description": "kept", "default": 1}, "plain"], "$comment": description},
        },
        "required": ["path"],
    }


def test_schemas_that_differ_only_in_annotations_share_one_generated_validator(monkeypatch: pytest.MonkeyPatch) -> None:
    import fastjsonschema

    generated: list[object] = []
    real = fastjsonschema.compile_to_code
    monkeypatch.setattr(fastjsonschema, "compile_to_code", lambda schema, **kw: generated.append(schema) or real(schema, **kw))
    _code_for.cache_clear()
    codes = {validator_code(shape(f"The path, as tool {n} reads it.")) for n in range(5)}
    assert len(codes) == 1 and len(generated) == 1
    code = codes.pop()
    assert "The path" not in code and "definition=" not in code  # raises carry nothing: explain() says why


@pytest.mark.parametrize(
    ("arguments", "accepted"),
    [
        ({"path": "/a", "description": 2, "mode": {"description": "kept", "default": 1}}, True),
        ({"path": "/a", "mode": "plain"}, True),
        ({"path": "/a", "mode": {}}, False),  # an enum's values are data, never stripped
        ({"path": "/a", "mode": {"description": "kept"}}, False),
        ({"path": "/a", "description": "two"}, False),  # a parameter named like an annotation is still checked
        ({"description": 2}, False),
    ],
)
def test_what_validation_reads_is_kept(arguments: dict[str, object], accepted: bool) -> None:
    validate = compile_validator(shape("The path."))
    if accepted:
        assert validate("t", arguments) == arguments
    else:
        with pytest.raises(InvalidArguments):
            validate("t", arguments)
