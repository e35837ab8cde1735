"""Landlock (Linux 5.13+): what a process may read, write and connect to, enforced by the kernel on itself.

The confinement used where bubblewrap cannot start (see :mod:`toolexec.runtimes.sandbox`). Landlock's rules
only grant: a right given on a directory holds for everything beneath it. So a tree that must be readable or
writable *except* some paths inside it (the hidden paths, toolexec's own files) is granted around them: the
directories on the way to an excluded path get only the rights no exclusion below withholds (listing them
stays possible), and each of their other entries gets the whole grant. An entry made after the rules are
made is not covered (it stays unreadable or read-only: the failure is closed).

Standard library and ctypes only, no other toolexec module: the launcher (:mod:`toolexec.runtimes.launcher`)
imports this file as a top-level module under ``python -S -I`` in the tool's process, before its ``exec``.
"""

from __future__ import annotations

import ctypes
import os
import stat
import struct

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

READ = EXECUTE | READ_FILE | READ_DIR
# No device nodes: making one needs a capability a tool does not have, and is never granted.
WRITE = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_SYM | REFER | TRUNCATE
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a non-directory may hold
ALL = (1 << 16) - 1

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same number on every architecture
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_libc: Any = None

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def libc() -> Any:
    """The C library (ctypes), loaded once."""
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        _libc = libc  # published whole: a concurrent call never gets it before its restype is set
    return _libc


def _syscall(*args: Any) -> int:
    result = libc().syscall(*args)
    if result < 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))
    return int(result)


def abi() -> int:
    """The Landlock ABI version this kernel offers (0 without Landlock: too old, not built, or disabled at boot)."""
    try:
        return _syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def fs_rights(version: int) -> int:
    """The filesystem rights Landlock ABI ``version`` knows."""
    rights = ALL & ~(REFER | TRUNCATE | IOCTL_DEV)
    return rights | (REFER if version >= 2 else 0) | (TRUNCATE if version >= 3 else 0) | (IOCTL_DEV if version >= 5 else 0)


def restrict(grants: list[tuple[str, int]], exclusions: dict[str, int], *, network: str, version: int) -> None:
    """Confine this process (and what it execs) to ``grants``, each (path, rights), withholding from a grant the
    rights ``exclusions`` maps a path inside it to; under ``network`` ``none`` no TCP bind or connect (ABI 4);
    and (ABI 6) no signal to, and no abstract Unix socket of, a process outside. OSError when the kernel refuses."""
    handled = fs_rights(version)
    net = NET_BIND_TCP | NET_CONNECT_TCP if network == "none" and version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    attr = (ctypes.c_uint64 * 3)(handled, net, scoped)
    size = 8 * (3 if version >= 6 else 2 if version >= 4 else 1)
    ruleset = _syscall(_CREATE_RULESET, ctypes.byref(attr), size, 0)
    try:
        for path, rights in grants:
            inside = {place: withheld for place, withheld in exclusions.items() if withheld & rights and _within(place, path)}
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a place that does not exist: nothing to grant
            _grant(ruleset, fd, path, rights & handled, inside)
        no_new_privileges()
        _syscall(_RESTRICT_SELF, ruleset, 0)
    finally:
        os.close(ruleset)


def no_new_privileges() -> None:
    """``PR_SET_NO_NEW_PRIVS``: nothing this process execs gains privileges (set-user-ID, file capabilities); Landlock
    and seccomp need it of an unprivileged process."""
    if libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(error)}")


def _within(place: str, top: str) -> bool:
    return place == top or place.startswith(top.rstrip("/") + "/")


def _add_rule(ruleset: int, fd: int, rights: int) -> None:
    rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)  # struct landlock_path_beneath_attr (packed)
    _syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, rule, 0)


def _grant(ruleset: int, fd: int, path: str, rights: int, inside: dict[str, int]) -> None:
    """Grant ``rights`` on the tree at ``fd`` (``path``; the descriptor is closed) but around ``inside``."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISDIR(info.st_mode):
            rights &= FILE_RIGHTS & ~inside.get(path, 0)
            if rights:
                _add_rule(ruleset, fd, rights)
            return
        rights &= ~inside.pop(path, 0)
        if not inside:
            if rights:
                _add_rule(ruleset, fd, rights)
            return
        withheld = 0
        for value in inside.values():
            withheld |= value
        if rights & ~withheld:
            _add_rule(ruleset, fd, rights & ~withheld)
        try:
            listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
        except OSError:
            return
        try:
            names = os.listdir(listing)
        finally:
            os.close(listing)
        for name in names:
            child = os.path.join(path, name)
            below = {place: value for place, value in inside.items() if _within(place, child)}
            if not below and not rights & withheld:
                continue  # the rule on this directory covers it
            try:
                if stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode):
                    continue  # a link is followed to its target, which its own rules cover
                sub = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError:
                continue
            _grant(ruleset, sub, child, rights, below)
    finally:
        os.close(fd)
