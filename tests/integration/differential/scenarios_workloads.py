"""Gangs of kube-scheduler's own pod groups, on the plane's release, against its
GangScheduling: the Workload API's `spec.workloadRef` at 1.35, `scheduling.k8s.io` PodGroup
objects named by `spec.schedulingGroup` from 1.36 (`v1alpha2`; `v1beta1` in 1.37).

The builders here give each release's objects and gates, so one scenario says the same on
every release; what a release decides differently (1.36's pod group cycle fails the members
that fit when their group does not, where 1.35 keeps them waiting on Permit) is written per
release."""

from __future__ import annotations

from typing import Any

from ascheduler.features import Release
from tests.integration.differential.harness import Json, Scenario, fake_node, pause, plane_release

RELEASE = plane_release()
#: From 1.36 pods name a PodGroup object; the pod group cycle decides a group at once.
POD_GROUPS = Release(1, 36) <= RELEASE
#: The gates both schedulers run gang scenarios with: the GangScheduling gate is gone in 1.37,
#: where GenericWorkload alone puts the plugin in the default profile.
GANG_GATES = (
    "GenericWorkload=true"
    if Release(1, 37) <= RELEASE
    else "GenericWorkload=true,GangScheduling=true"
)
#: The version the plane serves PodGroups (1.36 on) or Workloads (1.35) as.
API_VERSION = {Release(1, 36): "v1alpha2", Release(1, 37): "v1beta1"}.get(RELEASE, "v1alpha1")


def _policy(count: int | None) -> Json:
    return {"basic": {}} if count is None else {"gang": {"minCount": count}}


def workload(name: str, **groups: int | None) -> list[tuple[str, Json]]:
    """A workload's groups: a gang of `minCount` (an int), or a basic group (None). At 1.35 a
    Workload with those pod groups; from 1.36 one PodGroup object per group, named
    `<workload>-<group>`, made from the Workload's template of that name."""
    if not POD_GROUPS:
        return [
            (
                "scheduling.k8s.io/v1alpha1/workloads",
                {
                    "apiVersion": "scheduling.k8s.io/v1alpha1",
                    "kind": "Workload",
                    "metadata": {"name": name},
                    "spec": {
                        "podGroups": [
                            {"name": group, "policy": _policy(count)}
                            for group, count in groups.items()
                        ]
                    },
                },
            )
        ]
    return [pod_group(f"{name}-{group}", count) for group, count in groups.items()]


def pod_group(name: str, count: int | None, **spec: Any) -> tuple[str, Json]:
    """A `scheduling.k8s.io` PodGroup (1.36 on) of its own, with no Workload behind it."""
    return (
        f"scheduling.k8s.io/{API_VERSION}/podgroups",
        {
            "apiVersion": f"scheduling.k8s.io/{API_VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"schedulingPolicy": _policy(count), **spec},
        },
    )


def member(name: str, workload_name: str, group: str, **kw: Any) -> Json:
    """A pod of the workload's group: `spec.workloadRef` at 1.35, `spec.schedulingGroup`
    naming the group's PodGroup from 1.36."""
    if POD_GROUPS:
        return pause(name, schedulingGroup={"podGroupName": f"{workload_name}-{group}"}, **kw)
    return pause(name, workloadRef={"name": workload_name, "podGroup": group}, **kw)


THREE = [fake_node("a", zone="z1"), fake_node("b", zone="z1"), fake_node("c", zone="z2")]

WORKLOADS: list[Scenario] = []

