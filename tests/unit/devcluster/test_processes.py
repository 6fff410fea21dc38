"""Processes are stopped by pid, and a recycled pid is never mistaken for ours."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

from ascheduler.devcluster import processes


def test_spawn_then_stop(tmp_path: Path) -> None:
    record = processes.spawn("sleeper", ["sleep", "60"], log=tmp_path / "sleeper.log")
    assert processes.is_alive(record)
    processes.stop(record, timeout=5)
    assert not processes.is_alive(record)


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path: Path) -> None:
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    log = tmp_path / "stubborn.log"
    record = processes.spawn("stubborn", [sys.executable, "-c", script], log=log)
    while "ready" not in log.read_text():
        assert processes.is_alive(record)
        time.sleep(0.01)
    processes.stop(record, timeout=0.5)
    assert not processes.is_alive(record)


def test_a_record_with_another_start_time_is_not_ours(tmp_path: Path) -> None:
    other = subprocess.Popen(["sleep", "60"])
    try:
        real = processes._stat(other.pid)
        assert real is not None
        impostor = processes.ProcessRecord(
            name="old",
            pid=other.pid,
            start_ticks=real[1] - 1,
            log=str(tmp_path / "x.log"),
            argv=("old",),
        )
        assert not processes.is_alive(impostor)
        processes.stop(impostor, timeout=0.1)
        assert other.poll() is None  # the unrelated process was left alone
    finally:
        other.kill()
        other.wait()


def test_records_round_trip_through_json(tmp_path: Path) -> None:
    record = processes.spawn("echo", ["true"], log=tmp_path / "echo.log")
    processes.stop(record)
    assert processes.ProcessRecord.from_json(record.to_json()) == record
    assert dataclasses.asdict(record)["argv"] == ("true",)
