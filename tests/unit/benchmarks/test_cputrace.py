"""The CPU trace of a run: per process, CPU per pod between the first and the last bind, and
the window table of the report."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from benchmarks import report
from benchmarks.cputrace import CpuTrace, clock_ticks, machine_ticks

HZ = os.sysconf("SC_CLK_TCK")


def synthetic(rates: dict[str, float], seconds: int = 10) -> CpuTrace:
    """Samples every 0.1 s for `seconds`: each process burning `rates[name]` cores, the
    machine two cores of which one is busy."""
    trace = CpuTrace(dict, interval=0.1)
    for i in range(seconds * 10 + 1):
        t = i / 10
        trace.times.append(t)
        trace.machine.append((int(t * HZ), int(2 * t * HZ)))
        for name, cores in rates.items():
            trace.ticks.setdefault(name, []).append((t, int(t * cores * HZ)))
    return trace


def test_the_window_reads_each_process_between_the_first_and_last_bind() -> None:
    trace = synthetic({"scheduler": 0.5, "kube-apiserver": 1.0})
    window = trace.window(2.0, 6.0, pods=2000)
    assert window is not None
    assert window["seconds"] == pytest.approx(4.0)
    assert window["machine_busy"] == pytest.approx(0.5, abs=0.01)
    assert window["processes"]["scheduler"]["cores"] == pytest.approx(0.5, abs=0.01)
    # 2 CPU-seconds over 2,000 pods
    assert window["processes"]["scheduler"]["us_per_pod"] == pytest.approx(1000, rel=0.02)
    assert window["processes"]["kube-apiserver"]["us_per_pod"] == pytest.approx(2000, rel=0.02)


def test_a_process_started_late_is_read_from_its_first_sample() -> None:
    trace = synthetic({"kube-apiserver": 1.0})
    trace.ticks["scheduler"] = [(t, int((t - 3) * HZ)) for t in trace.times if t >= 3]
    window = trace.window(3.0, 8.0, pods=100)
    assert window is not None
    assert window["processes"]["scheduler"]["cores"] == pytest.approx(1.0, abs=0.02)


def test_a_window_too_short_to_read_reports_nothing() -> None:
    trace = synthetic({"scheduler": 1.0})
    assert trace.window(2.0, 2.05, pods=10) is None
    assert trace.window(2.0, 4.0, pods=0) is None


def test_the_clocks_read_this_process_and_the_machine() -> None:
    assert clock_ticks(os.getpid()) is not None
    assert clock_ticks(2**22 + 12345) is None  # no such process
    busy, total = machine_ticks()
    assert 0 <= busy <= total


async def test_a_started_trace_samples_until_stopped() -> None:
    trace = CpuTrace(lambda: {"me": os.getpid()}, interval=0.01)
    trace.start()
    await asyncio.sleep(0.05)  # sampled as it starts, and every 10 ms
    await trace.stop()
    assert len(trace.times) >= 2
    assert len(trace.ticks["me"]) == len(trace.times)


def summary(window: dict[str, float]) -> dict[str, Any]:
    return {"throughput_avg": 1000.0, **window}


def test_the_report_tables_the_window_per_scheduler() -> None:
    rows = report._window_table(
        {
            "ascheduler": summary(
                {
                    "window_machine_busy": 0.99,
                    "window_us_per_pod_scheduler": 440.0,
                    "window_us_per_pod_kube-apiserver": 510.0,
                    "window_us_per_pod_etcd": 140.0,
                }
            ),
            "ceiling-go": summary(
                {"window_machine_busy": 0.97, "window_us_per_pod_scheduler": 160.0}
            ),
            "old": summary({}),  # a result from before the trace
        }
    )
    assert "| scheduler | machine busy | scheduler | kube-apiserver | etcd | total |" in rows
    assert "| ascheduler | 99% | 440 | 510 | 140 | 1090 |" in rows
    assert "| ceiling-go | 97% | 160 | - | - | 160 |" in rows
    assert not any(r.startswith("| old ") for r in rows)
    assert report._window_table({"old": summary({})}) == []


def test_a_split_window_reports_how_busy_each_group_of_cpus_was() -> None:
    trace = synthetic({"kube-apiserver": 1.0})
    trace.groups = {"plane": frozenset({0}), "schedulers": frozenset({1})}
    # the plane's CPU all busy, the schedulers' a quarter
    trace.group_ticks = {
        "plane": [(int(t * HZ), int(t * HZ)) for t in trace.times],
        "schedulers": [(int(t * HZ / 4), int(t * HZ)) for t in trace.times],
    }
    window = trace.window(2.0, 6.0, pods=1000)
    assert window is not None
    assert window["busy"]["plane"] == pytest.approx(1.0, abs=0.01)
    assert window["busy"]["schedulers"] == pytest.approx(0.25, abs=0.01)
    assert "busy" not in (synthetic({}).window(2.0, 6.0, pods=10) or {})


async def test_a_started_trace_samples_its_groups_of_cpus() -> None:
    mine = frozenset(os.sched_getaffinity(0))
    trace = CpuTrace(dict, interval=0.01, groups={"all": mine})
    trace.start()
    await asyncio.sleep(0.05)
    await trace.stop()
    assert len(trace.group_ticks["all"]) == len(trace.times) >= 2


def test_the_window_table_shows_the_split_cpus_busy() -> None:
    rows = report._window_table(
        {
            "ascheduler": summary(
                {
                    "window_machine_busy": 0.8,
                    "window_busy_plane": 0.99,
                    "window_busy_schedulers": 0.61,
                    "window_us_per_pod_scheduler": 440.0,
                    "window_us_per_pod_kube-apiserver": 510.0,
                }
            ),
        }
    )
    head = "| scheduler | machine busy | plane CPUs busy | schedulers CPUs busy | scheduler |"
    assert any(r.startswith(head) for r in rows)
    assert "| ascheduler | 80% | 99% | 61% | 440 | 510 | 950 |" in rows
