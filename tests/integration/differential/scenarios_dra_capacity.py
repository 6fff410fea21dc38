"""Consumable capacity (`DRAConsumableCapacity`, beta and on from 1.36): devices that allow
multiple allocations split by what the claims ask of their capacity, request policies rounding
the asks up, and the `distinctAttribute` constraint.

On 1.35 the API server drops the fields its gate keeps off: the same devices are then held
alone, and the split scenarios check that nothing else changed. The scenarios that need the
fields to exist (fractional ranges from 1.37, `distinctAttribute` from 1.36) are listed only
on those releases' planes.
"""

from __future__ import annotations

from typing import Any

from ascheduler.features import Release
from tests.integration.differential.harness import HOSTNAME, Json, Scenario, plane_release
from tests.integration.differential.scenarios import (
    DRIVER,
    THREE,
    claiming,
    device_class,
    device_slice,
)

CAPACITY: list[Scenario] = []

KIND = f'device.attributes["{DRIVER}"].kind'


def shared(name: str, kind: str, policy: Json | None = None, **capacity: str) -> Json:
    """A device that allows multiple allocations, with `capacity` (name -> value) under
    `policy` (name -> requestPolicy)."""
    return {
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": {"kind": {"string": kind}, "uuid": {"string": f"{kind}-{name}"}},
        "capacity": {
            k: {"value": v, **({"requestPolicy": policy[k]} if policy and k in policy else {})}
            for k, v in capacity.items()
        },
    }


def plain(name: str, kind: str, **capacity: str) -> Json:
    return {
        "name": name,
        "attributes": {"kind": {"string": kind}},
        "capacity": {k: {"value": v} for k, v in capacity.items()},
    }


def asking(name: str, kind: str | None = None, **capacity: str) -> Json:
    """An `exactly` request for one device (of `kind`) asking `capacity`."""
    exact: Json = {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}
    if kind is not None:
        exact["selectors"] = [{"cel": {"expression": f'{KIND} == "{kind}"'}}]
    if capacity:
        exact["capacity"] = {"requests": dict(capacity)}
    return {"name": name, "exactly": exact}


def capacity_claim(name: str, *requests: Json, distinct: str | None = None) -> tuple[str, Json]:
    spec: Json = {"devices": {"requests": list(requests)}}
    if distinct is not None:
        spec["devices"]["constraints"] = [{"distinctAttribute": distinct}]
    return "resource.k8s.io/v1/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def on(node: str) -> dict[str, Any]:
    return {"nodeSelector": {HOSTNAME: node}}


