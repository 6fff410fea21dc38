"""The benchmark workloads are what they say: every pod schedulable on the workload's nodes,
and each shape lands where its constraints allow (checked with ascheduler's own cycle)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME
from ascheduler.devcluster.nodes import csinode_body, fake_node_body
from ascheduler.framework import CycleState, Handle, multipoint
from ascheduler.framework.runtime import Framework
from ascheduler.model import parse_node, parse_pod
from ascheduler.model.storage import parse_claim, parse_csi_node, parse_volume
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.volumematching import bound_to, fully_bound
from benchmarks.algorithm import DRA_DEVICES, add_devices, dra_pod
from benchmarks.objects import gang_latencies
from benchmarks.workloads import (
    CSI_DRIVER,
    CSI_LIMIT,
    GANG_GROUP,
    GPU,
    HIGH,
    WORKLOADS,
    ZONE,
    bound_claim,
    bound_volume,
    gang_workload,
    gpu_nodes,
    mixed_nodes,
    mixed_pod,
    pod_group,
)
from tests.unit.test_scheduler import Env


def nodes_of(groups: Any) -> tuple[Any, dict[str, dict[str, Any]]]:
    bodies = {name: fake_node_body(name, g) for g in groups for name in g.names()}
    return [parse_node(b) for b in bodies.values()], bodies


def test_every_workload_names_its_sizes() -> None:
    for name, w in WORKLOADS.items():
        assert f"{w.node_count()}Nodes" in name
        # a steady state has no initial pods: it starts with claims allocated instead
        assert w.initial_pods > 0 or w.steady_state is not None
        assert w.measured_pods > 0
    assert WORKLOADS["SchedulingBasic_5000Nodes_10000Pods"].measured_pods == 10000
    assert WORKLOADS["SchedulingBasic_5000Nodes_10000Pods"].initial_pods == 1000


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_pods_parse_cleanly(name: str) -> None:
    w = WORKLOADS[name]
    for i in range(40):
        body = w.pod(f"p-{i}", "s", i)
        body["metadata"].update(namespace="ns", uid=f"u{i}")
        assert parse_pod(body).errors == ()
        # As the API server requires: an extended resource's limit equals its request.
        resources = body["spec"]["containers"][0]["resources"]
        for key, value in resources["requests"].items():
            if "/" in key:
                assert resources["limits"][key] == value


def test_mixed_groups_add_up_and_are_distinct() -> None:
    groups = mixed_nodes(1000)("n")
    names = [n for g in groups for n in g.names()]
    assert len(names) == len(set(names)) == 1000


async def test_mixed_pods_land_where_their_constraints_allow() -> None:
    infos, bodies = nodes_of(mixed_nodes(40)("n"))
    env = Env(*infos)
    placed: dict[int, str] = {}
    for i in range(200):
        body = mixed_pod(f"p-{i}", DEFAULT_SCHEDULER_NAME, i)
        body["metadata"].update(namespace="ns", uid=f"u{i}")
        result, _ = await env.attempt(parse_pod(body))
        assert result is not None, f"pod {i} unschedulable"
        placed[i] = result.node
    for i, node in placed.items():
        labels = bodies[node]["metadata"]["labels"]
        taints = {t["key"] for t in bodies[node]["spec"].get("taints", [])}
        gpus = int(bodies[node]["status"]["capacity"].get(GPU, "0"))
        kind = i % 10
        if kind >= 8:
            assert gpus > 0, (i, node)
        else:
            assert GPU not in taints, (i, node)
        if kind in (4, 5):
            assert labels[ZONE] == ("zone-a", "zone-b", "zone-c")[i % 3]
        if kind == 6:
            assert labels[ZONE] != ("zone-a", "zone-b", "zone-c")[i % 3]
        if kind == 7:
            assert labels.get("node-role") == "infra"
        if kind < 7:
            assert "dedicated" not in taints, (i, node)


async def test_gpu_pods_fill_gpu_nodes_to_their_count() -> None:
    infos, _ = nodes_of(gpu_nodes(2)("g"))
    env = Env(*infos)
    workload = WORKLOADS["GPU_NodeLocks_500Nodes"]
    outcomes = []
    for i in range(17):
        body = workload.pod(f"p-{i}", DEFAULT_SCHEDULER_NAME, i)
        body["metadata"].update(namespace="ns", uid=f"u{i}")
        result, _ = await env.attempt(parse_pod(body))
        outcomes.append(result is not None)
    assert outcomes == [True] * 16 + [False]  # 2 nodes x 8 GPUs


def test_claimed_pods_get_a_bound_pair_and_nodes_a_csinode() -> None:
    w = WORKLOADS["SchedulingCSIPVs_5000Nodes_5000Pods"]
    assert w.claims
    body = w.pod("m-3", "s", 3)
    (volume,) = body["spec"]["volumes"]
    claim_body = bound_claim("ns", "m-3")
    assert volume["persistentVolumeClaim"]["claimName"] == claim_body["metadata"]["name"]
    claim = parse_claim({**claim_body, "metadata": {**claim_body["metadata"], "namespace": "ns"}})
    claim = dataclasses.replace(claim, uid="claim-uid")
    pv = parse_volume(bound_volume("ns", "m-3", "claim-uid"))
    assert fully_bound(claim)
    assert bound_to(pv, claim)
    assert pv.name == claim.volume_name
    assert pv.csi_driver == CSI_DRIVER
    # Another run's volume of the same pod name is a different object.
    assert parse_volume(bound_volume("other", "m-3", "x")).name != pv.name

    (group,) = w.nodes("n")
    node = {"metadata": {"name": "n-0", "uid": "node-uid"}}
    csinode = parse_csi_node(csinode_body(node, group.csi_drivers))
    assert csinode.name == "n-0"
    assert [(d.name, d.count) for d in csinode.drivers.values()] == [(CSI_DRIVER, CSI_LIMIT)]
    assert csinode.errors == ()


def test_dra_pods_take_one_device_each_until_the_nodes_have_none_left() -> None:
    """The DRA shape (the plane workload's slices and claims, the algorithm benchmark's
    cycle): 2 nodes of 8 devices place 16 pods, the 17th cannot allocate its claim."""
    assert WORKLOADS["SchedulingWithResourceClaimTemplate_5000Nodes_8Devices"].devices_per_node
    cache = Cache()
    infos, _ = nodes_of(WORKLOADS["Smoke_DRA_10Nodes"].nodes("n"))
    for info in infos[:2]:
        cache.add_node(info)
    add_devices(cache, cache.table.names, 17)
    handle = Handle(nodes=cache.table, storage=cache.storage, resources=cache.resources)
    fw = Framework(multipoint("s"), IN_TREE, handle)
    placed: list[str] = []
    for i in range(17):
        pod, state = dra_pod(i), CycleState()
        result = fw.find_nodes(state, pod, cache.table)
        if result.node is None:
            assert i == 2 * DRA_DEVICES
            assert "2 cannot allocate all claims" in result.status.message
            break
        assert fw.reserve(state, pod, result.node).ok
        cache.assume(pod, result.node)
        placed.append(result.node)
    assert sorted(placed) == sorted(cache.table.names * DRA_DEVICES)


def test_gang_workloads_group_the_measured_pods_and_name_their_sizes() -> None:
    w = WORKLOADS["GangScheduling_5000Nodes_1000Gangs_3000Pods"]
    assert (w.gangs(), w.gang_size) == (1000, 3)
    assert "GangScheduling=true" in w.feature_gates
    assert "workloadRef" not in w.pod("init-0", "s", 999)["spec"]  # initial pods: plain
    refs = [w.pod(f"m-{i}", "s", 1000 + i)["spec"]["workloadRef"] for i in range(7)]
    assert [r["name"] for r in refs] == ["gang-0"] * 3 + ["gang-1"] * 3 + ["gang-2"]
    assert {r["podGroup"] for r in refs} == {GANG_GROUP}
    body = gang_workload("gang-1", 3)
    assert body["spec"]["podGroups"] == [{"name": GANG_GROUP, "policy": {"gang": {"minCount": 3}}}]
    one = WORKLOADS["GangScheduling_5000Nodes_1Gang_5000Pods"]
    assert (one.gangs(), one.gang_size, one.measured_pods) == (1, 5000, 5000)


def test_pod_group_workloads_are_scheduler_perfs_podgroup_families() -> None:
    gangs = WORKLOADS["PodGroupGangScheduling_5000Nodes_1000Gangs_3000Pods"]
    assert (gangs.gangs(), gangs.gang_size, gangs.initial_pods) == (1000, 3, 1000)
    assert (gangs.pod_group_policy, gangs.feature_gates) == ("gang", "GenericWorkload=true")
    assert gangs.releases == ("1.37",)
    assert "schedulingGroup" not in gangs.pod("init-0", "s", 999)["spec"]  # initial: plain
    groups = [gangs.pod(f"m-{i}", "s", 1000 + i)["spec"]["schedulingGroup"] for i in range(4)]
    assert [g["podGroupName"] for g in groups] == ["gang-0"] * 3 + ["gang-1"]
    requests = gangs.pod("m-0", "s", 1000)["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "100m", "memory": "100Mi"}
    assert pod_group("gang-1", 3, "gang", "v1beta1") == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "gang-1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 3}}},
    }
    assert pod_group("basic-0", 3, "basic", "v1alpha2")["spec"] == {
        "schedulingPolicy": {"basic": {}}
    }
    sizes = {
        name: (w.gangs(), w.gang_size, w.pod_group_policy)
        for name, w in WORKLOADS.items()
        if w.pod_group_policy and not name.startswith(("Smoke", "GangPreemption"))
    }
    assert sizes == {
        "PodGroupGangScheduling_5000Nodes_1000Gangs_3000Pods": (1000, 3, "gang"),
        "PodGroupGangScheduling_5000Nodes_3Gangs_3000Pods_1000PerGroup": (3, 1000, "gang"),
        "PodGroupBasicScheduling_5000Nodes_1000Groups_3000Pods": (1000, 3, "basic"),
        "PodGroupBasicScheduling_5000Nodes_3Groups_3000Pods_1000PerGroup": (3, 1000, "basic"),
        "PodGroupGangScheduling_5000Nodes_10Gangs_50000Pods": (10, 5000, "gang"),
    }


def test_gang_preemption_workloads_are_scheduler_perfs_workload_preemption_families() -> None:
    w = WORKLOADS["GangPreemptionBasic_100Nodes_10PreemptorGangs_10Pods_Evicting_1000InitPods"]
    assert (w.initial_pods, w.gangs(), w.gang_size, w.releases) == (1000, 10, 10, ("1.37",))
    # The low-priority pods: 40m, no grace period, ten host ports, so ten on every node.
    low = [w.pod(f"init-{i}", "s", i)["spec"] for i in range(12)]
    assert {s["containers"][0]["resources"]["requests"]["cpu"] for s in low} == {"40m"}
    assert {s["terminationGracePeriodSeconds"] for s in low} == {0}
    ports = [s["containers"][0]["ports"][0]["hostPort"] for s in low]
    assert ports == [8000 + i % 10 for i in range(12)]
    assert "priorityClassName" not in low[0]
    # The preemptors: 3970m (a node's 4 CPUs less the ten 40m pods do not hold it), high
    # priority, in PodGroups of ten made with the same class.
    high = w.pod("m-0", "s", 1000)["spec"]
    assert high["containers"][0]["resources"]["requests"]["cpu"] == "3970m"
    assert (high["priorityClassName"], high["schedulingGroup"]) == (
        HIGH,
        {"podGroupName": "gang-0"},
    )
    assert w.pod("m-10", "s", 1010)["spec"]["schedulingGroup"] == {"podGroupName": "gang-1"}
    assert w.pod_group_priority_class == HIGH
    assert pod_group("gang-0", 10, "gang", "v1beta1", HIGH)["spec"]["priorityClassName"] == HIGH
    one = WORKLOADS["GangPreemptionBasic_100Nodes_1PreemptorGang_100Pods_Evicting_1000InitPods"]
    assert (one.gangs(), one.gang_size) == (1, 100)


def test_a_gang_is_bound_when_its_last_member_is_from_its_last_member_created() -> None:
    w = WORKLOADS["Smoke_Gangs_10Nodes"]  # gangs of 4
    created = {f"m-{i}": float(i) for i in range(8)}
    bound = {f"m-{i}": 10.0 + i for i in range(4)}  # gang-0: created by 3, bound by 13
    bound |= {"m-4": 20.0, "m-5": 21.0, "m-6": 21.5, "m-7": 30.0, "init-0": 99.0}
    assert sorted(gang_latencies(w, created, bound)) == [10.0, 23.0]
