"""The scheduling cycle (`Scheduler.schedule_one`) and `EventRouter`, without a network."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from ascheduler.app import DEFAULT_SCHEDULER_NAME, RunOptions, build_frameworks, build_queue
from ascheduler.cache import Cache
from ascheduler.events import NOTE_LIMIT, StatusWriter, truncate_note
from ascheduler.framework import (
    ClusterEvent,
    NoArgs,
    PermitPlugin,
    PluginRef,
    PostFilterPlugin,
    PostFilterResult,
    QueuedPodInfo,
    Registration,
    Registry,
    ReservePlugin,
    ScorePlugin,
    Status,
    default_plugins,
    multipoint,
)
from ascheduler.framework.nodes import CPU, PODS
from ascheduler.model import Node, PodInfo, parse_node, parse_pod
from ascheduler.model.quantity import MAX_QUANTITY
from ascheduler.plugins import IN_TREE
from ascheduler.queue import QueueSettings, SchedulingQueue
from ascheduler.scheduler import INVALID_SPEC, EventRouter, Scheduler


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
) -> Node:
    return parse_node(
        {
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
        }
    )


def make_pod(
    name: str,
    *,
    cpu: str = "1",
    node: str = "",
    scheduler: str = DEFAULT_SCHEDULER_NAME,
    **spec: Any,
) -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
                **spec,
            },
        }
    )


async def pop(queue: SchedulingQueue) -> QueuedPodInfo | None:
    """`queue.pop()` with a deadline, so a bug fails the test instead of hanging it."""
    async with asyncio.timeout(10):
        return await queue.pop()


class Env:
    def __init__(
        self,
        *nodes: Node,
        options: RunOptions | None = None,
        store: dict[str, PodInfo] | None = None,
    ) -> None:
        """`store` plays the pod informer's store (by uid) when a test needs one."""
        self.clock = FakeClock()
        self.cache = Cache()
        for node in nodes:
            self.cache.add_node(node)
        self.frameworks = build_frameworks(options or RunOptions(), self.cache, None)
        self.queue: SchedulingQueue = build_queue(self.frameworks, QueueSettings())
        self.queue.clock = self.clock
        self.writer = StatusWriter(None, hostname="test")
        self.store = store
        self.scheduler = Scheduler(
            frameworks=self.frameworks,
            cache=self.cache,
            queue=self.queue,
            writer=self.writer,
            pods=None if store is None else store.get,
        )
        self.router = EventRouter(self.scheduler)

    async def attempt(self, pod: PodInfo) -> tuple[Any, QueuedPodInfo]:
        """Queue `pod` (unless queued), pop it and run one scheduling cycle on it."""
        if pod.uid not in self.queue:
            self.queue.add(pod)
        qp = await pop(self.queue)
        assert qp is not None
        assert qp.pod.uid == pod.uid
        return self.scheduler.schedule_one(qp), qp

    def written(self) -> list[Any]:
        items = []
        while not self.writer.queue.empty():
            items.append(self.writer.queue.get_nowait())
        return items

    def failed_events(self) -> list[Any]:
        return [i for i in self.written() if getattr(i, "reason", "") == "FailedScheduling"]


# -- schedule_one ----------------------------------------------------------------------------


async def test_pod_is_assumed_on_the_feasible_node() -> None:
    env = Env(make_node("small", cpu="1"), make_node("big", cpu="8"))
    pod = make_pod("p", cpu="2")
    bind, _ = await env.attempt(pod)
    assert bind is not None
    fw, _state, qp, node = bind
    assert node == "big"
    assert fw is env.frameworks[DEFAULT_SCHEDULER_NAME]
    assert qp.pod.uid == pod.uid
    assert env.cache.is_assumed(pod.uid)
    assert env.cache.pod_node(pod.uid) == "big"
    row = env.cache.table.index["big"]
    assert int(env.cache.table.requested[CPU, row]) == 2000
    assert int(env.cache.table.requested[PODS, row]) == 1
    assert env.queue.where(pod.uid) == "in-flight"  # until its binding cycle ends
    assert env.written() == []
    assert env.scheduler.stats.attempts == 1


