"""Start and stop the plane's processes, by pid, safely.

A pid alone is not an identity: once a process exits its pid may be reused. Each record keeps
the process's start time (field 22 of `/proc/<pid>/stat`), and a pid is only signalled while
its start time still matches. Every process gets a session (and process group) of its own, so
stopping it also stops anything it forked and a terminal's Ctrl-C does not reach it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
# Children we spawned ourselves, so we can reap them (and not leave zombies behind).
_children: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ProcessRecord:
    name: str
    pid: int
    start_ticks: int
    log: str
    argv: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            log=str(data["log"]),
            argv=tuple(str(a) for a in data["argv"]),
        )


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of a live pid, or None."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may hold spaces: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


def is_alive(record: ProcessRecord) -> bool:
    child = _children.get(record.pid)
    if child is not None and child.poll() is not None:
        return False
    stat = _stat(record.pid)
    return stat is not None and stat[0] not in ("Z", "X") and stat[1] == record.start_ticks


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    die_with_parent: bool = False,
) -> ProcessRecord:
    """Start `argv` in a new session, output appended to `log`.

    `die_with_parent` makes the kernel kill the process if this one dies without cleaning up
    (a test run killed with SIGKILL); the CLI's `cluster up` leaves it off so the plane outlives
    the command that started it.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    preexec: Callable[[], None] | None = _die_with_parent if die_with_parent else None
    with log.open("ab") as out:
        child = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            preexec_fn=preexec,
        )
    _children[child.pid] = child
    stat = _stat(child.pid)
    start_ticks = stat[1] if stat else 0
    return ProcessRecord(
        name=name, pid=child.pid, start_ticks=start_ticks, log=str(log), argv=tuple(argv)
    )


def exit_code(record: ProcessRecord) -> int | None:
    """The exit status of a child of ours that has exited, else None."""
    child = _children.get(record.pid)
    return None if child is None else child.poll()


def stop(record: ProcessRecord, *, timeout: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it has not exited within `timeout`."""
    if is_alive(record):
        _signal_group(record, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while is_alive(record) and time.monotonic() < deadline:
            time.sleep(0.05)
        if is_alive(record):
            _signal_group(record, signal.SIGKILL)
            deadline = time.monotonic() + 5.0
            while is_alive(record) and time.monotonic() < deadline:
                time.sleep(0.05)
    child = _children.pop(record.pid, None)
    if child is not None:
        child.wait(timeout=5.0)


def kill(record: ProcessRecord) -> None:
    """SIGKILL the process group at once (a crash, not a stop); `stop` then reaps it."""
    if is_alive(record):
        _signal_group(record, signal.SIGKILL)


def _signal_group(record: ProcessRecord, sig: signal.Signals) -> None:
    try:
        if os.getpgid(record.pid) == record.pid:
            os.killpg(record.pid, sig)
        else:
            os.kill(record.pid, sig)
    except ProcessLookupError:
        pass
