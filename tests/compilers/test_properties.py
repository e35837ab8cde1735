"""Property: on any source text, a compiler returns a declaration with a valid JSON Schema or raises CompileError."""

from __future__ import annotations

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolexec.compilers import compile_source
from toolexec.errors import CompileError

FRAGMENTS = {
    ".py": [
        "def run(",
        "async def run(a: int = 1, *, b: list[str] | None = None):",
        '    """Doc.\n\n    Args:\n        a (int): x\n    """',
        "x: Literal['a', 1, None]",
        'y: dict[str, Optional["List[int]"]] = {}',
        "*args",
        "**kw",
        "/",
        "@decorator",
        "Timeout: 3",
        ")",
        ":",
        "\n",
        "    ",
        "z: tuple[int, ...] = (1, -2.5)",
        "w: Union[int, str, None]",
    ],
    ".sh": [
        "# @describe Something",
        "# @option --name![a|b] <INT> help",
        "# @option -s --x*,=`_fn`",
        "# @flag --f*",
        "# @arg a+[=x|y]",
        "# @env NAME!=x[a|b]",
        "# @meta require-tools",
        "# @meta timeout x",
        "# @option --broken[",
        "# @option <NUM>",
        "main() { :; }",
        "_fn() { echo a; }",
        "\n",
        "# continued",
    ],
    ".ts": [
        "/**\n * Desc.\n * @param {integer} a - x\n * @timeout 2\n */",
        "export async function run(",
        "a: string | null | undefined,",
        "b: 1 | 2 | 'x' = 1,",
        "c?: { d: Array<number>; e?: Record<string, boolean> },",
        "...rest: string[]",
        "{ x }: T",
        ") {}",
        "interface T { a: T; b?: string }",
        "type U = T | null;",
        "export const run = () => 1;",
        "\n",
        "enum E { A }",
    ],
    ".js": [
        "/**\n * Desc.\n * @typedef {Object} Args\n * @property {'a'|'b'} [m=a] - x\n * @param {Args} args\n */",
        "exports.run = function (args) {};",
        "export default { name: 'n', description: 'd', inputSchema: { type: 'object' }, run() {} };",
        "export const meta = { name: 1 };",
        "export function run(a, b = [1, 'x']) {}",
        "module.exports.run = async (x) => x;",
        "/** D. @param {Integer} a */",
        "\n",
        "export const tool = { name: 'bad name', args: 3 };",
    ],
}


def sources(suffix: str) -> st.SearchStrategy[str]:
    fragments = st.lists(st.sampled_from(FRAGMENTS[suffix]), max_size=12).map(lambda parts: "\n".join(parts))
    noise = st.text(max_size=200)
    mixed = st.tuples(fragments, noise, fragments).map(lambda t: f"{t[0]}{t[1]}{t[2]}")
    return st.one_of(fragments, noise, mixed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), suffix=st.sampled_from(sorted(FRAGMENTS)))
def test_compilers_return_valid_schemas_or_compile_errors(data: st.DataObject, suffix: str) -> None:
    source = data.draw(sources(suffix))
    try:
        declaration = compile_source(source, f"tool{suffix}")
    except CompileError as error:
        assert error.problems, "a CompileError must carry at least one problem"
        return
    jsonschema.Draft202012Validator.check_schema(declaration.parameters)
    assert declaration.parameters.get("type") == "object"
    assert isinstance(declaration.description, str) and declaration.description