async def test_assumed_usage_steers_the_next_pod() -> None:
    env = Env(make_node("a", cpu="3"), make_node("b", cpu="3"))
    first, _ = await env.attempt(make_pod("p1", cpu="2"))
    second, _ = await env.attempt(make_pod("p2", cpu="2"))
    assert first is not None
    assert second is not None
    assert {first[3], second[3]} == {"a", "b"}


async def test_unschedulable_pod_is_parked_with_kube_schedulers_message() -> None:
    env = Env(make_node("n1", cpu="1"), make_node("n2", cpu="1"))
    pod = make_pod("p", cpu="2")
    bind, _ = await env.attempt(pod)
    assert bind is None
    assert env.queue.where(pod.uid) == "unschedulable"
    assert not env.cache.has_pod(pod.uid)
    items = env.written()
    events = [i for i in items if getattr(i, "reason", "") == "FailedScheduling"]
    assert len(events) == 1
    event = events[0]
    assert event.note == "0/2 nodes are available: 2 Insufficient cpu."
    assert (event.type, event.action, event.profile) == (
        "Warning",
        "Scheduling",
        DEFAULT_SCHEDULER_NAME,
    )
    conditions = [i for i in items if not hasattr(i, "note")]
    assert [(c.reason, c.message) for c in conditions] == [
        ("Unschedulable", "0/2 nodes are available: 2 Insufficient cpu.")
    ]
    assert env.scheduler.stats.unschedulable == 1


async def test_each_node_counts_under_its_first_failing_filter() -> None:
    env = Env(
        make_node("tainted", taints=[{"key": "k", "effect": "NoSchedule"}]),
        make_node("cordoned", unschedulable=True, labels={"zone": "b"}),
        make_node("small", cpu="500m", labels={"zone": "b"}),
        make_node("wrong-zone", labels={"zone": "a"}),
    )
    bind, _ = await env.attempt(make_pod("p", nodeSelector={"zone": "b"}, cpu="2"))
    assert bind is None
    [event] = env.failed_events()
    assert event.note == (
        "0/4 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint(s), 1 node(s) were unschedulable."
    )


@pytest.mark.parametrize(
    ("small", "tainted", "message"),
    [
        (2, 3, "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint(s)."),
        (
            10,
            2,
            "0/12 nodes are available: 10 Insufficient cpu, 2 node(s) had untolerated taint(s).",
        ),
        (
            2,
            10,
            "0/12 nodes are available: 10 node(s) had untolerated taint(s), 2 Insufficient cpu.",
        ),
    ],
)
async def test_reasons_sort_as_plain_strings(small: int, tainted: int, message: str) -> None:
    nodes = [make_node(f"small-{i}", cpu="1") for i in range(small)]
    nodes += [
        make_node(f"tainted-{i}", taints=[{"key": "k", "effect": "NoSchedule"}])
        for i in range(tainted)
    ]
    env = Env(*nodes)
    await env.attempt(make_pod("p", cpu="2"))
    [event] = env.failed_events()
    assert event.note == message


async def test_first_failing_filter_per_node_wins() -> None:
    env = Env(
        make_node("tainted", cpu="500m", taints=[{"key": "k", "effect": "NoExecute"}]),
        make_node("small", cpu="500m"),
        make_node("cordoned", cpu="500m", unschedulable=True),
    )
    bind, _ = await env.attempt(make_pod("p", cpu="2"))
    assert bind is None
    [event] = env.failed_events()
    assert event.note == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "1 node(s) were unschedulable."
    )


async def test_no_nodes_message() -> None:
    env = Env()
    bind, _ = await env.attempt(make_pod("p"))
    assert bind is None
    [event] = env.failed_events()
    assert event.note == "no nodes available to schedule pods"


async def test_unschedulable_pod_moves_only_for_events_that_may_help() -> None:
    env = Env(make_node("n1", cpu="1"))
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    assert env.queue.move_all(ClusterEvent.NODE_TAINT) == 0
    assert env.queue.move_all(ClusterEvent.NODE_LABEL) == 0
    assert env.queue.where(pod.uid) == "unschedulable"
    assert env.queue.move_all(ClusterEvent.NODE_ALLOCATABLE) == 1
    assert env.queue.where(pod.uid) in ("backoff", "active")


