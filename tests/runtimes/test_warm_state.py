"""A warm call never sees what an earlier call of the same tool did to its process: a hostile call taints all it can
(globals, the environment, a module, signal dispositions, the umask, Bash's functions, traps, options, builtins and
exported functions, Node's ``process.env``, globals and listeners), and the next calls see what the first call saw.

Each call is a fresh process (a fork of the Python server, a subshell or spare of the Bash server, a new node), in
every launch mode that runs warm: unconfined (``sandbox: off``) and under the sandbox's baseline.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import Project
from toolexec.runtimes import baseline, process_linux

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="warm calls need pidfd and /proc (Linux)")

PY = '''import json, os, signal, sys

STATE = []
LOADS = os.path.join(os.environ["LLM_TOOL_CACHE_DIR"], "loads")
with open(LOADS, "a") as out:
    out.write("x")


def run(action: str) -> str:
    """Taint the process, or look for another call's taint.

    Warm: true
    """
    if action == "taint":
        STATE.append("x")
        os.environ["TAINTED"] = "yes"
        json.TAINTED = "yes"
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        os.umask(0o077)
        sys.path.insert(0, "/tainted")
        return "tainted"
    umask = os.umask(0)
    os.umask(umask)
    return json.dumps(
        {
            "state": len(STATE),
            "env": os.environ.get("TAINTED", "-"),
            "module": getattr(json, "TAINTED", "-"),
            "sigterm": str(signal.getsignal(signal.SIGTERM)),
            "umask": umask,
            "path": "/tainted" in sys.path,
            "loads": len(open(LOADS).read()),  # (warm indeed: loaded once, by its server)
        }
    )
'''
SH = """# @describe Taint the process, or look for another call's taint.
# @meta warm
# @option --action! taint or look
STATE=${STATE-}
main() {
    if [[ $argc_action == taint ]]; then
        STATE=tainted
        export TAINTED=yes BASH_ENV=/tainted
        tainted_fn() { :; }
        export -f tainted_fn
        trap 'printf trapped >>"$LLM_OUTPUT"' EXIT
        trap '' TERM
        enable -n echo
        shopt -s nullglob extglob
        set -o noclobber
        umask 077
        alias ll=ls
        printf tainted >>"$LLM_OUTPUT"
        return
    fi
    printf '%s|' "${STATE:--}" "${TAINTED:--}" "${BASH_ENV:--}" "$(declare -F tainted_fn)" "$(trap -p EXIT TERM)" \\
        "$(enable -n)" "$(shopt nullglob extglob)" "$(set -o | grep noclobber)" "$(umask)" "$(alias)" >>"$LLM_OUTPUT"
}
"""
JS = """/**
 * Taint the process, or look for another call's taint.
 * @warm
 */
export function run(action: string): string {
  if (action === "taint") {
    (globalThis as any).TAINTED = "yes";
    process.env.TAINTED = "yes";
    (JSON as any).TAINTED = "yes";
    process.umask(0o077);
    process.on("SIGTERM", () => {});
    return "tainted";
  }
  return JSON.stringify({
    global: (globalThis as any).TAINTED ?? "-",
    env: process.env.TAINTED ?? "-",
    json: (JSON as any).TAINTED ?? "-",
    umask: process.umask(),
    listeners: process.listenerCount("SIGTERM"),
  });
}
"""
FILES = {"py": ("state.py", PY), "sh": ("state.sh", SH), "ts": ("state.ts", JS)}


@pytest.mark.parametrize("sandbox", ["off", "declared"])
@pytest.mark.parametrize("language", sorted(FILES))
def test_a_warm_call_never_sees_what_an_earlier_call_did_to_its_process(project: Project, language: str, sandbox: str) -> None:
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no sandbox baseline here")
    file, source = FILES[language]
    project.tool(file, source)
    with project.executor(sandbox=sandbox, warm_tools=["state"]) as executor:
        results = [executor.call("state", {"action": action}) for action in ("look", "taint", "look", "look")]
    assert [(r.status, r.error) for r in results] == [("ok", None)] * 4
    first, tainted, *later = (r.output for r in results)
    assert tainted.startswith("tainted")
    assert later == [first, first]
    assert "yes" not in first and "tainted" not in first.replace("-", "")
    if language == "py":
        assert json.loads(first)["loads"] == 1
