"""The binds a confined call's bwrap makes over its read-only root and private /tmp (``sandbox._view``): only those
that change what the tool sees, worked out once per policy; whether a hidden path is there is looked at per call.

The kernel's side (the same view, enforced) is tested end to end by ``test_sandbox.py``'s hostile tools."""

from __future__ import annotations

from pathlib import Path

from toolexec.runtimes import sandbox
from toolexec.runtimes.sandbox import Confinement


def test_only_the_binds_that_change_the_view_are_made() -> None:
    """A typical project under /tmp (as the benchmarks' and the tests' are): its functions directory is seen, its
    config is hidden (and under the private /tmp is simply not there: no bind), the tool's own script is seen through
    the functions directory, the other tools' caches are covered, the tool's own cache is writable inside that cover,
    and HOME's secrets are covered."""
    found = sandbox._rules(
        Confinement(
            writable=("/tmp/p/functions/cache/noop",),
            protected=("/tmp/p/config.yaml", "/tmp/p/functions", "/home/u/.local/state/toolexec"),
            hidden=("/home/u/.ssh", "/tmp/p/config.yaml", "/tmp/p/functions/cache", "/home/u/.config/toolexec"),
            revealed=("/home/u/.local/state/toolexec/transpiled",),
        ),
        ["/tmp/p/functions/tools/noop.sh"],
    )
    assert found == (
        ("protected", "/tmp/p/functions"),
        ("hidden", "/home/u/.ssh"),
        ("hidden", "/tmp/p/functions/cache"),
        ("hidden", "/home/u/.config/toolexec"),
        ("writable", "/tmp/p/functions/cache/noop"),
    )


def test_a_place_is_bound_again_only_where_a_rule_above_it_changed_it() -> None:
    found = sandbox._rules(
        Confinement(
            visible=("/tmp/cwd",),
            writable=("/home/u/notes", "/home/u/notes/deeper", "/home/u/.ssh/known_hosts"),
            protected=("/home/u/notes/config.yaml", "/home/u/.ssh/config", "/etc/toolexec"),
            hidden=("/home/u/.ssh", "/tmp/elsewhere/.netrc", "/home/u/notes/.env"),
            revealed=("/home/u/notes/shared", "/home/u/.ssh/id.pub"),
        ),
        ["/tmp/cwd/tool.py"],
    )
    assert found == (
        ("visible", "/tmp/cwd"),  # the private /tmp covers it: seen again (its script with it)
        ("writable", "/home/u/notes"),  # /home/u/notes/deeper is writable through it
        ("hidden", "/home/u/.ssh"),
        ("writable", "/home/u/.ssh/known_hosts"),
        ("protected", "/home/u/notes/config.yaml"),  # read-only inside a writable place
        ("hidden", "/home/u/notes/.env"),
        ("revealed", "/home/u/.ssh/id.pub"),  # declared: seen through its cover; .ssh/config is not
    )
    # not bound: /etc/toolexec (the root is read-only), /home/u/notes/shared (readable where it is), the hidden
    # /tmp/elsewhere/.netrc (not there under the private /tmp), /home/u/.ssh/config (protected under a cover)


def test_the_private_tmp_itself_is_seen_again_when_declared() -> None:
    """``/tmp`` is covered by the private one: a tool that reads it sees the host's, one that writes a place there
    writes the host's; a place under a declared ``/tmp`` is seen through it."""
    found = sandbox._rules(Confinement(writable=("/tmp/work",), revealed=("/tmp", "/tmp/other")), ["/tmp/venv/bin/python"])
    assert found == (("revealed", "/tmp"), ("writable", "/tmp/work"))
    assert sandbox._rules(Confinement(writable=("/tmp",)), []) == (("writable", "/tmp"),)


def test_at_one_path_the_later_kind_wins() -> None:
    """A writable place that is also revealed stays writable; a writable place that is also protected is read-only
    (as the root is: no bind); a hidden one the tool declares it reads is seen (where it is: no bind)."""
    found = sandbox._rules(
        Confinement(
            writable=("/home/u/cache", "/home/u/work"),
            protected=("/home/u/work",),
            hidden=("/home/u/.aws",),
            revealed=("/home/u/cache", "/home/u/.aws"),
        ),
        [],
    )
    assert found == (("writable", "/home/u/cache"),)


def test_whether_a_hidden_path_is_there_is_looked_at_on_every_call(tmp_path: Path) -> None:
    """The rules are remembered per policy; the cover each hidden path needs (none, an empty directory, an empty
    file) is not: one that appears between two calls is covered on the second."""
    home = tmp_path / "home"
    home.mkdir()
    confinement = Confinement(writable=(str(home),), hidden=(str(home / ".ssh"), str(home / ".netrc")))
    # toolexec's own files, when this checkout or venv lives under /tmp (hidden by the private one), come first
    own = [arg for place in sandbox._installed_under_tmp([]) for arg in ("--ro-bind-try", place, place)]
    assert sandbox._view(confinement, []) == [*own, "--bind-try", str(home), str(home)]
    (home / ".ssh").mkdir()
    (home / ".netrc").write_text("machine x password y")
    assert sandbox._view(confinement, []) == [
        *own,
        *("--bind-try", str(home), str(home)),
        *("--tmpfs", str(home / ".ssh")),
        *("--ro-bind", "/dev/null", str(home / ".netrc")),
    ]


def test_a_program_whose_link_now_names_another_file_is_resolved_again(tmp_path: Path) -> None:
    """What a program's path resolves to is remembered (a system call per component saved per call) only while it
    names the same file: a venv's ``bin/python`` pointed elsewhere between two calls is seen where it now leads."""
    import os

    first, second = tmp_path / "one" / "python", tmp_path / "two" / "python"
    for program in (first, second):
        program.parent.mkdir()
        program.write_text("")
    link = tmp_path / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(first)

    def resolved() -> str:
        status = os.stat(link)
        return sandbox._real_path(str(link), (status.st_dev, status.st_ino))

    assert resolved() == os.path.realpath(first)
    link.unlink()
    link.symlink_to(second)
    assert resolved() == os.path.realpath(second)