async def test_invalid_pod_is_reported_and_not_retried_on_cluster_events() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", cpu="lots")
    assert pod.errors
    bind, _ = await env.attempt(pod)
    assert bind is None
    assert not env.cache.has_pod(pod.uid)
    assert env.queue.where(pod.uid) == "unschedulable"
    items = env.written()
    [event] = [i for i in items if getattr(i, "reason", "") == "FailedScheduling"]
    assert event.note == (
        "invalid pod ns/p: spec.containers[0].resources.requests.cpu: not a quantity: 'lots'"
    )
    [condition] = [i for i in items if not hasattr(i, "note")]
    assert condition.reason == "SchedulerError"
    assert "spec.containers[0].resources.requests.cpu" in condition.message

    for event_kind in ClusterEvent:
        if event_kind is not ClusterEvent.FORCE:
            assert env.queue.move_all(event_kind) == 0
    env.router.nodes.on_add(make_node("n2", cpu="64"))
    running = make_pod("other", node="n1")
    env.router.pods.on_add(running)
    env.router.pods.on_delete(running)  # an assigned pod deleted: room freed
    assert env.queue.where(pod.uid) == "unschedulable"


async def test_fixed_invalid_pod_is_retried_on_its_update() -> None:
    env = Env(make_node("n1"))
    bad = make_pod("p", cpu="lots")
    await env.attempt(bad)
    env.router.pods.on_update(bad, make_pod("p", cpu="1"))
    assert env.queue.where(bad.uid) in ("backoff", "active")
    env.clock.advance(1)
    bind, qp = await env.attempt(make_pod("p", cpu="1"))
    assert qp.pod.errors == ()
    assert bind is not None
    assert bind[3] == "n1"


async def test_pod_of_another_profile_or_already_placed_is_dropped() -> None:
    env = Env(make_node("n1"))
    assigned = make_pod("assigned", node="n1")
    env.queue.add(assigned)
    qp = await pop(env.queue)
    assert qp is not None
    assert env.scheduler.schedule_one(qp) is None
    assert env.queue.where(assigned.uid) is None
    assert not env.cache.has_pod(assigned.uid)
    foreign = make_pod("foreign", scheduler="someone-else")
    env.queue.add(foreign)
    qp = await pop(env.queue)
    assert qp is not None
    assert env.scheduler.schedule_one(qp) is None
    assert env.queue.where(foreign.uid) is None
    assert not env.cache.has_pod(foreign.uid)
    assert env.written() == []
    assert env.scheduler.stats.attempts == 0


# -- EventRouter -----------------------------------------------------------------------------


def test_assigned_pod_add_goes_to_the_cache_only() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", node="n1", cpu="3")
    env.router.pods.on_add(pod)
    assert env.cache.has_pod(pod.uid)
    assert not env.cache.is_assumed(pod.uid)
    assert int(env.cache.table.requested[CPU, env.cache.table.index["n1"]]) == 3000
    assert pod.uid not in env.queue


def test_assigned_pod_of_another_scheduler_is_still_counted() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", node="n1", scheduler="default-scheduler")
    env.router.pods.on_add(pod)
    assert env.cache.has_pod(pod.uid)


def test_unassigned_pod_of_ours_is_queued() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    assert env.queue.where(pod.uid) == "active"


def test_pod_of_another_scheduler_is_never_queued() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p", scheduler="default-scheduler")
    env.router.pods.on_add(pod)
    env.router.pods.on_update(pod, make_pod("p", scheduler="default-scheduler", cpu="2"))
    assert pod.uid not in env.queue
    assert env.queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert not env.cache.has_pod(pod.uid)


