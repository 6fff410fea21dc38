"""Topology on the real plane: a Deployment (created by the plane's kube-controller-manager)
spread over zones with one replica per node; pods whose constraints cannot be met reported
with kube-scheduler's reasons; pods with absurd or enormous constraints neither crash the
scheduler nor stop it scheduling everything else."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ascheduler.devcluster.demo import spread_deployment
from ascheduler.devcluster.nodes import FakeNodes
from ascheduler.devcluster.processes import ProcessRecord, is_alive
from ascheduler.kube import KubeClient
from tests.integration.conftest import NodeFactory
from tests.integration.helpers import (
    NO_NEW_CLAIMS,
    create_pods,
    eventually,
    pause_pod,
    pods_in,
    wait_bound,
    wait_unschedulable,
)

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


async def test_a_deployment_spreads_over_zones_one_replica_per_node(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    zone_of = {}
    for zone in ("a", "b", "c"):
        for name in await nodes(
            FakeNodes(count=2, prefix=f"{namespace}-{zone}", labels={ZONE: zone})
        ):
            zone_of[name] = zone
    deployment = spread_deployment("web", 7, "ascheduler")
    await kube.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)

    async def decided() -> dict[str, dict[str, Any]] | None:
        pods = await pods_in(kube, namespace)
        if len(pods) < 7:
            return None
        bound = [p for p in pods.values() if p["spec"].get("nodeName")]
        pending = [
            p
            for p in pods.values()
            if any(
                c.get("type") == "PodScheduled" and c.get("status") == "False"
                for c in p.get("status", {}).get("conditions") or []
            )
        ]
        return pods if len(bound) == 6 and len(pending) == 1 else None

    pods = await eventually(decided, what="6 replicas bound and the 7th pending", timeout=90)
    placed = [p["spec"]["nodeName"] for p in pods.values() if p["spec"].get("nodeName")]
    assert len(set(placed)) == 6  # one per node
    assert Counter(zone_of[n] for n in placed) == {"a": 2, "b": 2, "c": 2}
    (pending,) = [p for p in pods.values() if not p["spec"].get("nodeName")]
    message = await wait_unschedulable(kube, namespace, pending["metadata"]["name"])
    assert message == (
        "0/6 nodes are available: 6 node(s) didn't match pod anti-affinity rules. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/6 nodes are available: 6 No preemption victims found for incoming pod."
    )
    assert is_alive(ascheduler)


async def test_unmeetable_and_enormous_constraints_are_reported_and_others_scheduled(
    ascheduler: ProcessRecord, kube: KubeClient, namespace: str, nodes: NodeFactory
) -> None:
    await nodes(FakeNodes(count=3, prefix=f"{namespace}-n", labels={ZONE: "a"}))
    no_such_key = pause_pod(
        "no-such-key",
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "example.com/rack",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ],
    )
    absurd_skew = pause_pod(
        "absurd-skew",
        topologySpreadConstraints=[
            {
                "maxSkew": 2**31 - 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
            }
        ],
    )
    selects_nothing = pause_pod(
        "selects-nothing",
        affinity={
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "x"}},
                        "namespaceSelector": {"matchLabels": {"no": "such-namespace"}},
                        "topologyKey": ZONE,
                    }
                ]
            }
        },
    )
    many = [
        {"labelSelector": {"matchLabels": {"app": f"a{i}"}}, "topologyKey": HOSTNAME}
        for i in range(10_000)
    ]
    many_terms = pause_pod(
        "many-terms",
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": many}},
    )
    plain = [pause_pod(f"plain-{i}") for i in range(5)]
    await create_pods(
        kube, namespace, [no_such_key, absurd_skew, selects_nothing, many_terms, *plain]
    )

    await wait_bound(kube, namespace, [f"plain-{i}" for i in range(5)])
    await wait_bound(kube, namespace, ["absurd-skew", "many-terms"], timeout=120)
    message = await wait_unschedulable(kube, namespace, "no-such-key")
    assert message == (
        "0/3 nodes are available: 3 node(s) didn't match pod topology spread constraints "
        "(missing required label). "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    # No pod matches in no namespace: the pod is not the first of its group (it does not
    # match its own term), so nothing fits.
    message = await wait_unschedulable(kube, namespace, "selects-nothing")
    assert message == (
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
        f"{NO_NEW_CLAIMS}"
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )
    assert is_alive(ascheduler)
