"""A one-shot ``toolexec run`` of a Python or Bash tool starts the tool's process (its sandbox too) before toolexec
imports itself (toolexec.early, toolexec.runtimes.early_start), and hands the call to it only when it is what the
cold start would have been.

The real command, real interpreters: each run is a process of its own, as a user's. Whether a run's tool was that
early spare is read from how its process started: a spare's start environment (``/proc/self/environ``, what the
kernel shows of it whatever the process changed since) holds ``TOOLEXEC_EARLY``, a cold start's the call's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Project, toolexec, wrapper_interpreter
from tests.helpers import alive, marked_processes, wait_until
from toolexec.runtimes import baseline, process_linux
from toolexec.runtimes.sandbox_spare import LAUNCHER

pytestmark = pytest.mark.skipif(not process_linux.available(), reason="the early spare needs pidfd and /proc (Linux)")

WHO_PY = '''import json, os, sys


def run(text: str) -> str:
    """Report how this call's process started, and what the call sees."""
    started = open("/proc/self/environ", "rb").read().split(b"\\0")
    return json.dumps({
        "text": text,
        "early": any(entry.startswith(b"TOOLEXEC_EARLY=") for entry in started),
        "id": os.environ.get("LLM_TOOL_CALL_ID"),
        "greeting": os.environ.get("GREETING", "unset"),
        "cwd": os.getcwd(),
        "toolexec": sorted(n for n in os.environ if n.startswith("TOOLEXEC_") and n != "TOOLEXEC_CALL_MARK"),
        "modules": sorted(n for n in ("_socket", "_spare_launcher", "__future__") if n in sys.modules),
        "stdin": sys.stdin.buffer.read().decode(),
    })
'''
WHO_SH = r"""#!/usr/bin/env bash
# @describe Report how this call's process started, and what the call sees.
# @option --text The text.
main() {
    local early=false
    if tr '\0' '\n' </proc/$$/environ | grep -q '^TOOLEXEC_EARLY='; then early=true; fi
    printf '{"text": "%s", "early": %s, "id": "%s", "greeting": "%s", "via": "%s", "cwd": "%s", "toolexec": "%s"}' \
        "${argc_text:-}" "$early" "$LLM_TOOL_CALL_ID" "${GREETING:-unset}" "${VIA_WRAPPER:-no}" "$PWD" \
        "$(compgen -e | grep '^TOOLEXEC_' | grep -v '^TOOLEXEC_CALL_MARK$' | tr '\n' ' ')" >>"$LLM_OUTPUT"
}
"""
BEHAVE_PY = '''import os, sys, time


def run(behave: str) -> str:
    """Behave as asked; say how this process started in EARLY_PROOF."""
    started = open("/proc/self/environ", "rb").read().split(b"\\0")
    with open(os.environ["EARLY_PROOF"], "a") as proof:
        proof.write("early\\n" if any(e.startswith(b"TOOLEXEC_EARLY=") for e in started) else "cold\\n")
    print("to stdout")
    print("to stderr", file=sys.stderr)
    if behave == "fails":
        raise SystemExit(3)
    if behave == "sleeps":
        time.sleep(60)
    if behave == "writes":
        with open(os.environ["BIG"], "wb") as big:
            big.write(b"x" * 300000)
    return "done"
