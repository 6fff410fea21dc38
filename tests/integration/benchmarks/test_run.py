"""The harness end to end at its smoke size, on the session's plane: every scheduler binds every
pod, the result files are written, and nothing it started is left behind. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ascheduler.devcluster.plane import PlaneState
from ascheduler.kube import KubeClient
from tests.integration.benchmarks.helpers import benchmarks, cmdlines


def written(out: Path) -> dict[str, Any]:
    """The run's JSON, after checking its Markdown and PNG siblings exist."""
    (result_file,) = out.glob("*-Smoke_10Nodes_40Pods.json")
    assert result_file.with_suffix(".png").read_bytes()[:4] == b"\x89PNG"
    assert "| kube-scheduler |" in result_file.with_suffix(".md").read_text()
    result: dict[str, Any] = json.loads(result_file.read_text())
    return result


async def test_smoke_run_of_every_scheduler(
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
    result = written(tmp_path)
    assert set(result["runs"]) == {"ascheduler", "kube-scheduler", "ceiling"}
    for name, (run,) in result["runs"].items():
        assert run["pods"] == 40
        assert sum(run["samples"]) == 40, name  # every measured pod was seen bound
        assert run["requests_per_pod"] >= 1.0, name  # at least its Binding, per pod
        assert run["peak_rss_bytes"] > 0
    assert "throughput_avg ascheduler/kube-scheduler" in result["ratios"]
    assert "throughput_avg ascheduler/ceiling" in result["ratios"]

    run_id = result["run_id"]
    assert not [c for c in cmdlines() if run_id in c]
    left = await kube.get("/api/v1/nodes", params={"labelSelector": "ascheduler.io/benchmark"})
    assert left["items"] == []
    pods = await kube.get("/api/v1/pods")
    assert not [p for p in pods["items"] if run_id in p["spec"].get("schedulerName", "")]
