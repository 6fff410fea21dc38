"""The harness end to end at its smoke size, on the session's plane, in both modes: every
scheduler (the Go ceiling built on first use) binds every pod, the result files are written,
and nothing it started is left behind. No timing is asserted."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from ascheduler.devcluster import versions
from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from benchmarks import run as harness
from tests.integration.benchmarks.helpers import benchmarks, cmdlines
from tests.integration.helpers import plane_since


def written(out: Path, mode: str, row: str = "kube-scheduler") -> dict[str, Any]:
    """The run's JSON for `mode`, after checking its Markdown (with a `row`) and PNG siblings
    exist."""
    (result_file,) = out.glob(f"*-Smoke_10Nodes_40Pods-{mode}.json")
    assert result_file.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert f"| {row} |" in result_file.with_suffix(".md").read_text()
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result


async def test_smoke_run_of_every_scheduler_in_both_modes(
    plane_state: PlaneState, kube: KubeClient, tmp_path: Path
) -> None:
    await benchmarks(
        "run",
        "--workload",
        "Smoke_10Nodes_40Pods",
        "--kubeconfig",
        str(plane_state.admin_kubeconfig),
        "--out",
        str(tmp_path),
        "--quiet",
    )
    steady, backlog = written(tmp_path, "steady"), written(tmp_path, "backlog")
    assert steady["run_id"] == backlog["run_id"]
    everyone = {"ascheduler", "kube-scheduler", "ceiling-go", "ceiling-python"}
    for result in (steady, backlog):
        assert set(result["runs"]) == everyone
        for name, (run,) in result["runs"].items():
            assert run["mode"] == result["mode"]
            assert run["pods"] == 40
            assert sum(run["samples"]) == 40, name  # every measured pod was seen bound
            assert run["requests_per_pod"] >= 1.0, name  # at least its Binding, per pod
            assert run["requests"].get("POST 201", 0) >= 40, name  # the Bindings themselves
            assert run["peak_rss_bytes"] > 0
        assert "throughput_avg ascheduler/kube-scheduler" in result["ratios"]
        assert "throughput_avg ascheduler/ceiling" in result["ratios"]
        assert "throughput_avg ceiling-python/ceiling-go" in result["ratios"]
        assert result["ceiling_limit"]
    for name, (run,) in backlog["runs"].items():
        # The scheduler started after the pods existed: its first bind follows its start.
        assert 0 < run["first_bind_s"] <= run["last_bind_s"], name

    run_id = steady["run_id"]
    assert not [c for c in cmdlines() if run_id in c]
    left = await kube.get("/api/v1/nodes", params={"labelSelector": "ascheduler.io/benchmark"})
    assert left["items"] == []
    pods = await kube.get("/api/v1/pods")
    assert not [p for p in pods["items"] if run_id in p["spec"].get("schedulerName", "")]


def test_a_run_cut_short_keeps_the_repeats_it_finished(
    plane_state: PlaneState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The results are written after every repeat: the second repeat fails, and the file
    holds the first, saying how many were planned."""
    real = harness.one_run
    calls = 0

    async def failing_later(*args: Any, **kwargs: Any) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("the second repeat fails")
        return await real(*args, **kwargs)

    monkeypatch.setattr(harness, "one_run", failing_later)
    argv = [
        "--workload",
        "Smoke_10Nodes_40Pods",
        "--scheduler",
        "ceiling-python",
        "--mode",
        "steady",
        "--repeat",
        "2",
        "--kubeconfig",
        str(plane_state.admin_kubeconfig),
        "--out",
        str(tmp_path),
        "--quiet",
    ]
    with pytest.raises(RuntimeError, match="the second repeat fails"):
        harness.main(argv)
    result = written(tmp_path, "steady", "ceiling-python")
    assert (result["repeat"], result["repeats_planned"]) == (1, 2)
    ((only,),) = result["runs"].values()
    assert sum(only["samples"]) == 40


async def test_a_split_run_keeps_the_plane_and_the_schedulers_on_their_own_cpus(
    tmp_path: Path,
) -> None:
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("a split needs two CPUs")
    plane_cpu, rest = mine[0], mine[1:]
    await benchmarks(
        "run",
        "--workload",
        "Smoke_10Nodes_40Pods",
        "--scheduler",
        "ascheduler",
        "--scheduler",
        "ceiling-python",
        "--mode",
        "backlog",
        "--plane-cpus",
        str(plane_cpu),
        "--out",
        str(tmp_path),
        "--quiet",
    )
    result = written(tmp_path, "backlog-split", "ceiling-python")
    assert result["cpus"]["plane"] == [plane_cpu]
    assert result["cpus"]["schedulers"] == rest
    # the plane's own processes, found on its CPU once pinned
    placed = result["cpus"]["placed"]
    assert {"etcd", "kube-apiserver", "kwok"} <= set(placed)
    assert all(where == [plane_cpu] for where in placed.values()), placed
    assert f"plane on CPU {plane_cpu}" in result["plane"]
    for name, (run,) in result["runs"].items():
        assert run["cpus"] == rest, name  # the scheduler started where the harness runs
        assert sum(run["samples"]) == 40, name
    assert "throughput_avg ascheduler/ceiling" in result["ratios"]
    # its plane, schedulers and ceiling all stopped
    assert not [c for c in cmdlines() if result["run_id"] in c or "ascheduler-bench-" in c]


