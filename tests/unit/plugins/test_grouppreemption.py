"""Workload-aware preemption (DefaultPreemption's PodGroupPostFilter, 1.37): the victims a
group may take and their order, budgets over whole victims, and the whole preemption on a
real cache, framework and group dry run: what it evicts, what it reprieves, where it
nominates the members, and that the cluster is left as it was."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME
from ascheduler.features import Release, parse_gates
from ascheduler.framework import Code, group_uid
from ascheduler.framework.runtime import Framework
from ascheduler.model import PodInfo
from ascheduler.model.objects import parse_budget
from ascheduler.model.podgroups import SchedulingGroup
from ascheduler.plugins.grouppreemption import (
    GROUP_RANK,
    POD_RANK,
    Victim,
    collect_victims,
    split_victims,
)
from tests.kit import node_info, on, parsed, pod
from tests.kit.groups import group_cluster, group_member, pod_group

V137 = parse_gates("GenericWorkload=true", Release(1, 37))
PROFILE = DEFAULT_SCHEDULER_NAME


group = pod_group


def bound(name: str, node: str, cpu: str = "1", **fields: Any) -> PodInfo:
    return parsed(on(node, pod(name, cpu=cpu, scheduler_name=PROFILE, **fields)))


def member(name: str, of: str, cpu: str = "1", **fields: Any) -> PodInfo:
    fields.setdefault("priority", 1000)
    return group_member(name, of, cpu, **fields)


# -- victims ---------------------------------------------------------------------------------


def test_victims_take_their_groups_priority_and_a_group_disrupted_whole_is_one() -> None:
    groups = {
        "default/all": group("all", 2, priority=5, disruptionMode={"all": {}}),
        "default/single": group("single", 1, priority=7),
        "default/top": group("top", 1, priority=2000),
    }
    pods = [
        bound("plain", "a", priority=10),
        bound("all-0", "a", priority=900, schedulingGroup={"podGroupName": "all"}),
        bound("all-1", "b", priority=900, schedulingGroup={"podGroupName": "all"}),
        bound("single-0", "b", priority=900, schedulingGroup={"podGroupName": "single"}),
        # Its pod says 1, its group 2000: not below the preemptor's 1000.
        bound("top-0", "b", priority=1, schedulingGroup={"podGroupName": "top"}),
        bound("high", "b", priority=1000),
    ]
    victims = collect_victims(pods, groups, 1000, now=100.0, started={})
    by_first = {v.pods[0].name: v for v in victims}
    assert set(by_first) == {"plain", "all-0", "single-0"}
    assert [p.name for p in by_first["all-0"].pods] == ["all-0", "all-1"]
    assert (by_first["all-0"].priority, by_first["all-0"].rank) == (5, GROUP_RANK)
    # A pod naming a PodGroup ranks as one even alone (kube-scheduler's `NewPodVictim`).
    assert (by_first["single-0"].priority, by_first["single-0"].rank) == (7, GROUP_RANK)
    assert (by_first["plain"].priority, by_first["plain"].rank) == (10, POD_RANK)


def test_victims_sort_by_priority_then_kind_then_size_then_start() -> None:
    p = bound("p", "a")
    q = bound("q", "a")
    victims = [
        Victim((p,), 5, POD_RANK, 10.0),
        Victim((p, q), 5, GROUP_RANK, 10.0),
        Victim((q,), 5, GROUP_RANK, 1.0),
        Victim((q,), 9, POD_RANK, 50.0),
        Victim((q,), 5, POD_RANK, 3.0),
    ]
    ordered = sorted(victims, key=Victim.sort_key)
    assert [(v.priority, v.rank, len(v.pods), v.started) for v in ordered] == [
        (9, POD_RANK, 1, 50.0),
        (5, GROUP_RANK, 2, 10.0),
        (5, GROUP_RANK, 1, 1.0),
        (5, POD_RANK, 1, 3.0),
        (5, POD_RANK, 1, 10.0),
    ]


def test_a_victim_violates_a_budget_as_a_whole_counting_its_violating_pods() -> None:
    web = {"matchLabels": {"app": "web"}}
    budget = parse_budget(
        {
            "metadata": {"name": "b", "namespace": "default"},
            "spec": {"selector": web},
            "status": {"disruptionsAllowed": 1},
        }
    )
    w0, w1, w2 = (bound(f"w{i}", "a", labels={"app": "web"}) for i in range(3))
    plain = bound("plain", "a")
    whole = Victim((w0, w1, w2), 1, GROUP_RANK, 0.0)
    alone = Victim((plain,), 1, POD_RANK, 0.0)
    violating, fine = split_victims([whole, alone], [budget])
    # w0 uses the one disruption allowed; w1 and w2 each take the budget below zero.
    assert violating == [(whole, 2)]
    assert fine == [alone]


# -- the whole preemption ------------------------------------------------------------------


class Evictions:
    """Records what the plugin hands over; its preemptions run until `finish`."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str, list[str], list[str]]] = []
        self.live: set[str] = set()

    def start(self, preemptor: PodInfo, node: str, victims: Sequence[PodInfo]) -> None:
        raise AssertionError("a pod preemption where a group's was expected")

    def start_group(
        self,
        group: SchedulingGroup,
        scheduler: str,
        victims: Sequence[PodInfo],
        members: Sequence[str] = (),
    ) -> None:
        self.started.append((group.key, scheduler, sorted(v.name for v in victims), list(members)))
        self.live.add(group_uid(group))

    def running(self, uid: str) -> bool:
        return uid in self.live