CAPACITY += [
    Scenario(
        "dra capacity: a shared device split by capacity between two pods, a third refused",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [shared("g0", "gpu", memory="40Gi")], node="a"),
            device_slice("b-gpus", [plain("g0", "gpu", memory="8Gi")], node="b"),
        ],
        objects=[
            capacity_claim("big", asking("r", memory="30Gi")),
            capacity_claim("small", asking("r", memory="10Gi")),
            capacity_claim("more", asking("r", memory="12Gi")),
            capacity_claim("whole", asking("r")),
        ],
        pods=[
            # Only a's shared device has 30Gi (b's holds 8Gi). (Placed on a: on 1.35, where
            # the asks are dropped, a and b would tie.)
            claiming("big", "big", **on("a")),
            # a's last 10Gi (b's 8Gi are too few).
            claiming("small", "small"),
            # a is full, b too small: refused everywhere.
            claiming("more", "more"),
            # No capacity asked: a whole device; a's has nothing left, b's is free.
            claiming("whole", "whole"),
        ],
    ),
    Scenario(
        "dra capacity: request policies round the asks up (validRange step, validValues)",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice(
                "a-gpus",
                [
                    shared(
                        "g0",
                        "ranged",
                        {
                            "memory": {
                                "default": "2Gi",
                                "validRange": {"min": "2Gi", "max": "16Gi", "step": "2Gi"},
                            }
                        },
                        memory="16Gi",
                    )
                ],
                node="a",
            ),
            device_slice(
                "b-gpus",
                [
                    shared(
                        "g0",
                        "listed",
                        {"memory": {"default": "1Gi", "validValues": ["1Gi", "4Gi", "8Gi"]}},
                        memory="8Gi",
                    )
                ],
                node="b",
            ),
        ],
        objects=[
            # 3Gi -> 4Gi, 5Gi -> 6Gi, 7Gi -> 8Gi: 18Gi, past a's 16Gi (15Gi unrounded).
            capacity_claim("r3", asking("r", "ranged", memory="3Gi")),
            capacity_claim("r5", asking("r", "ranged", memory="5Gi")),
            capacity_claim("r7", asking("r", "ranged", memory="7Gi")),
            capacity_claim("r6", asking("r", "ranged", memory="6Gi")),
            capacity_claim("over", asking("r", "ranged", memory="17Gi")),
            # 2Gi -> 4Gi twice: b's 8Gi are gone; the default (1Gi) no longer fits.
            capacity_claim("l2", asking("r", "listed", memory="2Gi")),
            capacity_claim("l2b", asking("r", "listed", memory="2Gi")),
            capacity_claim("ldefault", asking("r", "listed")),
        ],
        pods=[
            claiming("r3", "r3"),
            claiming("r5", "r5"),
            claiming("r7", "r7"),
            claiming("r6", "r6"),  # 4 + 6 + 6 = 16Gi: fits exactly
            claiming("over", "over"),  # above the range's max
            claiming("l2", "l2"),
            claiming("l2b", "l2b"),
            claiming("ldefault", "ldefault"),
        ],
    ),
]

if plane_release() >= Release(1, 36):
    CAPACITY += [
        Scenario(
            "dra capacity: distinctAttribute keeps a claim's requests on different devices",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                device_slice(
                    "a-gpus",
                    [shared("g0", "gpu", memory="40Gi"), shared("g1", "gpu", memory="40Gi")],
                    node="a",
                ),
                device_slice("b-gpus", [shared("g0", "gpu", memory="40Gi")], node="b"),
            ],
            objects=[
                capacity_claim(
                    "apart",
                    asking("x", memory="4Gi"),
                    asking("y", memory="4Gi"),
                    distinct=f"{DRIVER}/uuid",
                ),
                capacity_claim("together", asking("x", memory="4Gi"), asking("y", memory="4Gi")),
                capacity_claim(
                    "apart-on-b",
                    asking("x", memory="4Gi"),
                    asking("y", memory="4Gi"),
                    distinct=f"{DRIVER}/uuid",
                ),
            ],
            pods=[
                # Two devices with different uuids: only a has them.
                claiming("apart", "apart"),
                # Without the constraint both requests share b's one device.
                claiming("together", "together", **on("b")),
                claiming("apart-on-b", "apart-on-b", **on("b")),
            ],
        ),
    ]


def fractional(name: str, gates: str, comment: str) -> Scenario:
    """Five pods asking 300m of a device's 2 cores, in steps of 250m from 250m."""
    policy = {
        "cores": {"default": "500m", "validRange": {"min": "250m", "max": "2", "step": "250m"}}
    }
    return Scenario(
        f"dra capacity: a fractional range, {comment} (1.37)",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [shared("g0", "cores", policy, cores="2")], node="a"),
        ],
        objects=[capacity_claim(f"c{i}", asking("r", "cores", cores="300m")) for i in range(5)],
        pods=[claiming(f"c{i}", f"c{i}") for i in range(5)],
        feature_gates=gates,
    )


if plane_release() >= Release(1, 37):
    CAPACITY += [
        # DRAFractionalCapacityRange is off by default (on only from
        # --min-compatibility-version 1.37): 300m, the step and the min count as whole
        # units, each pod takes 1 core, two fit.
        fractional("default", "", "in whole units by default"),
        # On: thousandths, 300m -> 500m, four fit in 2 cores, the fifth does not.
        fractional("on", "DRAFractionalCapacityRange=true", "in thousandths with its gate on"),
    ]
