"""DefaultPreemption's rules that need no cycle: its arguments, victims' importance, budgets,
and the choice among candidate nodes (kube-scheduler's `pickOneNodeForPreemption`)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import Features, Release
from ascheduler.framework.errors import PluginArgsError
from ascheduler.framework.interface import Code, Diagnosis, FilterResult
from ascheduler.framework.runtime import recorded_status
from ascheduler.model import PodInfo, parse_pod
from ascheduler.model.objects import parse_budget
from ascheduler.plugins.defaultpreemption import (
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    Candidate,
    DefaultPreemptionArgs,
    eligible,
    importance,
    on_current_rows,
    pick,
    split_by_budgets,
)
from tests.kit import node_info, on, pod
from tests.kit.scheduling import Env

NOW = 2_000_000_000.0


def victim(
    name: str, priority: int, started: str = "", labels: dict[str, str] | None = None
) -> PodInfo:
    raw = pod(name, priority=priority, labels=labels)
    if started:
        raw["status"] = {"startTime": started}
    return parse_pod(raw)


def budget(name: str, allowed: int, selector: Any, **status: Any) -> Any:
    return parse_budget(
        {
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector},
            "status": {"disruptionsAllowed": allowed, **status},
        }
    )


# -- arguments ---------------------------------------------------------------------------------


def test_args_validate_as_kube_scheduler() -> None:
    with pytest.raises(PluginArgsError, match="minCandidateNodesPercentage: not in valid range"):
        DefaultPreemptionArgs(min_candidate_nodes_percentage=101)
    with pytest.raises(PluginArgsError, match="minCandidateNodesAbsolute: not in valid range"):
        DefaultPreemptionArgs(min_candidate_nodes_absolute=-1)
    with pytest.raises(PluginArgsError, match="cannot be zero at the same time"):
        DefaultPreemptionArgs(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=0)


@pytest.mark.parametrize(
    ("pct", "absolute", "nodes", "want"),
    [(10, 100, 5000, 500), (10, 100, 50, 50), (10, 100, 900, 100), (0, 1, 10, 1), (100, 0, 7, 7)],
)
def test_candidates_to_find(pct: int, absolute: int, nodes: int, want: int) -> None:
    args = DefaultPreemptionArgs(pct, absolute)
    assert args.candidates_to_find(nodes) == want


# -- eligibility and importance ----------------------------------------------------------------


def test_never_and_terminating_victims_make_a_pod_ineligible() -> None:
    assert eligible(parse_pod(pod("p", preemptionPolicy="Never")), False) == NOT_ELIGIBLE_NEVER
    assert eligible(parse_pod(pod("p")), True) == NOT_ELIGIBLE_TERMINATING
    assert eligible(parse_pod(pod("p")), False) == ""


def test_importance_orders_by_priority_then_the_longer_running() -> None:
    pods = [
        victim("new", 5, "2030-01-02T00:00:00Z"),
        victim("low", 1, "2020-01-01T00:00:00Z"),
        victim("old", 5, "2030-01-01T00:00:00Z"),
        victim("unstarted", 5),  # counts as starting now: the least important of its priority
    ]
    order = sorted(pods, key=importance(NOW))
    assert [p.name for p in order] == ["old", "new", "unstarted", "low"]


def test_a_pod_s_disruption_target_condition_and_policy_are_read() -> None:
    raw = pod("p", preemptionPolicy="Never")
    raw["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    raw["status"] = {
        "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
        ]
    }
    info = parse_pod(raw)
    assert (info.preemption_policy, info.preempted, info.deleting) == ("Never", True, True)
    bad = parse_pod(pod("q", preemptionPolicy="Sometimes"))
    assert bad.preemption_policy == "PreemptLowerPriority"
    assert any("spec.preemptionPolicy" in e for e in bad.errors)


# -- budgets -----------------------------------------------------------------------------------


def test_budgets_are_decremented_victim_by_victim() -> None:
    web = {"matchLabels": {"app": "web"}}
    victims = [victim(f"w{i}", 1, labels={"app": "web"}) for i in range(3)]
    victims.append(victim("plain", 1))
    violating, fine = split_by_budgets(victims, [budget("b", 1, web)])
    assert [p.name for p in fine] == ["w0", "plain"]
    assert [p.name for p in violating] == ["w1", "w2"]


def test_from_1_37_a_victim_s_first_exhausted_budget_ends_its_accounting() -> None:
    """`guarded` is covered by `strict` (no room) then `roomy` (room for one); `web` by
    `roomy` alone. Until 1.36 `guarded` costs both budgets, so `web` finds `roomy` empty;
    from 1.37 `strict` going below zero ends `guarded`'s accounting and `roomy` keeps its
    room for `web`."""
    both = {"tier": "x"}
    victims = [
        victim("guarded", 1, labels={"app": "web", "tier": "x"}),
        victim("web", 1, labels={"app": "web"}),
    ]
    budgets = [
        budget("strict", 0, {"matchLabels": both}),
        budget("roomy", 1, {"matchLabels": {"app": "web"}}),
    ]
    old = split_by_budgets(victims, budgets)
    new = split_by_budgets(victims, budgets, first_violation_ends=True)
    assert [[p.name for p in group] for group in old] == [["guarded", "web"], []]
    assert [[p.name for p in group] for group in new] == [["guarded"], ["web"]]
    # The budgets in the other order: `roomy` is charged before `strict` stops the count.
    flipped = split_by_budgets(victims, budgets[::-1], first_violation_ends=True)
    assert [[p.name for p in group] for group in flipped] == [["guarded", "web"], []]


def test_a_disrupted_pod_costs_its_budget_nothing() -> None:
    web = {"matchLabels": {"app": "web"}}
    victims = [victim("w0", 1, labels={"app": "web"}), victim("w1", 1, labels={"app": "web"})]
    b = budget("b", 1, web, disruptedPods={"w0": "2030-01-01T00:00:00Z"})
    violating, fine = split_by_budgets(victims, [b])
    assert ([p.name for p in violating], [p.name for p in fine]) == ([], ["w0", "w1"])


@pytest.mark.parametrize(
    "selector",
    [None, {}, {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}],
    ids=["absent", "empty", "invalid"],
)
def test_a_budget_without_a_usable_selector_covers_nothing(selector: Any) -> None:
    victims = [victim("w0", 1, labels={"app": "web"})]
    violating, fine = split_by_budgets(victims, [budget("b", 0, selector)])
    assert (violating, [p.name for p in fine]) == ([], ["w0"])


def test_a_budget_in_another_namespace_or_a_bad_status_is_harmless() -> None:
    other = parse_budget(
        {
            "metadata": {"name": "b", "namespace": "elsewhere"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": "lots"},
        }
    )
    assert other.disruptions_allowed == 0
    violating, _ = split_by_budgets([victim("w0", 1, labels={"app": "web"})], [other])
    assert violating == []


# -- the choice of node ------------------------------------------------------------------------


def cand(node: str, *victims: PodInfo, violations: int = 0) -> Candidate:
    return Candidate(node, tuple(sorted(victims, key=importance(NOW))), violations)


def test_pick_follows_kube_scheduler_s_criteria_in_order() -> None:
    a = victim("a", 10, "2030-01-01T00:00:00Z")
    b = victim("b", 10, "2030-01-02T00:00:00Z")
    low = victim("low", 1)
    neg = victim("neg", -5)
    # 1. fewest PDB violations beats everything after it.
    assert pick([cand("n1", low, violations=1), cand("n2", a)], NOW).node == "n2"
    # 2. the lowest highest-victim priority.
    assert pick([cand("n1", a), cand("n2", low, low)], NOW).node == "n2"
    # 3. the smallest sum of (shifted) priorities: one negative pod beats two.
    assert pick([cand("n1", neg, neg), cand("n2", neg)], NOW).node == "n2"
    # 4. (fewest victims: with shifted int32 priorities, equal sums mean equal counts)
    # 5. the latest start of the highest-priority victims.
    assert pick([cand("n1", a), cand("n2", b)], NOW).node == "n2"
    # 6. still tied: the first.
    assert pick([cand("n1", a), cand("n2", a)], NOW).node == "n1"
    assert pick([], NOW) is None


# -- whole cycles: the dry run, the choice, the messages ---------------------------------------


def placed(name: str, node: str, priority: int, cpu: str = "1", started: str = "") -> PodInfo:
    raw = on(node, pod(name, namespace="ns", cpu=cpu, priority=priority))
    if started:
        raw["status"] = {"startTime": started}
    return parse_pod(raw)


def incoming(name: str = "vip", priority: int = 100, cpu: str = "1", **spec: Any) -> PodInfo:
    return parse_pod(
        pod(
            name,
            namespace="ns",
            cpu=cpu,
            priority=priority,
            scheduler_name=DEFAULT_SCHEDULER_NAME,
            **spec,
        )
    )


def env_with(
    nodes: list[str], pods: list[PodInfo], cpu: str = "2", options: SchedulerConfig | None = None
) -> Env:
    env = Env(*(node_info(n, cpu=cpu) for n in nodes), options=options)
    for p in pods:
        env.cache.add_pod(p)
    return env


async def attempt(env: Env, p: PodInfo) -> tuple[str, str, list[str]]:
    """One cycle of `p`: (node it was nominated to, its FailedScheduling note, the victims
    handed to the evictions)."""
    started: list[tuple[str, list[str]]] = []

    def record(preemptor: PodInfo, node: str, victims: Any) -> None:
        started.append((node, [v.name for v in victims]))

    env.scheduler.evictions.start = record  # type: ignore[method-assign]
    bind, _ = await env.attempt(p)
    assert bind is None
    notes = [e.note for e in env.failed_events()]
    nominated = env.scheduler.nominator.node_of(p.uid)
    victims = started[0][1] if started else []
    if started:
        assert started[0][0] == nominated
    return nominated, notes[-1] if notes else "", victims


async def test_the_fewest_least_important_victims_make_room() -> None:
    env = env_with(
        ["a", "b"],
        [
            placed("old", "a", 0, started="2030-01-01T00:00:00Z"),
            placed("new", "a", 0, started="2030-01-02T00:00:00Z"),
            placed("vip-peer", "b", 200, cpu="2"),
        ],
    )
    node, note, victims = await attempt(env, incoming(cpu="1"))
    assert (node, victims) == ("a", ["new"])  # the later start is the less important
    assert note == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: found a potential placement for pod on node a, preempting 1 victims"
    )


async def test_a_victim_a_budget_protects_is_reprieved_first() -> None:
    web = {"app": "web"}
    env = env_with(["a"], [placed("plain", "a", 0)])
    guarded = parse_pod(on("a", pod("guarded", namespace="ns", cpu="1", priority=0, labels=web)))
    env.cache.add_pod(guarded)
    env.cache.objects.budget_handler.on_add(
        parse_budget(
            {
                "metadata": {"name": "b", "namespace": "ns"},
                "spec": {"selector": {"matchLabels": web}},
                "status": {"disruptionsAllowed": 0},
            }
        )
    )
    _, _, victims = await attempt(env, incoming(cpu="1"))
    assert victims == ["plain"]


async def test_the_node_whose_victims_matter_least_is_chosen() -> None:
    env = env_with(["a", "b"], [placed("mid", "a", 50, cpu="2"), placed("low", "b", 10, cpu="2")])
    node, _, victims = await attempt(env, incoming(cpu="2"))
    assert (node, victims) == ("b", ["low"])


async def test_from_1_37_a_successful_preemption_ends_the_failure_message() -> None:
    """1.37's Evaluator.Preempt succeeds with a message the FitError appends; the DRA
    PostFilter's rejection before it is not kept (RunPostFilterPlugins returns the success
    as it is). 1.35 and 1.36 end the message with the filters' reasons."""
    pods = [placed("old", "a", 0, started="2030-01-01T00:00:00Z"), placed("new", "a", 0)]
    pods.append(placed("peer", "b", 200, cpu="2"))
    for release, tail in (
        (Release(1, 35), ""),
        (Release(1, 36), ""),
        (
            Release(1, 37),
            " preemption: found a potential placement for pod on node a, preempting 2 victims",
        ),
    ):
        env = env_with(
            ["a", "b"], pods, options=SchedulerConfig(features=Features.defaults(release))
        )
        node, note, victims = await attempt(env, incoming(cpu="2"))
        assert (node, sorted(victims)) == ("a", ["new", "old"])
        assert note == f"0/2 nodes are available: 2 Insufficient cpu.{tail}", release