def cluster(
    *pods: PodInfo, groups: Sequence[SchedulingGroup] = (), cpu: str = "2"
) -> tuple[Cache, Framework, Evictions]:
    nodes = [node_info(name, cpu=cpu, labels={"pool": name}) for name in ("a", "b")]
    cache, frameworks = group_cluster(V137, nodes, groups, pods)
    fw = frameworks[PROFILE]
    evictions = Evictions()
    fw.handle.set_evictor(evictions)
    return cache, fw, evictions


def usage(cache: Cache) -> np.ndarray[Any, Any]:
    return np.array(cache.table.free, copy=True)


def test_a_gang_evicts_what_it_needs_reprieves_the_rest_and_nominates_its_members() -> None:
    train = group("train", 2, priority=1000)
    big = member("big", "train", cpu="2", node_selector={"pool": "a"})
    small = member("small", "train", cpu="1")
    cache, fw, evictions = cluster(
        bound("low-a0", "a", priority=10),
        bound("low-a1", "a", priority=10),
        bound("mid-b", "b", priority=20),
        bound("low-b", "b", priority=10),
        big,
        small,
        groups=[train],
    )
    before = usage(cache)
    status = fw.pod_group_post_filter(train, big)
    assert status.code is Code.SUCCESS
    assert (
        status.message
        == "pod group preemption: found a placement for podgroup, preempting 3 victims"
    )
    assert status.plugin == "DefaultPreemption"
    # Every victim taken off, the members placed (small fits only on b), then mid-b, the most
    # important, put back (small still fits beside it), low-b not.
    assert evictions.started == [
        ("default/train", PROFILE, ["low-a0", "low-a1", "low-b"], [big.uid, small.uid])
    ]
    assert fw.handle.nominator.node_of(big.uid) == "a"
    assert fw.handle.nominator.node_of(small.uid) == "b"
    assert np.array_equal(usage(cache), before)  # the dry run left nothing behind
    # Asked again while its evictions run (another member failing with the same attempt):
    # the same answer, and nothing evicted twice.
    again = fw.pod_group_post_filter(train, small)
    assert again.message == status.message
    assert len(evictions.started) == 1


def test_a_victim_group_disrupted_whole_goes_whole() -> None:
    batch = group("batch", 2, priority=10, disruptionMode={"all": {}})
    solo = group("solo", 1, priority=1000)
    vip = member("vip", "solo", cpu="2", node_selector={"pool": "a"})
    _, fw, evictions = cluster(
        bound("batch-0", "a", cpu="2", priority=10, schedulingGroup={"podGroupName": "batch"}),
        bound("batch-1", "b", cpu="2", priority=10, schedulingGroup={"podGroupName": "batch"}),
        vip,
        groups=[batch, solo],
    )
    status = fw.pod_group_post_filter(solo, vip)
    assert status.code is Code.SUCCESS
    assert evictions.started[0][2] == ["batch-0", "batch-1"]


