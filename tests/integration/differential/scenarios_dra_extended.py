"""Extended resources backed by DRA (DRAExtendedResource): a pod asking for `example.com/gpu`,
which a DeviceClass's `extendedResourceName` backs, gets devices of that class on nodes that
advertise none of it (1.36 and 1.37, the gate on); a node advertising it natively serves it the
device-plugin way; with too few devices the pods wait with kube-scheduler's message. At 1.35
the gate is off: every such pod stays `Insufficient example.com/gpu` on both schedulers.
"""

from __future__ import annotations

from tests.integration.differential.harness import Json, Scenario, fake_node, pause
from tests.integration.differential.scenarios import (
    DRIVER,
    claiming,
    device_claim,
    device_slice,
    gpu,
    want,
)

GPU = "example.com/gpu"


def backing_class(name: str) -> tuple[str, Json]:
    return "DeviceClass", {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {
            "selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
            "extendedResourceName": GPU,
        },
    }


def wanting(name: str, count: int) -> Json:
    return pause(name, extended={GPU: str(count)})


DRA_EXTENDED: list[Scenario] = [
    Scenario(
        "dra extended: example.com/gpu served by the devices of the class backing it",
        nodes=[fake_node("a"), fake_node("b"), fake_node("c")],
        devices=[
            backing_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4")], node="a"),
            device_slice("b-gpus", [gpu("g0", "a100"), gpu("g1", "a100")], node="b"),
        ],
        pods=[
            wanting("two", 2),  # only b has two
            wanting("one", 1),  # b is taken: a's one
            wanting("none-left", 1),  # every device is taken
            wanting("too-many", 3),  # no node has three
        ],
    ),
    Scenario(
        "dra extended: a node advertising example.com/gpu beside one with devices",
        nodes=[
            # Much more cpu: LeastAllocated puts the first pod on the native node, on every
            # release's balance.
            fake_node("native", cpu="64", memory="64Gi", extended={GPU: "1"}),
            fake_node("devices"),
            fake_node("bare"),
        ],
        devices=[
            backing_class("gpu"),
            device_slice("devices-gpus", [gpu("g0", "t4")], node="devices"),
        ],
        pods=[
            wanting("first", 1),  # the native node (Fit counts it there)
            wanting("second", 1),  # the device
            # Fit refuses the native node, DynamicResources the other two.
            wanting("third", 1),
            wanting("two-native", 2),  # more than the native node has, no node has two devices
        ],
    ),
    Scenario(
        "dra extended: example.com/gpu beside a claim of the pod's own",
        nodes=[fake_node("a"), fake_node("b"), fake_node("c")],
        devices=[
            backing_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="a"),
            device_slice("b-gpus", [gpu("g0", "t4")], node="b"),
        ],
        objects=[device_claim("own", want("r")), device_claim("own-too", want("r"))],
        pods=[
            # Its claim and its extended resource need two devices: only a has them.
            claiming("both", "own", extended={GPU: "1"}),
            # b's one device is not enough for both; a's are taken.
            claiming("both-again", "own-too", extended={GPU: "1"}),
        ],
    ),
]
