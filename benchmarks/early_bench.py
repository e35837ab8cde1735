"""One-shot ``toolexec run`` (no server) of a no-op Bash, Python, JavaScript and TypeScript tool: the early start against
a cold one, as root and as an ordinary user.

    python benchmarks/early_bench.py [RUNS] [--json]

A one-shot run starts its tool's process (bwrap included under the sandbox's baseline) beside toolexec's own
imports, from what the last run of the same tool from the same place wrote down (:mod:`toolexec.early`). Each
language is measured under ``sandbox: off`` and the baseline (the default: the call in a PID namespace of its own),
two ways each: *early* (the memo of the run before is there, as on every run but a tool's first) and *cold* (the
memo folder removed before each run, untimed: the run starts nothing early, as before this mechanism). The four
runs of a language alternate, so that they see the same drift of a shared machine; the rows are the issue's: the
baseline against off (target: ≤ +3 ms, issue 21), each with the cold figures beside it. Where this runs as root it
measures again as an ordinary user (nobody, through util-linux's setpriv: this script re-run with ``--json``), as
``sandbox_bench`` does: root caps a call's processes with a pids cgroup, an ordinary user with ``RLIMIT_NPROC``.

That the early runs did start early is counted, not assumed: each no-op tool says whether its process started as
the run's spare (its start environment holds ``TOOLEXEC_EARLY`` or ``TOOLEXEC_NODE_SPARE``: a read of
``/proc/self/environ``, the same work under both modes), and the rows say how many of each mode's early runs (and
cold ones: none) were. Each mode has a cache of its own: a cold run removes its own mode's memo only (one shared
cache once made every "early" run cold, the other mode's cold run having removed its memo just before). After each
run, untimed, this process (the subreaper of what runs leave) waits for what the run left to end: a root run leaves
its cgroups' removal to its parent-death guard, which goes on a few milliseconds after the run, and would otherwise
take a core from the next run, another mode's. Each row's note gives the CPU of an early run (its processes', its
guard's included: the steadier figure on a busy machine) in both modes.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness

TYPE_CHECKING = False
if TYPE_CHECKING:
    from run import Bench, Row

LANGUAGES = {
    "Bash": ("noop_sh.sh", "noop_sh", harness.NOOP_SH),
    "Python": ("noop_py.py", "noop_py", harness.NOOP_PY),
    "JavaScript": ("noop_js.js", "noop_js", harness.NOOP_JS),
    "TypeScript": ("noop_ts.ts", "noop_ts", harness.NOOP_TS),
}
MODES: dict[str, dict[str, object]] = {"off": {"sandbox": "off"}, "baseline": {}}
WAYS = ("early", "cold")
SPARE_MARKS = ("TOOLEXEC_EARLY=", "TOOLEXEC_NODE_SPARE=")  # in a spare's start environment (toolexec.early)
# Each language's tool that says whether its process started as the run's early spare ("true" or "false").
WHO = {
    "Bash": (
        "#!/usr/bin/env bash\n# @describe Say how this process started.\n# @option --text The text.\n"
        "main() {\n    local early=false e\n"
        "    while IFS= read -r -d '' e; do case $e in TOOLEXEC_EARLY=*) early=true ;; esac; done </proc/$$/environ\n"
        '    printf "%s" "$early" >>"$LLM_OUTPUT"\n}\n'
    ),
    "Python": (
        'def run(text: str = "") -> str:\n    """Say how this process started."""\n'
        '    started = open("/proc/self/environ", "rb").read().split(b"\\0")\n'
        f"    return str(any(e.startswith(m) for e in started for m in {tuple(m.encode() for m in SPARE_MARKS)!r})).lower()\n"
    ),
    "JavaScript": (
        'import { readFileSync } from "node:fs";\n/** Say how this process started.\n * @param {string} [text] - The text.\n */\n'
        'export function run(text = "") {\n  const started = readFileSync("/proc/self/environ", "latin1").split("\\0");\n'
        f"  return String(started.some((e) => {json.dumps(list(SPARE_MARKS))}.some((m) => e.startsWith(m))));\n}}\n"
    ),
    "TypeScript": (
        'import { readFileSync } from "node:fs";\n/** Say how this process started. */\n'
        'export function run(text: string = ""): string {\n'
        '  const started = readFileSync("/proc/self/environ", "latin1").split("\\0");\n'
        f"  return String(started.some((e) => {json.dumps(list(SPARE_MARKS))}.some((m) => e.startsWith(m))));\n}}\n"
    ),
}


def languages() -> dict[str, tuple[str, str, str]]:
    """The languages this machine runs (JavaScript and TypeScript need node)."""
    node = shutil.which("node") is not None
    return {name: spec for name, spec in LANGUAGES.items() if node or name in ("Bash", "Python")}


def measure(root: Path, toolexec: str, python: str, runs: int) -> dict[str, dict[str, float]]:
    """Per language: the median wall ms of each "mode way" (the runs alternating), and for each "mode way adopted"
    how many of its timed runs were started by their spare. Each mode has a cache of its own, so that removing one's
    memo (its cold runs) leaves the other's."""
    found: dict[str, dict[str, float]] = {}
    for language, (file, name, _) in languages().items():
        actions: dict[str, tuple[Callable[[], str], Callable[[], object] | None]] = {}
        for mode, settings in MODES.items():
            cache = root / f"{language}-{mode}-cache"
            env = harness.clean_env(XDG_CACHE_HOME=str(cache), XDG_CONFIG_HOME=str(root / "xdg-config"), TOOLEXEC_NO_SERVER="1")
            project = root / f"{language}-{mode}"
            config = harness.write_project(project, {file: WHO[language]}, runtimes={"python": python}, **settings)
            run = _runner([toolexec, "--config", str(config), "run", name, '{"text": "x"}'], env)
            memos = cache / "toolexec" / "one-shot"
            actions[f"{mode} early"] = (run, None)
            actions[f"{mode} cold"] = (run, lambda memos=memos: shutil.rmtree(memos, ignore_errors=True))
        samples: dict[str, list[float]] = {key: [] for key in actions}
        cpu: dict[str, list[float]] = {key: [] for key in actions}
        adopted = dict.fromkeys(actions, 0)
        for action, _ in actions.values():  # warm the catalogs, the page cache, the memos
            action(), action()
        subreaper = _become_subreaper()
        own = _children()  # this process's own (the guard of run.py's in-process sections): never waited for
        order = list(actions.items())
        for turn in range(runs):
            for key, (action, prepare) in order if turn % 2 == 0 else reversed(order):  # no mode always goes first
                if prepare is not None:
                    prepare()
                used = _children_cpu()
                start = time.perf_counter()
                said = action()
                samples[key].append((time.perf_counter() - start) * 1000)
                adopted[key] += said == "true"
                if subreaper:
                    _reap_orphans(own)
                cpu[key].append(_children_cpu() - used)  # (what it left, reaped, counted with it)
        found[language] = {key: statistics.median(values) for key, values in samples.items()}
        pairs = zip(samples["baseline early"], samples["off early"], strict=True)  # a turn's pair sees the same drift
        found[language]["added early"] = statistics.median(b - o for b, o in pairs)
        found[language].update({f"{key} cpu": statistics.median(values) for key, values in cpu.items()})
        found[language].update({f"{key} adopted": float(count) for key, count in adopted.items()})
    return found