if POD_GROUPS:
    WORKLOADS += [
        Scenario(
            "workloads: a member too big for any node: the members that fit fail with it",
            nodes=[fake_node("a", cpu="2"), fake_node("b", cpu="2")],
            feature_gates=GANG_GATES,
            objects=workload("big", workers=4),
            pods=[
                *(member(f"big-{i}", "big", "workers", cpu="1") for i in range(3)),
                member("big-3", "big", "workers", cpu="3"),
            ],
            together=True,
            ties=frozenset({"big-0", "big-1", "big-2"}),
        ),
        Scenario(
            "workloads: a gang and a basic group of one workload, both placed",
            nodes=[fake_node("a", cpu="2"), fake_node("b", cpu="3")],
            feature_gates=GANG_GATES,
            objects=workload("mixed", gang=2, solo=None),
            pods=[
                member("g-0", "mixed", "gang", cpu="1"),
                member("g-1", "mixed", "gang", cpu="1"),
                member("s-0", "mixed", "solo", cpu="1"),
                member("s-1", "mixed", "solo", cpu="1"),
                member("s-2", "mixed", "solo", cpu="1"),
            ],
            together=True,
            ties=frozenset({"g-0", "g-1", "s-0", "s-1", "s-2"}),
        ),
        Scenario(
            "workloads: more members than minCount, one that fits nowhere: the rest are placed",
            nodes=THREE,
            feature_gates=GANG_GATES,
            objects=workload("spare", workers=2),
            pods=[
                member("spare-0", "spare", "workers"),
                member("spare-1", "spare", "workers"),
                member("spare-2", "spare", "workers", nodeSelector={"missing": "label"}),
            ],
            together=True,
            ties=frozenset({"spare-0", "spare-1"}),
        ),
        Scenario(
            "workloads: a gated member counts for the quorum, the others fail without it",
            nodes=THREE,
            feature_gates=GANG_GATES,
            objects=workload("gated", workers=3),
            pods=[
                member("gated-0", "gated", "workers"),
                member("gated-1", "gated", "workers"),
                member("gated-2", "gated", "workers", schedulingGates=[{"name": "example/hold"}]),
            ],
            together=True,
            # 1.36 tries the two others and fails them with their group; 1.37 queues the
            # group as one entity, held while a member is gated.
            held=frozenset({"gated-2"})
            if Release(1, 37) > RELEASE
            else frozenset({"gated-0", "gated-1", "gated-2"}),
        ),
    ]

if POD_GROUPS:
    # What the PodGroups' status says is compared too (`groups.py`).
    WORKLOADS += [
        Scenario(
            "workloads: a basic group none of whose pods fit: its PodGroup is unschedulable",
            nodes=[fake_node("a", cpu="2")],
            feature_gates=GANG_GATES,
            objects=workload("solo", any=None),
            pods=[member(f"solo-{i}", "solo", "any", cpu="3") for i in range(2)],
            together=True,
        ),
        Scenario(
            "workloads: members of a priority their group lacks (1.37 refuses the group)",
            nodes=THREE,
            feature_gates=GANG_GATES,
            objects=workload("prio", workers=2),
            pods=[
                member(f"prio-{i}", "prio", "workers", priorityClassName="diff-high")
                for i in range(2)
            ],
            together=True,
            ties=frozenset({"prio-0", "prio-1"}),
        ),
        Scenario(
            "workloads: members of one priority, two preemption policies (1.37 refuses them)",
            nodes=THREE,
            feature_gates=GANG_GATES,
            objects=[pod_group("pol-workers", 2, priorityClassName="diff-high")],
            pods=[
                member("pol-0", "pol", "workers", priorityClassName="diff-high"),
                member("pol-1", "pol", "workers", priorityClassName="diff-never"),
            ],
            together=True,
            ties=frozenset({"pol-0", "pol-1"}),
        ),
        Scenario(
            "workloads: a gang that may not preempt (preemptionPolicy Never) fails saying so",
            nodes=[fake_node("a", cpu="2"), fake_node("b", cpu="2")],
            feature_gates=GANG_GATES,
            objects=[pod_group("never-workers", 2, priorityClassName="diff-never")],
            pods=[
                member("never-0", "never", "workers", cpu="1", priorityClassName="diff-never"),
                member("never-1", "never", "workers", cpu="3", priorityClassName="diff-never"),
            ],
            together=True,
            ties=frozenset({"never-0"}),
        ),
    ]

POOLS = [
    fake_node("a", cpu="2", labels={"pool": "a"}),
    fake_node("b", cpu="2", labels={"pool": "b"}),
]
#: Two low pods on a, a mid and a low one on b: what the `pre` gang's members make room in.
HELD = [
    pause("low-a0", cpu="1", node="a", priorityClassName="diff-low"),
    pause("low-a1", cpu="1", node="a", priorityClassName="diff-low"),
    pause("mid-b", cpu="1", node="b", priorityClassName="diff-mid"),
    pause("low-b", cpu="1", node="b", priorityClassName="diff-low"),
]


def pre_member(name: str, cpu: str, pool: str = "") -> Json:
    """A high-priority member of the `pre` gang (on `pool`'s node, if named)."""
    spec: dict[str, Any] = {"nodeSelector": {"pool": pool}} if pool else {}
    return member(name, "pre", "workers", cpu=cpu, priorityClassName="diff-high", **spec)