def test_terminal_or_deleting_pods_are_not_queued() -> None:
    env = Env(make_node("n1"))
    deleting = parse_pod(
        {
            "metadata": {
                "name": "d",
                "namespace": "ns",
                "uid": "uid-d",
                "deletionTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {"schedulerName": DEFAULT_SCHEDULER_NAME},
        }
    )
    done = parse_pod(
        {
            "metadata": {"name": "s", "namespace": "ns", "uid": "uid-s"},
            "spec": {"schedulerName": DEFAULT_SCHEDULER_NAME, "nodeName": "n1"},
            "status": {"phase": "Succeeded"},
        }
    )
    env.router.pods.on_add(deleting)
    env.router.pods.on_add(done)
    assert deleting.uid not in env.queue
    assert not env.cache.has_pod(done.uid)


async def test_node_add_moves_unschedulable_pods_back() -> None:
    env = Env(make_node("n1", cpu="1"))
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.nodes.on_add(make_node("n2", cpu="4"))
    assert env.queue.where(pod.uid) in ("backoff", "active")
    assert env.cache.node("n2") is not None
    env.clock.advance(1)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    assert bind[3] == "n2"


async def test_node_update_moves_pods_for_matching_changes_only() -> None:
    env = Env(make_node("n1", cpu="1"))
    pod = make_pod("p", cpu="2")
    await env.attempt(pod)
    old = make_node("n1", cpu="1")
    tainted = make_node("n1", cpu="1", taints=[{"key": "k", "effect": "NoSchedule"}])
    env.router.nodes.on_update(old, tainted)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.nodes.on_update(tainted, make_node("n1", cpu="4"))
    assert env.queue.where(pod.uid) in ("backoff", "active")


async def test_assigned_pod_delete_moves_pods_waiting_for_room() -> None:
    env = Env(make_node("n1", cpu="2"))
    running = make_pod("running", node="n1", cpu="2")
    env.router.pods.on_add(running)
    pod = make_pod("p", cpu="1")
    await env.attempt(pod)
    assert env.queue.where(pod.uid) == "unschedulable"
    env.router.pods.on_delete(running)
    assert not env.cache.has_pod(running.uid)
    assert env.queue.where(pod.uid) in ("backoff", "active")


async def test_binding_confirmed_by_watch_leaves_the_queue() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    _fw, _state, qp, _node = bind
    env.router.pods.on_update(pod, make_pod("p", node="n1"))
    assert env.cache.has_pod(pod.uid)
    assert not env.cache.is_assumed(pod.uid)
    assert int(env.cache.table.requested[PODS, env.cache.table.index["n1"]]) == 1
    # Even if its binding cycle then reported a failure, the bound pod is not queued again.
    env.queue.requeue(qp, error=True)
    assert env.queue.where(pod.uid) is None


async def test_unassigned_update_of_assumed_pod_is_ignored() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    await env.attempt(pod)
    env.router.pods.on_update(pod, make_pod("p", cpu="2"))
    assert env.queue.where(pod.uid) == "in-flight"


def test_deleting_update_removes_queued_pod() -> None:
    env = Env(make_node("n1"))
    pod = make_pod("p")
    env.router.pods.on_add(pod)
    deleting = parse_pod(
        {
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "uid": "uid-p",
                "deletionTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {"schedulerName": DEFAULT_SCHEDULER_NAME},
        }
    )
    env.router.pods.on_update(pod, deleting)
    assert pod.uid not in env.queue


def test_invalid_spec_constant_is_what_build_queue_refuses() -> None:
    env = Env()
    qp = QueuedPodInfo(make_pod("p"), 0.0, unschedulable_plugins=frozenset({INVALID_SPEC}))
    assert not env.queue.event_filter(qp, ClusterEvent.NODE_ADD)
    assert env.queue.event_filter(
        QueuedPodInfo(make_pod("p"), 0.0, unschedulable_plugins=frozenset({"NodeAffinity"})),
        ClusterEvent.NODE_LABEL,
    )


# -- truncate_note ---------------------------------------------------------------------------


def test_short_notes_are_kept() -> None:
    assert truncate_note("") == ""
    assert truncate_note("0/1 nodes are available") == "0/1 nodes are available"
    exact = "x" * NOTE_LIMIT
    assert truncate_note(exact) == exact


@pytest.mark.parametrize("length", [NOTE_LIMIT + 1, 2000, 100_000])
def test_long_notes_are_cut_to_1020_bytes_and_marked(length: int) -> None:
    note = "".join(chr(ord("a") + i % 26) for i in range(length))
    cut = truncate_note(note)
    assert len(cut.encode()) == NOTE_LIMIT == 1024
    assert cut == note[:1020] + " ..."


def test_multibyte_notes_are_cut_on_bytes_and_stay_valid() -> None:
    note = "é" * 600  # 1200 bytes
    cut = truncate_note(note)
    assert cut == "é" * 510 + " ..."
    assert len(cut.encode()) == 1024
    odd = "a" + "é" * 600  # the 1020-byte cut falls inside a character
    cut = truncate_note(odd)
    assert cut == "a" + "é" * 509 + " ..."
    assert len(cut.encode()) <= 1024


# -- a failed attempt puts back the pod as it is now -----------------------------------------


def tolerating(pod: PodInfo, version: str) -> PodInfo:
    """`pod` as an update with a new resourceVersion and a new toleration would make it."""
    return parse_pod(
        {
            "metadata": {
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
                "resourceVersion": version,
            },
            "spec": {
                "schedulerName": pod.scheduler_name,
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            },
        }
    )


async def test_failed_bind_requeues_the_pod_as_the_informer_has_it_now() -> None:
    store: dict[str, PodInfo] = {}
    env = Env(make_node("n1"), store=store)
    pod = make_pod("p")
    store[pod.uid] = pod
    env.router.pods.on_add(pod)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    # Updated while assumed: the router ignores it (the pod is in its binding cycle).
    newer = tolerating(pod, "42")
    store[pod.uid] = newer
    env.router.pods.on_update(pod, newer)
    await env.scheduler._binding_cycle(*bind)
    assert not env.cache.has_pod(pod.uid)
    assert env.queue.where(pod.uid) == "backoff"
    env.clock.advance(10)
    again = await pop(env.queue)
    assert again is not None
    assert again.pod.resource_version == "42"
    assert again.pod.tolerations == newer.tolerations
    (condition,) = [i for i in env.written() if type(i).__name__ == "_Condition"]
    assert condition.pod.resource_version == "42"


@pytest.mark.parametrize("fate", ["deleted", "deleting", "bound elsewhere"])
async def test_failed_bind_of_a_pod_gone_meanwhile_is_not_requeued(fate: str) -> None:
    store: dict[str, PodInfo] = {}
    env = Env(make_node("n1"), make_node("n2"), store=store)
    pod = make_pod("p")
    store[pod.uid] = pod
    env.router.pods.on_add(pod)
    bind, _ = await env.attempt(pod)
    assert bind is not None
    if fate == "deleted":
        del store[pod.uid]
    elif fate == "deleting":
        store[pod.uid] = replace(pod, deleting=True)
    else:
        store[pod.uid] = replace(pod, node_name="n2")
    await env.scheduler._binding_cycle(*bind)
    assert env.queue.where(pod.uid) is None
    assert env.queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert env.failed_events() == []


# -- sums that would overflow int64 ----------------------------------------------------------


def two_huge_containers(name: str, *, node: str = "") -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
            "spec": {
                "schedulerName": DEFAULT_SCHEDULER_NAME,
                "nodeName": node,
                "containers": [
                    {"name": f"c{i}", "resources": {"requests": {"example.com/foo": "4Ei"}}}
                    for i in range(2)
                ],
            },
        }
    )


