"""Where a scheduler's CPU goes: py-spy's raw stacks parsed, each sample sorted by what its
frames were doing, the shares of several runs merged, the result tables, and py-spy attached
to a live Python process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks import cpuprofile, report
from benchmarks.cpuprofile import (
    BINDING,
    CYCLE,
    EVENTS,
    HANDLERS,
    LOGGING,
    LOOP,
    METRICS,
    STARTUP,
    TRANSPORT,
    WATCH,
)
from benchmarks.summary import summarise

SITE = "/w/.venv/lib/python3.11/site-packages"
LIB = "/usr/lib/python3.11"
CODE = "/home/u/ascheduler/ascheduler"

LOOP_ROOT = (
    f"_run_module_as_main ({LIB}/runpy.py:198);<module> ({CODE}/__main__.py:4);"
    f"run ({LIB}/asyncio/runners.py:190);Handle._run ({LIB}/asyncio/events.py:80)"
)


def line(*frames: str, count: int = 1) -> str:
    return ";".join((LOOP_ROOT, *frames)) + f" {count}"


CYCLE_FRAMES = (
    f"Scheduler.run ({CODE}/scheduler.py:200)",
    f"Scheduler.schedule_pod ({CODE}/scheduler.py:230)",
    f"Framework.run_filter ({CODE}/framework/runtime/framework.py:90)",
)
WATCH_FRAMES = (
    f"Informer._watch ({CODE}/kube/informer.py:270)",
    f"Informer._event ({CODE}/kube/informer.py:310)",
    f"Pod.parse ({CODE}/model/pod.py:50)",
)


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        (CYCLE_FRAMES, CYCLE),
        ((*CYCLE_FRAMES, f"BoundLogger.debug ({SITE}/structlog/_native.py:10)"), LOGGING),
        ((*CYCLE_FRAMES, f"Histogram.observe ({SITE}/prometheus_client/metrics.py:5)"), METRICS),
        (WATCH_FRAMES, WATCH),
        (
            (
                *WATCH_FRAMES[:2],
                f"Informer._dispatch ({CODE}/kube/informer.py:350)",
                f"PodHandler.on_add ({CODE}/eventhandlers.py:40)",
                f"Cache.add_pod ({CODE}/cache/cache.py:100)",
            ),
            HANDLERS,
        ),
        (
            (
                f"Scheduler._bind ({CODE}/scheduler.py:480)",
                f"KubeClient.post ({CODE}/kube/client.py:391)",
            ),
            BINDING,
        ),
        ((f"Binder.bind ({CODE}/binding/binder.py:120)",), BINDING),
        (
            (
                f"Binder.bind ({CODE}/binding/binder.py:120)",
                f"Recorder.emit ({CODE}/events.py:77)",
            ),
            EVENTS,
        ),
        ((f"_Connection.data_received ({CODE}/kube/transport.py:85)",), TRANSPORT),
        (("_find_and_load (<frozen importlib._bootstrap>:1176)",), STARTUP),
        ((), LOOP),
    ],
    ids=[
        "cycle",
        "logging-in-cycle",
        "metrics-in-cycle",
        "watch",
        "handlers",
        "scheduler-bind",
        "binder",
        "event-in-binding",
        "transport",
        "imports",
        "loop",
    ],
)
def test_a_sample_is_sorted_by_the_frames_on_its_stack(
    frames: tuple[str, ...], expected: str
) -> None:
    [(stack, count)] = cpuprofile.parse(line(*frames, count=3))
    assert count == 3
    assert cpuprofile.category(stack) == expected


def test_frames_are_named_by_package_path() -> None:
    assert cpuprofile.module_of(f"{CODE}/kube/informer.py") == "ascheduler/kube/informer.py"
    assert cpuprofile.module_of(f"{SITE}/structlog/_log.py") == "structlog/_log.py"
    assert cpuprofile.module_of(f"{LIB}/asyncio/events.py") == "asyncio/events.py"
    assert cpuprofile.module_of("<frozen importlib._bootstrap>") == "importlib"


def test_breakdown_shares_add_up_and_name_the_functions_on_top() -> None:
    raw = "\n".join(
        [
            line(*CYCLE_FRAMES, count=6),
            line(*WATCH_FRAMES, count=3),
            line(count=1),
            "garbage without a count",
        ]
    )
    profile = cpuprofile.breakdown(cpuprofile.parse(raw))
    assert profile["samples"] == 10
    assert list(profile["shares"]) == list(cpuprofile.CATEGORIES)
    assert profile["shares"][CYCLE] == pytest.approx(0.6)
    assert profile["shares"][WATCH] == pytest.approx(0.3)
    assert profile["shares"][LOOP] == pytest.approx(0.1)
    assert sum(profile["shares"].values()) == pytest.approx(1.0)
    assert profile["functions"][0] == [
        "ascheduler/framework/runtime/framework.py:Framework.run_filter",
        pytest.approx(0.6),
    ]


def test_runs_merge_weighed_by_their_samples() -> None:
    one = cpuprofile.breakdown(cpuprofile.parse(line(*CYCLE_FRAMES, count=30)))
    two = cpuprofile.breakdown(cpuprofile.parse(line(*WATCH_FRAMES, count=10)))
    merged = cpuprofile.merge([one, two])
    assert merged["samples"] == 40
    assert merged["shares"][CYCLE] == pytest.approx(0.75)
    assert merged["shares"][WATCH] == pytest.approx(0.25)
    assert cpuprofile.per_pod(merged, 400.0)[CYCLE] == pytest.approx(300.0)


def profiled_run(samples: int, cycle: int, cpu: float = 1.0, pods: int = 1000) -> dict[str, Any]:
    raw = "\n".join([line(*CYCLE_FRAMES, count=cycle), line(*WATCH_FRAMES, count=samples - cycle)])
    return {
        "scheduler": "ascheduler",
        "mode": "backlog",
        "pods": pods,
        "bound": pods,
        "cpu_seconds": cpu,
        "throughput_avg": 500.0,
        "profile": cpuprofile.breakdown(cpuprofile.parse(raw)),
    }


def test_a_profiled_result_tables_the_cpu_per_pod_by_category(tmp_path: Path) -> None:
    summary = {"ascheduler": summarise([profiled_run(100, 50), profiled_run(300, 250)])}
    assert summary["ascheduler"]["profile"]["samples"] == 400
    rows = report.profile_table(summary)
    cycle = next(r for r in rows if r.startswith(f"| {CYCLE} |"))
    # 300 of 400 samples; 1 s of CPU over 1,000 pods is 1,000 µs a pod.
    assert cycle == f"| {CYCLE} | 75.0% | 750 |"
    assert report.profile_table({"kube-scheduler": {"cpu_seconds": 1.0}}) == []

    results = tmp_path / report.PROFILES
    results.mkdir()
    for date, cycle_samples in (("2026-11-01", 10), ("2026-11-02", 90)):
        result = {
            "workload": "SchedulingBasic_5000Nodes_10000Pods",
            "mode": "backlog",
            "date": date,
            "repeat": 1,
            "versions": {"kubernetes": "v1.37.2"},
            "summary": {"ascheduler": summarise([profiled_run(100, cycle_samples)])},
        }
        (results / f"{date}-backlog.json").write_text(json.dumps(result))
    section = report.profile_section(results)
    assert "backlog" in section
    assert "steady" not in section
    assert "--scheduler ascheduler --profile`, 2026-11-02 at Kubernetes v1.37.2" in section
    assert f"| {CYCLE} | 90.0% |" in section
    assert "No CPU profiles yet" in report.profile_section(tmp_path / "none")


SPINNER = textwrap.dedent(
    """
    import sys

    def spin_in_a_named_function():
        n = 0
        while True:
            n += 1

    sys.stdout.write("ready\\n")
    sys.stdout.flush()
    spin_in_a_named_function()
    """
)


def test_py_spy_samples_a_live_process_until_stopped(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SPINNER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        profiler = cpuprofile.Profiler(child.pid, tmp_path / "profile.txt")
        for _ in range(30):  # a machine busy enough may give a second no sample
            profiler.start()
            assert profiler.process is not None
            spy = profiler.process.pid
            time.sleep(1.0)
            profile = profiler.stop()
            if profile["samples"]:
                break
        assert profile["samples"] > 0
        assert profile["functions"][0][0].endswith(":spin_in_a_named_function")
        assert profile["shares"][LOOP] == pytest.approx(1.0)  # no ascheduler frame on it
        assert profiler.process is None
        with pytest.raises(ProcessLookupError):
            os.kill(spy, 0)  # py-spy itself was stopped
    finally:
        child.kill()
        child.wait()


def test_a_categorys_time_is_told_by_the_functions_on_its_stacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = "\n".join(
        [
            line(*CYCLE_FRAMES, count=6),
            line(*CYCLE_FRAMES[:2], f"Snapshot.update ({CODE}/cache/snapshot.py:9)", count=2),
            line(*WATCH_FRAMES, count=2),
        ]
    )
    stacks = cpuprofile.parse(raw)
    on_cycle = dict(cpuprofile.inclusive(stacks, within="scheduling cycle"))
    assert on_cycle["ascheduler/scheduler.py:Scheduler.schedule_pod"] == pytest.approx(1.0)
    assert on_cycle["ascheduler/framework/runtime/framework.py:Framework.run_filter"] == (
        pytest.approx(0.75)
    )
    assert on_cycle["ascheduler/cache/snapshot.py:Snapshot.update"] == pytest.approx(0.25)
    assert "ascheduler/model/pod.py:Pod.parse" not in on_cycle
    # the frames under which the loop runs are on every stack, and say nothing
    everything = dict(cpuprofile.inclusive(stacks))
    assert "ascheduler/__main__.py:<module>" not in everything
    assert everything["ascheduler/model/pod.py:Pod.parse"] == pytest.approx(0.2)

    saved = tmp_path / "stacks.txt"
    saved.write_text(raw)
    assert cpuprofile.main([str(saved), "--within", "scheduling cycle", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "10 samples" in out
    assert " 80.0%  scheduling cycle" in out
    assert "100.0%  ascheduler/scheduler.py:Scheduler.run" in out
