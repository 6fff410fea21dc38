"""Partitionable devices (`DRAPartitionableDevices`, beta and on from 1.36): counter sets in a
slice of their own, partitions consuming them in another slice of the same pool, devices
placed one by one (`perDeviceNodeSelection`). Both schedulers must refuse what would overdraw
a counter set, with the same words. On a 1.35 plane the API server drops these fields (the
gate is off there), so the list is empty.
"""

from __future__ import annotations

from ascheduler.features import Release
from tests.integration.differential.harness import (
    HOSTNAME,
    Json,
    Scenario,
    plane_release,
)
from tests.integration.differential.scenarios import (
    DRIVER,
    THREE,
    claiming,
    device_claim,
    device_class,
    want,
)

PROFILE = f'device.attributes["{DRIVER}"].profile'


def counter_slice(
    name: str, pool: str, sets: dict[str, dict[str, str]], *, node: str | None = None
) -> tuple[str, Json]:
    """The pool's counter sets, in a slice of their own (one of the pool's two slices), on
    `node` or for all nodes."""
    spec: Json = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 2},
        "sharedCounters": [
            {"name": n, "counters": {c: {"value": v} for c, v in counters.items()}}
            for n, counters in sets.items()
        ],
    }
    if node is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": spec}
    return "ResourceSlice", {**body, "metadata": {"name": name}}


def partition(
    name: str, profile: str, counter_set: str, memory: str, *, node: str | None = None
) -> Json:
    """A device consuming `memory` of `counter_set` (placed on `node` in a slice with
    per-device node selection)."""
    out: Json = {
        "name": name,
        "attributes": {"profile": {"string": profile}},
        "consumesCounters": [
            {"counterSet": counter_set, "counters": {"memory": {"value": memory}}}
        ],
    }
    if node is not None:
        out["nodeName"] = node
    return out


def partitions(
    name: str, pool: str, devices: list[Json], *, node: str | None = None, slices: int = 2
) -> tuple[str, Json]:
    """The pool's devices: on `node`, or each on its own (`perDeviceNodeSelection`)."""
    spec: Json = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": slices},
        "devices": devices,
    }
    if node is None:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = node
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": spec}
    return "ResourceSlice", {**body, "metadata": {"name": name}}


def mig(node: str) -> list[tuple[str, Json]]:
    """A MIG-style GPU on `node`: 40Gi of memory as one counter set, a full partition taking
    all of it and two halves taking 20Gi each."""
    pool = f"gpu-{node}"
    return [
        counter_slice(f"{pool}-counters", pool, {"gpu": {"memory": "40Gi"}}, node=node),
        partitions(
            f"{pool}-partitions",
            pool,
            [
                partition("full", "full", "gpu", "40Gi"),
                partition("half-0", "half", "gpu", "20Gi"),
                partition("half-1", "half", "gpu", "20Gi"),
            ],
            node=node,
        ),
    ]


ON_A = {HOSTNAME: "a"}

DRA_COUNTERS: list[Scenario] = []
if plane_release() >= Release(1, 36):
    DRA_COUNTERS += [
        Scenario(
            "dra counters: the full partition first, then no half fits (MIG)",
            nodes=THREE,
            devices=[device_class("gpu"), *mig("a")],
            objects=[device_claim("first", want("r")), device_claim("second", want("r"))],
            pods=[
                # The partitions in slice order: the full one.
                claiming("first", "first"),
                # Both halves are free, their counters are not.
                claiming("second", "second"),
            ],
        ),
        Scenario(
            "dra counters: two halves fit together, a third one and the full one do not",
            nodes=THREE,
            devices=[device_class("gpu"), *mig("b")],
            objects=[
                device_claim("half-one", want("r", "gpu", 1, f'{PROFILE} == "half"')),
                device_claim("half-two", want("r", "gpu", 1, f'{PROFILE} == "half"')),
                device_claim("half-three", want("r", "gpu", 1, f'{PROFILE} == "half"')),
                device_claim("whole", want("r", "gpu", 1, f'{PROFILE} == "full"')),
                device_claim("both-halves", want("r", "gpu", 2)),
            ],
            pods=[
                claiming("half-one", "half-one"),
                claiming("half-two", "half-two"),
                claiming("half-three", "half-three"),
                claiming("whole", "whole"),
                claiming("both-halves", "both-halves"),
            ],
        ),
        Scenario(
            "dra counters: one claim for two devices takes both halves, not the full one",
            nodes=THREE,
            devices=[device_class("gpu"), *mig("c")],
            objects=[
                device_claim("pair", want("r", "gpu", 2)),
                device_claim("after", want("r")),
            ],
            pods=[claiming("pair", "pair"), claiming("after", "after")],
        ),
        Scenario(
            "dra counters: one counter set shared by devices of different nodes",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                counter_slice("shared-counters", "shared", {"link": {"memory": "2"}}),
                partitions(
                    "shared-devices",
                    "shared",
                    [
                        partition("on-a", "half", "link", "1", node="a"),
                        partition("on-b", "full", "link", "2", node="b"),
                        partition("on-c", "half", "link", "1", node="c"),
                    ],
                ),
            ],
            objects=[
                device_claim("first-half", want("r")),
                device_claim("second-half", want("r")),
                device_claim("then-full", want("r", "gpu", 1, f'{PROFILE} == "full"')),
                device_claim("third-half", want("r")),
            ],
            pods=[
                claiming("first-half", "first-half", nodeSelector=ON_A),
                # b's device needs the whole set, a took half: only c's half is left.
                claiming("second-half", "second-half"),
                claiming("then-full", "then-full"),
                claiming("third-half", "third-half"),
            ],
        ),
        Scenario(
            "dra counters: a shared claim's device placed by itself brings its pods to its node",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                counter_slice("placed-counters", "placed", {"link": {"memory": "1"}}),
                partitions(
                    "placed-devices", "placed", [partition("on-b", "full", "link", "1", node="b")]
                ),
            ],
            objects=[device_claim("shared", want("r"))],
            pods=[claiming("first", "shared"), claiming("second", "shared")],
        ),
        Scenario(
            # 1.36 takes counter slices as reaching every node: every node says invalid pools;
            # 1.37 only the node the counter slice (and the devices) reach.
            "dra counters: a partition consuming from a set its pool lacks makes it invalid",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                counter_slice("broken-counters", "broken", {"gpu": {"memory": "40Gi"}}, node="a"),
                partitions(
                    "broken-devices",
                    "broken",
                    [partition("full", "full", "other", "40Gi")],
                    node="a",
                ),
            ],
            objects=[device_claim("wants", want("r"))],
            pods=[claiming("wants", "wants")],
        ),
        Scenario(
            "dra counters: a pool whose counter slice has not come is not allocated from",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                partitions(
                    "waiting-devices",
                    "waiting",
                    [partition("full", "full", "gpu", "40Gi")],
                    node="a",
                ),
            ],
            objects=[device_claim("waits", want("r"))],
            pods=[claiming("waits", "waits")],
        ),
    ]