async def test_pod_whose_sums_pass_int64_is_assumed_without_overflow() -> None:
    """Fit ignores the resource group, so the pod fits and is assumed: its sum (2 x 4Ei, past
    int64) must saturate in the node's columns instead of raising out of the loop."""
    ignore = {"NodeResourcesFit": {"ignoredResourceGroups": ["example.com"]}}
    node = parse_node(
        {
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/foo": "1"}
            },
        }
    )
    env = Env(node, options=RunOptions(profiles=[multipoint(DEFAULT_SCHEDULER_NAME, args=ignore)]))
    bind, _ = await env.attempt(two_huge_containers("huge"))
    assert bind is not None
    assert env.cache.is_assumed("uid-huge")
    second, _ = await env.attempt(two_huge_containers("huge2"))
    assert second is not None
    table = env.cache.table
    foo = table.resource_row("example.com/foo")
    assert foo is not None
    assert int(table.requested[foo, 0]) == MAX_QUANTITY
    assert int(table.requested[PODS, 0]) == 2


def test_pod_created_bound_with_huge_sums_is_counted_whole() -> None:
    node = parse_node(
        {
            "metadata": {"name": "n1"},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110", "example.com/foo": "8"}
            },
        }
    )
    env = Env(node)
    env.router.pods.on_add(two_huge_containers("huge", node="n1"))
    table = env.cache.table
    foo = table.resource_row("example.com/foo")
    assert foo is not None
    assert env.cache.has_pod("uid-huge")
    assert int(table.requested[PODS, 0]) == 1
    assert int(table.free[foo, 0]) < 0  # full: nothing else asking for foo fits


