"""scheduler_perf's DRA steady state (mode `replace`): the claims allocated before a run
spread over the nodes, the workloads' slices, modes and controllers, the ceiling taking
devices back, and the tables of a steady-state result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from benchmarks import report
from benchmarks.ceiling_dra import ClaimWriter, Devices, allocation
from benchmarks.steadystate import init_claim, node_devices, prefill
from benchmarks.summary import ratios, summarise
from benchmarks.workloads import (
    CLAIM_TEMPLATE,
    COUNTER_SET,
    DRA_DRIVER,
    REPLACE,
    WORKLOADS,
    claim_template,
    template_pod,
)


def slices_of(workload: str, nodes: list[str]) -> list[dict[str, Any]]:
    return [s for n in nodes for s in WORKLOADS[workload].slices(n)]


def test_claims_allocated_before_go_to_each_node_in_turn_and_leave_the_rest_free() -> None:
    nodes = [f"n{i}" for i in range(4)]
    devices = node_devices(
        slices_of("SteadyStateResourceClaimTemplate_full_500Nodes", nodes), nodes
    )
    assert devices["n0"][:2] == [
        (DRA_DRIVER, "n0", "instance-0"),
        (DRA_DRIVER, "n0", "instance-1"),
    ]
    plan = prefill(devices, 4 * 10 - 3, 1)
    held = [(node, d) for node, got in plan for d in got]
    assert len(set(held)) == 37  # no device twice
    per_node = {n: sum(1 for node, _ in held if node == n) for n in nodes}
    # the three left free are on three nodes, one each: the last round stops short
    assert per_node == {"n0": 10, "n1": 9, "n2": 9, "n3": 9}
    with pytest.raises(ValueError, match="41 claims"):
        prefill(devices, 41, 1)


def test_a_partitionable_claim_takes_both_devices_of_one_node() -> None:
    nodes = ["a", "b", "c"]
    slices = slices_of("SteadyStatePartitionable_half_500Nodes", nodes)
    counters, parts = slices[0]["spec"], slices[1]["spec"]
    assert counters["sharedCounters"][0]["name"] == COUNTER_SET
    assert "devices" not in counters
    assert (
        counters["pool"] == parts["pool"] == {"name": "a", "generation": 0, "resourceSliceCount": 2}
    )
    consumed = [set(d["consumesCounters"][0]["counters"]) for d in parts["devices"]]
    assert consumed == [{"counter1", "counter2"}, {"counter3", "counter4"}]
    plan = prefill(node_devices(slices, nodes), 2, 2)
    assert plan == [
        ("a", [(DRA_DRIVER, "a", "device-1"), (DRA_DRIVER, "a", "device-2")]),
        ("b", [(DRA_DRIVER, "b", "device-1"), (DRA_DRIVER, "b", "device-2")]),
    ]
    with pytest.raises(ValueError, match="4 claims of 2 devices"):
        prefill(node_devices(slices, nodes), 4, 2)


def test_devices_of_other_nodes_and_drivers_are_left_alone() -> None:
    mine = WORKLOADS["SteadyStateResourceClaimTemplate_empty_500Nodes"].slices("mine")
    theirs = WORKLOADS["SteadyStateResourceClaimTemplate_empty_500Nodes"].slices("theirs")
    other_driver = {"spec": {**mine[0]["spec"], "driver": "gpu.example.com"}}
    found = node_devices([*mine, *theirs, other_driver], {"mine"})
    assert list(found) == ["mine"]
    assert len(found["mine"]) == 10


def test_the_pods_claims_come_from_the_template_and_the_early_ones_ask_alike() -> None:
    pod = template_pod("r-3", "sched", 3)
    assert pod["spec"]["resourceClaims"] == [
        {"name": "resource", "resourceClaimTemplateName": CLAIM_TEMPLATE}
    ]
    assert pod["spec"]["containers"][0]["resources"]["claims"] == [{"name": "resource"}]
    template = claim_template(2)["spec"]["spec"]["devices"]["requests"]
    early = init_claim(7, 2)
    assert early["metadata"]["name"] == "init-7"
    assert early["spec"]["devices"]["requests"] == template


def test_steady_state_workloads_run_in_mode_replace_with_the_claim_controllers() -> None:
    steady = WORKLOADS["SteadyStateResourceClaimTemplate_half_500Nodes"]
    assert steady.modes() == (REPLACE,)
    assert steady.steady_state is not None
    assert steady.steady_state.init_claims == 2500
    assert "resourceclaim-controller" in steady.controllers()
    assert "garbage-collector-controller" in steady.controllers()
    basic = WORKLOADS["SchedulingBasic_500Nodes_1000Pods"]
    assert basic.modes() == ("steady", "backlog")
    assert basic.controllers() == ()


def claim(name: str, node: str, devices: list[str]) -> dict[str, Any]:
    requests = ["req-0"] * len(devices)
    held = [(DRA_DRIVER, node, d) for d in devices]
    return {
        "metadata": {"namespace": "ns", "name": name},
        "status": {"allocation": allocation(requests, held, node)},
    }


async def test_the_ceiling_waits_for_devices_and_takes_back_an_allocation_taken_off() -> None:
    slices = WORKLOADS["SteadyStateResourceClaimTemplate_empty_500Nodes"].slices("n0")
    devices = Devices(["n0"], slices, set())
    assert devices.take(10) is not None
    assert devices.take(1) is None
    freed = devices.freed
    devices.give_back(claim("c", "n0", ["instance-3"]))
    assert freed.is_set()
    assert devices.take_on("n0", 1) == [(DRA_DRIVER, "n0", "instance-3")]
    # a claim of a node the ceiling does not hand out changes nothing
    devices.give_back(claim("c", "elsewhere", ["instance-3"]))
    assert devices.take(1) is None

    # a pod placed while none is free waits until one comes back (for a while)
    writer = ClaimWriter(None, None, ["n0"])  # type: ignore[arg-type]  # no requests made
    writer.devices = devices
    wanted = {**init_claim(0, 1), "metadata": {"namespace": "ns", "name": "c0"}}
    writer.informer.claims[("ns", "c0")] = wanted
    pod = {"metadata": {"namespace": "ns", "name": "p"}}
    assert await writer.place(pod, ["c0"], wait=0.01) is None
    placing = asyncio.create_task(writer.place(pod, ["c0"]))
    await asyncio.sleep(0)
    assert not placing.done()
    devices.give_back(claim("d", "n0", ["instance-5"]))
    placement = await placing
    assert placement is not None
    assert placement.node == "n0"
    assert placement.claims == [(wanted, [(DRA_DRIVER, "n0", "instance-5")])]


def replace_run(scheduler: str, pods_per_s: float, bound: int = 300) -> dict[str, Any]:
    return {
        "scheduler": scheduler,
        "mode": REPLACE,
        "pods": bound,
        "bound": bound,
        "finished": True,
        "throughput_avg": pods_per_s,
        "throughput_p50": pods_per_s,
        "throughput_p90": pods_per_s,
        "throughput_p99": pods_per_s,
        "cpu_seconds": 1.5,
        "peak_rss_bytes": 100 * 2**20,
        "requests_per_pod": 5.0,
        "requests": {"POST 201": bound},
        "pending": 10,
        "init_claims": 2500,
        "samples": [10, 10],
    }


def test_a_steady_state_result_is_tabled_without_latencies() -> None:
    runs = {
        "ascheduler": [replace_run("ascheduler", 90.0)],
        "kube-scheduler": [replace_run("kube-scheduler", 30.0)],
    }
    result = {
        "workload": "SteadyStateResourceClaimTemplate_half_500Nodes",
        "mode": REPLACE,
        "description": "d",
        "date": "2026-11-27T20:00:00+00:00",
        "repeat": 1,
        "machine": {"cpus": 2},
        "versions": {"kubernetes": "v1.37.2"},
        "plane": "local",
        "summary": {w: summarise(r) for w, r in runs.items()},
        "ratios": ratios(runs, REPLACE),
    }
    assert result["ratios"]["throughput_avg ascheduler/kube-scheduler"]["median"] == 3.0
    text = report.markdown(result)
    assert "Steady state (scheduler_perf's)" in text
    assert "latency" not in text
    assert "| ascheduler | 90 |" in text
    table = report.readme_table([result], REPLACE)
    assert "p99 latency" not in table
    assert "| SteadyStateResourceClaimTemplate_half_500Nodes | 90 | 30 |" in table
    assert "--mode replace" in table