async def test_never_preempting_pods_say_so() -> None:
    env = env_with(["a"], [placed("low", "a", 0, cpu="2")])
    node, note, victims = await attempt(env, incoming(cpu="2", preemptionPolicy="Never"))
    assert (node, victims) == ("", [])
    assert note == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_from_1_37_the_dra_post_filter_adds_nothing_to_the_message() -> None:
    """DynamicResources' PostFilter before DefaultPreemption: `no new claims to deallocate`
    until 1.36, a rejection without a message from 1.37."""
    for release, dra in (
        (Release(1, 35), "no new claims to deallocate, "),
        (Release(1, 36), "no new claims to deallocate, "),
        (Release(1, 37), ""),
    ):
        options = SchedulerConfig(features=Features.defaults(release))
        env = env_with(["a"], [placed("low", "a", 0, cpu="2")], options=options)
        _, note, _ = await attempt(env, incoming(cpu="2", preemptionPolicy="Never"))
        assert note == (
            f"0/1 nodes are available: 1 Insufficient cpu. {dra}"
            "preemption: not eligible due to preemptionPolicy=Never."
        ), release


async def test_no_lower_priority_pod_means_no_victims() -> None:
    env = env_with(["a", "b"], [placed("peer", "a", 100, cpu="2"), placed("top", "b", 500, "2")])
    env.cache.add_node(node_info("tainted", cpu="8", taints=[{"key": "k", "effect": "NoSchedule"}]))
    node, note, _ = await attempt(env, incoming(cpu="2"))
    assert node == ""
    assert note == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )


