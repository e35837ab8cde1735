"""config.yaml: lookup order, every setting, and errors that name the key and the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolexec.config import load_config, locate
from toolexec.errors import ConfigError
from toolexec.paths import package_defaults


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_lookup_order(isolated: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    embedded = package_defaults() / "config.yaml"
    user = Path(os.environ["XDG_CONFIG_HOME"]) / "toolexec" / "config.yaml"
    assert locate() == (
        embedded,
        True,
        (f"no user config at {user}", f"using {embedded} (the embedded default: read-only tools only)"),
    )
    xdg = write(user, "timeout: 7\n")
    assert locate() == (xdg.resolve(), False, (f"using {xdg.resolve()} (the user config)",))
    cwd = write(isolated / "config.yaml", "visible_tools: []\ntimeout: 8\n")
    assert locate() == (cwd.resolve(), False, (f"using {cwd.resolve()} (config.yaml in the working directory)",))
    from_env = write(tmp_path / "env.yaml", "timeout: 9\n")
    monkeypatch.setenv("TOOLEXEC_CONFIG", str(from_env))
    assert locate() == (from_env.resolve(), False, (f"using {from_env.resolve()} (from TOOLEXEC_CONFIG)",))
    explicit = write(tmp_path / "explicit.yaml", "timeout: 10\n")
    config = load_config(explicit)
    assert (config.timeout, config.lookup) == (10, (f"using {explicit.resolve()} (from --config)",))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("server:\n  port: 8080\n", "not a toolexec config (it has neither visible_tools nor functions_dir)"),
        ("- a\n- b\n", "not a toolexec config ({cwd}: expected a mapping of settings at the top level, got list)"),
        ("key: [unclosed\n", "not a toolexec config ({cwd}:2:1: not valid YAML: expected ',' or ']', but got '<stream end>')"),
    ],
)
def test_another_applications_config_yaml_is_skipped(isolated: Path, text: str, why: str) -> None:
    cwd = write(isolated / "config.yaml", text).resolve()
    user = write(Path(os.environ["XDG_CONFIG_HOME"]) / "toolexec" / "config.yaml", "timeout: 7\n").resolve()
    config = load_config()
    assert (config.path, config.timeout) == (user, 7)
    assert config.lookup == (f"skipped {cwd}: {why.replace('{cwd}', str(cwd))}", f"using {user} (the user config)")


def test_missing_explicit_config_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(tmp_path / "nope.yaml")
    assert str(error.value) == f"{tmp_path / 'nope.yaml'}: config file not found (from --config)"
    monkeypatch.setenv("TOOLEXEC_CONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(ConfigError, match=r"gone\.yaml: config file not found \(from TOOLEXEC_CONFIG\)$"):
        load_config()


def test_every_setting(tmp_path: Path) -> None:
    path = write(
        tmp_path / "config.yaml",
        """
functions_dir: ../fns
visible_tools:
  - a.py
  # - hidden.sh
  - b.sh
enabled_tools: fs, a
mapping_tools:
  fs: 'fs_cat,fs_ls'
  web: [fetch, search]
runtimes:
  python: python3.12 -X utf8
  typescript: [npx, tsx]