def _children_cpu() -> float:
    """The CPU (user and system, ms) of every process this one has reaped so far, and of what they reaped."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (used.ru_utime + used.ru_stime) * 1000


def _become_subreaper() -> bool:
    """Make this process the subreaper of what its runs leave (their parent-death guard, which outlives a run by a
    few milliseconds while it removes a root run's cgroups); whether it is one (Linux, prctl found)."""
    try:
        import ctypes

        return bool(ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def _children() -> set[int]:
    """The pids of this process's children (every thread's), zombies included."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as listing:
                found.update(int(pid) for pid in listing.read().split())
        except OSError:
            continue
    return found


def _reap_orphans(own: set[int]) -> None:
    """Wait, untimed, until what the last run left (its guard) has ended: a run's guard still at work when the next
    run starts would take a core from that run (on a 2-core machine, from the other mode's run). Only orphans are
    waited for, never ``own`` (children this process had before: run.py's in-process sections leave their guard,
    which ends with this process; waiting for any child hung the whole ``make bench`` there)."""
    while left := _children() - own:
        for pid in left:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                continue


def _runner(argv: list[str], env: dict[str, str]) -> Callable[[], str]:
    """A callable that runs ``argv`` to completion (failing loudly) and returns its output: whether the tool's
    process started as the run's spare ("true" or "false", see WHO)."""
    return lambda: subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout


def early_rows(b: Bench) -> list[Row]:
    """The issue's rows for ``benchmarks/run.py``: the baseline against off, early (cold figures in the note), as root
    and as an ordinary user where this runs as root."""
    from run import Row, ms

    runs = 2 * harness.RUNS - 1  # 81 by default: a one-shot row is noisier than the rest, and its target is absolute
    with tempfile.TemporaryDirectory() as directory:
        measured = [("", measure(Path(directory), b.toolexec, b.interpreter, runs))]
    if os.geteuid() == 0:
        measured.append((", as an ordinary user", as_user(b.interpreter, runs)))
    rows = []
    for who, found in measured:
        for language, figures in found.items():
            added = figures["added early"]
            note = (
                "added: the median of each turn's difference (the difference of the medians: "
                f"{figures['baseline early'] - figures['off early']:+.1f} ms); "
                f"cold (nothing started early): baseline {ms(figures['baseline cold'])}, off {ms(figures['off cold'])}; "
                f"started by their spare: {_adopted(figures, 'early')} early runs, {_adopted(figures, 'cold')} cold ones; "
                f"CPU per early run (its processes', its guard's included): baseline {ms(figures['baseline early cpu'])}, "
                f"off {ms(figures['off early cpu'])}; {runs} runs each"
            )
            rows.append(
                Row(
                    f"one-shot `toolexec run`, no-op {language} tool, baseline vs off{who}",
                    ms(figures["baseline early"]),
                    f"off: {ms(figures['off early'])}",
                    f"{added:+.1f} ms",
                    "≤ +3.0 ms",
                    added <= 3.0,
                    note,
                )
            )
    return rows


def _adopted(figures: dict[str, float], way: str) -> str:
    """How many of the ``way`` runs of every mode were started by their spare, "ADOPTED/RUNS" per mode."""
    return ", ".join(f"{mode} {int(figures[f'{mode} {way} adopted'])}" for mode in MODES)


def as_user(python: str, runs: int) -> dict[str, dict[str, float]]:
    """:func:`measure` by an ordinary user (nobody, through util-linux's setpriv), in a home of its own, with a Python
    they can start (:func:`_python_for_others`); empty where that cannot be done."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return {}
    with tempfile.TemporaryDirectory() as directory:
        home = Path(directory)
        os.chmod(home, 0o755)
        for sub in ("tmp", ".cache", ".config"):
            (home / sub).mkdir()
        theirs = _python_for_others(home / "venv", python)
        if theirs is None:
            print("as an ordinary user: no Python they can start", file=sys.stderr)
            return {}
        for path in [home, *home.rglob("*")]:
            os.chown(path, 65534, 65534, follow_symlinks=False)
        env = {**os.environ, "HOME": directory, "TMPDIR": str(home / "tmp"), "TOOLEXEC_BENCH_INSTALLED": "1"}
        command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", theirs, __file__, str(runs), "--json"]
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=directory, check=False)
    if done.returncode != 0:
        print(f"as an ordinary user: {done.stderr.strip()[-500:]}", file=sys.stderr)
        return {}
    return dict(json.loads(done.stdout))


def _python_for_others(folder: Path, python: str) -> str | None:
    """A venv in ``folder`` that an ordinary user can start (the system's Python of ``python``'s version, which a
    venv under a mode-700 /root is not), seeing ``python``'s packages, with a ``toolexec`` command; None where there is
    no such Python."""
    import stat

    said = subprocess.run(
        [python, "-c", "import sys, sysconfig; print(sys.version_info[0], sys.version_info[1]); "
         "print(sysconfig.get_paths()['purelib']); print(sysconfig.get_paths()['platlib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.split("\n")  # fmt: skip
    version = ".".join(said[0].split())
    base = next((f"{d}/python{version}" for d in ("/usr/bin", "/usr/local/bin") if os.path.exists(f"{d}/python{version}")), None)
    if base is None or not os.stat(base).st_mode & stat.S_IXOTH:
        return None
    subprocess.run([base, "-m", "venv", "--without-pip", str(folder)], check=True, capture_output=True)
    site = folder / "lib" / f"python{version}" / "site-packages"
    (site / "toolexec-bench.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in dict.fromkeys(said[1:3])))
    command = folder / "bin" / "toolexec"
    command.write_text(f"#!{folder}/bin/python\nimport sys\nfrom toolexec.entry import program\nsys.exit(program())\n")
    command.chmod(0o755)
    return str(folder / "bin" / "python")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 41
    python = Path(sys.executable) if os.environ.get("TOOLEXEC_BENCH_INSTALLED") == "1" else harness.installed_python()
    toolexec = str(python.parent / "toolexec")
    if "--json" in sys.argv:
        with tempfile.TemporaryDirectory() as directory:
            print(json.dumps(measure(Path(directory), toolexec, str(python), runs)))
        return
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    with tempfile.TemporaryDirectory() as directory:
        measured = [("root" if os.geteuid() == 0 else "this user", measure(Path(directory), toolexec, str(python), runs))]
    if os.geteuid() == 0:
        measured.append(("an ordinary user", as_user(str(python), runs)))
    print(f"load: {load}; runs: {runs}")
    for who, found in measured:
        for language, figures in found.items():
            added = figures["baseline early"] - figures["off early"]
            cells = ", ".join(f"{key} {value:.1f} ms" for key, value in figures.items() if not key.endswith("adopted"))
            print(f"{who}, {language}: {cells}; baseline vs off {added:+.1f} ms; started by their spare:", end=" ")
            print(f"{_adopted(figures, 'early')} early runs, {_adopted(figures, 'cold')} cold ones")
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True, check=False).stdout.strip()}")


if __name__ == "__main__":
    main()
