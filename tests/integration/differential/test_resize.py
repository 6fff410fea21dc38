"""An in-place resize that ends, run by kube-scheduler and by ascheduler: a pod refused
while a running pod's resize held the node's room is placed once the kubelet reports the
resize done, woken by that status update alone (the unschedulable pods' periodic flush is
minutes away)."""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.differential.harness import (
    ASCHEDULER,
    DECISION_TIMEOUT,
    KUBE,
    Runner,
    Scenario,
    fake_node,
    pause,
)
from tests.integration.differential.scenarios_resize import resized

SCENARIO = Scenario(
    "resize: its end wakes the pod waiting for room",
    nodes=[fake_node("n1", cpu="4")],
    existing=[pause("old", node="n1", cpu="1")],
    statuses={"old": resized("1", "128Mi", allocated_cpu="3")},
    pods=[pause("waits", cpu="2")],
    dry_run=False,
)


async def _bound_node(runner: Runner, namespace: str, name: str) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DECISION_TIMEOUT
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    while loop.time() < deadline:
        node = (await runner.kube.get(path))["spec"].get("nodeName")
        if node:
            return str(node)
        await asyncio.sleep(0.1)
    return ""


@pytest.mark.parametrize(("run", "scheduler"), [("k", KUBE), ("a", ASCHEDULER)])
async def test_a_finished_resize_wakes_the_pod_it_kept_out(
    runner: Runner, run: str, scheduler: str
) -> None:
    s = SCENARIO
    await runner.create_nodes(s)
    try:
        outcomes = await runner.run(s, run, scheduler)
        waits = outcomes["waits"]
        assert not waits.bound, f"{scheduler}: placed beside a resize holding 3 of 4 cpus"
        assert "Insufficient cpu" in waits.message
        ns = runner.namespace(s, run, "default")
        # The kubelet finished resizing back to the spec: 1 cpu held, 3 free.
        await runner.write_status(s, run, s.existing[0], resized("1", "128Mi", allocated_cpu="1"))
        node = await _bound_node(runner, ns, "waits")
        assert runner.logical_node(s, node) == "n1", f"{scheduler}: not placed once room was freed"
    finally:
        await runner.cleanup(s, run)
        await runner.delete_nodes(s)
