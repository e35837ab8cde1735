"""``toolexec mcp`` beyond text, driven by the SDK's own ``Client`` in both protocol eras: files written by tools
arrive as ``image`` / ``audio`` / embedded content (bytes compared) or as ``resource_link``s read back through
``resources/read`` (by their own client only, from any instance sharing the state); structured output of any
JSON shape; ``ttlMs``/``cacheScope`` on ``tools/list``."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import Project
from tests.executor.test_artifacts import IMAGE, WAV, WRITERS
from tests.executor.test_mcp import ERAS, HttpServer, inject_metadata, stdio

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

# Writes an image, a WAV file, a CSV table and a large binary file; prints "made".
MAKER = """#!/usr/bin/env bash
# @describe Make files.
# @option --root! where the inputs are
main() {
  cp "$argc_root/image.png" "$LLM_ARTIFACTS_DIR/chart.png"
  cp "$argc_root/sound.wav" "$LLM_ARTIFACTS_DIR/beep.wav"
  printf 'id,n\\n1,2\\n' > "$LLM_ARTIFACTS_DIR/table.csv"
  cp "$argc_root/big.bin" "$LLM_ARTIFACTS_DIR/data.bin"
  echo made >> "$LLM_OUTPUT"
}
"""
LIST_PY = '''
def run(n: int) -> str:
    """Count up to n, as a JSON array (or, for n < 0, a string that breaks the declared shape)."""
    import json

    return json.dumps(list(range(n)) if n >= 0 else "many")
'''
SCALAR_PY = '''
def run() -> str:
    """The answer, a JSON number."""
    return "42"
'''
ARRAY_SCHEMA = {"type": "array", "items": {"type": "integer"}}
BIG = bytes(range(256)) * 40  # 10240 bytes: past the inline budget the project sets


@pytest.fixture
def makers(project: Project) -> Project:
    for file in WRITERS:
        project.tool(file, WRITERS[file])
    project.tool("make.sh", MAKER)
    project.tool("count.py", LIST_PY)
    project.tool("answer.py", SCALAR_PY)
    (project.root / "image.png").write_bytes(IMAGE)
    (project.root / "sound.wav").write_bytes(WAV)
    (project.root / "big.bin").write_bytes(BIG)
    project.configure([*sorted(WRITERS), "make.sh", "count.py", "answer.py"], artifacts={"inline_bytes": 8192})
    inject_metadata(project, "count", {"output_schema": ARRAY_SCHEMA})
    inject_metadata(project, "answer", {"output_schema": {"type": "integer"}})
    return project


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def check_files(client: Client, root: Path) -> str:
    """Every language's image, then every kind of file; the link's URI."""
    for file in sorted(WRITERS):
        result = await client.call_tool(file[:-3], {"source": str(root / "image.png")})
        assert (result.content, result.is_error, result.structured_content) == (
            [
                types.TextContent(text="drawn\n" if file.endswith(".sh") else "drawn"),
                types.ImageContent(data=b64(IMAGE), mime_type="image/png"),
            ],
            False,
            None,
        )
    made = await client.call_tool("make", {"root": str(root)})
    assert made.is_error is False
    # In name order; the image and the audio went inline first, then the CSV; data.bin did not fit and is linked.
    text, beep, chart, link, table = made.content
    assert (text, beep, chart) == (
        types.TextContent(text="made\n"),
        types.AudioContent(data=b64(WAV), mime_type="audio/wav"),
        types.ImageContent(data=b64(IMAGE), mime_type="image/png"),
    )
    assert table == types.EmbeddedResource(
        resource=types.TextResourceContents(uri="toolexec://artifacts/inline/table.csv", mime_type="text/csv", text="id,n\n1,2\n")
    )
    assert isinstance(link, types.ResourceLink)
    assert (link.name, link.mime_type, link.size) == ("data.bin", "application/octet-stream", len(BIG))
    assert link.uri.startswith("toolexec://artifacts/") and link.uri.endswith("/data.bin")
    read = await client.read_resource(link.uri)
    assert read.contents == [types.BlobResourceContents(uri=link.uri, mime_type="application/octet-stream", blob=b64(BIG))]
    return link.uri


async def refused(client: Client, uri: str) -> str:
    with pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    assert caught.value.error.code == types.INVALID_PARAMS
    return caught.value.error.message


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_stdio_files_arrive_as_content_and_links(makers: Project, era: str) -> None:
    async def scenario() -> None:
        async with stdio(makers, era) as client:
            uri = await check_files(client, makers.root)
            forged = uri.rsplit("/", 2)[0] + "/" + "A" * 24 + "/data.bin"
            for other in (forged, uri + "x", "file:///etc/passwd", uri.replace("/data.bin", "/..%2F..%2Fconfig.yaml")):
                assert "links of tool results are readable by the client they were returned to" in await refused(client, other)
        async with stdio(makers, era) as another:  # another server process: another client
            await refused(another, uri)

    anyio.run(scenario)


@pytest.mark.slow
def test_http_links_are_read_from_any_instance_by_their_own_token_only(makers: Project) -> None:
    first, second, stranger = (HttpServer(makers, token=token) for token in ("t0ken-a", "t0ken-a", "t0ken-b"))
    try:

        async def scenario() -> None:
            async with (
                first.client() as session,
                Client(streamable_http_client(first.url, http_client=session), mode="2026-07-28") as client,
            ):
                uri = await check_files(client, makers.root)
            async with (
                second.client() as session,
                Client(streamable_http_client(second.url, http_client=session), mode="legacy") as client,
            ):
                read = await client.read_resource(uri)
                assert read.contents == [types.BlobResourceContents(uri=uri, mime_type="application/octet-stream", blob=b64(BIG))]
            async with (
                stranger.client() as session,
                Client(streamable_http_client(stranger.url, http_client=session), mode="2026-07-28") as client,
            ):
                message = await refused(client, uri)
            assert str(makers.root) not in message  # no server path reaches a client

        anyio.run(scenario)
    finally:
        assert [server.stop() for server in (first, second, stranger)] == [0, 0, 0]


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_structured_output_of_any_shape(makers: Project, era: str) -> None:
    async def scenario() -> None:
        async with stdio(makers, era) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            counted = await client.call_tool("count", {"n": 3})
            answer = await client.call_tool("answer", {})
            broken = await client.call_tool("count", {"n": -1})
        if era == "legacy":  # 2025-11-25: outputSchema and structuredContent are objects only
            assert (listed["count"].output_schema, listed["answer"].output_schema) == (None, None)
            assert (counted.structured_content, answer.structured_content) == (None, None)
        else:
            assert (listed["count"].output_schema, listed["answer"].output_schema) == (ARRAY_SCHEMA, {"type": "integer"})
            assert (counted.structured_content, answer.structured_content) == ([0, 1, 2], 42)
        assert (counted.content, counted.is_error) == ([types.TextContent(text="[0, 1, 2]")], False)
        assert (answer.content, answer.is_error) == ([types.TextContent(text="42")], False)
        assert broken.is_error is True
        assert broken.content == [
            types.TextContent(
                text="Tool call 'count' returned output that does not conform to its declared output schema: "
                "at (root): 'many' is not of type 'array'"
            )
        ]

    anyio.run(scenario)


def raw_list(project: Project, *extra: str) -> dict[str, Any]:
    """The wire form of a 2026-07-28 ``tools/list`` (the SDK client keeps the cache fields to itself)."""
    import subprocess
    import sys

    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    done = subprocess.run(
        [sys.executable, "-m", "toolexec", "--config", str(project.config), "mcp", *extra],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    return json.loads(done.stdout.splitlines()[0])


@pytest.mark.slow
def test_tools_list_says_how_long_it_may_be_cached(makers: Project) -> None:
    reloading = raw_list(makers)["result"]
    fixed = raw_list(makers, "--no-reload")["result"]
    assert (reloading["ttlMs"], reloading["cacheScope"]) == (10_000, "private")
    assert (fixed["ttlMs"], fixed["cacheScope"]) == (3_600_000, "private")


@pytest.mark.slow
def test_tools_list_carries_each_tools_icon(project: Project) -> None:
    from tests.compilers.test_icons import SVG

    project.tool("icon.svg", SVG.decode())
    project.tool("pic.sh", "#!/usr/bin/env bash\n# @describe Has an icon.\n# @meta icon ./icon.svg\nmain() { :; }\n")
    project.tool("plain.sh", "#!/usr/bin/env bash\n# @describe Has none.\nmain() { :; }\n")
    project.configure(["pic.sh", "plain.sh"])
    tools = {tool["name"]: tool for tool in raw_list(project)["result"]["tools"]}
    assert tools["pic"]["icons"] == [{"src": f"data:image/svg+xml;base64,{b64(SVG)}", "mimeType": "image/svg+xml"}]
    assert "icons" not in tools["plain"]
