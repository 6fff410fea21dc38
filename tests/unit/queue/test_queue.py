"""The scheduling queue under a fake clock: order, backoff, unschedulable, gates, in flight."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from ascheduler.app import build_frameworks, build_queue
from ascheduler.cache import Cache
from ascheduler.config import SchedulerConfig
from ascheduler.framework import SUCCESS, ClusterEvent, QueuedPodInfo, Status
from ascheduler.model import PodInfo, parse_pod
from ascheduler.model.dra import parse_resource_claim
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.prioritysort import PrioritySort
from ascheduler.plugins.schedulinggates import SchedulingGates
from ascheduler.queue import QueueSettings, SchedulingQueue
from ascheduler.scheduler import INVALID_SPEC
from tests.kit import FakeClock, pod_info

#: A guard against a pop that never returns (a failure, not a timing check).
DEADLINE = 10.0


async def pop(queue: SchedulingQueue) -> QueuedPodInfo | None:
    async with asyncio.timeout(DEADLINE):
        return await queue.pop()


async def settle(task: asyncio.Task[QueuedPodInfo | None]) -> QueuedPodInfo | None:
    async with asyncio.timeout(DEADLINE):
        return await task


async def let_tasks_run() -> None:
    """Give ready tasks one turn of the event loop (a yield, not a sleep)."""
    loop = asyncio.get_running_loop()
    turn = loop.create_future()
    loop.call_soon(turn.set_result, None)
    await turn


def make_pod(
    name: str,
    *,
    priority: int = 0,
    gates: tuple[str, ...] = (),
    cpu: str = "100m",
    **spec: Any,
) -> PodInfo:
    return pod_info(
        name,
        namespace="ns",
        scheduler_name="ascheduler",
        priority=priority,
        gates=gates,
        cpu=cpu,
        **spec,
    )


def make_queue(clock: FakeClock, **kwargs: Any) -> SchedulingQueue:
    return SchedulingQueue(
        sort_key=PrioritySort().sort_key,
        pre_enqueue=SchedulingGates().pre_enqueue,
        clock=clock,
        **kwargs,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> SchedulingQueue:
    return make_queue(clock)


@pytest.fixture
def default_queue(clock: FakeClock) -> SchedulingQueue:
    """The queue `ascheduler run` builds: events filtered by the default profile's plugins."""
    frameworks = build_frameworks(SchedulerConfig(), IN_TREE, Cache(), None)
    q = build_queue(frameworks, QueueSettings())
    q.clock = clock
    return q


async def pop_name(queue: SchedulingQueue) -> str:
    qp = await pop(queue)
    assert qp is not None
    return qp.pod.name


async def make_unschedulable(
    queue: SchedulingQueue, pod: PodInfo, rejected_by: frozenset[str]
) -> QueuedPodInfo:
    queue.add(pod)
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.uid == pod.uid
    queue.requeue(qp, rejected_by=rejected_by)
    assert queue.where(pod.uid) == "unschedulable"
    return qp


# -- order -----------------------------------------------------------------------------------


async def test_priority_sort_order(queue: SchedulingQueue, clock: FakeClock) -> None:
    for name, priority in [("low", 0), ("high", 100), ("mid-early", 10), ("neg", -5)]:
        queue.add(make_pod(name, priority=priority))
        clock.advance(1)
    queue.add(make_pod("mid-late", priority=10))
    assert queue.pending()["active"] == 5
    order = [await pop_name(queue) for _ in range(5)]
    assert order == ["high", "mid-early", "mid-late", "low", "neg"]


