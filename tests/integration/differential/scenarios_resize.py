"""Scenarios of effective requests beyond the spec: in-place pod resize (the kubelet's
`containerStatuses[].resources` and `allocatedResources`, an `Infeasible` resize) and
pod-level resources. The existing pods are placed, then given the status a kubelet would
report; the pods after them meet the node as kube-scheduler counts it."""

from __future__ import annotations

from typing import Any

from tests.integration.differential.harness import Json, Scenario, fake_node, pause

INFEASIBLE: Json = {
    "type": "PodResizePending",
    "status": "True",
    "reason": "Infeasible",
    "message": "Node didn't have enough capacity",
}


def resized(
    cpu: str | None = None,
    memory: str | None = None,
    *,
    allocated_cpu: str | None = None,
    container: str = "main",
    init: bool = False,
    infeasible: bool = False,
) -> Json:
    """A status fragment: the kubelet runs `container` at `cpu`/`memory` (actuated) and has
    admitted `allocated_cpu`; `init` for a sidecar's status."""
    actuated = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    entry: Json = {"name": container, "resources": {"requests": actuated}}
    if allocated_cpu is not None:
        entry["allocatedResources"] = {"cpu": allocated_cpu}
    out: Json = {"initContainerStatuses" if init else "containerStatuses": [entry]}
    if infeasible:
        out["conditions"] = [INFEASIBLE]
    return out


def pod_level(name: str, requests: Json, *containers: Json, **kw: Any) -> Json:
    """A pod whose `spec.resources.requests` replace its containers' aggregate."""
    body = pause(name, **kw)
    body["spec"]["containers"] = [
        {"name": f"c{i}", "image": "registry.k8s.io/pause:3.10", **c}
        for i, c in enumerate(containers)
    ]
    body["spec"]["resources"] = {"requests": requests}
    return body


def containers(name: str, *specs: tuple[str, str], node: str, init: str | None = None) -> Json:
    """A pod of containers (name, cpu) at 64Mi each; `init` names a plain init container
    (cpu 1) run before them."""
    body = pause(name, node=node)
    body["spec"]["containers"] = [
        {
            "name": c,
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
        }
        for c, cpu in specs
    ]
    if init is not None:
        body["spec"]["initContainers"] = [
            {
                "name": init,
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
            }
        ]
    return body


def running(container: str, cpu: str) -> Json:
    """A container status: resized to, and running at, `cpu`."""
    return {
        "name": container,
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
        "allocatedResources": {"cpu": cpu, "memory": "64Mi"},
    }


#: The profile of the scenarios for what a release counts: BalancedAllocation's formula is a
#: release's too (it scores the change in balance from 1.36), and is not what they compare.
COUNTING_ONLY: Json = {
    "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}}
}


def requesting(**requests: str) -> Json:
    return {"resources": {"requests": requests}} if requests else {}


RESIZE_SCENARIOS: list[Scenario] = [
    Scenario(
        "resize: a resize up in progress holds the allocated requests",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="2")],
        existing=[pause("old", node="n1", cpu="1")],
        statuses={"old": resized("1", "128Mi", allocated_cpu="3")},
        pods=[pause("two", cpu="2"), pause("one-and-a-half", cpu="1500m")],
    ),
    Scenario(
        "resize: a resize down not yet actuated holds what runs",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="3")],
        existing=[pause("old", node="n1", cpu="500m")],
        statuses={"old": resized("3", "128Mi", allocated_cpu="500m")},
        pods=[pause("big", cpu="2500m"), pause("small", cpu="800m")],
    ),
    Scenario(
        "resize: an infeasible resize holds only what runs, not the spec",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="1")],
        existing=[pause("old", node="n1", cpu="3")],
        statuses={"old": resized("1", "128Mi", allocated_cpu="1", infeasible=True)},
        pods=[pause("fits-beside", cpu="2500m"), pause("then-small", cpu="1")],
    ),
    Scenario(
        "resize: a sidecar's resize counts",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="2")],
        existing=[
            pause(
                "old",
                node="n1",
                cpu="500m",
                initContainers=[
                    {
                        "name": "side",
                        "image": "registry.k8s.io/pause:3.10",
                        "restartPolicy": "Always",
                        "resources": {"requests": {"cpu": "500m"}},
                    }
                ],
            )
        ],
        statuses={"old": resized("2", allocated_cpu="2", container="side", init=True)},
        pods=[pause("two", cpu="2"), pause("one", cpu="1")],
    ),
    Scenario(
        "pod-level resources: requests replace the containers', defaults only where neither "
        "level asks",
        nodes=[fake_node("n1", cpu="4", memory="2Gi"), fake_node("n2", cpu="4", memory="2Gi")],
        existing=[
            # Scored on its node at 1 cpu and 100Mi (no default memory for c1: c0 asks for
            # some), which puts the next pod on n1; counting 200Mi more for c1 would put it
            # on n2.
            pod_level("levelled", {"cpu": "1"}, requesting(memory="100Mi"), {}, node="n1"),
            pause("plain", node="n2", cpu="1", memory="200Mi"),
        ],
        pods=[
            pause("small", cpu="200m", memory="1Gi"),
            # Fit scores the pod being scheduled by its containers alone (each defaulted):
            # 600m and 400Mi here, though it holds 2500m once placed.
            pod_level("wide", {"cpu": "2500m"}, requesting(cpu="500m"), {}),
            pod_level("mem-only", {"memory": "512Mi"}, {}, {}),
            pod_level("too-wide", {"cpu": "3500m"}, requesting(cpu="100m")),
        ],
    ),
    Scenario(
        # 1.35 and 1.36 take each container's largest (2 + 2 = 4 cpus, n1 full); 1.37 the
        # largest of the whole-pod sums (spec 3, running 3: one cpu free on n1).
        "resize: containers resized opposite ways hold the largest sum (1.37), not the sum "
        "of the largest",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="1500m")],
        existing=[containers("old", ("a", "2"), ("b", "1"), node="n1")],
        statuses={"old": {"containerStatuses": [running("a", "1"), running("b", "2")]}},
        pods=[pause("one", cpu="1")],
        profile=COUNTING_ONLY,
    ),
    Scenario(
        # A plain init container's status counts from 1.37 (3 cpus held on n1), not before
        # (1 cpu: the spec's).
        "resize: a plain init container's status counts (1.37)",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="2")],
        existing=[containers("old", ("main", "1"), node="n1", init="setup")],
        statuses={"old": {"initContainerStatuses": [running("setup", "3")]}},
        pods=[pause("two", cpu="2")],
        profile=COUNTING_ONLY,
    ),
    Scenario(
        # With InPlacePodLevelResourcesVerticalScaling (on from 1.36) the pod-level requests
        # follow the pod's status: 3 cpus held on n1 instead of the spec's 1.
        "pod-level resources: requests follow the pod's resize status (1.36)",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="2")],
        existing=[pod_level("levelled", {"cpu": "1"}, requesting(memory="100Mi"), node="n1")],
        statuses={
            "levelled": {
                "resources": {"requests": {"cpu": "3", "memory": "100Mi"}},
                "allocatedResources": {"cpu": "3", "memory": "100Mi"},
            }
        },
        pods=[pause("two", cpu="2")],
        profile=COUNTING_ONLY,
    ),
]