async def test_the_few_nodes_holding_lower_priority_pods_are_the_only_ones_tried() -> None:
    # Fewer lower-priority pods than nodes: the table's priority index names the nodes they
    # are on; every other node has no victims. One such pod sits on a node the pod cannot
    # use at all (a taint): it makes no candidate.
    names = [f"n{i}" for i in range(6)]
    pods = [placed(f"peer-{n}", n, 100, cpu="2") for n in names if n != "n4"]
    pods.append(placed("low", "n4", 0, cpu="2"))
    env = env_with(names, pods)
    env.cache.add_node(node_info("tainted", cpu="2", taints=[{"key": "k", "effect": "NoSchedule"}]))
    env.cache.add_pod(placed("low-tainted", "tainted", 0, cpu="2"))
    node, note, victims = await attempt(env, incoming(cpu="2"))
    assert (node, victims) == ("n4", ["low"])
    assert note.endswith(
        "preemption: found a potential placement for pod on node n4, preempting 1 victims"
    )
    env.cache.remove_pod(pods[-1])
    node, note, victims = await attempt(env, incoming("vip-2", cpu="2"))
    assert (node, victims) == ("", [])
    assert note.endswith(
        "preemption: 0/7 nodes are available: 1 Preemption is not helpful for scheduling, "
        "6 No preemption victims found for incoming pod."
    )


