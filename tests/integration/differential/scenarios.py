"""The scenarios kube-scheduler and ascheduler are compared on: every field and message of
every plugin in the default profile. Nodes differ in size so that scores rarely tie; where
they do, the dry run says so and the harness reports the tie instead of a disagreement."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tests.integration.differential.harness import (
    HOSTNAME,
    ZONE,
    Json,
    Scenario,
    fake_node,
    pause,
)
from tests.integration.differential.scenarios_affinity import AFFINITY_SCENARIOS
from tests.integration.differential.scenarios_resize import RESIZE_SCENARIOS
from tests.integration.differential.scenarios_workloads import (
    GANG_GATES,
    POD_GROUPS,
    member,
    workload,
)
from tests.integration.helpers import plane_since, stateful_set_body

MB = 1024 * 1024


def spread(key: str = ZONE, skew: int = 1, action: str = "DoNotSchedule", **kw: Any) -> Json:
    app = kw.pop("app", "web")
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": action,
        "labelSelector": {"matchLabels": {"app": app}},
        **kw,
    }


def term(app: str, key: str = ZONE, **kw: Any) -> Json:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **kw}


def pod_affinity(
    required: list[Json] | None = None,
    anti: list[Json] | None = None,
    preferred: list[tuple[int, Json]] | None = None,
    preferred_anti: list[tuple[int, Json]] | None = None,
) -> Json:
    req = "requiredDuringSchedulingIgnoredDuringExecution"
    pref = "preferredDuringSchedulingIgnoredDuringExecution"
    out: Json = {}
    if required or preferred:
        out["podAffinity"] = {
            req: required or [],
            pref: [{"weight": w, "podAffinityTerm": t} for w, t in preferred or []],
        }
    if anti or preferred_anti:
        out["podAntiAffinity"] = {
            req: anti or [],
            pref: [{"weight": w, "podAffinityTerm": t} for w, t in preferred_anti or []],
        }
    return out


WEB = {"app": "web"}
ZONED = [
    fake_node("a1", zone="z1", cpu="4"),
    fake_node("a2", zone="z1", cpu="5"),
    fake_node("b1", zone="z2", cpu="6"),
    fake_node("b2", zone="z2", cpu="7"),
    fake_node("c1", zone="z3", cpu="8"),
]

SCENARIOS: list[Scenario] = [
    # -- the plugins ascheduler had before: fit, taints, node affinity, ports, unschedulable --
    Scenario(
        "fit: cpu, memory, pods, extended resources",
        nodes=[
            fake_node("n1", cpu="2", pods=1),
            fake_node("n2", cpu="4", extended={"nvidia.com/gpu": "2"}),
            fake_node("n3", cpu="8", memory="32Gi", extended={"nvidia.com/gpu": "4"}),
        ],
        existing=[pause("old", node="n1", cpu="100m")],
        pods=[
            pause("big", cpu="6"),
            pause("mid", cpu="3"),
            pause("small", cpu="500m"),
            pause("huge", cpu="10"),
            pause("greedy", memory="100Gi"),
            pause("both", cpu="10", memory="100Gi"),
            pause("gpu-3", extended={"nvidia.com/gpu": "3"}),
            pause("gpu-2", extended={"nvidia.com/gpu": "2"}),
            pause("gpu-5", extended={"nvidia.com/gpu": "5"}),
            pause("other-device", extended={"example.com/fpga": "1"}),
        ],
    ),
    Scenario(
        "unschedulable nodes",
        nodes=[fake_node("n1", cpu="8", unschedulable=True), fake_node("n2", cpu="4")],
        pods=[
            pause("plain"),
            pause(
                "tolerates-unschedulable",
                tolerations=[
                    {
                        "key": "node.kubernetes.io/unschedulable",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                    }
                ],
            ),
            pause("too-big", cpu="6"),
        ],
    ),
    Scenario(
        "taints: NoSchedule, PreferNoSchedule, tolerations",
        nodes=[
            fake_node(
                "n1", cpu="8", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
            ),
            fake_node(
                "n2",
                cpu="6",
                taints=[{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}],
            ),
            fake_node("n3", cpu="4"),
        ],
        pods=[
            pause("plain"),
            pause("tolerant", tolerations=[{"operator": "Exists"}]),
            pause(
                "gpu-only",
                nodeSelector={HOSTNAME: "n1"},
            ),
            pause(
                "keyed",
                tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}],
                cpu="7",
            ),
        ],
    ),
    Scenario(
        "node affinity: required and preferred terms",
        nodes=[
            fake_node("n1", cpu="4", labels={"disk": "ssd", "cores": "4"}),
            fake_node("n2", cpu="6", labels={"disk": "hdd", "cores": "8"}),
            fake_node("n3", cpu="8"),
        ],
        pods=[
            pause(
                "ssd",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "disk", "operator": "In", "values": ["ssd"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            pause(
                "many-cores",
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "cores", "operator": "Gt", "values": ["5"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            pause(
                "prefers-ssd",
                affinity={
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 50,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "disk", "operator": "In", "values": ["ssd"]}
                                    ]
                                },
                            }
                        ]
                    }
                },
            ),
            pause("nowhere", nodeSelector={"disk": "nvme"}),
        ],
    ),
    Scenario(
        "host ports and unschedulable nodes",
        nodes=[fake_node("n1", cpu="4"), fake_node("n2", cpu="6")],
        existing=[
            pause(
                "web-0",
                node="n1",
                containers=[
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "ports": [{"containerPort": 80, "hostPort": 8080}],
                    }
                ],
            )
        ],
        pods=[
            pause(
                f"web-{i}",
                containers=[
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.10",
                        "ports": [{"containerPort": 80, "hostPort": 8080}],
                    }
                ],
            )
            for i in (1, 2)
        ],
    ),
    # -- PodTopologySpread --------------------------------------------------------------------
    Scenario(
        "spread: zones, maxSkew 1, DoNotSchedule",
        nodes=ZONED,
        existing=[pause("w0", labels=WEB, node="a1"), pause("w1", labels=WEB, node="a2")],
        pods=[
            pause(f"web-{i}", labels=WEB, topologySpreadConstraints=[spread()]) for i in range(6)
        ],
    ),
    Scenario(
        "spread: minDomains beyond the zones there are",
        nodes=ZONED[:4],
        pods=[
            pause(f"web-{i}", labels=WEB, topologySpreadConstraints=[spread(minDomains=3)])
            for i in range(4)
        ],
    ),
    Scenario(
        "spread: a node without the key, and a key no node has",
        nodes=[*ZONED[:3], fake_node("bare", cpu="9")],
        pods=[
            pause("web-0", labels=WEB, topologySpreadConstraints=[spread()]),
            pause("web-1", labels=WEB, topologySpreadConstraints=[spread(key="rack")]),
        ],
    ),
    Scenario(
        "spread: node inclusion policies",
        nodes=[
            *ZONED[:4],
            fake_node(
                "t1",
                zone="z3",
                cpu="9",
                taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}],
            ),
        ],
        existing=[pause("w0", labels=WEB, node="a1"), pause("w1", labels=WEB, node="b1")],
        pods=[
            pause("ignore-taints", labels=WEB, topologySpreadConstraints=[spread()]),
            pause(
                "honor-taints",
                labels=WEB,
                topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")],
            ),
            pause(
                "honor-affinity",
                labels=WEB,
                nodeSelector={ZONE: "z1"},
                topologySpreadConstraints=[spread()],
            ),
            pause(
                "ignore-affinity",
                labels=WEB,
                nodeSelector={ZONE: "z1"},
                topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")],
            ),
        ],
        independent=True,
    ),
    Scenario(
        "spread: matchLabelKeys",
        nodes=ZONED[:4],
        existing=[
            pause("old-0", labels={"app": "web", "rev": "1"}, node="a1"),
            pause("old-1", labels={"app": "web", "rev": "1"}, node="a2"),
        ],
        pods=[
            pause(
                f"new-{i}",
                labels={"app": "web", "rev": "2"},
                topologySpreadConstraints=[spread(matchLabelKeys=["rev"])],
            )
            for i in range(3)
        ],
    ),
    Scenario(
        "spread: ScheduleAnyway over hostname and zone",
        nodes=ZONED,
        existing=[pause("w0", labels=WEB, node="c1"), pause("w1", labels=WEB, node="b2")],
        pods=[
            pause(
                f"web-{i}",
                labels=WEB,
                topologySpreadConstraints=[
                    spread(action="ScheduleAnyway", skew=2),
                    spread(key=HOSTNAME, action="ScheduleAnyway"),
                ],
            )
            for i in range(4)
        ],
    ),
    Scenario(
        "spread: system default constraints through a Service",
        nodes=ZONED,
        objects=[
            (
                "services",
                {
                    "metadata": {"name": "web"},
                    "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]},
                },
            )
        ],
        existing=[pause("w0", labels=WEB, node="c1")],
        pods=[pause(f"web-{i}", labels=WEB) for i in range(4)],
    ),
    # -- InterPodAffinity ---------------------------------------------------------------------
    Scenario(
        "affinity: required, first of its group, no match",
        nodes=ZONED,
        existing=[pause("db-0", labels={"app": "db"}, node="b1")],
        pods=[
            pause("near-db", labels=WEB, affinity=pod_affinity(required=[term("db")])),
            pause(
                "cache-0",
                labels={"app": "cache"},
                affinity=pod_affinity(required=[term("cache", key=HOSTNAME)]),
            ),
            pause("lonely", labels=WEB, affinity=pod_affinity(required=[term("queue")])),
        ],
    ),
    Scenario(
        "anti-affinity: one per node until none is left",
        nodes=ZONED[:3],
        pods=[
            pause(f"web-{i}", labels=WEB, affinity=pod_affinity(anti=[term("web", key=HOSTNAME)]))
            for i in range(4)
        ],
    ),
    Scenario(
        "anti-affinity: existing pods' terms keep others away",
        nodes=ZONED[:4],
        existing=[
            pause(
                "guard",
                labels={"app": "guard"},
                node="a1",
                affinity=pod_affinity(anti=[term("web")]),
            ),
            pause(
                "guard2",
                labels={"app": "guard"},
                node="b1",
                affinity=pod_affinity(anti=[term("web")]),
            ),
        ],
        pods=[pause("web-0", labels=WEB), pause("other", labels={"app": "other"})],
    ),
    Scenario(
        "affinity: namespaces and namespace selectors",
        nodes=ZONED,
        namespaces={"default": {}, "data": {"tier": "prod"}, "scratch": {"tier": "dev"}},
        existing=[
            pause("db-0", labels={"app": "db"}, namespace="data", node="a1"),
            pause("db-1", labels={"app": "db"}, namespace="scratch", node="b1"),
        ],
        pods=[
            pause("same-ns", labels=WEB, affinity=pod_affinity(required=[term("db")])),
            pause(
                "named",
                labels=WEB,
                affinity=pod_affinity(required=[term("db", namespaces=["scratch"])]),
            ),
            pause(
                "selected",
                labels=WEB,
                affinity=pod_affinity(
                    anti=[term("db", namespaceSelector={"matchLabels": {"tier": "prod"}})]
                ),
            ),
            pause(
                "everywhere",
                labels=WEB,
                affinity=pod_affinity(anti=[term("db", namespaceSelector={})]),
            ),
        ],
        independent=True,
    ),
    Scenario(
        "affinity: preferred terms, existing pods' terms, the hard weight",
        nodes=ZONED,
        existing=[
            pause("db-0", labels={"app": "db"}, node="a2"),
            pause("cache-0", labels={"app": "cache"}, node="b2"),
            pause(
                "fan",
                labels={"app": "fan"},
                node="c1",
                affinity=pod_affinity(
                    required=[term("web")], preferred=[(20, term("web", key=HOSTNAME))]
                ),
            ),
        ],
        pods=[
            pause(
                "likes-db",
                labels={"app": "x"},
                affinity=pod_affinity(preferred=[(80, term("db"))]),
            ),
            pause(
                "dislikes-db",
                labels={"app": "x"},
                affinity=pod_affinity(preferred_anti=[(80, term("db")), (30, term("cache"))]),
            ),
            pause("web-liked", labels=WEB),
        ],
        independent=True,
    ),
    # -- ImageLocality ------------------------------------------------------------------------
    Scenario(
        "image locality",
        nodes=[
            fake_node("n1", cpu="6"),
            fake_node("n2", cpu="4", images=[("docker.io/library/big:1", 800 * MB)]),
            fake_node("n3", cpu="5", images=[("docker.io/library/big:1", 800 * MB)]),
        ],
        pods=[pause("big", image="docker.io/library/big:1"), pause("other")],
        independent=True,
    ),
]

# -- plugin arguments (both schedulers run the scenario with the same profile) ----------------

SERVICE = (
    "services",
    {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}},
)
SCENARIOS += [
    Scenario(
        "spread: listed default constraints",
        nodes=ZONED,
        objects=[SERVICE],
        existing=[pause("w0", labels=WEB, node="a1"), pause("w1", labels=WEB, node="a2")],
        pods=[pause(f"web-{i}", labels=WEB) for i in range(5)],
        profile={
            "pluginConfig": [
                {
                    "name": "PodTopologySpread",
                    "args": {
                        "defaultingType": "List",
                        "defaultConstraints": [
                            {
                                "maxSkew": 1,
                                "topologyKey": ZONE,
                                "whenUnsatisfiable": "DoNotSchedule",
                            },
                            {
                                "maxSkew": 1,
                                "topologyKey": HOSTNAME,
                                "whenUnsatisfiable": "ScheduleAnyway",
                            },
                        ],
                    },
                }
            ]
        },
    ),
    Scenario(
        "affinity: hardPodAffinityWeight and ignorePreferredTermsOfExistingPods",
        nodes=ZONED,
        existing=[
            pause(
                "fan",
                labels={"app": "fan"},
                node="a1",
                affinity=pod_affinity(
                    required=[term("web")], preferred=[(50, term("web", key=HOSTNAME))]
                ),
            ),
        ],
        pods=[
            pause("web-0", labels=WEB),
            # With terms of its own, PreScore runs: the fan's required term at weight 100
            # (its zone) and its preferred one (its node) count.
            pause("web-1", labels=WEB, affinity=pod_affinity(preferred=[(1, term("none"))])),
        ],
        independent=True,
        profile={
            "pluginConfig": [
                {
                    "name": "InterPodAffinity",
                    "args": {
                        "hardPodAffinityWeight": 100,
                        "ignorePreferredTermsOfExistingPods": True,
                    },
                }
            ]
        },
    ),
]

# -- configuration kube-scheduler reads its own way (both run the same profile) ---------------

SPOT = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}


def node_affinity(
    required: list[Json] | None = None, preferred: list[tuple[int, Json]] | None = None
) -> Json:
    out: Json = {}
    if required is not None:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": t} for w, t in preferred
        ]
    return out


def label_in(key: str, *values: str) -> Json:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}


SCENARIOS += [
    Scenario(
        # Named in multiPoint without a weight, TaintToleration replaces its default entry
        # at weight 1: the spot node's NodeAffinity preference (2 x 100) now outweighs the
        # untainted node's TaintToleration score (1 x 100); at the default 3 it would not.
        "config: multiPoint names TaintToleration without a weight",
        nodes=[fake_node("spot", labels={"pool": "spot"}, taints=[SPOT]), fake_node("plain")],
        pods=[
            pause(
                "likes-spot",
                affinity={
                    "nodeAffinity": node_affinity(preferred=[(10, label_in("pool", "spot"))])
                },
            ),
            pause("indifferent"),
        ],
        independent=True,
        profile={"plugins": {"multiPoint": {"enabled": [{"name": "TaintToleration"}]}}},
    ),
    Scenario(
        # The profile's addedAffinity: every pod kept to pool a (a node outside it rejected
        # for that alone), and ssd preferred at 10 on top of the pod's own preferences.
        "config: NodeAffinity addedAffinity",
        nodes=[
            fake_node("a-ssd", labels={"pool": "a", "disk": "ssd"}),
            fake_node("a-big", cpu="8", labels={"pool": "a", "rack": "r2"}),
            fake_node("b", cpu="16", labels={"pool": "b"}),
            fake_node("bare", cpu="16"),
        ],
        pods=[
            pause("plain"),
            pause("wants-b", nodeSelector={"pool": "b"}),
            pause(
                "likes-r2-a-little",
                affinity={"nodeAffinity": node_affinity(preferred=[(5, label_in("rack", "r2"))])},
            ),
            pause(
                "likes-r2",
                affinity={"nodeAffinity": node_affinity(preferred=[(20, label_in("rack", "r2"))])},
            ),
        ],
        independent=True,
        profile={
            "pluginConfig": [
                {
                    "name": "NodeAffinity",
                    "args": {
                        "addedAffinity": node_affinity(
                            required=[label_in("pool", "a")],
                            preferred=[(10, label_in("disk", "ssd"))],
                        )
                    },
                }
            ]
        },
    ),
]

# -- preemption (DefaultPreemption): who is evicted, where the preemptor goes, the messages ----


def budget(name: str, app: str, min_available: int = 1) -> tuple[str, Json]:
    return (
        "policy/v1/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": name},
            # minAvailable: bare pods have no controller to count maxUnavailable against.
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
        },
    )


def budget_on(name: str, labels: dict[str, str], min_available: int = 1) -> tuple[str, Json]:
    path, body = budget(name, "", min_available)
    body["spec"]["selector"] = {"matchLabels": labels}
    return path, body


def prio(name: str, cls: str, **kw: Any) -> Json:
    return pause(name, priorityClassName=f"diff-{cls}", **kw)


PAIR = [fake_node("a", cpu="2"), fake_node("b", cpu="2")]
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}

SCENARIOS += [
    Scenario(
        "preemption: the least important victim, the others reprieved",
        nodes=PAIR,
        existing=[
            prio("low-10", "low", cpu="1", node="a"),
            prio("mid-a", "mid", cpu="1", node="a"),
            prio("mid-b", "mid", cpu="2", node="b"),
        ],
        pods=[prio("vip", "high", cpu="1")],
        preemption=True,
        dry_run=False,
    ),
    Scenario(
        "preemption: the node whose victims matter least",
        nodes=PAIR,
        existing=[prio("mid", "mid", cpu="2", node="a"), prio("low", "low", cpu="2", node="b")],
        pods=[prio("vip", "high", cpu="2")],
        preemption=True,
        dry_run=False,
    ),
    Scenario(
        "preemption: a victim its budget protects is reprieved first",
        nodes=[fake_node("a", cpu="2")],
        objects=[budget("web", "web")],
        existing=[
            prio("guarded", "low", cpu="1", node="a", labels=WEB),
            prio("plain", "low", cpu="1", node="a"),
        ],
        pods=[prio("vip", "high", cpu="1")],
        preemption=True,
        dry_run=False,
    ),
    Scenario(
        "preemption: the node with fewer budget violations",
        nodes=PAIR,
        objects=[budget("web", "web")],
        existing=[
            prio("guarded", "low", cpu="2", node="a", labels=WEB),
            prio("plain", "mid", cpu="2", node="b"),
        ],
        pods=[prio("vip", "high", cpu="2")],
        preemption=True,
        dry_run=False,
    ),
    Scenario(
        # While its victim terminates, vip's room on a is held from the lower-priority pod
        # after it (kube-scheduler's filter with nominated pods): `after` fits only on b.
        # Without the nomination counted, a (2 cpu free) would score better.
        "preemption: a nomination holds its room against lower priorities",
        nodes=[fake_node("a", cpu="8", kubelet=False), fake_node("b", cpu="4")],
        existing=[prio("low", "low", cpu="6", node="a"), prio("top", "high", cpu="3", node="b")],
        pods=[prio("vip", "high", cpu="4"), prio("after", "mid", cpu="1")],
        preemption=True,
        victims_linger=True,
        dry_run=False,
    ),
    Scenario(
        "preemption: preemptionPolicy Never, no victims, not helpful",
        nodes=[*PAIR, fake_node("tainted", cpu="8", taints=[TAINT])],
        existing=[prio("low", "low", cpu="2", node="a"), prio("top", "high", cpu="2", node="b")],
        pods=[
            prio("never", "never", cpu="2"),
            prio("peer", "high", cpu="2", nodeSelector={HOSTNAME: "b"}),
            prio("huge", "high", cpu="3"),
        ],
        preemption=True,
        independent=True,
        dry_run=False,
    ),
    Scenario(
        # From 1.37 the preemptor's first failure ends with where preemption made room and
        # how many pods it evicts there (both victims counted).
        "preemption: the message names the node and the victims",
        nodes=PAIR,
        existing=[
            prio("low-1", "low", cpu="1", node="a"),
            prio("low-2", "low", cpu="1", node="a"),
            prio("top", "high", cpu="2", node="b"),
        ],
        pods=[prio("vip", "high", cpu="2")],
        preemption=True,
        dry_run=False,
    ),
    Scenario(
        # `both` is covered by two budgets with no room: it violates whichever is counted
        # first (1.37 stops there, earlier releases charge both), and `web-b` violates `web`
        # alone; either node has one violation, b fewer victims. kube-scheduler lists the
        # budgets in no fixed order, so only a case every order agrees on is compared.
        # (`x-b`, covered by `tier` alone, makes the disruption controller count `tier`: it
        # follows a pod two budgets cover through one of them only.)
        "preemption: a victim two budgets cover",
        nodes=[fake_node("a", cpu="2"), fake_node("b", cpu="3")],
        objects=[
            budget("web", "web", min_available=2),
            budget_on("tier", {"tier": "x"}, min_available=2),
        ],
        existing=[
            prio("both", "low", cpu="1", node="a", labels={**WEB, "tier": "x"}),
            prio("plain-a", "low", cpu="1", node="a"),
            prio("web-b", "low", cpu="2", node="b", labels=WEB),
            prio("x-b", "high", cpu="1", node="b", labels={"tier": "x"}),
        ],
        pods=[prio("vip", "high", cpu="2")],
        preemption=True,
        dry_run=False,
    ),
]


# -- volumes ------------------------------------------------------------------------------------


def storage_class(
    name: str,
    *,
    delayed: bool = True,
    provisioner: str = "kubernetes.io/no-provisioner",
    zones: Sequence[str] = (),
) -> tuple[str, Json]:
    body: Json = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": "WaitForFirstConsumer" if delayed else "Immediate",
    }
    if zones:
        body["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": ZONE, "values": list(zones)}]}
        ]
    return ("StorageClass", body)


def volume(
    name: str,
    *,
    size: str = "1Gi",
    klass: str = "local",
    node: str | None = None,
    claim: str | None = None,
    labels: Mapping[str, str] | None = None,
    modes: Sequence[str] = ("ReadWriteOnce",),
) -> tuple[str, Json]:
    """A PersistentVolume: a local volume on `node`, pre-bound to `claim` if given."""
    spec: Json = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": klass,
        "persistentVolumeReclaimPolicy": "Retain",
    }
    if node is not None:
        spec["local"] = {"path": f"/mnt/{name}"}
        spec["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
                ]
            }
        }
    else:
        spec["hostPath"] = {"path": f"/mnt/{name}"}
    if claim is not None:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    body: Json = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }
    return ("PersistentVolume", body)


def csi_volume(name: str, claim: str, driver: str = "example.csi.io") -> tuple[str, Json]:
    """A CSI PersistentVolume (no topology) pre-bound to `claim` (class `local`)."""
    body: Json = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": driver, "volumeHandle": name},
            "claimRef": {"namespace": "default", "name": claim},
        },
    }
    return ("PersistentVolume", body)


def attachment(
    name: str, node: str, volume: str, driver: str = "example.csi.io"
) -> tuple[str, Json]:
    """A VolumeAttachment of `volume` to `node` (as the attach/detach controller leaves one
    whose pod went before the volume was detached)."""
    body: Json = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": driver, "nodeName": node, "source": {"persistentVolumeName": volume}},
    }
    return ("VolumeAttachment", body)


def claim(
    name: str,
    *,
    size: str = "1Gi",
    klass: str = "local",
    volume_name: str | None = None,
    modes: Sequence[str] = ("ReadWriteOnce",),
) -> tuple[str, Json]:
    spec: Json = {
        "accessModes": list(modes),
        "storageClassName": klass,
        "resources": {"requests": {"storage": size}},
    }
    if volume_name is not None:
        spec["volumeName"] = volume_name
    body: Json = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }
    return ("persistentvolumeclaims", body)


def with_claims(name: str, *claims: str, **kw: Any) -> Json:
    return pause(
        name,
        volumes=[
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
        **kw,
    )


THREE = [
    fake_node("a", zone="z1"),
    fake_node("b", zone="z1"),
    fake_node("c", zone="z2"),
]

SCENARIOS += [
    Scenario(
        "volumes: missing claims and unbound Immediate claims",
        nodes=THREE,
        storage=[storage_class("std", delayed=False, provisioner="example.com/none")],
        objects=[claim("waiting", klass="std")],
        pods=[with_claims("missing", "nope"), with_claims("unbound", "waiting")],
        independent=True,
    ),
    Scenario(
        "volumes: a bound local volume's node",
        nodes=THREE,
        storage=[storage_class("local"), volume("pv-b", node="b", claim="data")],
        objects=[claim("data", volume_name="pv-b")],
        bound_claims=["default/data"],
        pods=[with_claims("user", "data")],
    ),
    Scenario(
        "volumes: a bound volume's zone labels",
        nodes=THREE,
        storage=[
            storage_class("local"),
            volume("pv-z2", claim="data", labels={ZONE: "z2"}),
            volume("pv-z1", claim="data2", labels={ZONE: "z1__z9"}),
        ],
        objects=[claim("data", volume_name="pv-z2"), claim("data2", volume_name="pv-z1")],
        bound_claims=["default/data", "default/data2"],
        pods=[with_claims("zone-2", "data"), with_claims("zone-1", "data2")],
        independent=True,
    ),
    Scenario(
        "volumes: WaitForFirstConsumer claims matched to local volumes",
        nodes=THREE,
        storage=[
            storage_class("local"),
            volume("a-1g", node="a", size="1Gi"),
            volume("a-10g", node="a", size="10Gi"),
            volume("b-5g", node="b", size="5Gi"),
            volume("c-1g", node="c", size="1Gi", modes=("ReadOnlyMany",)),
        ],
        objects=[
            claim("big", size="6Gi"),
            claim("small-1"),
            claim("small-2"),
            claim("medium", size="2Gi"),
        ],
        pods=[
            # Only a-10g takes 6Gi. Then a has one volume left for two claims, b one: no
            # node for the pair (a volume is never given twice). 2Gi: only b-5g.
            with_claims("big-one", "big"),
            with_claims("pair", "small-1", "small-2"),
            with_claims("medium-one", "medium"),
        ],
    ),
    Scenario(
        "volumes: provisioning outside the class's allowed topologies",
        nodes=THREE,
        storage=[storage_class("zonal", provisioner="example.com/zonal", zones=["z9"])],
        objects=[claim("dyn", klass="zonal")],
        pods=[with_claims("nowhere", "dyn")],
    ),
    Scenario(
        "volumes: a ReadWriteOncePod claim in use, and a GCE disk mounted",
        nodes=THREE,
        storage=[
            storage_class("local"),
            volume("solo", claim="solo", modes=("ReadWriteOncePod",)),
        ],
        objects=[claim("solo", volume_name="solo", modes=("ReadWriteOncePod",))],
        bound_claims=["default/solo"],
        existing=[
            with_claims("owner", "solo", node="a"),
            pause(
                "disk-user",
                node="b",
                volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "pd-1"}}],
            ),
        ],
        pods=[
            with_claims("second", "solo"),
            pause("disk", volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "pd-1"}}]),
        ],
        independent=True,
    ),
]

SCENARIOS += [
    Scenario(
        "volumes: CSI attach limits, VolumeAttachments counted",
        nodes=THREE[:2],
        csi_nodes={"a": {"example.csi.io": 1}, "b": {"example.csi.io": 1}},
        storage=[
            storage_class("local"),
            *(csi_volume(f"csi-{i}", f"d{i}") for i in (1, 2, 3)),
            # csi-1 is still attached to a, though no pod there uses it.
            attachment("va-1", "a", "csi-1"),
        ],
        objects=[claim(f"d{i}", volume_name=f"csi-{i}") for i in (1, 2, 3)],
        bound_claims=["default/d1", "default/d2", "default/d3"],
        pods=[
            # a is full with the attachment: b.
            with_claims("second", "d2"),
            # Both full.
            with_claims("third", "d3"),
            # The attached volume itself: a counts it twice, b is full.
            with_claims("first", "d1"),
        ],
    ),
    Scenario(
        "volumes: CSI limits per driver, shared volumes counted once",
        nodes=THREE,
        csi_nodes={
            "a": {"example.csi.io": 2, "other.csi.io": 0},
            "b": {"example.csi.io": 1},
            "c": {"example.csi.io": None},
        },
        storage=[
            storage_class("local"),
            csi_volume("shared", "shared"),
            csi_volume("one", "one"),
            csi_volume("two", "two"),
            csi_volume("elsewhere", "elsewhere", driver="other.csi.io"),
        ],
        objects=[
            claim("shared", volume_name="shared"),
            claim("one", volume_name="one"),
            claim("two", volume_name="two"),
            claim("elsewhere", volume_name="elsewhere"),
        ],
        bound_claims=["default/shared", "default/one", "default/two", "default/elsewhere"],
        existing=[with_claims("holder", "shared", node="b")],
        pods=[
            # b holds `shared` already: another user adds nothing there.
            with_claims("sharer", "shared", nodeSelector={HOSTNAME: "b"}),
            with_claims("more-on-b", "one", nodeSelector={HOSTNAME: "b"}),
            # a takes two example volumes, no other.csi.io one; c has no count: no limit.
            with_claims("pair-on-a", "one", "two", nodeSelector={HOSTNAME: "a"}),
            with_claims("other-on-a", "elsewhere", nodeSelector={HOSTNAME: "a"}),
            with_claims("pair-on-c", "one", "two", nodeSelector={HOSTNAME: "c"}),
        ],
        independent=True,
    ),
]


def stateful_set(name: str, replicas: int, klass: str, size: str = "1Gi") -> tuple[str, Json]:
    """A StatefulSet of pause pods, one claim of `klass` each (`data-<name>-<i>`)."""
    spec = {**pause(name)["spec"], "terminationGracePeriodSeconds": 0}
    return ("apps/v1/statefulsets", stateful_set_body(name, replicas, spec, klass, size))


SCENARIOS += [
    Scenario(
        "volumes: a StatefulSet with WaitForFirstConsumer local volumes on several nodes",
        nodes=[
            # Less room: the resource scores prefer b while both have a volume.
            fake_node("a", zone="z1", cpu="1", memory="2Gi"),
            fake_node("b", zone="z1"),
            fake_node("c", zone="z2"),
        ],
        storage=[
            storage_class("local"),
            volume("a-1g", node="a", size="1Gi"),
            volume("b-5g", node="b", size="5Gi"),
            volume("c-small", node="c", size="100Mi"),
        ],
        controllers=[stateful_set("web", 3, "local")],
        # web-0 on b (its volume bound there by the controller), web-1 on a, the only node
        # with a volume left; web-2 finds none.
        controlled=["web-0", "web-1", "web-2"],
        pods=[],
    ),
]


SCENARIOS += [
    Scenario(
        "volumes: StorageCapacityScoring prefers the emptiest volume",
        nodes=THREE,
        feature_gates="StorageCapacityScoring=true",
        storage=[
            storage_class("local"),
            volume("a-2g", node="a", size="2Gi"),
            volume("b-10g", node="b", size="10Gi"),
            volume("c-4g", node="c", size="4Gi"),
            volume("c-1g", node="c", size="1Gi"),
        ],
        objects=[claim("first"), claim("second"), claim("third")],
        pods=[
            # 1Gi: 50% of a's, 10% of b's, 100% of c's smallest (smallest fit): b.
            with_claims("first", "first"),
            # b's is taken: a at 50%, c at 100%: a.
            with_claims("second", "second"),
            # Only c has volumes left.
            with_claims("third", "third"),
            # No claim: VolumeBinding still scores (0 on every node), as the gate has it.
            pause("no-claims"),
        ],
    ),
]


def named(*names: str) -> Json:
    """A required node affinity term on `metadata.name`."""
    field_term = {"key": "metadata.name", "operator": "In", "values": list(names)}
    return {"matchFields": [field_term]}


def required_terms(*terms: Json) -> Json:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


SCENARIOS += [
    # An outright (unresolvable) PreFilter rejection stops PreFilter before DynamicResources,
    # whose PostFilter then fails on its missing state and ends PostFilter; a resolvable
    # one, or a rejection by DynamicResources itself, lets it say `no new claims to
    # deallocate` before preemption speaks.
    Scenario(
        "prefilter: outright rejections before DynamicResources",
        nodes=THREE,
        objects=[claim("present")],
        pods=[
            pause("no-such-node", affinity=required_terms(named("nowhere"))),
            with_claims("missing-claim", "absent"),
            pause("too-big", cpu="64"),
            pause("fine"),
        ],
        ties=frozenset({"fine"}),
        dry_run=False,
    ),
]


# -- Dynamic Resource Allocation ---------------------------------------------------------

DRIVER = "gpu.example.com"


def gpu(name: str, model: str, memory: str = "16Gi", numa: int = 0) -> Json:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "numa": {"int": numa}},
        "capacity": {"memory": {"value": memory}},
    }


def device_slice(
    name: str,
    devices: list[Json],
    *,
    node: str | None = None,
    node_selector: Json | None = None,
    all_nodes: bool = False,
    pool: str | None = None,
    slices: int = 1,
) -> tuple[str, Json]:
    """A ResourceSlice of a pool (one slice, named as the slice, unless `pool` and
    `slices` say otherwise) on `node`, the nodes of `node_selector`, or all nodes."""
    spec: Json = {
        "driver": DRIVER,
        "pool": {"name": pool or name, "generation": 1, "resourceSliceCount": slices},
        "devices": devices,
    }
    if node is not None:
        spec["nodeName"] = node
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if all_nodes:
        spec["allNodes"] = True
    body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": spec}
    return "ResourceSlice", {**body, "metadata": {"name": name}}


def device_class(name: str, expression: str = f'device.driver == "{DRIVER}"') -> tuple[str, Json]:
    return "DeviceClass", {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def want(
    name: str, klass: str = "gpu", count: int | None = 1, *selectors: str, all_: bool = False
) -> Json:
    """An `exactly` request (`count` devices, or All)."""
    exact: Json = {"deviceClassName": klass}
    if all_:
        exact["allocationMode"] = "All"
    else:
        exact["allocationMode"], exact["count"] = "ExactCount", count
    if selectors:
        exact["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {"name": name, "exactly": exact}


def either(name: str, *alternatives: tuple[str, str, int, str | None]) -> Json:
    """A `firstAvailable` request: (subrequest, class, count, selector or None) in order."""
    subs = []
    for sub, klass, count, selector in alternatives:
        entry: Json = {
            "name": sub,
            "deviceClassName": klass,
            "allocationMode": "ExactCount",
            "count": count,
        }
        if selector is not None:
            entry["selectors"] = [{"cel": {"expression": selector}}]
        subs.append(entry)
    return {"name": name, "firstAvailable": subs}


def device_claim(
    name: str, *requests: Json, match: str | None = None, template: bool = False
) -> tuple[str, Json]:
    spec: Json = {"devices": {"requests": list(requests)}}
    if match is not None:
        spec["devices"]["constraints"] = [{"matchAttribute": match}]
    if template:
        return "resource.k8s.io/v1/resourceclaimtemplates", {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": spec},
        }
    return "resource.k8s.io/v1/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def claiming(name: str, *claims: str, templates: tuple[str, ...] = (), **kw: Any) -> Json:
    """A pod using the ResourceClaims `claims` and one claim per template of `templates`."""
    body = pause(name, **kw)
    refs = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    refs += [{"name": f"t{i}", "resourceClaimTemplateName": t} for i, t in enumerate(templates)]
    body["spec"]["resourceClaims"] = refs
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": r["name"]} for r in refs]
    return body


MODEL = f'device.attributes["{DRIVER}"].model'
FORTY = "[" + ",".join(str(i) for i in range(40)) + "]"
#: 40^3 = 64,000 iterations (cel-cpp alone stops at 10,000), under Kubernetes' cost limit.
MANY = f"{FORTY}.all(a, {FORTY}.all(b, {FORTY}.all(c, a + b + c >= 0)))"
MEMORY = f'device.capacity["{DRIVER}"].memory'

SCENARIOS += [
    Scenario(
        "dra: device counts, selectors on attributes and capacity, every message",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_class("a100", f'device.driver == "{DRIVER}" && {MODEL} == "a100"'),
            device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="a"),
            device_slice(
                "b-gpus",
                [gpu(f"g{i}", "a100", "80Gi") for i in range(3)] + [gpu("g3", "t4")],
                node="b",
            ),
        ],
        objects=[
            device_claim("two-a100", want("r", "a100", 2)),
            device_claim(
                "big-memory", want("r", "gpu", 1, f'{MEMORY}.compareTo(quantity("40Gi")) >= 0')
            ),
            device_claim("third-a100", want("r", "a100", 1)),
            device_claim("three-t4", want("r", "gpu", 3, f'{MODEL} == "t4"')),
            device_claim("any-two", want("r", "gpu", 2)),
            device_claim("no-class", want("r", "ghost", 1)),
            device_claim("every-t4", want("r", "gpu", None, f'{MODEL} == "t4"', all_=True)),
        ],
        pods=[
            claiming("two-a100", "two-a100"),
            claiming("big-memory", "big-memory"),
            # b's a100s are all taken now.
            claiming("third-a100", "third-a100"),
            # No node has three t4s.
            claiming("three-t4", "three-t4"),
            claiming("no-class", "no-class"),
            # All t4s that reach a node: a's two, or b's one.
            claiming("every-t4", "every-t4"),
            claiming("any-two", "any-two"),
        ],
    ),
]


NUMA = f'device.attributes["{DRIVER}"].numa'

SCENARIOS += [
    Scenario(
        "dra: firstAvailable falls back, and prefers nodes for earlier alternatives",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="a"),
            device_slice("b-gpus", [gpu("g0", "a100", "80Gi"), gpu("g1", "t4")], node="b"),
        ],
        objects=[
            device_claim(
                "prefer-a100",
                either("r", ("big", "gpu", 1, f'{MODEL} == "a100"'), ("small", "gpu", 2, None)),
            ),
            device_claim(
                "fallback",
                either("r", ("big", "gpu", 1, f'{MODEL} == "a100"'), ("small", "gpu", 2, None)),
            ),
            device_claim(
                "nothing-left",
                either("r", ("big", "gpu", 1, f'{MODEL} == "a100"'), ("two", "gpu", 2, None)),
            ),
        ],
        pods=[
            # b has the a100: the first alternative scores it above a's two t4s.
            claiming("prefer-a100", "prefer-a100"),
            # The a100 is taken: two of anything, only a has two left.
            claiming("fallback", "fallback"),
            claiming("nothing-left", "nothing-left"),
        ],
    ),
    Scenario(
        "dra: matchAttribute keeps two requests on one NUMA node",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice(
                "a-gpus",
                [gpu("g0", "t4", numa=0), gpu("g1", "t4", numa=1), gpu("g2", "t4", numa=1)],
                node="a",
            ),
            device_slice("b-gpus", [gpu("g0", "t4", numa=0), gpu("g1", "t4", numa=1)], node="b"),
        ],
        objects=[
            device_claim("pair", want("x"), want("y"), match=f"{DRIVER}/numa"),
            device_claim("pair2", want("x"), want("y"), match=f"{DRIVER}/numa"),
            device_claim("any-pair", want("x"), want("y")),
        ],
        pods=[
            claiming("pair", "pair"),  # only a's numa 1 has two
            claiming("pair2", "pair2"),  # a's numa 1 is taken: none left
            claiming("any-pair", "any-pair"),  # b's two, or a's last
        ],
    ),
    Scenario(
        "dra: a shared claim brings its second pod to the first one's node",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4")], node="a"),
            device_slice("b-gpus", [gpu("g0", "t4")], node="b"),
            device_slice("c-gpus", [gpu("g0", "t4")], node="c"),
        ],
        objects=[device_claim("shared", want("r"))],
        pods=[
            # (placed on b, so the claim's node is no tie between the runs)
            claiming("first", "shared", nodeSelector={HOSTNAME: "b"}),
            claiming("second", "shared"),
            claiming("third", "shared", cpu="5"),  # the claim's node has no room
        ],
    ),
    Scenario(
        "dra: network-attached devices, by node selector and for all nodes",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_class("fabric", f'device.driver == "{DRIVER}" && {MODEL} == "fabric"'),
            device_slice(
                "z1-fabric",
                [gpu("f0", "fabric"), gpu("f1", "fabric")],
                node_selector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["z1"]}]}
                    ]
                },
            ),
            device_slice("everywhere", [gpu("e0", "t4")], all_nodes=True),
        ],
        objects=[
            device_claim("fabric-1", want("r", "fabric")),
            device_claim("fabric-2", want("r", "fabric")),
            device_claim("fabric-3", want("r", "fabric")),
            device_claim("shared-t4", want("r", "gpu", 1, f'{MODEL} == "t4"')),
            device_claim("t4-again", want("r", "gpu", 1, f'{MODEL} == "t4"')),
        ],
        # Pods pinned where the devices would leave a tie: a network-attached device's
        # claim stays allocated wherever its first pod went.
        pods=[
            claiming("fabric-1", "fabric-1", nodeSelector={HOSTNAME: "a"}),
            claiming("fabric-2", "fabric-2", nodeSelector={HOSTNAME: "b"}),
            claiming("fabric-3", "fabric-3"),  # both fabric devices are taken
            claiming("fabric-on-c", "fabric-1", nodeSelector={HOSTNAME: "c"}),  # not in z1
            claiming("shared-t4", "shared-t4", nodeSelector={HOSTNAME: "c"}),
            claiming("t4-again", "t4-again"),  # the only t4 is taken
        ],
    ),
    Scenario(
        "dra: a selector that fails at run time fails the attempt",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4")], node="a"),
            device_slice("b-gpus", [{"name": "bare"}], node="b"),
        ],
        objects=[
            # No `model` attribute on b's device: a runtime error there.
            device_claim("no-such-key", want("r", "gpu", 1, f'{MODEL} == "t4"')),
            device_claim("has-check", want("r", "gpu", 1, f'has({MODEL}) && {MODEL} == "t4"')),
        ],
        pods=[
            claiming("no-such-key", "no-such-key"),
            claiming("has-check", "has-check"),
        ],
        dry_run=False,
    ),
    Scenario(
        "dra: a selector that gives no bool fails the attempt",
        nodes=THREE,
        devices=[device_class("gpu"), device_slice("a-gpus", [gpu("g0", "t4")], node="a")],
        # The API server admits it (an attribute's type is only known at run time).
        objects=[device_claim("not-a-bool", want("r", "gpu", 1, MODEL))],
        pods=[claiming("not-a-bool", "not-a-bool")],
        dry_run=False,
    ),
    Scenario(
        "dra: selectors are bounded by their runtime cost, not by a count of iterations",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "a100")], node="a"),
        ],
        # The API server admits it (its estimate: 598,971 of 1,000,000). One past the limit
        # it refuses, so that case is checked against Kubernetes' own evaluation in
        # tests/unit/dra/celcost instead.
        objects=[
            device_claim("iterations", want("r", "gpu", 1, f"{MANY} && {MODEL} == 'a100'")),
        ],
        pods=[claiming("iterations", "iterations")],
        dry_run=False,
    ),
    Scenario(
        "dra: claims from a template, made by the resourceclaim controller",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("b-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="b"),
        ],
        objects=[device_claim("one-gpu", want("r"), template=True)],
        pods=[
            claiming("first", templates=("one-gpu",)),
            claiming("second", templates=("one-gpu",)),
            claiming("third", templates=("one-gpu",)),  # b's two are taken
        ],
        # (no dry run: a pod's claim only exists once the pod does)
        dry_run=False,
    ),
    Scenario(
        "dra: bad input: duplicate device names in a pool, absurd counts",
        nodes=THREE,
        devices=[
            device_class("gpu"),
            device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="a"),
            device_slice("b-twice", [gpu("g0", "t4")], node="b"),
            # One pool, two slices, one device name in both: the pool is invalid.
            device_slice("c-one", [gpu("g0", "t4")], node="c", pool="c-pool", slices=2),
            device_slice("c-two", [gpu("g0", "t4")], node="c", pool="c-pool", slices=2),
        ],
        objects=[
            device_claim("huge", want("r", "gpu", 1000)),
            device_claim("over-limit", want("r", "gpu", 33)),
            device_claim("one", want("r")),
            device_claim("all-of-them", want("r", "gpu", None, all_=True)),
        ],
        pods=[
            claiming("huge", "huge"),
            claiming("over-limit", "over-limit"),
            claiming("c-only", "one", nodeSelector={HOSTNAME: "c"}),  # c's pool is invalid
            claiming("all-of-them", "all-of-them"),
        ],
        dry_run=False,
    ),
]

# 1.35's computeScore indexes the new allocations by the position among all claims: a pod
# with an allocated claim and a new one fails Score there, so the scenario starts at 1.36.
if plane_since(1, 36):
    SCENARIOS += [
        Scenario(
            "dra: firstAvailable scores a claim allocated earlier beside the new one's",
            nodes=THREE,
            devices=[
                device_class("gpu"),
                device_slice("a-gpus", [gpu("g0", "t4"), gpu("g1", "t4")], node="a"),
                device_slice("b-gpus", [gpu("g0", "a100", "80Gi"), gpu("g1", "t4")], node="b"),
                # Network-attached: a pod sharing a claim allocated here may go to any node.
                device_slice("fabric", [gpu("f0", "slow")], all_nodes=True),
            ],
            objects=[
                device_claim(
                    "shared",
                    either(
                        "r",
                        ("fast", "gpu", 1, f'{MODEL} == "fast"'),
                        ("slow", "gpu", 1, f'{MODEL} == "slow"'),
                    ),
                ),
                device_claim(
                    "prefer-a100",
                    either("r", ("big", "gpu", 1, f'{MODEL} == "a100"'), ("small", "gpu", 2, None)),
                ),
            ],
            pods=[
                # Allocates the shared claim its second subrequest (the fabric's device).
                claiming("first", "shared"),
                # From 1.36 the shared claim's own choice scores on every node beside the new
                # claim's: b 8 + 7, a 7 + 7, normalized 100 and 93 (1.35's index-based
                # computeScore fails a pod with an allocated and a new claim: no scenario there).
                claiming("second", "shared", "prefer-a100"),
            ],
            ties=frozenset({"first"}),
        ),
    ]


# -- gangs: the Workload API, against kube-scheduler's GangScheduling ------------------------

SCENARIOS += [
    Scenario(
        "gangs: a Workload's gang is placed whole, a basic group pod by pod",
        nodes=[fake_node("a", cpu="2"), fake_node("b", cpu="4"), fake_node("c", cpu="8")],
        feature_gates=GANG_GATES,
        objects=workload("train", workers=3, solo=None),
        pods=[
            member("w-0", "train", "workers", cpu="1"),
            member("w-1", "train", "workers", cpu="1"),
            member("w-2", "train", "workers", cpu="1"),
            member("s-0", "train", "solo", cpu="1"),
        ],
        together=True,
        ties=frozenset({"w-0", "w-1", "w-2", "s-0"}),
    ),
    Scenario(
        "gangs: too few members, a missing Workload, a missing pod group: all held",
        nodes=THREE,
        feature_gates=GANG_GATES,
        objects=workload("short", workers=4),
        pods=[
            member("short-0", "short", "workers"),
            member("short-1", "short", "workers"),
            member("absent-0", "absent", "workers"),
            member("nogroup-0", "short", "nope"),
        ],
        together=True,
        held=frozenset({"short-0", "short-1", "absent-0", "nogroup-0"}),
    ),
    Scenario(
        "gangs: one member fits nowhere: its own message, its siblings wait",
        nodes=THREE,
        feature_gates=GANG_GATES,
        objects=workload("job", workers=3),
        pods=[
            member("job-0", "job", "workers"),
            member("job-1", "job", "workers"),
            member("job-2", "job", "workers", nodeSelector={"missing": "label"}),
        ],
        together=True,
        # 1.35: job-0 and job-1 wait on Permit (kube-scheduler's gang timeout is 5 minutes);
        # from 1.36 the pod group cycle fails them with their group.
        held=frozenset() if POD_GROUPS else frozenset({"job-0", "job-1"}),
    ),
]

# In-place pod resize and pod-level resources: requests read from the status too.
SCENARIOS += RESIZE_SCENARIOS
SCENARIOS += AFFINITY_SCENARIOS
