"""`SchedulingQueue.disown`: a pod that became another sharding member's leaves wherever it
waits; one in flight finishes its attempt and is not put back, unless it became ours again."""

from __future__ import annotations

import pytest

from ascheduler.queue import SchedulingQueue
from tests.kit import FakeClock
from tests.unit.queue.test_queue import make_pod, make_queue, pop


@pytest.fixture
def queue() -> SchedulingQueue:
    return make_queue(FakeClock())


async def place(queue: SchedulingQueue, where: str) -> None:
    """Pod `p` waiting in `where`."""
    pod = make_pod("p", gates=("g",) if where == "gated" else ())
    queue.add(pod)
    if where in ("backoff", "unschedulable"):
        qp = await pop(queue)
        assert qp is not None
        error = where == "backoff"
        queue.requeue(qp, rejected_by=frozenset() if error else frozenset({"X"}), error=error)
    assert queue.where(pod.uid) == where


@pytest.mark.parametrize("where", ["active", "backoff", "unschedulable", "gated"])
async def test_a_disowned_pod_leaves_wherever_it_waits(queue: SchedulingQueue, where: str) -> None:
    await place(queue, where)
    queue.disown(make_pod("p"))
    assert queue.where("uid-p") is None
    assert sum(queue.pending().values()) == 0


async def test_a_pod_disowned_in_flight_is_not_put_back(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    queue.disown(qp.pod)
    assert queue.where("uid-p") == "in-flight"  # its attempt goes on
    queue.requeue(qp, rejected_by=frozenset({"X"}))
    assert queue.where("uid-p") is None


async def test_a_pod_ours_again_while_in_flight_is_put_back(queue: SchedulingQueue) -> None:
    queue.add(make_pod("p"))
    qp = await pop(queue)
    assert qp is not None
    queue.disown(qp.pod)
    queue.update(qp.pod)  # ours again (the members changed back)
    queue.requeue(qp, error=True)
    assert queue.where("uid-p") == "backoff"


async def test_disowning_a_pod_the_queue_does_not_hold_changes_nothing(
    queue: SchedulingQueue,
) -> None:
    queue.add(make_pod("q"))
    queue.disown(make_pod("p"))
    assert queue.where("uid-q") == "active"