timeout: 2.5
max_output_bytes: 4096
max_parallel: 3
""",
    )
    config = load_config(path)
    assert config.functions_dir == (tmp_path.parent / "fns").resolve()
    assert config.visible_tools == ("a.py", "b.sh")
    assert config.enabled_tools == ("fs", "a")
    assert config.mapping_tools == {"fs": ("fs_cat", "fs_ls"), "web": ("fetch", "search")}
    assert config.runtimes == {"python": ("python3.12", "-X", "utf8"), "typescript": ("npx", "tsx")}
    assert (config.timeout, config.max_output_bytes, config.max_parallel) == (2.5, 4096, 3)


def test_defaults_and_enabled_forms(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "c.yaml", "visible_tools: [a.py]\n"))
    assert (config.enabled_tools, config.timeout, config.max_parallel, config.functions_dir) == (
        None,
        60,
        8,
        tmp_path / "functions",
    )
    assert load_config(write(tmp_path / "d.yaml", "enabled_tools: all\n")).enabled_tools is None
    assert load_config(write(tmp_path / "e.yaml", "enabled_tools: [x, y]\n")).enabled_tools == ("x", "y")
    assert load_config(write(tmp_path / "f.yaml", "")).visible_tools == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "timout: 5\n",
            "key 'timout': unknown setting: neither toolexec, Loki, Coyote nor AIChat has it; did you mean 'timeout'?",
        ),
        ("frobnicate: 1\n", "key 'frobnicate': unknown setting: neither toolexec, Loki, Coyote nor AIChat has it"),
        ("timeout: soon\n", "key 'timeout': expected a positive number of seconds, got 'soon'"),
        ("timeout: -1\n", "key 'timeout': expected a positive number of seconds, got -1"),
        ("timeout: .inf\n", "key 'timeout': expected a positive number of seconds, got inf"),
        ("timeout: .nan\n", "key 'timeout': expected a positive number of seconds, got nan"),
        ("max_parallel: 1.5\n", "key 'max_parallel': expected a positive whole number up to 1024, got 1.5"),
        ("max_output_bytes: true\n", "key 'max_output_bytes': expected a positive whole number, got True"),
        ("visible_tools: {a: 1}\n", "key 'visible_tools': expected a list of names or a comma-separated string, got {'a': 1}"),
        ("visible_tools: [../x.py]\n", "key 'visible_tools': '../x.py' is not a file name in functions/tools/"),
        ("runtimes: {pyhton: python3}\n", "key 'runtimes.pyhton': unknown language; did you mean 'python'?"),
        ("runtimes: {bash: ''}\n", "key 'runtimes.bash': expected a command such as 'python3.12', got ''"),
        ("mapping_tools: [a]\n", "key 'mapping_tools': expected a mapping of alias: 'tool_a,tool_b', got ['a']"),
        ("functions_dir: 3\n", "key 'functions_dir': expected a directory path, got 3"),
        ("- a\n- b\n", "expected a mapping of settings at the top level, got list"),
        ("sandbox: always\n", "key 'sandbox': expected one of off, declared, strict, got 'always'"),
        ("sandbox_policies: [a]\n", "key 'sandbox_policies': expected a mapping of TOOL: {network: none, …}, got ['a']"),
        (
            "sandbox_policies: {t: 3}\n",
            "key 'sandbox_policies.t': must be a mapping of sandbox fields (network, writes, reads, env, memory, cpu, processes, file_size)",
        ),
        (
            "sandbox_policies: {t: {memory: lots}}\n",
            "key 'sandbox_policies.t.memory': must be a size such as 256 MiB, 10MB or a whole number of bytes, not 'lots'",
        ),
        (
            "sandbox_policies: {t: {netwrk: none}}\n",
            "key 'sandbox_policies.t.netwrk': is not a sandbox field (they are network, writes, reads, env, memory, cpu, processes, file_size)",
        ),
        (
            "sandbox_policies: {t: {writes: [etc]}}\n",
            "key 'sandbox_policies.t.writes': 'etc' is not cache, cwd, an absolute path or a ~/ path",
        ),
        ("sandbox_hide: [.ssh]\n", "key 'sandbox_hide': '.ssh' is not an absolute or ~/ path"),
        ("sandbox_hide: ~/.ssh\n", "key 'sandbox_hide': expected a list of absolute or ~/ paths, got '~/.ssh'"),
        ("mcp: {task_store: /srv/tasks}\n", "key 'mcp.task_store': expected dir:PATH or redis://HOST:PORT/DB, got '/srv/tasks'"),
        ("mcp: {task_store: 'dir:'}\n", "key 'mcp.task_store': expected dir:PATH or redis://HOST:PORT/DB, got 'dir:'"),
        ("mcp: {task_store: [dir]}\n", "key 'mcp.task_store': expected dir:PATH or redis://HOST:PORT/DB, got ['dir']"),
        ("mcp: {task_ttl: 0}\n", "key 'mcp.task_ttl': expected a positive number of seconds up to 604800 (a week), got 0"),
        (
            "mcp: {task_ttl: 1000000}\n",
            "key 'mcp.task_ttl': expected a positive number of seconds up to 604800 (a week), got 1000000",
        ),
        ("mcp: {task_tl: 5}\n", "key 'mcp.task_tl': unknown setting; did you mean 'task_ttl'?"),
    ],
)
def test_errors_name_the_key_and_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "config.yaml", text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert str(error.value) == f"{path}: {message}"


def test_the_task_store_settings_and_their_defaults(tmp_path: Path) -> None:
    default = load_config(write(tmp_path / "config.yaml", "timeout: 5\n")).mcp
    assert (default.task_store, default.task_ttl) == (None, 3600.0)
    given = load_config(write(tmp_path / "config.yaml", "mcp: {task_store: 'redis://10.0.0.5:6379/2', task_ttl: 600}\n")).mcp
    assert (given.task_store, given.task_ttl) == ("redis://10.0.0.5:6379/2", 600.0)


def test_yaml_syntax_error_has_a_position(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "visible_tools: [a.py\ntimeout: 3\n")
    with pytest.raises(ConfigError, match=rf"^{path}:\d+:\d+: not valid YAML: "):
        load_config(path)


def test_snapshot_notices_edits(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", "timeout: 5\n")
    assert load_config(path).timeout == 5
    assert load_config(path).timeout == 5  # from the snapshot
    path.write_text("timeout: 66\n")
    assert load_config(path).timeout == 66
    path.write_text("timeout: nope\n")
    with pytest.raises(ConfigError):
        load_config(path)


def test_snapshot_notices_a_same_size_edit_put_back_with_the_old_mtime(tmp_path: Path) -> None:
    """``cp -p``, ``rsync -t`` and ``tar x`` restore the mtime: a same-size config edited so is still seen."""
    import os
    import shutil

    path = write(tmp_path / "config.yaml", "timeout: 5\n")
    assert load_config(path).timeout == 5  # the snapshot is made
    before = path.stat()
    other = write(tmp_path / "other.yaml", "timeout: 7\n")
    os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
    shutil.copy2(other, path)  # in place, as cp -p: same size, same mtime
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert load_config(path).timeout == 7
    path.write_bytes(b"timeout: 8\n")  # and in place again at once, the mtime put back
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert load_config(path).timeout == 8


# Settings as Coyote's and Loki's own configs write them (their current and older names), none of toolexec's.
COYOTE_SETTINGS = """model: openai:gpt-4o
reasoning_effort: medium
function_calling_support: true
auto_continue: false
max_auto_continues: 10
inject_todo_instructions: true
skills_enabled: true
enabled_skills: null
memory: true
memory_cap_with_tools: 20
rag_graph_hops: 2
rag_extractor_model: null
compression_keep_last: 4
max_tool_result_chars: 50000
workspace_instructions: true
no_workspace_mcp: false
secrets_provider: null
raw_markdown: false
mcp_server_support: true
mapping_mcp_servers: {}
enabled_mcp_servers: null
clients: []
"""


def test_settings_of_loki_coyote_and_aichat_are_accepted_and_listed(tmp_path: Path) -> None:
    config = load_config(write(tmp_path / "coyote" / "config.yaml", COYOTE_SETTINGS + "visible_tools: [a.sh]\n"))
    ignored = sorted(line.split(":", 1)[0] for line in COYOTE_SETTINGS.splitlines())
    assert config.foreign == tuple(ignored)
    assert config.lookup[-2:] == (
        f"ignored settings of Coyote (toolexec does not use them): {', '.join(ignored)}",
        "no tool is enabled: a config of those applications with no enabled_tools enables none, as there",
    )
    older = load_config(write(tmp_path / "aichat.yaml", "function_calling: true\nuse_tools: fs\ncompress_threshold: 4000\n"))
    assert older.foreign == ("compress_threshold", "function_calling", "use_tools")
    assert older.lookup[-2] == (
        "ignored settings of Loki, Coyote and AIChat (toolexec does not use them): compress_threshold, function_calling, use_tools"
    )
    only_coyote = load_config(write(tmp_path / "c.yaml", "skills_enabled: true\n"))
    assert only_coyote.lookup[-2] == "ignored settings of Coyote (toolexec does not use them): skills_enabled"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("function_calling_suport: true\n", "did you mean 'function_calling_support'?"),
        ("visible_tool: [a]\n", "did you mean 'visible_tools'?"),
        ("max_auto_continue: 3\n", "did you mean 'max_auto_continues'?"),
        ("zzz_qqq: 1\n", ""),
    ],
)
def test_a_setting_none_of_them_has_is_refused_with_a_close_match(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "config.yaml", "model: x\n" + text)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    key = text.split(":", 1)[0]
    hint = f"; {message}" if message else ""
    assert str(error.value) == f"{path}: key {key!r}: unknown setting: neither toolexec, Loki, Coyote nor AIChat has it{hint}"


@pytest.mark.parametrize(
    ("text", "enabled", "why_a", "why_b"),
    [
        ("", None, "enabled: no enabled_tools (the default: all)", "enabled: no enabled_tools (the default: all)"),
        (
            "enabled_tools: null\n",
            None,
            "enabled: no enabled_tools (the default: all)",
            "enabled: no enabled_tools (the default: all)",
        ),
        ("enabled_tools: all\n", None, "enabled: enabled_tools is all", "enabled: enabled_tools is all"),
        ("enabled_tools: a\n", ("a",), "enabled by enabled_tools", "not enabled: not in enabled_tools"),
        (
            "enabled_tools: fs\nmapping_tools: {fs: 'b'}\n",
            ("fs",),
            "not enabled: not in enabled_tools",
            "enabled by enabled_tools, through the mapping_tools alias 'fs'",
        ),
        ("enabled_tools: []\n", (), "not enabled: not in enabled_tools", "not enabled: not in enabled_tools"),
        # a Loki / Coyote config: absent or null enables none, as in Loki
        ("model: x\n", (), *["not enabled: a Loki, Coyote and AIChat config with no enabled_tools enables none, as there"] * 2),
        (
            "function_calling_support: true\nenabled_tools: null\n",
            (),
            *["not enabled: a Loki and Coyote config with no enabled_tools enables none, as there"] * 2,
        ),
        (
            "function_calling_support: true\nenabled_tools: all\n",
            None,
            "enabled: enabled_tools is all",
            "enabled: enabled_tools is all",
        ),
        ("model: x\nenabled_tools: b\n", ("b",), "not enabled: not in enabled_tools", "enabled by enabled_tools"),
    ],
)
def test_which_tools_are_enabled_and_why(
    tmp_path: Path, text: str, enabled: tuple[str, ...] | None, why_a: str, why_b: str
) -> None:
    config = load_config(write(tmp_path / "config.yaml", "visible_tools: [a.sh, b.sh]\n" + text))
    assert config.enabled_tools == enabled
    assert (config.enabling("a"), config.enabling("b")) == (
        (why_a.startswith("enabled"), why_a),
        (why_b.startswith("enabled"), why_b),
    )


def test_sandbox_settings(tmp_path: Path) -> None:
    from toolexec.records import Sandbox

    default = load_config(write(tmp_path / "a" / "config.yaml", "visible_tools: []\n"))
    assert (default.sandbox, default.sandbox_policies) == ("declared", {})
    assert default.sandbox_hide == ("~/.ssh", "~/.aws", "~/.gnupg", "~/.netrc", "~/.config/gcloud", "~/.kube", "~/.docker")
    text = (
        "visible_tools: []\nsandbox: off\nsandbox_hide: [~/.secrets, /srv/keys]\n"
        "sandbox_policies:\n  fetch: {network: [api.github.com, 'localhost:8080'], writes: [], memory: 256MiB, cpu: 10, "
        "processes: '64', file_size: 10 MiB, env: 'GITHUB_TOKEN, AWS_PROFILE', reads: [~/.aws]}\n  quiet:\n"
    )
    config = load_config(write(tmp_path / "b" / "config.yaml", text))
    assert (config.sandbox, config.sandbox_hide) == ("off", ("~/.secrets", "/srv/keys"))
    assert config.sandbox_policies == {
        "fetch": Sandbox(
            network=("api.github.com", "localhost:8080"),
            writes=(),
            reads=("~/.aws",),
            env=("GITHUB_TOKEN", "AWS_PROFILE"),
            memory=256 << 20,
            cpu=10,
            processes=64,
            file_size=10 << 20,
        ),
        "quiet": Sandbox(),
    }


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            [*"ab/._-", " ", "\t", "\n", "\r", "'", '"', "\\", "\x0b", "\x0c", "\x1c", "\xa0", "\u2003", "é", "#"]
        )
    )
)
def test_a_runtime_command_is_split_as_shlex_splits_it(command: str) -> None:
    """A plain command is split without shlex (a one-shot run does not import it): the same words either way."""
    import shlex

    from toolexec.config import _runtimes

    try:
        expected: tuple[str, ...] | None = tuple(shlex.split(command))
    except ValueError:
        expected = None
    if not command.strip() or expected == ():
        return  # an empty command is refused before it is split
    try:
        found: tuple[str, ...] | None = _runtimes({"python": command}, "config.yaml")["python"]
    except ConfigError:
        found = None
    assert found == expected


def test_a_config_read_ahead_is_taken_once_and_only_while_the_file_is_unchanged(tmp_path: Path) -> None:
    """``toolexec serve``'s waiting child reads its config ahead (``prime``): the call's read takes that mapping
    while the file is the one read, once; an edit made meanwhile (same size, same second) is the call's to see."""
    from toolexec import config as module

    path = tmp_path / "config.yaml"
    path.write_text("timeout: 11\n", encoding="utf-8")
    module.prime(path.resolve())
    primed = module._primed[str(path.resolve())][1]
    assert module._read(path.resolve()) is primed  # taken: no read, no parse
    assert module._read(path.resolve()) is not primed  # once: the next read reads
    assert module._primed == {}
    module.prime(path.resolve())
    path.write_text("timeout: 12\n", encoding="utf-8")
    assert load_config(path).timeout == 12
    assert module._primed == {}
