"""No call keeps a capability a cold call of an ordinary user's would not have, warm or cold, in any language.

An ordinary user's confined or baseline call runs in a user namespace of its own, where bwrap leaves its tool no
capability: none effective or permitted, and an empty bounding set (so that no ``exec`` inside a new user namespace
gives one back). A warm server lives in the baseline's namespaces with CAP_SYS_ADMIN kept there (it unshares a PID
namespace per call): each call it forks must drop it from every set, the bounding set included. Root's calls keep
root's capabilities, warm as cold. Each test runs toolexec in a process of its own, as ``nobody`` when this runs as root.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Ordinary
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(
    not (baseline.usable() and process_linux.available()), reason="needs bwrap, PID namespaces, pidfd and /proc"
)

SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
NONE = dict.fromkeys(SETS, "0000000000000000")
# Each tool counts its loads (in its cache) and answers its capability sets and how many times it was loaded.
PY = '''import json, os

with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads"), "a") as out:
    out.write("x")


def run() -> str:
    """Show my capabilities.
{warm}
    """
    with open("/proc/self/status") as status:
        caps = dict(line.split()[:2] for line in status if line.startswith("Cap"))
    with open("/proc/self/cmdline", "rb") as cmdline:
        warm = b"python_zygote" in cmdline.read()  # (forked from its warm server, not started anew)
    with open(os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads")) as loads:
        caps = {{k.rstrip(":"): v for k, v in caps.items()}}
        return json.dumps({{"caps": caps, "loads": len(loads.read()), "warm": warm}})
'''
SH = """# @describe Show my capabilities.
{warm}
printf x >>"$LLM_TOOL_CACHE_DIR/loads"
main() {{
    local caps=() name value loads warm=false init
    while read -r name value; do
        [[ $name == Cap* ]] && caps+=("\\"${{name%:}}\\": \\"$value\\"")
    done </proc/self/status
    loads=$(<"$LLM_TOOL_CACHE_DIR/loads")
    mapfile -d '' -t init </proc/1/cmdline  # a warm call's init is its server's spare
    [[ ${{init[*]}} != *_bash_zygote.py* ]] || warm=true
    local IFS=,
    printf '{{"caps": {{%s}}, "loads": %s, "warm": %s}}' "${{caps[*]}}" "${{#loads}}" "$warm" >>"$LLM_OUTPUT"
}}
"""
JS = """import fs from "node:fs";

fs.appendFileSync(`${{process.env.LLM_TOOL_CACHE_DIR}}/loads`, "x");

/**
 * Show my capabilities.
 * {warm}
 */
export function run() {{
  const caps = {{}};
  for (const line of fs.readFileSync("/proc/self/status", "utf8").split("\\n")) {{
    const [name, value] = line.split(/\\s+/);
    if (name.startsWith("Cap")) caps[name.slice(0, -1)] = value;
  }}
  const loads = fs.readFileSync(`${{process.env.LLM_TOOL_CACHE_DIR}}/loads`, "utf8").length;
  return JSON.stringify({{ caps, loads, warm: false }});
}}
"""
TOOLS = {"py.py": PY.format(warm="\n    Warm: true"), "sh.sh": SH.format(warm="# @meta warm"), "js.js": JS.format(warm="@warm")}
# Each tool called twice cold, then twice warm (its loads counted across both).
CALLS = """
import json, sys
from toolexec import Executor

found = {}
for warm in (False, True):
    with Executor(sys.argv[1], warm=warm) as executor:
        results = [executor.call(sys.argv[2], {}) for _ in range(2)]
        found["warm" if warm else "cold"] = [json.loads(r.output) if r.status == "ok" else r.error for r in results]
print(json.dumps(found))
"""


class Place(Ordinary):
    """A project in a fresh folder under /tmp, with a HOME of its own; run by ``nobody`` when ``ordinary``."""

    def __init__(self, root: Path, ordinary: bool, sandbox: str) -> None:
        import yaml

        super().__init__(root, drop=ordinary)
        self.sandbox = sandbox
        for name, source in TOOLS.items():
            (root / "functions" / "tools" / name).write_text(source)
        self.config.write_text(yaml.safe_dump({"visible_tools": sorted(TOOLS), "sandbox": sandbox}))
        self.own()

    def calls(self, name: str) -> dict[str, list[dict]]:
        done = self.run("python", "-c", CALLS, str(self.config), name)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def place(request: pytest.FixtureRequest) -> Iterator[Place]:
    ordinary, sandbox = request.param
    root = Path(tempfile.mkdtemp(prefix="toolexec-caps-", dir="/tmp"))
    try:
        yield Place(root, ordinary, sandbox)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("place", [(True, "declared"), (True, "strict")], ids=["baseline", "strict"], indirect=True)
@pytest.mark.parametrize("language", ["py", "sh", "js"])
def test_an_ordinary_users_warm_call_keeps_no_capability_not_even_in_its_bounding_set(place: Place, language: str) -> None:
    found = place.calls(language)
    assert found["cold"] == [{"caps": NONE, "loads": 1, "warm": False}, {"caps": NONE, "loads": 2, "warm": False}]
    assert [call["caps"] for call in found["warm"]] == [NONE, NONE]
    # (a confined Bash tool runs cold; a node spare is not told apart)
    if language == "py" or (place.sandbox == "declared" and language == "sh"):
        # warm indeed: Python's loaded once by its server (inside its sandbox under strict); Bash's by each call's
        # spare, ahead of it (and of the next)
        assert [call["warm"] for call in found["warm"]] == [True, True]
        if language == "py":
            assert [call["loads"] for call in found["warm"]] == [3, 3]


@pytest.mark.skipif(os.geteuid() != 0, reason="root's own calls")
@pytest.mark.parametrize("place", [(False, "declared")], ids=["root"], indirect=True)
@pytest.mark.parametrize("language", ["py", "sh", "js"])
def test_roots_warm_call_has_the_capabilities_of_its_cold_call(place: Place, language: str) -> None:
    found = place.calls(language)
    assert [call["caps"] for call in found["warm"]] == [call["caps"] for call in found["cold"]]
