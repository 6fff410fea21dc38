"""The standalone benchmark commands end to end at tiny sizes: each starts its own plane, prints
its JSON summary, and leaves no process behind. No timing is asserted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.benchmarks.helpers import benchmarks, cmdlines


async def summary(*args: str) -> list[dict[str, Any]]:
    """The JSON objects `python -m benchmarks ARGS` printed, one a line."""
    out = await benchmarks(*args, timeout=300)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def no_plane_left(prefix: str) -> None:
    assert not [c for c in cmdlines() if f"ascheduler-{prefix}-" in c]


@pytest.mark.usefixtures("plane")  # the binaries are built
async def test_locks_reports_both_policies_and_coalescing() -> None:
    (result,) = await summary("locks", "--nodes", "3", "--pods", "12", "--repeat", "1")
    assert len(result["pods_per_second"]["none"]) == 1
    assert len(result["pods_per_second"]["all"]) == 1
    assert result["pods_per_second"]["none"][0] > 0
    assert result["pods_per_second"]["all"][0] > 0
    # 12 pods on 3 nodes: every hold serves at least one bind.
    (per_hold,) = result["binds_per_hold"]
    assert per_hold >= 1.0
    assert set(result["ratio_all_over_none"]) == {"median", "min", "max"}
    no_plane_left("locks")


@pytest.mark.usefixtures("plane")
async def test_apicost_measures_every_request_of_a_bind() -> None:
    (result,) = await summary("apicost", "--nodes", "3", "--count", "200", "--repeat", "1")
    costs = result["cpu_ms_per_request_median"]["plane_ms"]
    assert set(costs) == {
        "create pod",
        "binding",
        "event",
        "lock + unlock patches (node)",
        "list the node's pods",
        "lock write (Lease)",
    }
    # More binds per hold (per lock write) share its cost: the bound can only rise.
    for key in ("bound_all_over_none_by_binds_per_hold", "bound_leases_by_binds_per_lock_write"):
        bounds = result[key]
        assert bounds["1.0"] <= bounds["2.0"] <= bounds["4.0"] <= bounds["inf"] <= 1.0
    no_plane_left("apicost")


@pytest.mark.usefixtures("plane")
async def test_client_measures_the_pool_and_aiohttp_alike() -> None:
    (result,) = await summary("client", "--count", "50", "--repeat", "2")
    for key in ("cpu_us_per_request", "requests_per_second"):
        assert set(result[key]) == {"pool", "aiohttp"}
        for runs in result[key].values():
            assert len(runs) == 2
            assert all(v > 0 for v in runs)
    no_plane_left("client")


@pytest.mark.usefixtures("plane")
async def test_instances_binds_every_pod_under_both_layouts() -> None:
    (result,) = await summary(
        "instances", "--nodes", "4", "--pods", "16", "--instances", "2", "--repeat", "1"
    )
    for layout in ("lease per node", "lease groups"):
        runs = result[layout]
        assert len(runs["pods_per_second"]) == 1
        assert runs["pods_per_second"][0] > 0
        assert runs["requests_per_pod"][0] >= 1.0  # at least each pod's Binding
    assert set(result["throughput_groups_over_per_node"]) == {"median", "min", "max"}
    no_plane_left("instances")


@pytest.mark.usefixtures("plane")
async def test_sharding_binds_every_pod_with_each_member_count() -> None:
    (result,) = await summary(
        "sharding", "--nodes", "4", "--pods", "16", "--members", "1", "2", "--repeat", "1"
    )
    for members in ("1", "2"):
        runs = result[members]
        assert len(runs["pods_per_second"]) == 1
        assert runs["pods_per_second"][0] > 0
        assert runs["requests_per_pod"][0] >= 1.0  # at least each pod's Binding
    assert set(result["2"]["throughput_over_one"]) == {"median", "min", "max"}
    no_plane_left("sharding")


@pytest.mark.usefixtures("plane")
async def test_memory_reports_both_schedulers() -> None:
    (result,) = await summary("memory", "--nodes", "5", "--pods", "20")
    assert result["ascheduler_rss_bytes"] > 0
    assert result["kube_scheduler_rss_bytes"] > 0
    no_plane_left("mem")


async def test_algorithm_places_every_pod() -> None:
    rows = await summary(
        "algorithm",
        *("--nodes", "20", "60", "--pods", "40", "--initial", "10", "--repeat", "2", "--json"),
        *("--topology-initial", "100"),
    )
    basic = [r for r in rows if r["shape"] == "basic"]
    topology = [r for r in rows if r["shape"] == "topology"]
    preemption = [r for r in rows if r["shape"] == "preemption"]
    assert [r["nodes"] for r in basic] == [20, 60]
    assert [(r["nodes"], r["initial_pods"]) for r in topology] == [(20, 40), (60, 100)]
    # Nodes full of four low-priority pods each; the default number of attempts.
    assert [(r["nodes"], r["initial_pods"], r["pods"]) for r in preemption] == [
        (20, 80, 30),
        (60, 240, 30),
    ]
    for row in basic + topology:
        assert row["pods"] == 40
    for row in rows:
        assert row["us_per_pod_median"] > 0
        assert len(row["us_per_pod_runs"]) == 2
