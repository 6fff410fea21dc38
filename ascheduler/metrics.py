"""Prometheus metrics of ascheduler's own (kube-scheduler's names live beside them).

kube-scheduler's metrics are a release's: a metric a release added is exported only by
ascheduler behaving as that release or a later one (`RELEASE_METRICS`, registered by
`behave_as` once the release is known), so a dashboard sees what the cluster's own
kube-scheduler would export.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from ascheduler.features import Features, Release

NODE_LOCK_WAIT: Final = Histogram(
    "ascheduler_node_lock_wait_seconds",
    "Time from asking for a node's lock (both levels) to holding it.",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
NODE_LOCK_CONTENDED: Final = Counter(
    "ascheduler_node_lock_contended_total",
    "Times a node-lock acquisition found the lock held by another holder (it asks for it and "
    "waits for the hand-over, or fails) or lost the race for it.",
)
NODE_LOCK_BINDS_PER_HOLD: Final = Histogram(
    "ascheduler_node_lock_binds_per_hold",
    "Binds served under one hold of a node's lock (binds to one node are coalesced).",
    buckets=(1, 2, 4, 8, 16, 32),
)
NODE_LOCK_REVALIDATIONS: Final = Counter(
    "ascheduler_node_lock_revalidations_total",
    "Holds of a node's lock by where their re-validation read the node's pods: `list` (the "
    "API server's, read in the hold), `record` (what this instance's last hold saw plus its "
    "binds since, when nobody took the lock in between), `cache` (the cache, which has seen "
    "every pod the lock object records as bound under it lately), `refresh` (a record or "
    "cache that refused a bind, read again).",
    ["source"],
)
NODE_LOCK_BINDS_ALONE: Final = Counter(
    "ascheduler_node_lock_binds_alone_total",
    "Binds the lock policy selects that went out without their node's lock, because no other "
    "instance shares the nodes (see nodeLock.whenAlone).",
)
NODE_LOCK_ALONE: Final = Gauge(
    "ascheduler_node_lock_alone",
    "1 while this instance is the only one sharing the nodes (binds skip node locks), else 0.",
)
SHARD_MEMBERS: Final = Gauge(
    "ascheduler_shard_members",
    "Live members the pending pods are split among, as this instance sees them (0: not in "
    "sharding mode, or this instance's own Lease is late).",
)
SHARD_PODS_MOVED: Final = Counter(
    "ascheduler_shard_pods_moved_total",
    "Pending pods that became this instance's (in) or another member's (out) at a re-split.",
    ["direction"],
)
NODE_LOCK_RECOVERED: Final = Counter(
    "ascheduler_node_lock_recovered_total",
    "Node locks taken over from a holder that crashed or left garbage.",
    ["kind"],
)

# -- kube-scheduler's metric names and labels, so existing dashboards work -------------------

# client-go's, which kube-scheduler exports too
REST_CLIENT_REQUESTS: Final = Counter(
    "rest_client_requests",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)

_DURATION_BUCKETS: Final = (
    0.001,
    0.002,
    0.004,
    0.008,
    0.016,
    0.032,
    0.064,
    0.128,
    0.256,
    0.512,
    1.024,
    2.048,
    4.096,
    8.192,
    16.384,
)

SCHEDULE_ATTEMPTS: Final = Counter(
    "scheduler_schedule_attempts_total",
    "Number of attempts to schedule pods, by the result.",
    ["result", "profile"],
)
SCHEDULING_ATTEMPT_DURATION: Final = Histogram(
    "scheduler_scheduling_attempt_duration_seconds",
    "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
    ["result", "profile"],
    buckets=_DURATION_BUCKETS,
)
PENDING_PODS: Final = Gauge(
    "scheduler_pending_pods",
    "Number of pending pods, by the queue type.",
    ["queue"],
)
EXTENSION_POINT_DURATION: Final = Histogram(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point (sampled cycles).",
    ["extension_point", "status", "profile"],
    buckets=(
        0.0001,
        0.0002,
        0.0004,
        0.0008,
        0.0016,
        0.0032,
        0.0064,
        0.0128,
        0.0256,
        0.0512,
        0.1024,
        0.2048,
        0.4096,
        0.8192,
        1.6384,
    ),
)
QUEUE_INCOMING_PODS: Final = Counter(
    "scheduler_queue_incoming_pods_total",
    "Number of pods added to scheduling queues by event and queue type.",
    ["queue", "event"],
)
POD_SCHEDULING_SLI_DURATION: Final = Histogram(
    "scheduler_pod_scheduling_sli_duration_seconds",
    "E2e latency for a pod being scheduled, from the time it first entered the queue.",
    ["attempts"],
    buckets=(
        0.01,
        0.02,
        0.04,
        0.08,
        0.16,
        0.32,
        0.64,
        1.28,
        2.56,
        5.12,
        10.24,
        20.48,
        40.96,
        81.92,
        163.84,
        327.68,
        655.36,
        1310.72,
        2621.44,
        5242.88,
    ),
)
#: v1.37: the queued pods again, by entity type (`pod`: not a member of a pod group; ascheduler
#: has no Workload pod groups, so every pod is one).
QUEUED_ENTITIES: Final = Gauge(
    "scheduler_queued_entities",
    "Number of queued scheduling entities ('pod' or 'podgroup'; 'pod' stands for individual "
    "pods that are not members of any podgroup) by the queue type. 'active' means number of "
    "entities in activeQ; 'backoff' means number of entities in backoffQ; 'unschedulable' "
    "means number of entities in unschedulableEntities that the scheduler attempted to "
    "schedule and failed; 'gated' is the number of unschedulable entities that the scheduler "
    "never attempted to schedule because they are gated.",
    ["queue", "type"],
    registry=None,
)
#: v1.37: the pods entering a queue, by entity type, counted only when new to the queue or
#: when they land elsewhere than their queueing strategy named (`queue.incoming`).
QUEUE_INCOMING_ENTITIES: Final = Counter(
    "scheduler_queue_incoming_entities_total",
    "Number of scheduling entities added to scheduling queues by event, queue type, and entity "
    "type. Entity types are either 'pod' (for individual pods that are not members of any "
    "podgroup) or 'podgroup'.",
    ["queue", "event", "type"],
    registry=None,
)
#: v1.36: pods bound after the periodic flush (not an event) moved them out of the
#: unschedulable pool.
POD_SCHEDULED_AFTER_FLUSH: Final = Counter(
    "scheduler_pod_scheduled_after_flush_total",
    "Number of pods that were successfully scheduled after being flushed from "
    "unschedulablePods due to timeout. This metric helps detect potential queueing hint "
    "misconfigurations or event handling issues.",
    registry=None,
)
#: The `type` of a plain pod in `QUEUED_ENTITIES`.
POD_ENTITY: Final = "pod"
#: kube-scheduler's metrics a release added, exported from that release on.
RELEASE_METRICS: Final[Mapping[Gauge | Counter | Histogram, Release]] = {
    POD_SCHEDULED_AFTER_FLUSH: Release(1, 36),
    QUEUED_ENTITIES: Release(1, 37),
    QUEUE_INCOMING_ENTITIES: Release(1, 37),
}
_REGISTERED: set[object] = set()


def behave_as(features: Features, registry: CollectorRegistry = REGISTRY) -> None:
    """Export the metrics the release of `features` has (once; a metric is never taken back,
    as a process behaves as one release)."""
    for metric, since in RELEASE_METRICS.items():
        if features.release >= since and (metric, registry) not in _REGISTERED:
            registry.register(metric)
            _REGISTERED.add((metric, registry))


def set_pending(counts: Mapping[str, int]) -> None:
    """The queues' sizes: `pending_pods`, and `queued_entities` (exported from 1.37)."""
    for queue, count in counts.items():
        labelled(PENDING_PODS, queue).set(count)
        labelled(QUEUED_ENTITIES, queue, POD_ENTITY).set(count)