async def test_room_that_evictions_cannot_make_is_reported_per_node() -> None:
    # Evicting every lower-priority pod still leaves too little cpu: the filter's reason.
    env = env_with(["a"], [placed("peer", "a", 100, cpu="1500m"), placed("low", "a", 0, "500m")])
    node, note, _ = await attempt(env, incoming(cpu="1"))
    assert node == ""
    assert note.endswith("preemption: 0/1 nodes are available: 1 Insufficient cpu.")


async def test_a_nominated_pod_keeps_its_room_from_lower_priority_pods() -> None:
    env = env_with(["a"], [placed("low", "a", 0, cpu="2")])
    vip = incoming(cpu="2")
    node, _, victims = await attempt(env, vip)
    assert (node, victims) == ("a", ["low"])
    env.cache.remove_pod(env.cache.table.pods(0)[placed("low", "a", 0).uid])  # evicted
    # A pod of lower priority than the nominated one sees its room as taken...
    _, note, _ = await attempt(env, incoming("small", priority=50, cpu="1"))
    assert note.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    # ...one of higher priority does not.
    bind, _ = await env.attempt(incoming("boss", priority=1000, cpu="1"))
    assert bind is not None
    assert bind.node == "a"


async def test_the_preemptor_is_held_until_its_evictions_are_done() -> None:
    low = placed("low", "a", 0, cpu="2")
    env = env_with(["a"], [low])
    vip = incoming(cpu="2")
    await env.attempt(vip)
    evictions = env.scheduler.evictions
    assert evictions.running(vip.uid)
    env.queue.activate(vip.uid)  # moved while they run: PreEnqueue holds it back
    assert env.queue.where(vip.uid) == "gated"
    for _ in range(50):
        if not evictions.running(vip.uid):
            break
        await asyncio.sleep(0)
    assert not evictions.running(vip.uid)
    # Its victim is still in the cache (terminating): its deletion lets the preemptor out,
    # not the end of the task, as kube-scheduler's queue does.
    assert env.queue.where(vip.uid) == "gated"
    env.router.pods.on_delete(low)
    assert env.queue.where(vip.uid) in ("active", "backoff")