def dra_result(out: Path) -> tuple[dict[str, Any], str]:
    """The DRA smoke run's JSON, and its Markdown."""
    (result_file,) = out.glob("*-Smoke_DRA_10Nodes-steady.json")
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result, result_file.with_suffix(".md").read_text()


async def test_the_ceilings_of_a_dra_run_write_every_pods_claim(
    plane_state: PlaneState, tmp_path: Path
) -> None:
    await benchmarks(
        "run",
        "--workload",
        "Smoke_DRA_10Nodes",
        "--scheduler",
        "ceiling-go",
        "--scheduler",
        "ceiling-python",
        "--mode",
        "steady",
        "--kubeconfig",
        str(plane_state.admin_kubeconfig),
        "--out",
        str(tmp_path),
        "--quiet",
    )
    result, table = dra_result(tmp_path)
    assert result["ceiling_kind"] == "dra"
    assert "wrote each pod's claims" in table
    for name, (run,) in result["runs"].items():
        assert sum(run["samples"]) == 40, name
        # Per measured pod: its nominated node, its claim's finalizer and status, its Binding.
        assert run["requests"].get("PATCH 200") == 40, name
        assert run["requests"].get("PUT 200") == 80, name
        assert run["requests"].get("POST 201") == 40, name
    assert not [c for c in cmdlines() if result["run_id"] in c]


def replace_result(out: Path, workload: str, mode: str = "replace") -> tuple[dict[str, Any], str]:
    """A run's JSON in `mode` (a steady-state run's by default), and its Markdown."""
    (result_file,) = out.glob(f"*-{workload}-{mode}.json")
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result, result_file.with_suffix(".md").read_text()


@pytest.mark.parametrize(
    ("workload", "schedulers", "free"),
    [
        # 10 nodes of 10 devices, 90 held by claims allocated before: 10 free
        ("Smoke_SteadyState_DRA_10Nodes", ("ascheduler", "kube-scheduler", "ceiling-python"), 10),
        # 10 nodes of one counter set for two devices, 5 held: 5 claims' worth free
        ("Smoke_SteadyState_Partitionable_10Nodes", ("ascheduler", "kube-scheduler"), 5),
    ],
)
async def test_a_steady_state_run_replaces_each_bound_pod_and_its_devices_come_back(
    plane_state: PlaneState,
    kube: KubeClient,
    tmp_path: Path,
    workload: str,
    schedulers: tuple[str, ...],
    free: int,
) -> None:
    await benchmarks(
        "run",
        "--workload",
        workload,
        *(arg for name in schedulers for arg in ("--scheduler", name)),
        "--kubeconfig",
        str(plane_state.admin_kubeconfig),
        "--out",
        str(tmp_path),
        "--quiet",
    )
    result, text = replace_result(tmp_path, workload)
    assert set(result["runs"]) == set(schedulers)
    for name, (run,) in result["runs"].items():
        assert run["mode"] == "replace"
        # More pods bound in the window than there were devices free: those of the pods
        # deleted came back (the resourceclaim controller took their allocations off).
        assert run["bound"] > free, name
        assert sum(run["samples"]) >= run["bound"] - run["pending"], name
        # A Binding per pod, give or take the pods in flight at either end of the window
        # (the counts are read as they are, while pods keep coming).
        assert run["requests"].get("POST 201", 0) >= run["bound"] - 2 * run["pending"], name
    assert "throughput_avg ascheduler/kube-scheduler" in result["ratios"]
    assert "Steady state (scheduler_perf's)" in text

    run_id = result["run_id"]
    assert not [c for c in cmdlines() if run_id in c]
    claims = await kube.get("/apis/resource.k8s.io/v1/resourceclaims")
    assert not [c for c in claims["items"] if run_id in c["metadata"]["namespace"]]
    left = await kube.get("/api/v1/nodes", params={"labelSelector": "ascheduler.io/benchmark"})
    assert left["items"] == []


@pytest.mark.skipif(not plane_since(1, 37), reason="scheduler_perf's podgroup families: 1.37")
async def test_a_pod_group_run_binds_every_gang_whole_in_both_modes(
    plane_state: PlaneState, kube: KubeClient, tmp_path: Path
) -> None:
    both = ("--scheduler", "ascheduler", "--scheduler", "kube-scheduler")
    where = ("--kubeconfig", str(plane_state.admin_kubeconfig), "--out", str(tmp_path))
    await benchmarks("run", "--workload", "Smoke_PodGroups_10Nodes", *both, *where, "--quiet")
    for mode in ("steady", "backlog"):
        result, _ = replace_result(tmp_path, "Smoke_PodGroups_10Nodes", mode)
        assert set(result["runs"]) == {"ascheduler", "kube-scheduler"}
        for name, (run,) in result["runs"].items():
            assert sum(run["samples"]) == 30, name  # every member of the 10 gangs of 3
            if mode == "steady":
                assert run["gang_latency_max"] >= run["gang_latency_p50"] > 0, name
    run_id = result["run_id"]
    assert not [c for c in cmdlines() if run_id in c]
    groups = await kube.get(f"/apis/scheduling.k8s.io/{versions.release().workload_api}/podgroups")
    assert not [g for g in groups["items"] if run_id in g["metadata"]["namespace"]]
