"""The scheduling queue: where every unscheduled pod of ours waits for its next attempt.

A pod is in exactly one place:

* **active**: a heap ordered by the QueueSort plugin (PrioritySort: priority, then the time it
  entered the queue); `pop()` takes its head.
* **backoff**: heaps by the time a pod's backoff ends (per pod `initial * 2^(attempts-1)`,
  capped at `max`); moved to active when that time comes. Pods that failed with an error wait
  in a heap of their own: when active is empty, a pod that was merely unschedulable may be
  popped from backoff early (kube-scheduler >= 1.33), one that failed with an error never is.
* **unschedulable**: pods no node fits. They leave when a cluster event one of their rejecting
  plugins registered for happens (`move_all`), when they are updated, or after
  `unschedulable_timeout` (5 min) regardless.
* **gated**: pods a PreEnqueue plugin holds back (scheduling gates, claims not created yet);
  re-checked on update, and on the events the gating plugin registered (a claim created).
* **in flight**: popped and being scheduled or bound. Events that arrive meanwhile are recorded,
  so a pod rejected on an outdated view is retried instead of parked (the race kube-scheduler's
  in-flight events close). The log keeps only events newer than the oldest pod in flight (the
  first in `_in_flight`, which keeps pop order), so it stays bounded while pods wait on Permit
  or bind in a steady stream. Updates of an in-flight pod are not recorded here: whoever
  puts it back passes the pod as the informer has it then (see `requeue`).

Time comes from an injected clock, so tests move time instead of sleeping. Everything runs on
the event loop: no locks.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ascheduler.framework.interface import ClusterEvent, QueuedPodInfo, Status
from ascheduler.model import PodInfo
from ascheduler.queue.incoming import Strategy, counts_as_entity, entity_label
from ascheduler.waits import wait_event

AFTER_BACKOFF, SKIP, IMMEDIATELY = Strategy.AFTER_BACKOFF, Strategy.SKIP, Strategy.IMMEDIATELY


class Clock(Protocol):
    def now(self) -> float: ...


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


@dataclass(frozen=True)
class QueueSettings:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_timeout: float = 300.0
    backoff_ordering_window: float = 1.0


SortKey = Callable[[QueuedPodInfo], tuple[Any, ...]]
PreEnqueue = Callable[[PodInfo], Status]
EventFilter = Callable[[QueuedPodInfo, ClusterEvent], bool]
#: (pod, event, the object before, after): whether the event may make the pod schedulable
#: (the rejecting plugins' queueing hints); asked after `EventFilter` said the event matters.
Hint = Callable[[QueuedPodInfo, ClusterEvent, Any, Any], bool]
#: The events that may help a pod the way it was rejected (what `EventFilter` would say yes
#: to), so that an event looks only at the pods waiting for it.
EventsOf = Callable[[QueuedPodInfo], frozenset[ClusterEvent]]
#: The objects (`object_key`) whose event of a kind may let a gated pod in; None: any.
GateKeys = Callable[[QueuedPodInfo, ClusterEvent], frozenset[str] | None]


def object_key(obj: Any) -> str | None:
    """`namespace/name` (or `name` for a cluster-scoped object) of an event's object; None
    when it has no name. An object may name itself otherwise with a `gate_key` (a pod group's
    event carries the group's key)."""
    gate = getattr(obj, "gate_key", None)
    if isinstance(gate, str):
        return gate
    name = getattr(obj, "name", None)
    if not isinstance(name, str):
        return None
    namespace = getattr(obj, "namespace", "")
    return f"{namespace}/{name}" if namespace else name


class _Heap:
    """A heap of pods by key with removal by uid (stale entries skipped on pop)."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, str]] = []
        self.items: dict[str, tuple[int, QueuedPodInfo]] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self.items)

    def __contains__(self, uid: object) -> bool:
        return uid in self.items

    def push(self, key: Any, qp: QueuedPodInfo) -> None:
        seq = next(self._seq)
        self.items[qp.pod.uid] = (seq, qp)
        heapq.heappush(self._heap, (key, seq, qp.pod.uid))

    def remove(self, uid: str) -> QueuedPodInfo | None:
        entry = self.items.pop(uid, None)
        return None if entry is None else entry[1]

    def _clean(self) -> None:
        while self._heap:
            _, seq, uid = self._heap[0]
            entry = self.items.get(uid)
            if entry is not None and entry[0] == seq:
                return
            heapq.heappop(self._heap)

    def peek(self) -> tuple[Any, QueuedPodInfo] | None:
        self._clean()
        if not self._heap:
            return None
        key, _, uid = self._heap[0]
        return key, self.items[uid][1]

    def pop(self) -> QueuedPodInfo | None:
        self._clean()
        if not self._heap:
            return None
        _, _, uid = heapq.heappop(self._heap)
        return self.items.pop(uid)[1]

    def values(self) -> Iterator[QueuedPodInfo]:
        return (qp for _, qp in self.items.values())


@dataclass
class _InFlight:
    qp: QueuedPodInfo
    event_mark: int
    deleted: bool = False
    #: Another sharding member's now: its attempt goes on, but it is not put back.
    disowned: bool = False
    #: `activate` was asked while it was in flight: back to the active queue, not parked.
    activate: bool = False
    #: `wake` was asked while it was in flight: back to the active queue once its backoff is
    #: over, not parked.
    wake: bool = False
    #: The pod as last updated while in flight (None: as popped).
    latest: PodInfo | None = None
    #: Its own relabellings while in flight, (before, after) each: kube-scheduler records
    #: them as in-flight events (`addEventsIfPodInFlight`) and asks the hints at requeue.
    relabels: list[tuple[PodInfo, PodInfo]] = field(default_factory=list)


class SchedulingQueue:
    def __init__(
        self,
        *,
        sort_key: SortKey,
        pre_enqueue: PreEnqueue,
        event_filter: EventFilter | None = None,
        hint: Hint | None = None,
        events_of: EventsOf | None = None,
        gate_keys: GateKeys | None = None,
        clock: Clock | None = None,
        settings: QueueSettings | None = None,
    ) -> None:
        self.sort_key = sort_key
        self.pre_enqueue = pre_enqueue
        self.event_filter: EventFilter = event_filter or (lambda _qp, _event: True)
        self.hint: Hint = hint or (lambda _qp, _event, _old, _new: True)
        self.events_of = events_of
        #: For a gated pod and an event: the objects (`namespace/name`) whose event may let it
        #: in, or None: any event of that kind may (see `_gate`).
        self.gate_keys = gate_keys
        #: Unschedulable pods by the events that may help them (with `events_of`).
        self._waiting_for: dict[ClusterEvent, dict[str, None]] = {}
        self.clock = clock or MonotonicClock()
        self.settings = settings or QueueSettings()
        self._active = _Heap()
        self._backoff = _Heap()
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._unschedulable_since: dict[str, float] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        #: Gated pods by the events that may let them in (their gating plugin's): any event of
        #: the kind, or only one about an object the pod names (`gate_keys`).
        self._gated_waiting: dict[ClusterEvent, dict[str, None]] = {}
        self._gated_keyed: dict[tuple[ClusterEvent, str], dict[str, None]] = {}
        self._gated_entries: dict[str, list[tuple[ClusterEvent, str | None]]] = {}
        self._error_backoff = _Heap()
        self._in_flight: dict[str, _InFlight] = {}
        #: (sequence number, event, old, new); those before `_events_head` are dropped (see
        #: `_trim_events`)
        self._events: list[tuple[int, ClusterEvent, Any, Any]] = []
        self._events_head = 0
        self._event_seq = 0
        self._wakeup = asyncio.Event()
        self._closed = False
        self.scheduling_cycle = 0
        #: Counters for `scheduler_queue_incoming_pods_total{queue,event}`.
        self.on_incoming: Callable[[str, str], None] = lambda _queue, _event: None
        #: Counters for `scheduler_queue_incoming_entities_total{queue,event}` (1.37), told
        #: only the moves kube-scheduler counts there (`queue.incoming`).
        self.on_incoming_entity: Callable[[str, str], None] = lambda _queue, _event: None
        #: Told the uid of each pod deleted from the queue (deleted, or bound elsewhere).
        self.on_delete: Callable[[str], None] = lambda _uid: None

    # -- introspection -------------------------------------------------------------------

    def pending(self) -> dict[str, int]:
        return {
            "active": len(self._active),
            "backoff": len(self._backoff) + len(self._error_backoff),
            "unschedulable": len(self._unschedulable),
            "gated": len(self._gated),
        }

    def entries(self) -> Iterator[tuple[str, QueuedPodInfo, float]]:
        """Every pod the queue holds: (queue, pod, seconds until its backoff ends), the
        active queue first (for `/debug/queue`; a walk over all of them)."""
        now = self.clock.now()
        for qp in self._active.values():
            yield "active", qp, 0.0
        for heap in (self._backoff, self._error_backoff):
            for qp in heap.values():
                yield "backoff", qp, max(self._backoff_end(qp) - now, 0.0)
        for qp in self._unschedulable.values():
            yield "unschedulable", qp, max(self._backoff_end(qp) - now, 0.0)
        for qp in self._gated.values():
            yield "gated", qp, 0.0
        for flight in self._in_flight.values():
            yield "in-flight", flight.qp, 0.0

    def where(self, uid: str) -> str | None:
        if uid in self._active:
            return "active"
        if uid in self._backoff or uid in self._error_backoff:
            return "backoff"
        if uid in self._unschedulable:
            return "unschedulable"
        if uid in self._gated:
            return "gated"
        if uid in self._in_flight:
            return "in-flight"
        return None

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, str) and self.where(uid) is not None

    # -- placing pods --------------------------------------------------------------------

    def _incoming(
        self, queue: str, event: str, strategy: Strategy | None, *, pooled: bool = False
    ) -> None:
        """Count a pod landing in `queue`, and the entity when kube-scheduler counts it:
        `strategy` is the queueing strategy that moved it (None: new to the queue),
        `pooled` whether kube-scheduler's unschedulable pool still holds it."""
        self.on_incoming(queue, event)
        if counts_as_entity(queue, strategy, pooled=pooled):
            self.on_incoming_entity(entity_label(queue), event)

    def _held(
        self, qp: QueuedPodInfo, event: str, strategy: Strategy | None, *, pooled: bool
    ) -> bool:
        """PreEnqueue on the pod's way in: True when a plugin holds it (it is gated then,
        under the plugin that said so)."""
        status = self.pre_enqueue(qp.pod)
        if status.ok:
            return False
        if status.plugin:
            qp = replace(qp, unschedulable_plugins=frozenset({status.plugin}))
        self._gate(qp)
        self._incoming("gated", event, strategy, pooled=pooled)
        return True

    def _to_active(
        self,
        qp: QueuedPodInfo,
        event: str,
        strategy: Strategy | None = None,
        *,
        pooled: bool = False,
    ) -> None:
        if self._held(qp, event, strategy, pooled=pooled):
            return
        self._active.push(self.sort_key(qp), qp)
        self._incoming("active", event, strategy)
        self._wakeup.set()

    def _backoff_end(self, qp: QueuedPodInfo) -> float:
        """When the pod's backoff ends, rounded up to a whole ordering window, so pods whose
        backoff ends within one window leave in QueueSort order (kube-scheduler >= 1.33)."""
        if qp.attempts == 0:
            return qp.timestamp
        s = self.settings
        doublings = min(qp.attempts - 1, 64)  # past that the cap holds anyway; no overflow
        duration = min(s.initial_backoff * 2.0**doublings, s.max_backoff)
        window = s.backoff_ordering_window
        return float(math.ceil((qp.timestamp + duration) / window) * window)

    def _push_backoff(self, qp: QueuedPodInfo, *, error: bool = False) -> None:
        heap = self._error_backoff if error else self._backoff
        heap.push((self._backoff_end(qp), *self.sort_key(qp)), qp)

    def _to_backoff(
        self,
        qp: QueuedPodInfo,
        event: str,
        strategy: Strategy | None = AFTER_BACKOFF,
        *,
        pooled: bool = False,
        error: bool = False,
    ) -> None:
        """Into the backoff queue, through PreEnqueue first (kube-scheduler's `moveToBackoffQ`
        with `SchedulerPopFromBackoffQ`): a pod may be popped from there early when nothing is
        active, so one its PreEnqueue holds back (a preemptor whose victims are still being
        evicted, say) is gated instead."""
        if self._held(qp, event, strategy, pooled=pooled):
            return
        self._push_backoff(qp, error=error)
        self._incoming("backoff", event, strategy)
        self._wakeup.set()

    def _to_active_or_backoff(
        self,
        qp: QueuedPodInfo,
        event: str,
        strategy: Strategy | None = AFTER_BACKOFF,
        *,
        pooled: bool = False,
    ) -> None:
        """kube-scheduler's `requeueEntityWithQueueingStrategy` for `queueAfterBackoff`
        (the default `strategy`): backoff while the pod's backoff lasts, active after."""
        end = self._backoff_end(qp)
        if end > self.clock.now():
            self._to_backoff(qp, event, strategy, pooled=pooled)
        else:
            self._to_active(qp, event, strategy, pooled=pooled)

    def add(self, pod: PodInfo) -> None:
        """A new unscheduled pod of ours."""
        if pod.uid in self:
            self.update(pod)
            return
        self._to_active(QueuedPodInfo(pod, self.clock.now()), "PodAdd")

    def update(self, pod: PodInfo) -> None:
        uid = pod.uid
        flight = self._in_flight.get(uid)
        if flight is not None:
            # Its attempt's owner re-reads it when putting it back; what the pod's spec
            # changed is seen then, a relabelling only through the hints (`requeue`).
            before = flight.latest or flight.qp.pod
            flight.disowned = False  # updated as ours: ours again, if it was not
            if before.labels != pod.labels:
                flight.relabels.append((before, pod))
            flight.latest = pod
            return
        for heap in (self._active, self._backoff, self._error_backoff):
            if uid in heap:
                qp = heap.remove(uid)
                assert qp is not None
                if heap is self._active:
                    # Updated in place there, for kube-scheduler: no new entity.
                    self._to_active(replace(qp, pod=pod), "PodUpdate", IMMEDIATELY, pooled=True)
                else:
                    self._push_backoff(replace(qp, pod=pod), error=heap is self._error_backoff)
                return
        if uid in self._gated:
            qp = self._ungate(uid)
            self._to_active(replace(qp, pod=pod), "PodUpdate", AFTER_BACKOFF, pooled=True)
            return
        if uid in self._unschedulable:
            qp = self._unschedulable[uid]
            event = ClusterEvent.UNSCHEDULED_POD_UPDATE
            relabelled = qp.pod.labels != pod.labels
            if qp.pod.scheduling_spec_equal(pod) and not (
                relabelled and self._may_help(qp, event, qp.pod, pod)
            ):
                self._unschedulable[uid] = replace(qp, pod=pod)
                return
            self._unpark(uid)
            self._to_active_or_backoff(replace(qp, pod=pod), "PodUpdate", pooled=True)
            return
        self.add(pod)

    def delete(self, pod: PodInfo) -> None:
        uid = pod.uid
        self.on_delete(uid)
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.deleted = True
        self._leave(uid)

    def disown(self, pod: PodInfo) -> None:
        """The pod is no longer ours to schedule (another sharding member's now): it leaves
        wherever it waits; an attempt in flight goes on, and is not put back if it fails
        (unless `add` or `update` makes the pod ours again first)."""
        uid = pod.uid
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.disowned = True
        self._leave(uid)

    def _leave(self, uid: str) -> None:
        """The pod out of every place it may wait in."""
        self._active.remove(uid)
        self._backoff.remove(uid)
        self._error_backoff.remove(uid)
        if uid in self._gated:
            self._ungate(uid)
        self._unpark(uid)

    def activate(self, uid: str) -> None:
        """Move the pod to the active queue now, wherever it waits (kube-scheduler's
        `Activate`): gated pods go through PreEnqueue again, backoff is cut short; a pod in
        flight is moved as soon as its attempt puts it back."""
        if uid in self._gated:
            self._to_active(self._ungate(uid), "ForceActivate", pooled=True)
            return
        parked = self._unpark(uid)
        if parked is not None:
            self._to_active(parked, "ForceActivate", pooled=True)
            return
        for heap in (self._backoff, self._error_backoff):
            qp = heap.remove(uid)
            if qp is not None:
                self._to_active(qp, "ForceActivate")
                return
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.activate = True

    def wake(self, uid: str) -> None:
        """Like `activate`, but a pod keeps its backoff: a parked pod goes to the active
        queue or, if its backoff is not over, to the backoff queue; one backing off stays
        there; one in flight does the same when its attempt puts it back. (A gang's first
        waiting member wakes its siblings so: a group doomed again and again is then retried
        at the pace of its members' backoff, not in a loop.)"""
        if uid in self._gated:
            self._to_active_or_backoff(self._ungate(uid), "ForceActivate", pooled=True)
            return
        parked = self._unpark(uid)
        if parked is not None:
            self._to_active_or_backoff(parked, "ForceActivate", None, pooled=True)
            return
        flight = self._in_flight.get(uid)
        if flight is not None:
            flight.wake = True

    def _gate(self, qp: QueuedPodInfo) -> None:
        """Index a gated pod by the events that may let it in; where its gating plugins name
        the objects it waits for, by those objects too, so that an event about another
        object (thousands of claims appearing at once, say) does not look at it."""
        uid = qp.pod.uid
        self._gated[uid] = qp
        if self.events_of is None or not qp.unschedulable_plugins:
            return
        entries: list[tuple[ClusterEvent, str | None]] = []
        for event in self.events_of(qp):
            keys = self.gate_keys(qp, event) if self.gate_keys is not None else None
            if keys is None:
                self._gated_waiting.setdefault(event, {})[uid] = None
                entries.append((event, None))
                continue
            for key in keys:
                self._gated_keyed.setdefault((event, key), {})[uid] = None
                entries.append((event, key))
        self._gated_entries[uid] = entries

    def _ungate(self, uid: str) -> QueuedPodInfo:
        qp = self._gated.pop(uid)
        for event, key in self._gated_entries.pop(uid, ()):
            index: dict[Any, dict[str, None]] = (
                self._gated_waiting if key is None else self._gated_keyed
            )
            at = event if key is None else (event, key)
            waiting = index.get(at)
            if waiting is not None:
                waiting.pop(uid, None)
                if not waiting:
                    del index[at]
        return qp

    def _gated_candidates(self, event: ClusterEvent, old: Any, new: Any) -> list[str]:
        uids = list(self._gated_waiting.get(event, ()))
        if not self._gated_keyed:
            return uids
        key = object_key(new if new is not None else old)
        if key is not None:
            uids += self._gated_keyed.get((event, key), ())
        else:  # an event that names no object: every pod waiting for its kind
            uids += [u for (e, _), w in self._gated_keyed.items() if e is event for u in w]
        return list(dict.fromkeys(uids))

    def _park(self, qp: QueuedPodInfo, now: float) -> None:
        uid = qp.pod.uid
        self._unschedulable[uid] = qp
        self._unschedulable_since[uid] = now
        if self.events_of is not None:
            for event in self.events_of(qp):
                self._waiting_for.setdefault(event, {})[uid] = None

    def _unpark(self, uid: str) -> QueuedPodInfo | None:
        qp = self._unschedulable.pop(uid, None)
        self._unschedulable_since.pop(uid, None)
        if qp is not None and self.events_of is not None:
            for event in self.events_of(qp):
                waiting = self._waiting_for.get(event)
                if waiting is not None:
                    waiting.pop(uid, None)
                    if not waiting:
                        del self._waiting_for[event]
        return qp

    # -- popping and outcomes ------------------------------------------------------------

    def _pop_now(self) -> QueuedPodInfo | None:
        self.flush_backoff_completed()
        qp = self._active.pop()
        if qp is None:
            # Nothing active: a pod only backing off from an unschedulable verdict may go early.
            qp = self._backoff.pop()
            if qp is not None:
                self.on_incoming_entity("active", "PopFromBackoffQ")
        if qp is None:
            return None
        return self._take(qp)

    def _take(self, qp: QueuedPodInfo) -> QueuedPodInfo:
        """A pod taken from the queue into flight: one more attempt, the cycle counted."""
        self.scheduling_cycle += 1
        qp = QueuedPodInfo(
            qp.pod,
            qp.timestamp,
            qp.attempts + 1,
            qp.initial_attempt_timestamp or self.clock.now(),
            qp.unschedulable_plugins,
            qp.flushed,
        )
        self._in_flight[qp.pod.uid] = _InFlight(qp, self._event_seq)
        return qp

    def waiting(self, uid: str) -> QueuedPodInfo | None:
        """The pod's entry where it waits (active, backing off, unschedulable or gated), as
        it is and left there; None when it is in flight or not queued."""
        qp = self._unschedulable.get(uid)  # first: where most of a large group waits
        if qp is not None:
            return qp
        for heap in (self._active, self._backoff, self._error_backoff):
            entry = heap.items.get(uid)
            if entry is not None:
                return entry[1]
        return self._gated.get(uid)

    def pop_specific(self, uid: str) -> QueuedPodInfo | None:
        """kube-scheduler's `PopSpecificPod`, for a pod group's members popped with the one
        that came up: the pod activated wherever it waits (backoff cut short, a gated pod
        through PreEnqueue again), then taken into flight. None when it is not to be had:
        in flight already, held by PreEnqueue, or not queued."""
        if uid in self._in_flight:
            return None
        if uid not in self._active:
            self.activate(uid)
        qp = self._active.remove(uid)
        return None if qp is None else self._take(qp)

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; waits for one. None once the queue is closed."""
        while not self._closed:
            qp = self._pop_now()
            if qp is not None:
                return qp
            self._wakeup.clear()
            delay = self._next_backoff_delay()
            if delay is None:
                await self._wakeup.wait()
            else:
                await wait_event(self._wakeup, max(delay, 0.001))
        return None

    def _next_backoff_delay(self) -> float | None:
        ends = [
            head[0][0]
            for heap in (self._backoff, self._error_backoff)
            if (head := heap.peek()) is not None
        ]
        return min(ends) - self.clock.now() if ends else None

    def deleted_in_flight(self, uid: str) -> bool:
        """Whether the pod was deleted while its attempt was in flight."""
        flight = self._in_flight.get(uid)
        return flight is not None and flight.deleted

    def done(self, uid: str) -> None:
        """The pod's attempt is over (bound, or put back): stop tracking it as in flight."""
        self._in_flight.pop(uid, None)
        self._trim_events()

    def requeue(
        self, qp: QueuedPodInfo, *, rejected_by: frozenset[str] = frozenset(), error: bool = False
    ) -> None:
        """Put back a pod whose attempt failed: unschedulable (rejected by plugins) or backoff
        (an error, or an event during the attempt that may have helped).

        `qp.pod` is the pod as it is now (the caller re-reads it from the informer); if what
        scheduling depends on changed since it was popped, it is retried like an updated pod.
        """
        uid = qp.pod.uid
        flight = self._in_flight.pop(uid, None)
        if flight is not None and (flight.deleted or flight.disowned):
            self._trim_events()
            return
        now = self.clock.now()
        qp = replace(qp, timestamp=now, unschedulable_plugins=rejected_by, flushed=False)
        # kube-scheduler asks the hints which strategy puts the pod back: `queueAfterBackoff`
        # for an error, an activation or an event that may help meanwhile, else `queueSkip`.
        if flight is not None and flight.activate:
            self._to_active(qp, "ForceActivate", AFTER_BACKOFF)
        elif flight is not None and flight.wake and not error:
            self._to_active_or_backoff(qp, "ForceActivate")
        elif error:
            self._to_backoff(qp, "ScheduleAttemptFailure", error=True)
        elif flight is not None and (
            not flight.qp.pod.scheduling_spec_equal(qp.pod)
            or self._helped(qp, flight)
            or self._relabel_helped(qp, flight)
        ):
            self._to_active_or_backoff(qp, "ScheduleAttemptFailure")
        else:
            self._park(qp, now)
            self._incoming("unschedulable", "ScheduleAttemptFailure", SKIP)
        self._trim_events()

    def _trim_events(self) -> None:
        """Drop the events no pod in flight can still be helped by: those up to the mark of
        the oldest one (`_in_flight` keeps pop order, so that is its first entry)."""
        if not self._in_flight:
            self._events.clear()
            self._events_head = 0
            return
        oldest = next(iter(self._in_flight.values())).event_mark
        events = self._events
        head = bisect.bisect_right(events, oldest, lo=self._events_head, key=lambda e: e[0])
        if head > len(events) // 2:
            del events[:head]
            head = 0
        self._events_head = head

    def _helped(self, qp: QueuedPodInfo, flight: _InFlight) -> bool:
        events = self._events
        start = bisect.bisect_right(
            events, flight.event_mark, lo=self._events_head, key=lambda e: e[0]
        )
        return any(self._may_help(qp, *events[i][1:]) for i in range(start, len(events)))

    def _relabel_helped(self, qp: QueuedPodInfo, flight: _InFlight) -> bool:
        """Whether one of the pod's own relabellings in flight may help it, as when it is
        relabelled while parked (`update`)."""
        event = ClusterEvent.UNSCHEDULED_POD_UPDATE
        return any(self._may_help(qp, event, old, new) for old, new in flight.relabels)

    def _may_help(self, qp: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        return event is ClusterEvent.FORCE or (
            self.event_filter(qp, event) and self.hint(qp, event, old, new)
        )

    @property
    def in_flight_events(self) -> int:
        """How many events the in-flight log holds (bounded by the oldest pod in flight)."""
        return len(self._events) - self._events_head

    # -- cluster events ------------------------------------------------------------------

    def move_all(
        self,
        event: ClusterEvent,
        old: Any = None,
        new: Any = None,
        pre_check: Callable[[PodInfo], bool] | None = None,
    ) -> int:
        """Move the unschedulable pods this event may help (`old` and `new`: the object
        before and after, None where there is none, for the plugins' hints); returns how
        many moved. `pre_check` (kube-scheduler's `PreEnqueueCheck`) narrows the pods asked
        (parked and gated alike, as its unschedulable pool holds both); the event is still
        recorded for the pods in flight, as kube-scheduler records it whatever the check."""
        self._event_seq += 1
        if self._in_flight:
            self._events.append((self._event_seq, event, old, new))
        moved = 0
        if self.events_of is None or event is ClusterEvent.FORCE:
            candidates = list(self._unschedulable)
        else:
            candidates = list(self._waiting_for.get(event, ()))
        for uid in candidates:
            qp = self._unschedulable[uid]
            if pre_check is not None and not pre_check(qp.pod):
                continue
            if self._may_help(qp, event, old, new):
                self._unpark(uid)
                self._to_active_or_backoff(qp, event.value)
                moved += 1
        for uid in self._gated_candidates(event, old, new):
            qp = self._gated[uid]
            if pre_check is not None and not pre_check(qp.pod):
                continue
            if self._may_help(qp, event, old, new):
                # Its backoff still holds (a pod gated on its way into the backoff queue).
                self._to_active_or_backoff(self._ungate(uid), event.value)
                moved += 1
        return moved

    def flush_backoff_completed(self) -> None:
        now = self.clock.now()
        for heap in (self._backoff, self._error_backoff):
            while (head := heap.peek()) is not None and head[0][0] <= now:
                qp = heap.pop()
                assert qp is not None
                self._to_active(qp, "BackoffComplete")

    def flush_unschedulable_leftover(self) -> None:
        now = self.clock.now()
        timeout = self.settings.unschedulable_timeout
        for uid, since in list(self._unschedulable_since.items()):
            if now - since >= timeout:
                qp = self._unpark(uid)
                assert qp is not None
                self._to_active_or_backoff(replace(qp, flushed=True), "UnschedulableTimeout")

    async def run_flushes(self, interval: float = 30.0) -> None:
        """Move long-unschedulable pods back every `interval` (backoff is handled by pop)."""
        while not self._closed:
            await asyncio.sleep(interval)
            self.flush_unschedulable_leftover()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