async def test_another_scheduler_s_nominated_pod_keeps_its_room_too() -> None:
    env = env_with(["a"], [])
    raw = pod("theirs", namespace="ns", cpu="2", priority=500, scheduler_name="default-scheduler")
    raw["status"] = {"nominatedNodeName": "a"}
    theirs = parse_pod(raw)
    env.router.pods.on_add(theirs)
    _, note, _ = await attempt(env, incoming("mine", priority=100, cpu="1"))
    assert note.startswith("0/1 nodes are available: 1 Insufficient cpu.")
    # Bound elsewhere (or its nomination dropped): the room is free again.
    cleared = parse_pod({**raw, "status": {}})
    env.router.pods.on_update(theirs, cleared)
    bind, _ = await env.attempt(incoming("next", priority=100, cpu="1"))
    assert bind is not None
    assert bind.node == "a"


async def test_a_node_failing_with_its_nominated_pods_reports_that_failure() -> None:
    """kube-scheduler filters a node with its nominated pods first; failing that pass is the
    node's failure, counted in the message like any other."""
    env = env_with(["a", "b"], [placed("big", "b", 500, cpu="2")])
    raw = pod("theirs", namespace="ns", cpu="2", priority=500)
    raw["status"] = {"nominatedNodeName": "a"}
    env.router.pods.on_add(parse_pod(raw))
    # `a` is empty: only the pass with `theirs` on it rejects it.
    _, note, _ = await attempt(env, incoming("mine", priority=100, cpu="1"))
    assert note.startswith("0/2 nodes are available: 2 Insufficient cpu. preemption:")


def test_a_diagnosis_taken_before_a_node_left_is_read_by_name() -> None:
    """A profile with extenders awaits them between Filter and PostFilter; a node removed
    meanwhile moves the last row into its place, and the what-if filters read the recorded
    verdicts by row: they must follow the names."""
    env = env_with(["a", "b", "c"], [])
    table = env.cache.table
    before = tuple(table.names)
    rejected = np.array([name == "c" for name in before])
    diagnosis = Diagnosis(
        3,
        codes=np.where(rejected, int(Code.UNSCHEDULABLE), int(Code.SUCCESS)),
        filtered=[("Fit", FilterResult.single("Insufficient cpu", rejected))],
        node_names=before,
    )
    env.cache.remove_node("a")
    assert tuple(table.names) != before[1:]  # the last row moved into a's place
    moved = on_current_rows(table, diagnosis)
    c, b = table.index["c"], table.index["b"]
    assert moved.node_names is None
    assert moved.num_nodes == 3
    assert moved.codes is not None
    assert moved.codes.tolist()[c] == Code.UNSCHEDULABLE
    assert moved.codes.tolist()[b] == Code.SUCCESS
    assert recorded_status(moved.filtered, "Fit", c).reasons == ("Insufficient cpu",)
    assert recorded_status(moved.filtered, "Fit", b).ok
    assert on_current_rows(table, moved) is moved
