"""Which moves of a pod into a queue count as an incoming entity (kube-scheduler 1.37's
`scheduler_queue_incoming_entities_total{queue,event,type}`, `recordIncomingEntitiesMetrics`).

kube-scheduler counts every move in `queue_incoming_pods_total`, but an entity only when it is
new to the queue (added, activated, its backoff over, popped from backoff: no strategy) or
when it lands somewhere else than the queue its queueing strategy names:
`queueImmediately` -> active, `queueAfterBackoff` -> backoff, `queueSkip` -> unschedulable. A
pod an event moves after its backoff is over goes to active although its strategy said
backoff, so it counts; one still backing off lands in backoff, and does not. A pod parked
after a failed attempt (`queueSkip`) does not count either.

Gated pods are in kube-scheduler's unschedulable pool: they count under `unschedulable`, and
only when they enter the pool (`unschedulableEntities.addOrUpdate` of a pod not there yet): a
pod gated again where kube-scheduler never took it out of the pool (an update, an activation)
does not count again.

ascheduler's queueing hints answer yes or no, as kube-scheduler's do (Queue or QueueSkip); a
yes from a plugin that rejected the pod is `queueAfterBackoff`. `queueImmediately` comes only
from a plugin that answered Pending, which no in-tree plugin does: the strategies moves here
carry are `AFTER_BACKOFF` and `SKIP`, and `IMMEDIATELY` for a pod already active.
"""

from __future__ import annotations

import enum


class Strategy(enum.Enum):
    """kube-scheduler's `queueingStrategy`, by the queue it names
    (`strategyToQueueLabel`)."""

    SKIP = "unschedulable"
    AFTER_BACKOFF = "backoff"
    IMMEDIATELY = "active"


def entity_label(queue: str) -> str:
    """The queue an entity is counted in: gated pods are in the unschedulable pool."""
    return "unschedulable" if queue == "gated" else queue


def counts_as_entity(queue: str, strategy: Strategy | None, *, pooled: bool = False) -> bool:
    """Whether a pod landing in `queue` (`active`, `backoff`, `unschedulable`, `gated`) is an
    incoming entity. `strategy` None: new to the queue. `pooled`: kube-scheduler's pool
    already holds it, so landing there (gated again) adds nothing."""
    label = entity_label(queue)
    if pooled and label == "unschedulable":
        return False
    return strategy is None or strategy.value != label