# -- one bad pod fails alone -----------------------------------------------------------------


class Exploding(ScorePlugin, ReservePlugin, PermitPlugin):
    """A plugin that raises at the extension point named in its args."""

    name = "Exploding"

    def __init__(self, at: str) -> None:
        self.at = at
        self.unreserved: list[str] = []

    def _maybe(self, point: str, pod: PodInfo) -> None:
        if point == self.at and pod.name.startswith("bad"):
            raise RuntimeError(f"boom at {point}")

    def score(self, state: Any, pod: PodInfo, nodes: Any, feasible: Any) -> Any:
        self._maybe("score", pod)
        return np.zeros(feasible.size, dtype=np.int64)

    def reserve(self, state: Any, pod: PodInfo, node: str) -> Status:
        self._maybe("reserve", pod)
        return Status()

    def unreserve(self, state: Any, pod: PodInfo, node: str) -> None:
        self.unreserved.append(pod.name)
        self._maybe("unreserve", pod)

    def permit(self, state: Any, pod: PodInfo, node: str) -> tuple[Status, float]:
        self._maybe("permit", pod)
        return Status(), 0.0


def exploding_env(at: str, *nodes: Node) -> tuple[Env, Exploding]:
    made: list[Exploding] = []

    def factory(args: NoArgs, handle: Any) -> Exploding:
        made.append(Exploding(at))
        return made[-1]

    defaults = default_plugins(IN_TREE)
    options = RunOptions(
        profiles=[multipoint(DEFAULT_SCHEDULER_NAME, (*defaults, PluginRef("Exploding")))],
        registry=Registry([*IN_TREE.values(), Registration("Exploding", factory, NoArgs)]),
    )
    env = Env(*nodes, options=options)
    return env, made[0]


@pytest.mark.parametrize("at", ["score", "reserve", "permit"])
async def test_a_plugin_that_raises_fails_its_pod_alone(at: str) -> None:
    env, plugin = exploding_env(at, make_node("n1"), make_node("n2"))
    bad = make_pod("bad")
    bind, _ = await env.attempt(bad)
    assert bind is None
    assert not env.cache.has_pod(bad.uid)  # assumed, then undone
    assert env.queue.where(bad.uid) == "backoff"
    (event,) = env.failed_events()
    assert "boom" in event.note
    assert env.scheduler.stats.errors == 1
    if at == "permit":
        assert plugin.unreserved == ["bad"]  # Reserve ran, so Unreserve did too
    good, _ = await env.attempt(make_pod("good"))
    assert good is not None
    assert env.cache.is_assumed("uid-good")


async def test_an_unreserve_that_raises_does_not_stop_the_failure_path() -> None:
    env, plugin = exploding_env("unreserve", make_node("n1"))
    bad = make_pod("bad")
    bind, _ = await env.attempt(bad)
    assert bind is not None
    await env.scheduler._binding_cycle(*bind)  # no API client: the bind fails
    assert plugin.unreserved == ["bad"]
    assert not env.cache.has_pod(bad.uid)
    assert env.queue.where(bad.uid) == "backoff"


class Nominating(PostFilterPlugin):
    name = "Nominating"

    def post_filter(self, state: Any, pod: PodInfo, nodes: Any, diagnosis: Any) -> PostFilterResult:
        return PostFilterResult(Status(reasons=("preempting on n1",)), nominated_node="n1")


async def test_a_post_filter_nomination_is_written_with_the_condition() -> None:
    options = RunOptions(
        profiles=[
            multipoint(DEFAULT_SCHEDULER_NAME, (*default_plugins(IN_TREE), PluginRef("Nominating")))
        ],
        registry=Registry(
            [*IN_TREE.values(), Registration("Nominating", lambda a, h: Nominating(), NoArgs)]
        ),
    )
    env = Env(make_node("n1", cpu="1"), options=options)
    bind, _ = await env.attempt(make_pod("big", cpu="2"))
    assert bind is None
    (condition,) = [i for i in env.written() if type(i).__name__ == "_Condition"]
    assert condition.nominated_node == "n1"
    assert condition.message == ("0/1 nodes are available: 1 Insufficient cpu. preempting on n1")
