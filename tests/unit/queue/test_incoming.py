"""`scheduler_queue_incoming_entities_total` (1.37) as kube-scheduler's
`recordIncomingEntitiesMetrics` counts it: a pod new to a queue, or one landing elsewhere than
its queueing strategy named; the rule alone, then the queue's moves."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.framework import ClusterEvent
from ascheduler.queue import SchedulingQueue
from ascheduler.queue.incoming import Strategy, counts_as_entity, entity_label
from tests.kit import FakeClock
from tests.unit.queue.test_queue import make_pod, make_queue, pop

AFTER_BACKOFF, SKIP, IMMEDIATELY = Strategy.AFTER_BACKOFF, Strategy.SKIP, Strategy.IMMEDIATELY
NODE_ADD = ClusterEvent.NODE_ADD


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.mark.parametrize(
    ("queue", "strategy", "pooled", "counted"),
    [
        ("active", None, False, True),  # added, activated, backoff over
        ("gated", None, False, True),
        ("gated", None, True, False),  # already in the unschedulable pool
        ("backoff", AFTER_BACKOFF, False, False),
        ("active", AFTER_BACKOFF, False, True),  # its backoff was over
        ("gated", AFTER_BACKOFF, False, True),
        ("unschedulable", SKIP, False, False),
        ("active", IMMEDIATELY, False, False),
        ("backoff", IMMEDIATELY, False, True),
    ],
)
def test_the_rule(queue: str, strategy: Strategy | None, pooled: bool, counted: bool) -> None:
    assert counts_as_entity(queue, strategy, pooled=pooled) is counted


def test_gated_pods_count_in_the_unschedulable_pool() -> None:
    assert entity_label("gated") == "unschedulable"
    assert entity_label("backoff") == "backoff"


def counting(
    clock: FakeClock, **kwargs: Any
) -> tuple[SchedulingQueue, list[tuple[str, str]], list[tuple[str, str]]]:
    queue = make_queue(clock, **kwargs)
    pods: list[tuple[str, str]] = []
    entities: list[tuple[str, str]] = []
    queue.on_incoming = lambda q, event: pods.append((q, event))
    queue.on_incoming_entity = lambda q, event: entities.append((q, event))
    return queue, pods, entities


async def test_new_pods_count_wherever_they_land(clock: FakeClock) -> None:
    queue, pods, entities = counting(clock)
    queue.add(make_pod("a"))
    queue.add(make_pod("g", gates=("x",)))
    assert pods == [("active", "PodAdd"), ("gated", "PodAdd")]
    assert entities == [("active", "PodAdd"), ("unschedulable", "PodAdd")]


async def test_a_failed_attempt_counts_only_a_pod_landing_elsewhere(clock: FakeClock) -> None:
    """Parked (`queueSkip`) or in backoff after an error (`queueAfterBackoff`): where the
    strategy said, so no entity; the pods counter counts both."""
    queue, pods, entities = counting(clock)
    for name in ("parked", "failed"):
        queue.add(make_pod(name))
    first, second = await pop(queue), await pop(queue)
    assert first is not None
    assert second is not None
    entities.clear()
    queue.requeue(first, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.requeue(second, error=True)
    assert queue.where(first.pod.uid) == "unschedulable"
    assert queue.where(second.pod.uid) == "backoff"
    assert pods[-2:] == [
        ("unschedulable", "ScheduleAttemptFailure"),
        ("backoff", "ScheduleAttemptFailure"),
    ]
    assert entities == []


async def test_an_event_counts_a_pod_only_once_its_backoff_is_over(clock: FakeClock) -> None:
    queue, _, entities = counting(clock)
    for name in ("early", "late"):
        queue.add(make_pod(name))
    early, late = await pop(queue), await pop(queue)
    assert early is not None
    assert late is not None
    queue.requeue(early, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.requeue(late, rejected_by=frozenset({"NodeResourcesFit"}))
    entities.clear()
    queue.move_all(NODE_ADD, pre_check=lambda p: p.name == "early")
    assert queue.where(early.pod.uid) == "backoff"
    assert entities == []  # backing off: where queueAfterBackoff sends it
    clock.advance(60)
    queue.move_all(NODE_ADD, pre_check=lambda p: p.name == "late")
    assert queue.where(late.pod.uid) == "active"
    assert entities == [("active", NODE_ADD.value)]


async def test_backoff_completed_and_popped_early_are_new_to_active(clock: FakeClock) -> None:
    queue, pods, entities = counting(clock)
    for name in ("done", "early"):
        queue.add(make_pod(name))
    done, early = await pop(queue), await pop(queue)
    assert done is not None
    assert early is not None
    for qp in (done, early):
        queue.requeue(qp, rejected_by=frozenset({"NodeResourcesFit"}))
        queue.move_all(NODE_ADD, pre_check=lambda p, name=qp.pod.name: p.name == name)
    assert queue.where(early.pod.uid) == "backoff"
    entities.clear()
    # Popped from backoff while active is empty: counted as an entity (kube-scheduler's
    # `PopFromBackoffQ`), not in the pods counter, which ascheduler has never counted it in.
    assert await pop(queue) is not None
    assert entities == [("active", "PopFromBackoffQ")]
    clock.advance(60)
    queue.flush_backoff_completed()
    assert entities[1:] == [("active", "BackoffComplete")]
    assert ("active", "PopFromBackoffQ") not in pods


async def test_a_gated_pod_counts_when_it_enters_the_pool_not_when_it_stays(
    clock: FakeClock,
) -> None:
    """Updated or activated and still gated, the pod never left kube-scheduler's pool: no
    entity. An event that moves it takes it out first: gated again, it is counted again."""
    queue, pods, entities = counting(clock, events_of=lambda _qp: frozenset({NODE_ADD}))
    gated = make_pod("g", gates=("x",))
    queue.add(gated)
    entities.clear()
    queue.update(make_pod("g", gates=("x", "y")))
    queue.activate(gated.uid)
    assert queue.where(gated.uid) == "gated"
    assert pods[-2:] == [("gated", "PodUpdate"), ("gated", "ForceActivate")]
    assert entities == []
    queue.move_all(NODE_ADD)
    assert queue.where(gated.uid) == "gated"
    assert entities == [("unschedulable", NODE_ADD.value)]
    entities.clear()
    queue.update(make_pod("g"))  # its gates removed
    assert queue.where(gated.uid) == "active"
    assert entities == [("active", "PodUpdate")]


async def test_activation_counts_and_an_update_in_place_does_not(clock: FakeClock) -> None:
    queue, _, entities = counting(clock)
    queue.add(make_pod("p"))
    parked = await pop(queue)
    assert parked is not None
    queue.requeue(parked, rejected_by=frozenset({"NodeResourcesFit"}))
    queue.add(make_pod("a"))
    entities.clear()
    queue.update(make_pod("a", cpu="200m"))  # in the active queue: updated there
    assert entities == []
    queue.activate(parked.pod.uid)
    assert entities == [("active", "ForceActivate")]
