"""The pod group algorithm as a dry run: members placed one after another on the cache's
node table (each seeing those before it), the group's verdict as GangScheduling's
PlacementFeasible gives it, and the table as it was afterwards."""

from __future__ import annotations

from typing import Any

import numpy as np

from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME
from ascheduler.features import Release, parse_gates
from ascheduler.framework import Code
from ascheduler.groupplanner import GroupPlanner
from ascheduler.model import PodInfo
from ascheduler.model.podgroups import SchedulingGroup
from tests.kit import node_info, on, parsed, pod
from tests.kit.groups import group_cluster, group_member, pod_group

V137 = parse_gates("GenericWorkload=true", Release(1, 37))
PROFILE = DEFAULT_SCHEDULER_NAME


def group(count: int | None) -> SchedulingGroup:
    return pod_group("g", count, uid="pg")


def member(name: str, cpu: str, **fields: Any) -> PodInfo:
    return group_member(name, "g", cpu, **fields)


def planner(g: SchedulingGroup, *pods: PodInfo, nodes: int = 2) -> tuple[Cache, GroupPlanner]:
    cache, frameworks = group_cluster(
        V137, [node_info(f"n{i}", cpu="2") for i in range(nodes)], [g], pods
    )
    return cache, GroupPlanner(cache, frameworks)


def test_members_are_placed_each_seeing_those_before_it_and_the_table_is_left_alone() -> None:
    g = group(3)
    low = parsed(on("n0", pod("low", cpu="2", priority=1)))
    members = [member(f"m{i}", cpu="1", priority=5) for i in range(4)]
    cache, plan = planner(g, low, *members)
    before = np.array(cache.table.free, copy=True)
    assert [p.name for p in plan.members(g)] == ["m0", "m1", "m2", "m3"]
    # With `low` taken off, four 1-CPU members fill both nodes, two on each.
    placed = plan.place(g, [low])
    assert placed.status.code is Code.SUCCESS
    nodes = [a.node for a in placed.assignments]
    assert sorted(nodes) == ["n0", "n0", "n1", "n1"]
    assert np.array_equal(cache.table.free, before)
    # Without taking it off, only n1's two CPUs are there: two placed, short of three.
    short = plan.place(g, [])
    assert short.status.code is Code.UNSCHEDULABLE
    assert short.status.message == "minCount (3) cannot be satisfied: 2 scheduled, 0 remaining"
    assert np.array_equal(cache.table.free, before)


def test_a_gang_stops_as_soon_as_the_quorum_is_out_of_reach() -> None:
    g = group(2)
    _, plan = planner(g, member("huge", cpu="8"), member("small", cpu="1"))
    result = plan.place(g, [])
    # `huge` fits nowhere: 0 scheduled and 1 remaining cannot make 2; `small` is not tried.
    assert result.status.message == "minCount (2) cannot be satisfied: 0 scheduled, 1 remaining"
    assert result.assignments == ()


def test_a_basic_group_needs_one_member_placed() -> None:
    g = group(None)
    _, plan = planner(g, member("huge", cpu="8"), member("small", cpu="1"))
    result = plan.place(g, [])
    assert result.status.code is Code.SUCCESS
    assert [a.pod.name for a in result.assignments] == ["small"]
    _, nothing = planner(g, member("huge", cpu="8"))
    none = nothing.place(g, [])
    assert (none.status.code, none.status.message) == (Code.UNSCHEDULABLE, "")


def test_members_reserved_already_are_taken_off_and_placed_afresh() -> None:
    g = group(2)
    first, second = member("first", cpu="2"), member("second", cpu="2")
    cache, plan = planner(g, first, second, nodes=2)
    # `first` reserved on n0 (waiting on Permit for `second`): on the table now.
    cache.assume(first, "n0")
    cache.gangs.assume(first)
    assert [p.name for p in plan.reserved(g)] == ["first"]
    before = np.array(cache.table.free, copy=True)
    result = plan.place(g, [])
    assert result.status.code is Code.SUCCESS
    assert sorted(a.node for a in result.assignments) == ["n0", "n1"]
    assert np.array_equal(cache.table.free, before)
