"""Where the machine's CPU goes while pods are bound.

A run's CPU figure is the scheduler's alone, from its start. On a small machine the
scheduler, kube-apiserver and etcd share the cores, so what a pod costs each of them
between the first and the last bind says why one scheduler binds faster than another: a
`CpuTrace` samples their CPU clocks (and the machine's busy time) every `interval` seconds
during a run, and `window` reads them at the first and last bind.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.cpus import busy_ticks

#: What a run's window reports for each process it traces: cores used, µs per pod.
Window = dict[str, Any]


def clock_ticks(pid: int) -> int | None:
    """The process's user plus system time in clock ticks; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


def machine_ticks() -> tuple[int, int]:
    """The machine's busy and total clock ticks so far, over all cores."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


class CpuTrace:
    """Samples of the CPU clocks of named processes, and of the machine, over time.

    `pids` is asked at each sample, so a process started after the trace (the scheduler of
    a backlog run) is picked up; a process gone reads as its last sample."""

    def __init__(
        self,
        pids: Callable[[], Mapping[str, int]],
        *,
        interval: float = 0.05,
        groups: Mapping[str, frozenset[int]] | None = None,
    ) -> None:
        self.pids = pids
        self.interval = interval
        #: CPU sets whose busy share a window reports besides the machine's (a split run's
        #: plane and scheduler CPUs).
        self.groups = dict(groups or {})
        self.times: list[float] = []
        self.machine: list[tuple[int, int]] = []
        self.group_ticks: dict[str, list[tuple[int, int]]] = {g: [] for g in self.groups}
        self.ticks: dict[str, list[tuple[float, int]]] = {}
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        now = time.monotonic()
        self.times.append(now)
        self.machine.append(machine_ticks())
        for group, cpus in self.groups.items():
            self.group_ticks[group].append(busy_ticks(cpus))
        for name, pid in self.pids().items():
            ticks = clock_ticks(pid)
            if ticks is not None:
                self.ticks.setdefault(name, []).append((now, ticks))

    async def _run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.interval)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.sample()

    def window(self, first: float, last: float, pods: int) -> Window | None:
        """Between `first` and `last` (monotonic seconds): the share of the machine that was
        busy (and of each group of CPUs, under `busy`), and per process the cores it used and
        its CPU µs per pod bound. None when the window is shorter than two samples apart."""
        if last - first < 2 * self.interval or pods <= 0:
            return None
        hz = os.sysconf("SC_CLK_TCK")
        a, b = self._index(first), self._index(last)
        if b <= a:
            return None
        (busy0, total0), (busy1, total1) = self.machine[a], self.machine[b]
        span = self.times[b] - self.times[a]
        result: Window = {
            "seconds": span,
            "machine_busy": (busy1 - busy0) / max(total1 - total0, 1),
            "processes": {},
        }
        if self.group_ticks:
            result["busy"] = {}
        for group, ticks in self.group_ticks.items():
            (busy0, total0), (busy1, total1) = ticks[a], ticks[b]
            result["busy"][group] = (busy1 - busy0) / max(total1 - total0, 1)
        for name, samples in self.ticks.items():
            times = [t for t, _ in samples]
            i = min(bisect.bisect_left(times, self.times[a]), len(samples) - 1)
            j = min(bisect.bisect_left(times, self.times[b]), len(samples) - 1)
            if j <= i:
                continue
            seconds = (samples[j][1] - samples[i][1]) / hz
            result["processes"][name] = {
                "cores": seconds / max(samples[j][0] - samples[i][0], 1e-9),
                "us_per_pod": 1e6 * seconds / pods,
            }
        return result

    def _index(self, when: float) -> int:
        """The sample nearest `when`."""
        i = bisect.bisect_left(self.times, when)
        if i == 0:
            return 0
        if i == len(self.times):
            return i - 1
        return i if self.times[i] - when < when - self.times[i - 1] else i - 1