BIND_DURATION: Final = Histogram(
    "ascheduler_binding_duration_seconds",
    "Time of a binding cycle: WaitOnPermit, PreBind, node lock, Bind.",
    ["result"],
    buckets=_DURATION_BUCKETS,
)
EVENTS_DROPPED: Final = Counter(
    "ascheduler_status_writes_dropped_total",
    "Events and conditions not written because the background writer's queue was full.",
)
PREEMPTION_VICTIMS: Final = Histogram(
    "scheduler_preemption_victims",
    "Number of selected preemption victims",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
PREEMPTION_ATTEMPTS: Final = Counter(
    "scheduler_preemption_attempts_total",
    "Total preemption attempts in the cluster till now",
)
WORKLOAD_PREEMPTION_ATTEMPTS: Final = Counter(
    "scheduler_workload_preemption_attempts_total",
    "Total preemption attempts initiated by workload (including pod groups) in the cluster "
    "till now.",
    ["result"],
)
WORKLOAD_PREEMPTION_VICTIMS: Final = Histogram(
    "scheduler_workload_preemption_victims",
    "Number of pod preemption victims caused by workload preemption.",
    buckets=tuple(float(2**i) for i in range(11)),
)
PREEMPTION_WORKLOAD_DISRUPTIONS: Final = Histogram(
    "scheduler_preemption_workload_disruptions",
    "Number of workload preemption units being preempted. A single preemption unit can be "
    "all pods in a pod group (in case of DisruptionMode=all), or a single pod (in case of "
    "DisruptionMode=single).",
    ["preemptor"],
    buckets=tuple(float(2**i) for i in range(11)),
)
PREEMPTION_PDB_VIOLATIONS: Final = Counter(
    "scheduler_preemption_pdb_violations_total",
    "Total number of pod disruption budget violations caused by preemption.",
    ["preemptor"],
)
PREEMPTION_GOROUTINES_DURATION: Final = Histogram(
    "scheduler_preemption_goroutines_duration_seconds",
    "Duration in seconds for running goroutines for the preemption.",
    ["result"],
    buckets=tuple(0.01 * 2**i for i in range(20)),
)
PREEMPTION_GOROUTINES: Final = Counter(
    "scheduler_preemption_goroutines_execution_total",
    "Number of preemption goroutines executed.",
    ["result"],
)
BINDER_REQUESTS: Final = Counter(
    "ascheduler_binder_requests_total",
    "BindRequests handled by `ascheduler binder`, by outcome: bound, retried (a bind failed "
    "and is tried again), failed (for good).",
    ["result"],
)
BINDER_BIND_DURATION: Final = Histogram(
    "ascheduler_binder_bind_duration_seconds",
    "Time of one bind attempt of `ascheduler binder` (node lock included).",
    ["result"],
    buckets=_DURATION_BUCKETS,
)
BINDER_PENDING: Final = Gauge(
    "ascheduler_binder_pending_requests",
    "BindRequests `ascheduler binder` knows that are not bound yet.",
)


_Metric = TypeVar("_Metric", Counter, Gauge, Histogram)
_CHILDREN: dict[tuple[object, tuple[str, ...]], object] = {}


def labelled(metric: _Metric, *values: str) -> _Metric:
    """`metric.labels(*values)`, kept once made: the hot paths label the same few series
    for every pod, and prometheus_client checks and locks on each `labels` call. (No series
    is ever removed, so a kept child stays the one exported; the key holds the metric
    itself, so it is never mistaken for another.)"""
    key = (metric, values)
    child = _CHILDREN.get(key)
    if child is None:
        child = _CHILDREN[key] = metric.labels(*values)
    return child  # type: ignore[return-value]