if POD_GROUPS and Release(1, 37) > RELEASE:
    # 1.36: each member preempts for itself (its own PostFilter), the group waits for it.
    WORKLOADS += [
        Scenario(
            "workloads: a gang whose members fit only after preemption (1.36: each preempts)",
            nodes=POOLS,
            feature_gates=GANG_GATES,
            existing=HELD,
            objects=[pod_group("pre-workers", 2, priorityClassName="diff-high")],
            pods=[
                pre_member("pre-big", "2", "a"),
                pre_member("pre-small", "2", "b"),
            ],
            together=True,
            preemption=True,
        ),
    ]

if Release(1, 37) <= RELEASE:
    # Workload-aware preemption (DefaultPreemption's PodGroupPostFilter): the victims, the
    # members' nominations and first failures, and where they end up, compared.
    WORKLOADS += [
        Scenario(
            "workloads: a gang that fits only after preemption evicts the least it needs",
            nodes=POOLS,
            feature_gates=GANG_GATES,
            existing=HELD,
            objects=[pod_group("pre-workers", 2, priorityClassName="diff-high")],
            pods=[
                pre_member("pre-big", "2", "a"),
                pre_member("pre-small", "1"),
            ],
            together=True,
            preemption=True,
        ),
        Scenario(
            "workloads: a victim group disrupted as a whole goes whole",
            nodes=[
                fake_node("a", cpu="1", labels={"pool": "a"}),
                fake_node("b", cpu="1", labels={"pool": "b"}),
            ],
            feature_gates=GANG_GATES,
            objects=[
                pod_group("batch-all", 2, priorityClassName="diff-low", disruptionMode={"all": {}}),
                pod_group("vip-solo", 1, priorityClassName="diff-high"),
            ],
            existing=[
                member("batch-0", "batch", "all", cpu="1", node="a", priorityClassName="diff-low"),
                member("batch-1", "batch", "all", cpu="1", node="b", priorityClassName="diff-low"),
            ],
            pods=[
                member(
                    "vip",
                    "vip",
                    "solo",
                    cpu="1",
                    priorityClassName="diff-high",
                    nodeSelector={"pool": "a"},
                )
            ],
            together=True,
            preemption=True,
        ),
    ]
    WEB_BUDGET = (
        "policy/v1/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    WORKLOADS += [
        Scenario(
            "workloads: a group's preemption reprieves the victim a budget protects first",
            nodes=POOLS,
            feature_gates=GANG_GATES,
            objects=[WEB_BUDGET, pod_group("pdb-workers", 1, priorityClassName="diff-high")],
            existing=[
                pause(
                    "guarded",
                    cpu="1",
                    node="a",
                    labels={"app": "web"},
                    priorityClassName="diff-low",
                ),
                pause("plain", cpu="1", node="a", priorityClassName="diff-low"),
                pause("full-b", cpu="2", node="b", priorityClassName="diff-high"),
            ],
            pods=[
                member(
                    "pdb-0",
                    "pdb",
                    "workers",
                    cpu="1",
                    priorityClassName="diff-high",
                    nodeSelector={"pool": "a"},
                )
            ],
            together=True,
            preemption=True,
        ),
        Scenario(
            "workloads: a basic group's member that fits only after preemption preempts",
            nodes=POOLS,
            feature_gates=GANG_GATES,
            objects=[pod_group("any-workers", None, priorityClassName="diff-high")],
            existing=[
                pause("low-a", cpu="2", node="a", priorityClassName="diff-low"),
                pause("low-b", cpu="1", node="b", priorityClassName="diff-low"),
            ],
            # One member: kube-scheduler may pop a basic group's first member before a
            # second one is queued, so two would make the scenario a race.
            pods=[
                member(
                    "any-0",
                    "any",
                    "workers",
                    cpu="2",
                    priorityClassName="diff-high",
                    nodeSelector={"pool": "a"},
                )
            ],
            together=True,
            preemption=True,
        ),
        Scenario(
            "workloads: a gang too big even after preemption evicts nothing and says why",
            nodes=POOLS,
            feature_gates=GANG_GATES,
            objects=[pod_group("huge-workers", 3, priorityClassName="diff-high")],
            existing=[pause("low-a", cpu="1", node="a", priorityClassName="diff-low")],
            pods=[
                member(f"huge-{i}", "huge", "workers", cpu="2", priorityClassName="diff-high")
                for i in range(3)
            ],
            together=True,
            preemption=True,
            ties=frozenset({"huge-0", "huge-1", "huge-2"}),
        ),
    ]