async def test_equal_priority_pops_earlier_timestamp_first(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    for name in ["c", "a", "b"]:
        queue.add(make_pod(name))
        clock.advance(0.5)
    assert [await pop_name(queue) for _ in range(3)] == ["c", "a", "b"]


async def test_failed_pod_timestamp_is_reset(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("first"))
    clock.advance(1)
    queue.add(make_pod("second"))
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.name == "first"
    clock.advance(1)
    queue.requeue(qp, error=True)  # timestamp now 1002, backoff until 1003
    clock.advance(5)
    queue.flush_backoff_completed()
    assert queue.pending()["active"] == 2
    # "first" entered the queue before "second", but its failure put it behind.
    assert [await pop_name(queue) for _ in range(2)] == ["second", "first"]


async def test_pop_counts_attempts_and_cycles(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    assert qp.attempts == 1
    assert qp.initial_attempt_timestamp == clock.now()
    assert queue.where(qp.pod.uid) == "in-flight"
    assert queue.scheduling_cycle == 1
    first = clock.now()
    queue.requeue(qp, error=True)
    clock.advance(1)
    qp = await pop(queue)
    assert qp is not None
    assert qp.attempts == 2
    assert qp.initial_attempt_timestamp == first
    assert queue.scheduling_cycle == 2


# -- backoff ---------------------------------------------------------------------------------


async def test_backoff_doubles_and_is_capped(queue: SchedulingQueue, clock: FakeClock) -> None:
    pod = make_pod("p")
    queue.add(pod)
    for expected in [1, 2, 4, 8, 10, 10, 10]:
        qp = await pop(queue)
        assert qp is not None
        failed_at = clock.now()
        queue.requeue(qp, error=True)
        assert queue.where(pod.uid) == "backoff"
        clock.t = failed_at + expected - 0.5
        queue.flush_backoff_completed()
        assert queue.where(pod.uid) == "backoff", f"left backoff before {expected}s"
        clock.t = failed_at + expected + 0.5
        queue.flush_backoff_completed()
        assert queue.where(pod.uid) == "active", f"still in backoff after {expected}s"
        clock.t = failed_at + expected + 1  # the next failure on a whole second again


async def test_backoff_settings_are_used(clock: FakeClock) -> None:
    queue = make_queue(clock, settings=QueueSettings(initial_backoff=3, max_backoff=5))
    pod = make_pod("p")
    queue.add(pod)
    for expected in [3, 5, 5]:
        qp = await pop(queue)
        assert qp is not None
        failed_at = clock.now()
        queue.requeue(qp, error=True)
        clock.t = failed_at + expected - 0.5
        queue.flush_backoff_completed()
        assert queue.where(pod.uid) == "backoff"
        clock.t = failed_at + expected + 0.5
        queue.flush_backoff_completed()
        assert queue.where(pod.uid) == "active"
        clock.t = failed_at + expected + 1


async def test_backoff_stays_capped_after_many_attempts(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    pod = make_pod("p")
    queue.add(pod)
    for attempt in range(1, 1101):
        qp = await pop(queue)
        assert qp is not None
        assert qp.attempts == attempt
        expected = min(2 ** (attempt - 1), 10)
        failed_at = clock.now()
        queue.requeue(qp, error=True)
        clock.t = failed_at + expected - 0.5
        queue.flush_backoff_completed()
        assert queue.where(pod.uid) == "backoff"
        clock.t = failed_at + expected


async def test_backoff_end_is_rounded_up_to_the_ordering_window(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    clock.advance(0.3)
    queue.requeue(qp, error=True)  # 1000.3 + 1 s ends with the window at 1002
    clock.t = 1001.5
    queue.flush_backoff_completed()
    assert queue.where("uid-p") == "backoff"
    clock.t = 1002.0
    queue.flush_backoff_completed()
    assert queue.where("uid-p") == "active"


async def test_backoffs_ending_in_one_window_leave_in_priority_order(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    clock.advance(0.2)
    await make_unschedulable(queue, make_pod("low"), frozenset({"X"}))
    clock.advance(0.5)
    await make_unschedulable(queue, make_pod("high", priority=100), frozenset({"X"}))
    queue.move_all(ClusterEvent.NODE_ADD)  # both until 1002 (1001.2 and 1001.7 rounded up)
    assert queue.pending()["backoff"] == 2
    # Active is empty, so both may leave early: within the window, priority decides.
    assert [await pop_name(queue), await pop_name(queue)] == ["high", "low"]


async def test_flush_moves_only_completed_backoffs(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("a"))
    queue.add(make_pod("b"))
    a = await pop(queue)
    b = await pop(queue)
    assert a is not None
    assert b is not None
    queue.requeue(a, error=True)  # until +1
    clock.advance(0.5)
    queue.requeue(b, error=True)  # until +1.5
    clock.advance(0.5)
    queue.flush_backoff_completed()
    assert queue.where(a.pod.uid) == "active"
    assert queue.where(b.pod.uid) == "backoff"
    assert queue.pending() == {"active": 1, "backoff": 1, "unschedulable": 0, "gated": 0}


async def test_pop_takes_completed_backoff_itself(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    queue.requeue(qp, error=True)
    clock.advance(1)
    assert await pop_name(queue) == "p"


async def test_unschedulable_pod_may_pop_early_from_backoff_when_active_is_empty(
    queue: SchedulingQueue,
) -> None:
    pod = make_pod("p")
    await make_unschedulable(queue, pod, frozenset({"NodeResourcesFit"}))
    queue.move_all(ClusterEvent.NODE_ADD)
    assert queue.where(pod.uid) == "backoff"
    # The clock has not moved: its backoff has not ended, yet nothing else is waiting.
    assert await pop_name(queue) == "p"
    assert queue.where(pod.uid) == "in-flight"


def holding_queue(clock: FakeClock, held: set[str]) -> SchedulingQueue:
    """A queue whose PreEnqueue holds back the pods named in `held` (as DefaultPreemption
    holds a preemptor whose victims are still being evicted)."""

    def pre_enqueue(pod: PodInfo) -> Status:
        if pod.name in held:
            return Status.unschedulable("waiting", plugin="DefaultPreemption", resolvable=False)
        return SUCCESS

    return SchedulingQueue(
        sort_key=PrioritySort().sort_key,
        pre_enqueue=pre_enqueue,
        events_of=lambda _qp: (ClusterEvent.NODE_ADD,),
        clock=clock,
    )


async def test_a_pod_on_its_way_to_backoff_goes_through_pre_enqueue(clock: FakeClock) -> None:
    """kube-scheduler's `moveToBackoffQ`: a pod put back into the backoff queue (helped by an
    event in flight, or after an error) is gated there if its PreEnqueue holds it, so an
    early pop from the backoff queue cannot take it."""
    held: set[str] = set()
    queue = holding_queue(clock, held)
    for name, error in (("helped", False), ("errored", True)):
        queue.add(make_pod(name))
        qp = await pop(queue)
        assert qp is not None
        held.add(name)
        queue.move_all(ClusterEvent.NODE_ADD)  # in flight: may help it
        queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}), error=error)
        assert queue.where(qp.pod.uid) == "gated"
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    assert not waiter.done()
    queue.close()
    assert await settle(waiter) is None


async def test_a_gated_pod_moved_by_an_event_keeps_its_backoff(clock: FakeClock) -> None:
    """An event lets a gated pod out through its backoff, as kube-scheduler requeues it; a
    pod never attempted has none."""
    held: set[str] = set()
    queue = holding_queue(clock, held)
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    held.update(("p", "new"))
    queue.move_all(ClusterEvent.NODE_ADD)
    queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.add(make_pod("new"))
    assert queue.where("uid-p") == queue.where("uid-new") == "gated"
    held.clear()
    assert queue.move_all(ClusterEvent.NODE_ADD) == 2
    assert queue.where("uid-new") == "active"
    assert queue.where("uid-p") == "backoff"
    clock.advance(1.5)
    queue.flush_backoff_completed()
    assert queue.where("uid-p") == "active"


async def test_active_pods_go_before_early_backoff(queue: SchedulingQueue) -> None:
    pod = make_pod("backing-off", priority=1000)
    await make_unschedulable(queue, pod, frozenset({"NodeResourcesFit"}))
    queue.move_all(ClusterEvent.NODE_ADD)
    queue.add(make_pod("active"))
    assert await pop_name(queue) == "active"
    assert queue.where(pod.uid) == "backoff"


async def test_errored_pod_serves_its_whole_backoff(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    pod = make_pod("p")
    queue.add(pod)
    qp = await pop(queue)
    assert qp is not None
    queue.requeue(qp, error=True)
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    assert not waiter.done()
    assert queue.where(pod.uid) == "backoff"
    clock.advance(1)
    queue.flush_backoff_completed()
    popped = await settle(waiter)
    assert popped is not None
    assert popped.pod.uid == pod.uid


async def test_errored_pod_not_popped_early_then_close(queue: SchedulingQueue) -> None:
    pod = make_pod("p")
    queue.add(pod)
    qp = await pop(queue)
    assert qp is not None
    queue.requeue(qp, error=True)
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    assert not waiter.done()
    queue.close()
    assert await settle(waiter) is None
    assert queue.where(pod.uid) == "backoff"


async def test_errored_head_does_not_block_early_pop_of_others(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    errored, waiting = make_pod("errored"), make_pod("waiting")
    queue.add(errored)
    queue.add(waiting)
    e = await pop(queue)
    w = await pop(queue)
    assert e is not None
    assert w is not None
    queue.requeue(e, error=True)  # backoff until +1, errored
    clock.advance(0.5)
    queue.requeue(w, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.move_all(ClusterEvent.NODE_ADD)  # backoff until +1.5
    assert queue.pending()["backoff"] == 2
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    done = waiter.done()
    if not done:
        queue.close()
    popped = await settle(waiter)
    assert done
    assert popped is not None
    assert popped.pod.name == "waiting"


# -- unschedulable ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugins", "event", "moves"),
    [
        ({"NodeResourcesFit"}, ClusterEvent.NODE_ADD, True),
        ({"NodeResourcesFit"}, ClusterEvent.NODE_ALLOCATABLE, True),
        ({"NodeResourcesFit"}, ClusterEvent.ASSIGNED_POD_DELETE, True),
        ({"NodeResourcesFit"}, ClusterEvent.ASSIGNED_POD_UPDATE, True),
        ({"NodeResourcesFit"}, ClusterEvent.NODE_TAINT, False),
        ({"NodeResourcesFit"}, ClusterEvent.NODE_LABEL, False),
        ({"TaintToleration"}, ClusterEvent.NODE_TAINT, True),
        ({"TaintToleration"}, ClusterEvent.NODE_ALLOCATABLE, False),
        ({"NodeAffinity"}, ClusterEvent.NODE_LABEL, True),
        ({"NodeAffinity"}, ClusterEvent.ASSIGNED_POD_DELETE, False),
        ({"NodeUnschedulable"}, ClusterEvent.NODE_SCHEDULABLE, True),
        ({"NodeUnschedulable"}, ClusterEvent.NODE_TAINT, False),
        ({"NodePorts"}, ClusterEvent.ASSIGNED_POD_DELETE, True),
        ({"NodePorts"}, ClusterEvent.NODE_ALLOCATABLE, False),
        ({"NodeName"}, ClusterEvent.NODE_ADD, True),
        ({"NodeName"}, ClusterEvent.NODE_LABEL, False),
        ({"TaintToleration", "NodeAffinity"}, ClusterEvent.NODE_LABEL, True),
        ({"TaintToleration", "NodeAffinity"}, ClusterEvent.NODE_TAINT, True),
        ({"TaintToleration", "NodeAffinity"}, ClusterEvent.ASSIGNED_POD_DELETE, False),
        (set(), ClusterEvent.NODE_LABEL, True),  # no plugin named: any event may help
        ({INVALID_SPEC}, ClusterEvent.NODE_ADD, False),
        ({INVALID_SPEC}, ClusterEvent.FORCE, True),
        ({"NodeAffinity"}, ClusterEvent.FORCE, True),
    ],
)
async def test_move_all_follows_registered_events(
    default_queue: SchedulingQueue, plugins: set[str], event: ClusterEvent, moves: bool
) -> None:
    pod = make_pod("p")
    await make_unschedulable(default_queue, pod, frozenset(plugins))
    assert default_queue.move_all(event) == int(moves)
    assert (default_queue.where(pod.uid) != "unschedulable") is moves


async def test_move_all_with_custom_event_filter(clock: FakeClock) -> None:
    seen: list[tuple[str, ClusterEvent]] = []

    def only_labels(qp: QueuedPodInfo, event: ClusterEvent) -> bool:
        seen.append((qp.pod.name, event))
        return event is ClusterEvent.NODE_LABEL and "Label" in qp.unschedulable_plugins

    queue = make_queue(clock, event_filter=only_labels)
    await make_unschedulable(queue, make_pod("a"), frozenset({"Label"}))
    await make_unschedulable(queue, make_pod("b"), frozenset({"Other"}))
    assert queue.move_all(ClusterEvent.NODE_TAINT) == 0
    assert queue.move_all(ClusterEvent.NODE_LABEL) == 1
    assert queue.where("uid-a") == "backoff"
    assert queue.where("uid-b") == "unschedulable"
    assert ("a", ClusterEvent.NODE_TAINT) in seen


async def test_moved_pod_goes_to_active_once_its_backoff_is_over(
    default_queue: SchedulingQueue, clock: FakeClock
) -> None:
    pod = make_pod("p")
    await make_unschedulable(default_queue, pod, frozenset({"NodeResourcesFit"}))
    clock.advance(1)
    default_queue.move_all(ClusterEvent.NODE_ADD)
    assert default_queue.where(pod.uid) == "active"


async def test_unschedulable_flushed_after_five_minutes(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    pod = make_pod("p")
    await make_unschedulable(queue, pod, frozenset({"NodeResourcesFit"}))
    clock.advance(299)
    queue.flush_unschedulable_leftover()
    assert queue.where(pod.uid) == "unschedulable"
    clock.advance(2)
    queue.flush_unschedulable_leftover()
    assert queue.where(pod.uid) == "active"
    assert await pop_name(queue) == "p"


async def test_leftover_flush_uses_each_pods_own_time(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    await make_unschedulable(queue, make_pod("old"), frozenset({"X"}))
    clock.advance(200)
    await make_unschedulable(queue, make_pod("new"), frozenset({"X"}))
    clock.advance(150)
    queue.flush_unschedulable_leftover()
    assert queue.where("uid-old") == "active"
    assert queue.where("uid-new") == "unschedulable"


# -- gates -----------------------------------------------------------------------------------


async def test_gated_pod_held_until_gates_removed(queue: SchedulingQueue) -> None:
    gated = make_pod("p", gates=("example.com/wait", "other"))
    queue.add(gated)
    assert queue.where(gated.uid) == "gated"
    assert queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}
    assert queue.move_all(ClusterEvent.FORCE) == 0
    assert queue.where(gated.uid) == "gated"
    queue.update(make_pod("p", gates=("other",)))
    assert queue.where(gated.uid) == "gated"
    queue.update(make_pod("p"))
    assert queue.where(gated.uid) == "active"
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.scheduling_gates == ()


async def test_gated_pod_is_not_popped(queue: SchedulingQueue) -> None:
    queue.add(make_pod("gated", gates=("g",), priority=100))
    queue.add(make_pod("free"))
    assert await pop_name(queue) == "free"
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    assert not waiter.done()
    queue.update(make_pod("gated", priority=100))
    assert (await settle(waiter)) is not None


async def test_adding_gates_to_an_active_pod_gates_it(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.update(make_pod("p", gates=("g",)))
    assert queue.where("uid-p") == "gated"


# -- updates and deletes ---------------------------------------------------------------------


async def test_update_of_active_pod_reorders(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(make_pod("a"))
    clock.advance(1)
    queue.add(make_pod("b"))
    queue.update(make_pod("b", priority=10))
    assert queue.pending()["active"] == 2
    first = await pop(queue)
    assert first is not None
    assert first.pod.name == "b"
    assert first.pod.priority == 10
    assert await pop_name(queue) == "a"


async def test_add_of_queued_pod_is_an_update(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.add(make_pod("p", priority=3))
    assert queue.pending()["active"] == 1
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.priority == 3


async def test_update_of_backoff_pod_keeps_it_in_backoff(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    queue.requeue(qp, error=True)
    queue.update(make_pod("p", priority=5))
    assert queue.where("uid-p") == "backoff"
    clock.advance(1)
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.priority == 5


async def test_irrelevant_update_of_unschedulable_pod_keeps_it_there(
    default_queue: SchedulingQueue,
) -> None:
    queue = default_queue
    await make_unschedulable(queue, make_pod("p"), frozenset({"NodeResourcesFit"}))
    relabelled = parse_pod(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p", "labels": {"a": "b"}},
            "spec": {
                "schedulerName": "ascheduler",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}],
            },
        }
    )
    queue.update(relabelled)
    assert queue.where("uid-p") == "unschedulable"


async def test_relabelling_a_pod_that_spread_rejected_retries_it(
    default_queue: SchedulingQueue,
) -> None:
    # Its own labels decide whether it counts against its constraints.
    queue = default_queue

    def spreading(labels: dict[str, str]) -> PodInfo:
        constraint = {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"a": "b"}},
        }
        return parse_pod(
            {
                "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p", "labels": labels},
                "spec": {
                    "schedulerName": "ascheduler",
                    "containers": [{"name": "c"}],
                    "topologySpreadConstraints": [constraint],
                },
            }
        )

    await make_unschedulable(queue, spreading({}), frozenset({"PodTopologySpread"}))
    queue.update(spreading({"c": "d"}))  # its selector does not see this label
    assert queue.where("uid-p") == "unschedulable"
    queue.update(spreading({"a": "b"}))
    assert queue.where("uid-p") != "unschedulable"


async def test_relevant_update_of_unschedulable_pod_moves_it(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    await make_unschedulable(queue, make_pod("p"), frozenset({"NodeResourcesFit"}))
    queue.update(make_pod("p", cpu="50m"))
    assert queue.where("uid-p") == "backoff"
    clock.advance(1)
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.requests["cpu"] == 50


async def test_update_of_unknown_pod_adds_it(queue: SchedulingQueue) -> None:
    queue.update(make_pod("p"))
    assert queue.where("uid-p") == "active"


@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable", "gated"])
async def test_delete_from_every_place(
    queue: SchedulingQueue, clock: FakeClock, place: str
) -> None:
    pod = make_pod("p", gates=("g",) if place == "gated" else ())
    queue.add(pod)
    if place in ("backoff", "unschedulable"):
        qp = await pop(queue)
        assert qp is not None
        queue.requeue(qp, error=place == "backoff", rejected_by=frozenset({"X"}))
    assert queue.where(pod.uid) == place
    queue.delete(pod)
    assert queue.where(pod.uid) is None
    assert pod.uid not in queue
    assert queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}
    clock.advance(400)
    queue.flush_backoff_completed()
    queue.flush_unschedulable_leftover()
    assert queue.pending()["active"] == 0


async def test_deleted_pod_is_skipped_by_pop(queue: SchedulingQueue) -> None:
    queue.add(make_pod("gone", priority=10))
    queue.add(make_pod("stays"))
    queue.delete(make_pod("gone"))
    assert await pop_name(queue) == "stays"


# -- in flight -------------------------------------------------------------------------------


async def test_event_during_flight_sends_pod_to_backoff(default_queue: SchedulingQueue) -> None:
    default_queue.add(make_pod("p"))
    qp = await pop(default_queue)
    assert qp is not None
    assert default_queue.move_all(ClusterEvent.NODE_ADD) == 0
    default_queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    assert default_queue.where("uid-p") == "backoff"


async def test_unrelated_event_during_flight_leaves_pod_unschedulable(
    default_queue: SchedulingQueue,
) -> None:
    default_queue.add(make_pod("p"))
    qp = await pop(default_queue)
    assert qp is not None
    default_queue.move_all(ClusterEvent.NODE_TAINT)
    default_queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    assert default_queue.where("uid-p") == "unschedulable"


async def test_event_before_pop_does_not_count(default_queue: SchedulingQueue) -> None:
    default_queue.add(make_pod("other"))
    other = await pop(default_queue)  # keeps the queue recording events
    assert other is not None
    default_queue.move_all(ClusterEvent.NODE_ADD)
    default_queue.add(make_pod("p"))
    qp = await pop(default_queue)
    assert qp is not None
    assert qp.pod.name == "p"
    default_queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    assert default_queue.where("uid-p") == "unschedulable"
    default_queue.requeue(other, rejected_by=frozenset({"NodeResourcesFit"}))
    assert default_queue.where("uid-other") == "backoff"


async def test_invalid_spec_pod_is_not_helped_by_events_in_flight(
    default_queue: SchedulingQueue,
) -> None:
    default_queue.add(make_pod("p"))
    qp = await pop(default_queue)
    assert qp is not None
    default_queue.move_all(ClusterEvent.NODE_ADD)
    default_queue.requeue(qp, rejected_by=frozenset({INVALID_SPEC}))
    assert default_queue.where("uid-p") == "unschedulable"


async def test_pod_put_back_with_a_changed_spec_is_retried(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    queue.update(make_pod("p", priority=9))  # recorded nowhere: the owner re-reads the pod
    assert queue.where("uid-p") == "in-flight"
    queue.requeue(replace(qp, pod=make_pod("p", priority=9)), rejected_by=frozenset({"X"}))
    assert queue.where("uid-p") == "backoff"
    clock.advance(1)
    again = await pop(queue)
    assert again is not None
    assert again.pod.priority == 9


async def test_pod_put_back_unchanged_stays_unschedulable(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    newer = replace(make_pod("p"), resource_version="7")  # an annotation, say
    queue.requeue(replace(qp, pod=newer), rejected_by=frozenset({"NodeResourcesFit"}))
    assert queue.where("uid-p") == "unschedulable"
    queue.flush_unschedulable_leftover()
    assert queue.pending()["unschedulable"] == 1


async def test_pod_deleted_in_flight_is_not_requeued(queue: SchedulingQueue) -> None:
    pod = make_pod("p")
    queue.add(pod)
    qp = await pop(queue)
    assert qp is not None
    queue.delete(pod)
    queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
    assert queue.where(pod.uid) is None
    assert queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


async def test_pod_deleted_in_flight_after_error_is_not_requeued(queue: SchedulingQueue) -> None:
    pod = make_pod("p")
    queue.add(pod)
    qp = await pop(queue)
    assert qp is not None
    queue.delete(pod)
    queue.requeue(qp, error=True)
    assert queue.where(pod.uid) is None


async def test_event_log_keeps_only_what_pods_in_flight_can_use(
    default_queue: SchedulingQueue,
) -> None:
    """A pod that stays in flight (waiting on Permit, say) while others come and go keeps
    only the events since it was popped; once it is done, the log empties."""
    queue = default_queue
    queue.add(make_pod("waiter"))
    waiter = await pop(queue)
    assert waiter is not None
    for i in range(50):
        queue.move_all(ClusterEvent.NODE_TAINT)
        queue.add(make_pod(f"p{i}"))
        qp = await pop(queue)
        assert qp is not None
        queue.done(qp.pod.uid)
    assert queue.in_flight_events == 50  # all newer than the waiter: it may still need them
    queue.move_all(ClusterEvent.NODE_ADD)
    queue.add(make_pod("late"))
    late = await pop(queue)
    assert late is not None
    queue.requeue(waiter, rejected_by=frozenset({"NodeResourcesFit"}))
    assert queue.where("uid-waiter") == "backoff"  # NODE_ADD during its flight helped it
    assert queue.in_flight_events == 0  # nothing newer than `late`'s pop
    queue.move_all(ClusterEvent.NODE_TAINT)
    assert queue.in_flight_events == 1
    queue.requeue(late, rejected_by=frozenset({"NodeResourcesFit"}))
    assert queue.where("uid-late") == "unschedulable"  # a taint change does not help Fit
    assert queue.in_flight_events == 0


async def test_event_log_is_bounded_under_steady_traffic(
    default_queue: SchedulingQueue,
) -> None:
    """Pods always in flight (steady binding), never all done at once: the log still drops
    what every pod in flight has seen."""
    queue = default_queue
    flying: list[QueuedPodInfo] = []
    for i in range(2000):
        queue.add(make_pod(f"p{i}"))
        qp = await pop(queue)
        assert qp is not None
        flying.append(qp)
        queue.move_all(ClusterEvent.ASSIGNED_POD_DELETE)
        if len(flying) > 3:
            queue.done(flying.pop(0).pod.uid)
    assert queue.in_flight_events <= 4


async def test_done_stops_tracking(queue: SchedulingQueue) -> None:
    pod = make_pod("p")
    queue.add(pod)
    qp = await pop(queue)
    assert qp is not None
    queue.done(pod.uid)
    assert queue.where(pod.uid) is None
    assert pod.uid not in queue


# -- close -----------------------------------------------------------------------------------


async def test_pop_returns_none_after_close(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    queue.close()
    assert await pop(queue) is None


async def test_close_releases_a_waiting_pop(queue: SchedulingQueue) -> None:
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    assert not waiter.done()
    queue.close()
    assert await settle(waiter) is None


async def test_add_wakes_a_waiting_pop(queue: SchedulingQueue) -> None:
    waiter = asyncio.create_task(queue.pop())
    await let_tasks_run()
    assert not waiter.done()
    queue.add(make_pod("p"))
    qp = await settle(waiter)
    assert qp is not None
    assert qp.pod.name == "p"


def test_incoming_counters(clock: FakeClock) -> None:
    seen: list[tuple[str, str]] = []
    queue = make_queue(clock)
    queue.on_incoming = lambda q, event: seen.append((q, event))
    queue.add(make_pod("a"))
    queue.add(make_pod("g", gates=("x",)))
    assert seen == [("active", "PodAdd"), ("gated", "PodAdd")]


async def test_unrelated_pods_binding_do_not_wake_an_anti_affinity_pod(
    default_queue: SchedulingQueue,
) -> None:
    queue = default_queue
    raw = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "uid-p", "labels": {"app": "web"}},
        "spec": {
            "schedulerName": "ascheduler",
            "containers": [{"name": "c"}],
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
                    ]
                }
            },
        },
    }
    await make_unschedulable(queue, parse_pod(raw), frozenset({"InterPodAffinity"}))

    def bound(name: str, app: str) -> PodInfo:
        return parse_pod(
            {
                "metadata": {
                    "name": name,
                    "namespace": "ns",
                    "uid": f"uid-{name}",
                    "labels": {"app": app},
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            }
        )

    assert queue.move_all(ClusterEvent.ASSIGNED_POD_ADD, None, bound("x", "cache")) == 0
    assert queue.where("uid-p") == "unschedulable"
    assert queue.move_all(ClusterEvent.ASSIGNED_POD_ADD, None, bound("d", "db")) == 1
    assert queue.where("uid-p") != "unschedulable"


async def test_an_event_looks_only_at_the_pods_waiting_for_it(
    default_queue: SchedulingQueue,
) -> None:
    # Binding a pod (AssignedPodAdd) happens hundreds of times a second: pods that no plugin
    # registered it for must not even be looked at.
    queue = default_queue
    for i in range(50):
        await make_unschedulable(queue, make_pod(f"fit-{i}"), frozenset({"NodeResourcesFit"}))
    await make_unschedulable(queue, make_pod("spread"), frozenset({"PodTopologySpread"}))
    asked: list[str] = []
    inner = queue.event_filter

    def counting(qp: QueuedPodInfo, event: ClusterEvent) -> bool:
        asked.append(qp.pod.name)
        return inner(qp, event)

    queue.event_filter = counting
    assert queue.move_all(ClusterEvent.ASSIGNED_POD_ADD) == 1
    assert asked == ["spread"]
    assert queue.where("uid-fit-0") == "unschedulable"
    asked.clear()
    assert queue.move_all(ClusterEvent.NODE_ALLOCATABLE) == 50
    assert len(asked) == 50
    assert queue.pending()["unschedulable"] == 0


async def test_a_claim_event_looks_only_at_the_gated_pods_that_name_the_claim(
    clock: FakeClock,
) -> None:
    """Thousands of claims appearing at once (an informer's relist) must not each look at
    every pod DynamicResources holds back: pods are indexed by the claims they name."""
    cache = Cache()
    frameworks = build_frameworks(SchedulerConfig(), IN_TREE, cache, None)
    queue = build_queue(frameworks, QueueSettings())
    queue.clock = clock
    plugin = next(iter(frameworks.values())).plugins["DynamicResources"]
    asked: list[str] = []
    hint = plugin.queueing_hint

    def counting(pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        asked.append(pod.name)
        return bool(hint(pod, event, old, new))

    plugin.queueing_hint = counting  # type: ignore[method-assign]
    for i in range(200):
        body = parse_pod(
            {
                "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"uid-{i}"},
                "spec": {
                    "schedulerName": "ascheduler",
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": f"c{i}"}],
                    "containers": [{"name": "c", "resources": {"claims": [{"name": "gpu"}]}}],
                },
            }
        )
        queue.add(body)
        assert queue.where(body.uid) == "gated"
    claim = parse_resource_claim(
        {
            "metadata": {"name": "c7", "namespace": "ns", "uid": "claim-7", "resourceVersion": "1"},
            "spec": {"devices": {"requests": []}},
        }
    )
    cache.resources.handlers["ResourceClaim"].on_add(claim)
    assert queue.move_all(ClusterEvent.RESOURCE_CLAIM_ADD, None, claim) == 1
    assert asked == ["p7"]
    assert queue.where("uid-7") == "active"
    assert queue.pending()["gated"] == 199


async def test_wake_keeps_backoff_where_activate_cuts_it_short(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    woken, forced = make_pod("woken"), make_pod("forced")
    for p in (woken, forced):
        await make_unschedulable(queue, p, frozenset({"Coscheduling"}))  # backoff 1 s
    queue.wake(woken.uid)
    queue.activate(forced.uid)
    assert queue.where(woken.uid) == "backoff"  # its backoff is not over yet
    assert queue.where(forced.uid) == "active"
    clock.advance(1.5)
    queue.flush_backoff_completed()
    assert queue.where(woken.uid) == "active"


async def test_pop_specific_takes_a_pod_from_wherever_it_waits_into_flight(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    """kube-scheduler's PopSpecificPod: backoff cut short, a gated pod left where it is, a
    pod in flight or not queued not had."""
    backing, active, gated = make_pod("backing"), make_pod("active"), make_pod("g", gates=("x",))
    parked = make_pod("parked")
    for p in (backing, parked):
        await make_unschedulable(queue, p, frozenset({"Coscheduling"}))
    queue.add(active)
    queue.add(gated)
    queue.wake(backing.uid)
    assert queue.where(backing.uid) == "backoff"  # its backoff is not over yet
    taken = queue.pop_specific(parked.uid)
    assert taken is not None
    assert queue.where(parked.uid) == "in-flight"
    taken = queue.pop_specific(backing.uid)
    assert taken is not None
    assert (taken.pod.uid, taken.attempts, queue.where(backing.uid)) == (
        backing.uid,
        2,
        "in-flight",
    )
    assert queue.pop_specific(backing.uid) is None  # in flight already
    assert queue.pop_specific(gated.uid) is None
    assert queue.where(gated.uid) == "gated"
    assert queue.pop_specific("nobody") is None
    cycle = queue.scheduling_cycle
    taken = queue.pop_specific(active.uid)
    assert taken is not None
    assert queue.scheduling_cycle == cycle + 1
    assert queue.pending() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1}


async def test_waiting_tells_a_pods_entry_wherever_it_waits_and_leaves_it_there(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    parked, active, gated = make_pod("parked"), make_pod("active"), make_pod("g", gates=("x",))
    await make_unschedulable(queue, parked, frozenset({"Coscheduling"}))
    queue.add(active)
    queue.add(gated)
    for p, where in ((parked, "unschedulable"), (active, "active"), (gated, "gated")):
        entry = queue.waiting(p.uid)
        assert entry is not None
        assert (entry.pod.uid, queue.where(p.uid)) == (p.uid, where)
    assert queue.waiting("nobody") is None
    taken = await pop(queue)
    assert taken is not None
    assert queue.waiting(taken.pod.uid) is None  # in flight


async def test_wake_after_the_backoff_or_in_flight(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    parked = make_pod("parked")
    await make_unschedulable(queue, parked, frozenset({"Coscheduling"}))
    clock.advance(5.0)
    queue.wake(parked.uid)
    assert queue.where(parked.uid) == "active"  # backoff over: straight in
    # Woken while in flight: put back by its attempt as if helped, its backoff kept.
    qp = await pop(queue)
    assert qp is not None
    assert qp.pod.uid == parked.uid
    queue.wake(parked.uid)
    queue.requeue(qp, rejected_by=frozenset({"Coscheduling"}))
    assert queue.where(parked.uid) == "backoff"


async def test_move_all_pre_check_narrows_the_pods_asked_not_the_in_flight_log(
    queue: SchedulingQueue,
) -> None:
    """kube-scheduler's `PreEnqueueCheck`: only the pods it passes are moved; the event is
    still recorded for a pod in flight (its requeue asks the hints whatever the check)."""
    low = make_pod("low", priority=1)
    high = make_pod("high", priority=100)
    await make_unschedulable(queue, low, frozenset({"NodeResourcesFit"}))
    await make_unschedulable(queue, high, frozenset({"NodeResourcesFit"}))
    queue.add(make_pod("flying", priority=100))
    flying = await pop(queue)
    assert flying is not None
    moved = queue.move_all(
        ClusterEvent.ASSIGNED_POD_DELETE, None, None, pre_check=lambda p: p.priority <= 10
    )
    assert moved == 1
    assert queue.where(low.uid) in ("backoff", "active")
    assert queue.where(high.uid) == "unschedulable"
    queue.requeue(flying, rejected_by=frozenset({"NodeResourcesFit"}))
    assert queue.where(flying.pod.uid) in ("backoff", "active")