def test_victims_are_found_by_their_groups_priority_whatever_their_own() -> None:
    # The pods' own priorities say the opposite of their groups': only the groups' count.
    old = group("old", 1, priority=10)
    new = group("new", 1, priority=5000)
    solo = group("solo", 1, priority=1000)
    vip = member("vip", "solo", cpu="2", node_selector={"pool": "a"})
    cache, fw, evictions = cluster(
        bound("old-0", "a", priority=2000, schedulingGroup={"podGroupName": "old"}),
        bound("new-0", "a", priority=1, schedulingGroup={"podGroupName": "new"}),
        vip,
        groups=[old, new, solo],
    )
    pods = {r: set(cache.table.pods(r)) for r in range(cache.table.n)}
    status = fw.pod_group_post_filter(solo, vip)
    # new-0 (its group above the preemptor's) stays: a's second CPU is not enough.
    assert status.message == (
        "deallocation and deletion of ResourceClaims completed, "
        "pod group preemption: minCount (1) cannot be satisfied: 0 scheduled, 0 remaining"
    )
    assert evictions.started == []
    # The dry run put every pod back where it was.
    assert {r: set(cache.table.pods(r)) for r in range(cache.table.n)} == pods
    vip_b = member("vip-b", "solo", cpu="1", node_selector={"pool": "a"})
    cache.gangs.add_pod(vip_b)
    status = fw.pod_group_post_filter(solo, vip_b)
    assert status.code is Code.SUCCESS
    assert evictions.started[0][2] == ["old-0"]


def test_no_lower_priority_pod_means_no_victims() -> None:
    train = group("train", 1, priority=10)
    m = member("m", "train", cpu="2", priority=10)
    _, fw, evictions = cluster(bound("same", "a", cpu="2", priority=10), m, groups=[train], cpu="2")
    status = fw.pod_group_post_filter(train, m)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert (
        status.message == "pod group preemption: No preemption victims found for incoming preemptor"
    )
    assert evictions.started == []


def test_a_group_too_big_even_with_every_victim_gone_says_why_and_evicts_nothing() -> None:
    train = group("train", 3, priority=1000)
    members = [member(f"m{i}", "train", cpu="2") for i in range(3)]
    cache, fw, evictions = cluster(bound("low", "a", priority=10), *members, groups=[train])
    before = usage(cache)
    status = fw.pod_group_post_filter(train, members[0])
    assert status.code is Code.UNSCHEDULABLE
    # Two nodes of 2 CPUs: two members placed, the third fits nowhere. (DynamicResources,
    # first in the profile's order, has released the group's claims: kube's reasons joined.)
    assert status.message == (
        "deallocation and deletion of ResourceClaims completed, "
        "pod group preemption: minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    )
    assert evictions.started == []
    assert fw.handle.nominator.node_of(members[0].uid) == ""
    assert np.array_equal(usage(cache), before)


@pytest.mark.parametrize("by_group", [False, True])
def test_a_group_that_may_not_preempt_is_not_eligible(by_group: bool) -> None:
    gates = "GenericWorkload=true" + (",PodGroupPreemptionPolicy=true" if by_group else "")
    features = parse_gates(gates, Release(1, 37))
    train = group("train", 1, priority=1000, preemptionPolicy="Never" if by_group else None)
    m = member("m", "train", cpu="2", preemptionPolicy="Never" if not by_group else None)
    low = bound("low", "a", cpu="2", priority=1)
    _, frameworks = group_cluster(features, [node_info("a", cpu="2")], [train], [low, m])
    status = frameworks[PROFILE].pod_group_post_filter(train, m)
    assert status.code is Code.UNSCHEDULABLE
    assert status.message.endswith(
        "pod group preemption: not eligible due to preemptionPolicy=Never."
    )
