"""Scenarios for the scores themselves: which plugins kube-scheduler skips at PreScore and
which it scores on every node even where nothing applies (TaintToleration's 100 x 3 on
untainted nodes, ImageLocality's and DynamicResources' 0), held to its logged numbers by the
harness (`scores.py`); and NodeResourcesFit's scoring strategies with BalancedAllocation over
an extended resource, in profiles both schedulers run. Each pod meets the same base state
(`independent`)."""

from __future__ import annotations

from tests.integration.differential.harness import HOSTNAME, ZONE, Scenario, fake_node, pause
from tests.integration.differential.scenarios import MB, WEB, pod_affinity, spread, term

IMAGE = "docker.io/library/held:1"
INIT_IMAGE = "docker.io/library/init:1"
#: Zoned nodes of different sizes, one holding images; no node has a taint.
NODES = [
    fake_node("a", zone="z1", cpu="4", images=[(IMAGE, 600 * MB), (INIT_IMAGE, 300 * MB)]),
    fake_node("b", zone="z1", cpu="6"),
    fake_node("c", zone="z2", cpu="8", memory="8Gi"),
]
PREFERS_Z2 = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 7,
                "preference": {
                    "matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z2"]}]
                },
            }
        ]
    }
}
MAGNET = {"app": "magnet"}

SCORING = [
    Scenario(
        "scores: PreScore skips as kube-scheduler's, and plugins that never skip",
        nodes=NODES,
        existing=[
            pause("w0", labels=WEB, node="a"),
            # An existing pod's preferred term draws pods it matches, even those without
            # terms of their own (InterPodAffinity scores them).
            pause("m0", node="b", affinity=pod_affinity(preferred=[(9, term("magnet"))])),
        ],
        pods=[
            # Requests, no terms: TaintToleration 300 everywhere, ImageLocality and
            # DynamicResources 0, BalancedAllocation scored; NodeAffinity, InterPodAffinity,
            # PodTopologySpread and VolumeBinding skipped.
            pause("plain"),
            # Nothing requested: BalancedAllocation skipped too.
            pause("best-effort", cpu="0", memory="0"),
            # Images (an init container's counted too) one node holds.
            pause(
                "images",
                image=IMAGE,
                initContainers=[{"name": "init", "image": INIT_IMAGE}],
            ),
            pause("prefers-zone", affinity=PREFERS_Z2),
            # A preferred pod-affinity term no pod matches: InterPodAffinity skipped.
            pause("affinity-to-nobody", affinity=pod_affinity(preferred=[(5, term("nobody"))])),
            pause(
                "anti-affinity-to-web",
                affinity=pod_affinity(preferred_anti=[(4, term("web", key=HOSTNAME))]),
            ),
            pause("drawn-by-existing", labels=MAGNET),
            pause(
                "spread-anyway",
                labels=WEB,
                topologySpreadConstraints=[spread(action="ScheduleAnyway")],
            ),
        ],
        independent=True,
    ),
]

GPU = "example.com/gpu"
#: Sizes that make fractions uneven, an extended resource on two nodes of three.
SHAPES = [
    fake_node("small", cpu="3", memory="5Gi", extended={GPU: "2"}),
    fake_node("mid", cpu="7", memory="9Gi"),
    fake_node("big", cpu="13", memory="31Gi", extended={GPU: "8"}),
]
LOADED = [
    pause("l0", node="small", cpu="1100m", memory="1Gi", extended={GPU: "1"}),
    pause("l1", node="big", cpu="2500m", memory="7Gi"),
    pause("l2", node="mid", cpu="300m", memory="3Gi"),
]
ASKING = [
    pause("cpu", cpu="900m", memory="200Mi"),
    pause("memory", cpu="100m", memory="3Gi"),
    pause("gpu", cpu="500m", memory="1Gi", extended={GPU: "1"}),
    pause("nothing", cpu="0", memory="0"),
]
RESOURCES = [
    {"name": "cpu", "weight": 2},
    {"name": "memory", "weight": 1},
    {"name": GPU, "weight": 3},
]


def strategy(kind: str, **extra: object) -> dict[str, object]:
    """A profile: NodeResourcesFit scoring with `kind` over RESOURCES, BalancedAllocation
    over the same resources (whose weights must be 1 there)."""
    balanced = [{**r, "weight": 1} for r in RESOURCES]
    return {
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {"scoringStrategy": {"type": kind, "resources": RESOURCES, **extra}},
            },
            {"name": "NodeResourcesBalancedAllocation", "args": {"resources": balanced}},
        ]
    }


SCORING += [
    Scenario(
        "scores: MostAllocated and BalancedAllocation over an extended resource",
        nodes=SHAPES,
        existing=LOADED,
        pods=ASKING,
        profile=strategy("MostAllocated"),
        independent=True,
    ),
    Scenario(
        "scores: RequestedToCapacityRatio's shape over an extended resource",
        nodes=SHAPES,
        existing=LOADED,
        pods=ASKING,
        profile=strategy(
            "RequestedToCapacityRatio",
            requestedToCapacityRatio={
                "shape": [
                    {"utilization": 0, "score": 10},
                    {"utilization": 40, "score": 3},
                    {"utilization": 100, "score": 7},
                ]
            },
        ),
        independent=True,
    ),
]
