"""Keeping the plane and the schedulers on separate CPUs (`benchmarks run --plane-cpus`).

On a small machine a scheduler shares the cores with kube-apiserver and etcd, so what it
spends on its own work is taken from the plane's binds: a run then measures the scheduler's
CPU per pod as much as the plane's limit. Split the CPUs and each side has its own: the plane's
processes (every thread of etcd, kube-apiserver, kwok and the rest) on one set, the harness and
every process it starts (schedulers, ceilings, binders, which inherit its affinity) on the
other. The ceiling then measures the plane on its CPUs, and a scheduler that keeps up with it
binds as fast.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

#: A thread started while a process is pinned may copy the mask of one not pinned yet; pin
#: again until a pass finds every thread pinned, at most this many passes.
PASSES = 5


def parse(text: str) -> frozenset[int]:
    """A CPU list as `taskset -c` and the kernel write it: `0`, `0,2`, `0-3,6`."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(f"not a CPU list: {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"not a CPU list: {text!r}")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def show(cpus: Iterable[int]) -> str:
    """The CPU list back in the short form: `0-3,6`."""
    ordered = sorted(set(cpus))
    runs: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        runs.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(runs)


@dataclass(frozen=True)
class Split:
    """The plane's CPUs and the schedulers' (the harness's with them)."""

    plane: frozenset[int]
    schedulers: frozenset[int]

    @classmethod
    def of(cls, plane: str, available: Iterable[int] | None = None) -> Split:
        """The split that gives the plane the CPUs `plane` lists and the schedulers the rest
        of `available` (default: the CPUs this process may run on)."""
        usable = frozenset(os.sched_getaffinity(0) if available is None else available)
        cpus = parse(plane)
        if not cpus <= usable:
            raise ValueError(
                f"--plane-cpus {plane}: CPU {show(cpus - usable)} is not one of {show(usable)}"
            )
        rest = usable - cpus
        if not rest:
            raise ValueError(f"--plane-cpus {plane}: no CPU of {show(usable)} left for schedulers")
        return cls(cpus, rest)

    def describe(self) -> str:
        plane, schedulers = show(self.plane), show(self.schedulers)
        return f"plane on CPU {plane}, schedulers and harness on CPU {schedulers}"

    def to_json(self) -> dict[str, list[int]]:
        return {"plane": sorted(self.plane), "schedulers": sorted(self.schedulers)}


def threads(pid: int) -> list[int]:
    """The process's thread ids; none once it is gone."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


def pin(pid: int, cpus: frozenset[int]) -> int:
    """Every thread of the process on `cpus`; how many threads it has. Threads it starts from
    then on inherit the mask."""
    for _ in range(PASSES):
        tids = threads(pid)
        moved = 0
        for tid in tids:
            try:
                if os.sched_getaffinity(tid) != cpus:
                    os.sched_setaffinity(tid, cpus)
                    moved += 1
            except ProcessLookupError:  # the thread ended meanwhile
                continue
        if not moved:
            return len(tids)
    raise RuntimeError(f"pid {pid}: threads still starting off CPU {show(cpus)}")


def busy_ticks(cpus: frozenset[int], stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    """The busy and total clock ticks so far of the CPUs listed."""
    busy = total = 0
    for line in stat.read_text().splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        fields = [int(v) for v in rest.split()]
        idle = fields[3] + fields[4]  # idle, iowait
        busy += sum(fields) - idle
        total += sum(fields)
    return busy, total
