"""Keeping the plane and the schedulers on separate CPUs: CPU lists, the split, pinning every
thread of a process, and the busy time of a set of CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import cpus
from benchmarks.cpus import Split


@pytest.mark.parametrize(
    ("text", "listed"),
    [("0", {0}), ("0,2", {0, 2}), ("0-3,6", {0, 1, 2, 3, 6}), (" 1 , 3-4", {1, 3, 4})],
)
def test_a_cpu_list_reads_as_taskset_writes_it(text: str, listed: set[int]) -> None:
    assert cpus.parse(text) == listed
    assert cpus.parse(cpus.show(listed)) == listed


@pytest.mark.parametrize("text", ["", "a", "3-1", "-1", "0,,1", "1-"])
def test_what_is_not_a_cpu_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a CPU list"):
        cpus.parse(text)


def test_show_writes_runs_short() -> None:
    assert cpus.show([6, 0, 1, 2, 3]) == "0-3,6"
    assert cpus.show([1]) == "1"
    assert cpus.show([0, 2, 4]) == "0,2,4"


def test_the_schedulers_get_every_cpu_the_plane_does_not() -> None:
    split = Split.of("0", available=[0, 1, 2, 3])
    assert split.plane == {0}
    assert split.schedulers == {1, 2, 3}
    assert split.describe() == "plane on CPU 0, schedulers and harness on CPU 1-3"
    assert split.to_json() == {"plane": [0], "schedulers": [1, 2, 3]}


def test_a_split_needs_cpus_this_process_has_and_one_left_over() -> None:
    with pytest.raises(ValueError, match="CPU 5 is not one of 0-1"):
        Split.of("0,5", available=[0, 1])
    with pytest.raises(ValueError, match="no CPU of 0-1 left for schedulers"):
        Split.of("0-1", available=[0, 1])


def test_pinning_moves_every_thread_and_the_threads_started_after() -> None:
    mine = sorted(os.sched_getaffinity(0))
    target = frozenset(mine[:1])
    script = (
        "import threading, time, sys\n"
        "def sleeper():\n"
        "    return threading.Thread(target=time.sleep, args=(60,), daemon=True)\n"
        "threads = [sleeper() for _ in range(3)]\n"
        "[t.start() for t in threads]\n"
        "print('up', flush=True)\n"
        "line = sys.stdin.readline()\n"
        "late = sleeper()\n"
        "late.start()\n"
        "print(late.native_id, flush=True)\n"
        "sys.stdin.readline()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline() == "up\n"
        assert cpus.pin(child.pid, target) == 4  # the main thread and three more
        assert {frozenset(os.sched_getaffinity(t)) for t in cpus.threads(child.pid)} == {target}
        child.stdin.write("start one more\n")
        child.stdin.flush()
        late = int(child.stdout.readline())
        assert os.sched_getaffinity(late) == target
    finally:
        child.kill()
        child.wait()
    assert cpus.threads(child.pid) == []  # gone: nothing to pin


def test_busy_ticks_add_up_the_cpus_listed(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text(
        "cpu  300 0 100 600 0 0 0 0 0 0\n"
        "cpu0 100 0 50 100 0 0 0 0 0 0\n"
        "cpu1 200 0 50 500 0 0 0 0 0 0\n"
        "intr 12345\n"
        "ctxt 999\n"
    )
    # user, nice, system, idle, iowait, ...: busy is everything but idle and iowait
    assert cpus.busy_ticks(frozenset({0}), stat) == (150, 250)
    assert cpus.busy_ticks(frozenset({1}), stat) == (250, 750)
    assert cpus.busy_ticks(frozenset({0, 1}), stat) == (400, 1000)


def test_busy_ticks_read_this_machine() -> None:
    mine = frozenset(os.sched_getaffinity(0))
    busy0, total0 = cpus.busy_ticks(mine)
    end = time.thread_time() + 0.05
    while time.thread_time() < end:
        pass
    busy1, total1 = cpus.busy_ticks(mine)
    assert 0 <= busy0 <= total0
    assert busy1 > busy0
    assert total1 > total0
