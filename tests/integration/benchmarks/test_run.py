"""The harness end to end at its smoke size, on the session's plane, in both modes: every
scheduler (the Go ceiling built on first use) binds every pod, the result files are written,
and nothing it started is left behind. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from tests.integration.benchmarks.helpers import benchmarks, cmdlines


def written(out: Path, mode: str) -> dict[str, Any]:
    """The run's JSON for `mode`, after checking its Markdown and PNG siblings exist."""
    (result_file,) = out.glob(f"*-Smoke_10Nodes_40Pods-{mode}.json")
    assert result_file.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert "| kube-scheduler |" in result_file.with_suffix(".md").read_text()
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