'''
BEHAVE_SH = r"""#!/usr/bin/env bash
# @describe Behave as asked; say how this process started in EARLY_PROOF.
# @option --behave The behaviour.
main() {
    if tr '\0' '\n' </proc/$$/environ | grep -q '^TOOLEXEC_EARLY='; then echo early; else echo cold; fi >>"$EARLY_PROOF"
    echo "to stdout"
    echo "to stderr" >&2
    case $argc_behave in
    fails) exit 3 ;;
    sleeps) sleep 60 ;;
    writes) head -c 300000 /dev/zero >"$BIG" || exit $? ;;
    esac
    echo done >>"$LLM_OUTPUT"
}
"""
TOOLS = {"python": ("who.py", WHO_PY, "behave.py", BEHAVE_PY), "bash": ("who.sh", WHO_SH, "behave.sh", BEHAVE_SH)}
STARTS = [("python", "off"), ("python", "declared"), ("bash", "off"), ("bash", "declared")]


def _memos(project: Project) -> list[Path]:
    folder = Path(os.environ["XDG_CACHE_HOME"]) / "toolexec" / "one-shot"
    return sorted(folder.iterdir()) if folder.exists() else []


def _spare_processes(*names: str) -> list[int]:
    """Live processes whose command line names one of ``names`` (a spare left behind would)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if any(name.encode() in line for name in names):
                found.append(int(pid))
    return found


def _needs(sandbox: str) -> None:
    if sandbox == "declared" and not baseline.usable():
        pytest.skip("no PID namespace on this host: the baseline cannot be tested")


@pytest.fixture(autouse=True)
def _launchers_before() -> None:
    """The sandbox launchers alive as a test starts: the idle spares of executors earlier tests made in this
    process (an ``Executor`` keeps them until it is closed or collected), never this test's."""
    _BEFORE.clear()
    _BEFORE.update(_spare_processes(LAUNCHER))


_BEFORE: set[int] = set()


def _no_leftovers(project: Project, private_tmpdir: Path) -> None:
    assert marked_processes(private_tmpdir) == []
    # (this toolexec's launcher: others' run theirs; those alive before the test are earlier tests' executors')
    assert set(_spare_processes(str(project.tools), LAUNCHER)) - _BEFORE == set()
    assert [p.name for p in _memos(project) if "." in p.name] == []  # no staging file
    assert list(private_tmpdir.iterdir()) == []


def _who(run: subprocess.CompletedProcess[str], language: str) -> dict[str, object]:
    assert (run.returncode, run.stderr) == (0, ""), run.stderr
    seen = json.loads(run.stdout)
    if language == "bash":
        seen["toolexec"] = sorted(str(seen["toolexec"]).split())
    return seen


@pytest.mark.parametrize(("language", "sandbox"), STARTS)
def test_the_second_run_takes_the_process_started_first_and_sees_only_its_call(
    project: Project, private_tmpdir: Path, language: str, sandbox: str
) -> None:
    _needs(sandbox)
    file, source, _, _ = TOOLS[language]
    project.tool(file, source)
    config = str(project.configure(sandbox=sandbox))
    runs = [toolexec("--config", config, "run", "who", json.dumps({"text": f"t{n}"}), "--call-id", f"c{n}") for n in range(3)]
    seen = [_who(run, language) for run in runs]
    assert [(s["text"], s["id"], s["early"]) for s in seen] == [("t0", "c0", False), ("t1", "c1", True), ("t2", "c2", True)]
    # what the cold run's tool saw, the early ones' saw too: nothing of the spare's own
    same = [{k: v for k, v in s.items() if k not in ("text", "id", "early")} for s in seen]
    assert same[0] == same[1] == same[2]
    assert (seen[0]["greeting"], seen[0]["cwd"]) == ("unset", os.getcwd())
    assert not {"TOOLEXEC_EARLY", "TOOLEXEC_EARLY_CGROUP", "TOOLEXEC_FILE_LIMIT"} & set(
        seen[1]["toolexec"]  # type: ignore[arg-type]
    )
    if language == "python":
        assert seen[1]["modules"] == seen[0]["modules"] == []  # nothing the spare loaded to wait is left loaded
        assert seen[1]["stdin"] == seen[0]["stdin"] == ""  # the request's stdin, read to its end, as a cold start's
    assert len(_memos(project)) == 1
    _no_leftovers(project, private_tmpdir)


@pytest.mark.parametrize("language", ["python", "bash"])
def test_an_undeclared_tools_early_run_loads_nothing_for_policies(project: Project, language: str) -> None:
    """The baseline's call (its own PID namespace, its limits) is made without the policies' module
    (``toolexec.confine``, whose patterns took ~0.7 ms of a one-shot run) or zlib; a tool under a policy loads it."""
    _needs("declared")
    file, source, _, _ = TOOLS[language]
    project.tool(file, source)
    loaded = {}
    for policies in ({}, {"who": {"network": "none"}}):
        # (the interpreter named: finding one behind a version manager's shim reads its memo with zlib)
        config = str(project.configure(sandbox="declared", sandbox_policies=policies, runtimes={"python": sys.executable}))
        command = [sys.executable, "-X", "importtime", "-m", "toolexec", "--config", config, "run", "who", '{"text": "x"}']
        for _ in range(2):  # the second run's call is its early spare's (the first wrote the memo)
            done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        found = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
        early = json.loads(done.stdout)["early"] if not policies else None
        loaded["declared" if policies else "baseline"] = (early, sorted({"toolexec.confine", "zlib"} & found))
    assert loaded == {"baseline": (True, []), "declared": (None, ["toolexec.confine"])}


@pytest.mark.parametrize(("language", "sandbox"), STARTS)
@pytest.mark.parametrize("behave", ["returns", "fails", "sleeps", "writes"])
def test_an_early_run_gives_the_cold_runs_result(
    project: Project, private_tmpdir: Path, tmp_path: Path, language: str, sandbox: str, behave: str
) -> None:
    """Output, stdout, stderr, exit status and the reason of a limit (the time limit, the file size bound the
    baseline ties to max_kept_bytes) are the cold run's, byte for byte."""
    _needs(sandbox)
    _, _, file, source = TOOLS[language]
    project.tool(file, source)
    config = str(project.configure(sandbox=sandbox, max_kept_bytes=65536))
    proof, big = tmp_path / "proof", tmp_path / "big"
    env = {"EARLY_PROOF": str(proof), "BIG": str(big)}
    argv = ["--config", config, "run", "--json", "--timeout", "2", "--call-id", "same", "behave", json.dumps({"behave": behave})]
    results = []
    for _ in range(2):
        run = toolexec(*argv, env=env)
        result = json.loads(run.stdout)
        result.pop("duration_ms")
        # (bash names the process a signal killed by its pid, which differs from run to run outside a PID namespace)
        results.append((run.returncode, json.loads(re.sub(r"(line \d+: +)\d+ ", r"\1PID ", json.dumps(result))), run.stderr))
    assert proof.read_text().split() == ["cold", "early"]
    assert results[0] == results[1]
    code, result, _ = results[0]
    expected = {"returns": 0, "fails": 3, "sleeps": 124, "writes": None}[behave]
    if expected is not None:
        assert code == expected, result
    if behave == "writes":
        assert (result["reason"], big.stat().st_size) == ("file_limit", 65536)
    if behave == "sleeps":
        assert result["reason"] == "timeout"
    _no_leftovers(project, private_tmpdir)


def _second_is_cold(project: Project, config: str, *, cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    run = toolexec("--config", config, "run", "who", '{"text": "b"}', cwd=cwd, env=env)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["early"] is False


@pytest.mark.parametrize(("language", "sandbox"), STARTS)
@pytest.mark.parametrize("change", ["cwd", "environment", "interpreter", "policy"])
def test_a_spare_that_is_not_the_cold_start_is_ended_and_the_call_runs_cold(
    project: Project, private_tmpdir: Path, tmp_path: Path, language: str, sandbox: str, change: str
) -> None:
    _needs(sandbox)
    file, source, _, _ = TOOLS[language]
    tool = project.tool(file, source)
    config = str(project.configure(sandbox=sandbox))
    first = toolexec("--config", config, "run", "who", '{"text": "a"}')
    assert (first.returncode, first.stderr) == (0, "")
    assert len(_memos(project)) == 1
    if change == "cwd":  # a memo of that directory's, started there (none yet): the one here is not used
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        _second_is_cold(project, config, cwd=elsewhere)
        assert len(_memos(project)) == 2
    elif change == "environment":  # a .env file's variable: the spare started without it, the call's start would not
        (project.root / "functions" / ".env").write_text("GREETING=hello\n")
        run = toolexec("--config", config, "run", "who", '{"text": "b"}')
        assert (json.loads(run.stdout)["early"], json.loads(run.stdout)["greeting"]) == (False, "hello")
        assert _memos(project) == []  # a call's start that is not the command's own: nothing to start next time
    elif change == "interpreter":
        if language == "bash":
            wrapper = wrapper_interpreter(tmp_path, "bash-wrapper", "bash")
            tool.write_text(source.replace("#!/usr/bin/env bash", f"#!{wrapper}"))
        else:
            wrapper = wrapper_interpreter(tmp_path, "python-wrapper", sys.executable)
            config = str(project.configure(sandbox=sandbox, runtimes={"python": str(wrapper)}))
        _second_is_cold(project, config)
        third = toolexec("--config", config, "run", "who", '{"text": "c"}')
        assert json.loads(third.stdout)["early"] is True  # the new start, remembered
        if language == "bash":
            assert json.loads(third.stdout)["via"] == "yes"
    else:
        if sandbox == "off":
            pytest.skip("under off no policy applies (test_a_memo_for_another_sandbox_mode_is_never_adopted)")
        policy = "    Network: none\n" if language == "python" else "# @meta network none\n"
        if language == "python":
            tool.write_text(
                source.replace('process started, and what the call sees."""', "process started.\n\n" + policy + '    """')
            )
        else:
            tool.write_text(source.replace("# @option", policy + "# @option"))
        _second_is_cold(project, config)
        assert _memos(project) == []  # a declared policy's start: none is started early
    _no_leftovers(project, private_tmpdir)


@pytest.mark.parametrize("language", ["python", "bash"])
def test_a_memo_for_another_sandbox_mode_is_never_adopted(project: Project, private_tmpdir: Path, language: str) -> None:
    """The memo of the same tool from the same place, written under ``sandbox: off`` (no bwrap), then the config
    says ``declared``: that spare is not the baseline's start, and is ended; the next run's is the baseline's."""
    _needs("declared")
    file, source, _, _ = TOOLS[language]
    project.tool(file, source)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    assert b"--unshare-pid" not in _memos(project)[0].read_bytes()
    config = str(project.configure(sandbox="declared"))
    _second_is_cold(project, config)
    assert b"--unshare-pid" in _memos(project)[0].read_bytes()
    third = toolexec("--config", config, "run", "who", '{"text": "c"}')
    assert json.loads(third.stdout)["early"] is True
    _no_leftovers(project, private_tmpdir)


@pytest.mark.parametrize("planted", ["another-program", "anothers-file"])
def test_a_memo_naming_another_program_is_never_the_call(
    project: Project, private_tmpdir: Path, tmp_path: Path, planted: str
) -> None:
    """A memo of the right kind naming another program: one the user wrote starts (the memo is theirs) and is ended
    unused, the call runs cold and the right memo is written; one another user owns is not read at all."""
    project.tool("who.py", WHO_PY)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}', env={"TOOLEXEC_NO_SERVER": "1"}).returncode == 0
    [memo] = _memos(project)
    right = memo.read_bytes()
    proof = tmp_path / "proof"
    environ = right.split(b"\0")[1].decode()  # (the digest of the next run's environment: the same)
    memo.write_bytes("\0".join(["python", environ, "/bin/sh", "-c", f"echo ran >{proof}; exec sleep 61.4242", "", ""]).encode())
    if planted == "anothers-file":
        if os.geteuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(memo, 65534, 65534)
    _second_is_cold(project, config, env={"TOOLEXEC_NO_SERVER": "1"})
    if planted == "another-program":  # (started, perhaps ended before it ran its first command)
        assert memo.read_bytes() == right
    else:
        assert not proof.exists()
    assert _spare_processes("sleep\x0061.4242") == []
    _no_leftovers(project, private_tmpdir)


def test_a_confined_tool_can_neither_read_nor_write_the_memos(project: Project, private_tmpdir: Path) -> None:
    """The memos name programs a run starts before checking anything: they are in toolexec's cache, which no tool
    under a declared policy may write, and hidden from it."""
    _needs("declared")
    from toolexec.runtimes import sandbox as runtime_sandbox

    if runtime_sandbox.mechanism()[0] != "bwrap":
        pytest.skip("the view of a declared policy needs bwrap")
    project.tool("who.py", WHO_PY)
    config = str(project.configure(sandbox="declared"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    [memo] = _memos(project)
    project.tool(
        "plant.py",
        "import os\n\n\ndef run() -> str:\n"
        '    """Try the memos.\n\n    Network: none\n    Writes: ~/\n    """\n'
        f"    folder = {str(memo.parent)!r}\n"
        "    seen = []\n"
        "    for attempt in (lambda: ' '.join(os.listdir(folder)), lambda: open(os.path.join(folder, 'x'), 'w').write('x'),\n"
        f"                    lambda: open({str(memo)!r}, 'rb').read()):\n"
        "        try:\n            seen.append(str(attempt()))\n"
        "        except OSError as exc:\n            seen.append(type(exc).__name__)\n"
        "    return ' | '.join(seen)\n",
    )
    config = str(project.configure(sandbox="declared", sandbox_policies={"plant": {"network": "none", "writes": ["~/"]}}))
    run = toolexec("--config", config, "run", "plant", "{}")
    assert run.returncode == 0, run.stderr
    listing, _, read = run.stdout.split(" | ")
    assert memo.name not in listing and read in ("FileNotFoundError", "PermissionError"), run.stdout
    assert [p.name for p in _memos(project)] == [memo.name]  # what it wrote (if anything) went nowhere
    assert memo.read_bytes().startswith(b"python\0")
    _no_leftovers(project, private_tmpdir)


def test_a_run_that_launches_nothing_ends_its_spare(project: Project, private_tmpdir: Path) -> None:
    project.tool("who.py", WHO_PY)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    refused = toolexec("--config", config, "run", "who", '{"txt": "a"}')
    assert (refused.returncode, refused.stdout) == (2, "")
    assert "text" in refused.stderr and "Traceback" not in refused.stderr
    assert len(_memos(project)) == 1  # kept: the next call may use it
    _no_leftovers(project, private_tmpdir)


@pytest.mark.parametrize(("language", "sandbox"), STARTS)
def test_a_killed_run_leaves_nothing_of_its_early_call(
    project: Project, private_tmpdir: Path, tmp_path: Path, language: str, sandbox: str
) -> None:
    """The run is killed while the call it handed to its early spare runs: the guard ends the call's processes."""
    _needs(sandbox)
    _, _, file, source = TOOLS[language]
    project.tool(file, source)
    config = str(project.configure(sandbox=sandbox))
    proof = tmp_path / "proof"
    env = {**os.environ, "EARLY_PROOF": str(proof), "BIG": str(tmp_path / "big")}
    assert toolexec("--config", config, "run", "behave", '{"behave": "returns"}', env=env).returncode == 0
    run = subprocess.Popen(
        [sys.executable, "-m", "toolexec", "--config", config, "run", "behave", '{"behave": "sleeps"}'],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: proof.read_text().split() == ["cold", "early"], "the early call to start", timeout=60)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    wait_until(lambda: not _spare_processes(str(project.tools)), "the call's processes to end", timeout=30)
    wait_until(lambda: not marked_processes(private_tmpdir), "the call's marked processes to end", timeout=30)
    wait_until(lambda: not list(private_tmpdir.iterdir()), "the call's files to be removed", timeout=30)
    _no_leftovers(project, private_tmpdir)


@pytest.mark.parametrize(("language", "sandbox"), STARTS)
def test_a_run_killed_before_its_call_leaves_no_spare(
    project: Project, private_tmpdir: Path, language: str, sandbox: str
) -> None:
    """The run is killed right after it started its spare, as the installed command starts it (toolexec.entry:
    begin, then under the guard), before any call: the guard kills the spare's group. (bwrap's --die-with-parent
    alone left the namespace's init of a bwrap killed during its setup waiting forever, 8 runs in 8.)"""
    _needs(sandbox)
    file, source, _, _ = TOOLS[language]
    project.tool(file, source)
    config = str(project.configure(sandbox=sandbox))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0
    script = (
        "import os, sys\nfrom toolexec import early\nfrom toolexec.runtimes import process_linux\n"
        f"early.begin(['--config', {config!r}, 'run', 'who'])\n"
        "early.guarded(process_linux.announce, process_linux.withdraw)\n"
        "print(early._early.proc.pid, flush=True)\nos.kill(os.getpid(), 9)\n"
    )
    # (the environment toolexec() gives its runs: a spare starts only with the one its memo was written with)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env={**os.environ})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    spare = int(killed.stdout)
    wait_until(lambda: not alive(spare), "the spare to end", timeout=30)
    wait_until(lambda: not _spare_processes(str(project.tools)), "the spare's processes to end", timeout=30)
    _no_leftovers(project, private_tmpdir)


def _open_descriptors() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/fd")}


def test_the_spares_start_before_subprocess_is_imported_is_popens_and_reports_a_program_not_found(tmp_path: Path) -> None:
    """The spare is started by a fork and an exec of its own (toolexec.early._spawn) and given back as a Popen: its
    stdin, stdout and stderr pipes, its status and its session as Popen's; a program that is not there is Popen's
    OSError, leaving no descriptor and no child behind."""
    from toolexec import early

    before = _open_descriptors()
    script = 'read line; printf "%s|%s" "$line" "$(ps -o sid= -p $$ | tr -d " ")"; echo err >&2; exit 7'
    proc = early._spawn(["sh", "-c", script], {"PATH": os.environ["PATH"]}, -1, ())
    import threading

    # no thread in this process: the fork of its own; an earlier test of this process left one: Popen's
    assert type(proc).__name__ == ("Adopted" if threading.active_count() == 1 else "Popen")
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = proc.communicate(b"hello\n", timeout=30)
    assert (proc.returncode, out.decode(), err) == (7, f"hello|{proc.pid}", b"err\n")  # a session of its own
    assert _open_descriptors() == before
    with pytest.raises(FileNotFoundError):
        early._spawn([str(tmp_path / "no-such-program")], {}, -1, ())
    assert _open_descriptors() == before
    with contextlib.suppress(ChildProcessError):  # (no child at all)
        assert os.waitpid(-1, os.WNOHANG) == (0, 0)  # no child that ended unreaped (the one that could not exec)


START_ORDER = """
import sys
had = set(sys.modules)  # (the interpreter's start: an editable install's finder imports contextlib, say)
from toolexec import early

heavy = ("subprocess", "contextlib", "signal", "threading", "selectors")
before = sorted(name for name in heavy if name in sys.modules and name not in had)
adopted = early._adopted
heavy_at_start = []  # what was imported once the spare was started (its adoption as a Popen imports subprocess)
early._adopted = lambda *args: (heavy_at_start.extend(n for n in heavy if n in sys.modules and n not in had), adopted(*args))[1]
early.begin(sys.argv[1:])
proc = early._early.proc if early._early is not None else None
print(" ".join(before + heavy_at_start) or "-", proc is not None, type(proc).__name__ if proc else "-")
"""


def test_the_spare_starts_before_subprocess_contextlib_and_signal_are_imported(project: Project) -> None:
    """A structural hold on ~5 ms of a one-shot run: the installed command's path to its spare (toolexec.entry, then
    toolexec.early) imports none of them before the spare has started (by its own fork and exec, not Popen's)."""
    project.tool("who.py", WHO_PY)
    config = str(project.configure(sandbox="off"))
    assert toolexec("--config", config, "run", "who", '{"text": "a"}').returncode == 0  # (its memo)
    done = subprocess.run(
        [sys.executable, "-c", START_ORDER, "--config", config, "run", "who"],
        capture_output=True, text=True, timeout=60, env={**os.environ},
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout.split() == ["-", "True", "Adopted"]


@pytest.mark.parametrize(("language", "sandbox"), STARTS)
def test_a_run_whose_stdin_is_closed_still_starts_early_and_gives_the_cold_runs_result(
    project: Project, private_tmpdir: Path, language: str, sandbox: str
) -> None:
    """The command started with its descriptor 0 closed: a pipe the run makes may take its place, so the spare is
    started by Popen itself (toolexec.early._spawn), which takes care of that; the call is the cold one's still."""
    _needs(sandbox)
    file, source, _, _ = TOOLS[language]
    project.tool(file, source)
    config = str(project.configure(sandbox=sandbox))
    closed = ["/bin/sh", "-c", 'exec 0<&- "$@"', "sh", sys.executable, "-m", "toolexec", "--config", config, "run", "who"]
    runs = [
        subprocess.run([*closed, json.dumps({"text": text})], capture_output=True, text=True, timeout=120, env={**os.environ})
        for text in ("a", "b")
    ]
    seen = [_who(run, language) for run in runs]
    assert [(s["text"], s["early"]) for s in seen] == [("a", False), ("b", True)]
    _no_leftovers(project, private_tmpdir)
