"""DRA device taints and tolerations (`DRADeviceTaints`: beta and on in 1.36, GA in 1.37;
`DRADeviceTaintRules`: GA and on in 1.37), run by both schedulers on the plane's release.

On a 1.35 plane the gate is off in the API server too: it drops the slices' `taints` and the
claims' `tolerations` on create, so both schedulers see untainted devices (the taints'
scenarios then show 1.35 unchanged, some pods placed where 1.36 refuses them). The
DeviceTaintRule scenario needs the resource.k8s.io/v1 API of 1.37 and is left out before.
"""

from __future__ import annotations

from tests.integration.differential.harness import Json, Scenario
from tests.integration.differential.scenarios import (
    DRIVER,
    THREE,
    claiming,
    device_claim,
    device_class,
    device_slice,
    gpu,
)
from tests.integration.helpers import plane_since

MAINTENANCE = "example.com/maintenance"


def tainted(device: Json, effect: str, value: str = "") -> Json:
    """`device` with a `maintenance` taint of `effect`."""
    return {**device, "taints": [{"key": MAINTENANCE, "value": value, "effect": effect}]}


def tolerating(name: str, *tolerations: Json, count: int = 1, all_: bool = False) -> Json:
    """An `exactly` request of class gpu with `tolerations`."""
    exact: Json = {"deviceClassName": "gpu", "tolerations": list(tolerations)}
    if all_:
        exact["allocationMode"] = "All"
    else:
        exact["allocationMode"], exact["count"] = "ExactCount", count
    return {"name": name, "exactly": exact}


def toleration(effect: str = "", operator: str = "Exists", value: str = "") -> Json:
    out: Json = {"key": MAINTENANCE, "operator": operator}
    if effect:
        out["effect"] = effect
    if value:
        out["value"] = value
    return out


def taint_rule(name: str, pool: str, effect: str, device: str | None = None) -> tuple[str, Json]:
    selector: Json = {"driver": DRIVER, "pool": pool}
    if device is not None:
        selector["device"] = device
    return "DeviceTaintRule", {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": name},
        "spec": {"deviceSelector": selector, "taint": {"key": MAINTENANCE, "effect": effect}},
    }


DRA_TAINTS: list[Scenario] = [
    Scenario(
        "dra taints: a NoSchedule device is passed over, and when it is all that is left",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [tainted(gpu("g0", "t4"), "NoSchedule")], node="a"),
            device_slice("b-gpus", [gpu("g0", "t4")], node="b"),
        ],
        objects=[
            device_claim("first", tolerating("r")),
            device_claim("second", tolerating("r")),
        ],
        pods=[
            # b's untainted device (1.35: a or b, a tie).
            claiming("first", "first"),
            # Only a's tainted device is left: `cannot allocate all claims` (1.35: a).
            claiming("second", "second"),
        ],
    ),
    Scenario(
        "dra taints: tolerations by key, value and effect, NoExecute and a None effect",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [tainted(gpu("g0", "t4"), "NoSchedule", "drain")], node="a"),
            device_slice("b-gpus", [tainted(gpu("g0", "t4"), "NoExecute")], node="b"),
            device_slice("c-gpus", [tainted(gpu("g0", "t4"), "None")], node="c"),
        ],
        objects=[
            device_claim("wrong-value", tolerating("r", toleration(operator="Equal", value="x"))),
            device_claim(
                "right-value", tolerating("r", toleration(value="drain", operator="Equal"))
            ),
            device_claim("plain", tolerating("r")),
            device_claim("no-execute", tolerating("r", toleration("NoExecute"))),
            device_claim("none-left", tolerating("r", toleration("NoSchedule"))),
        ],
        pods=[
            # c's taint has no effect on allocation, a's value is not x: c.
            claiming("wrong-value", "wrong-value"),
            claiming("right-value", "right-value"),  # a
            claiming("plain", "plain"),  # b is NoExecute, the others taken
            claiming("no-execute", "no-execute"),  # b
            claiming("none-left", "none-left"),
        ],
    ),
    Scenario(
        "dra taints: an All request fails where one of its devices is tainted",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice(
                "a-gpus", [gpu("g0", "t4"), tainted(gpu("g1", "t4"), "NoSchedule")], node="a"
            ),
            device_slice("b-gpus", [gpu("g0", "t4")], node="b"),
        ],
        objects=[
            device_claim("every", tolerating("r", all_=True)),
            device_claim("every-tolerated", tolerating("r", toleration(), all_=True)),
        ],
        pods=[
            claiming("every", "every"),  # b (1.35: a or b)
            claiming("every-tolerated", "every-tolerated"),  # a's two
        ],
    ),
    Scenario(
        "dra taints: firstAvailable subrequests tolerate on their own",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [tainted(gpu("g0", "a100"), "NoSchedule")], node="a"),
            device_slice("b-gpus", [gpu("g0", "t4")], node="b"),
        ],
        objects=[
            device_claim(
                "either",
                {
                    "name": "r",
                    "firstAvailable": [
                        {"name": "strict", "deviceClassName": "gpu", "count": 1},
                        {
                            "name": "lenient",
                            "deviceClassName": "gpu",
                            "count": 1,
                            "tolerations": [toleration()],
                        },
                    ],
                },
            ),
            device_claim("strict", tolerating("r")),
        ],
        pods=[
            # Both nodes fit: b by the first subrequest scores above a by the second.
            claiming("either", "either"),
            claiming("strict", "strict"),
        ],
    ),
]

if not plane_since(1, 36):
    # 1.35's API server drops taints and tolerations (DRADeviceTaints off): every device is
    # free, and the scenarios would compare nothing but how the two break ties.
    DRA_TAINTS = []

if plane_since(1, 37):
    DRA_TAINTS += [
        Scenario(
            "dra taints: a DeviceTaintRule taints a pool's device",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="a"),
                device_slice("b-gpus", [gpu("g0", "t4")], node="b"),
                taint_rule("a-g0", "a-gpus", "NoSchedule", device="g0"),
                taint_rule("b-all", "b-gpus", "NoExecute"),
            ],
            objects=[
                device_claim("two", tolerating("r", count=2)),
                device_claim("one", tolerating("r")),
                device_claim("another", tolerating("r")),
                device_claim("tolerant", tolerating("r", toleration("NoExecute"))),
            ],
            pods=[
                claiming("two", "two"),  # a has one device left untainted: none fits
                claiming("one", "one"),  # a's g1
                claiming("another", "another"),
                claiming("tolerant", "tolerant"),  # b, its rule tolerated
            ],
        ),
    ]
