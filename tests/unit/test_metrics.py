"""The kept label children of `ascheduler.metrics`, and the metrics a release added."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from ascheduler import metrics
from ascheduler.app import build_frameworks, build_queue
from ascheduler.cache import Cache
from ascheduler.config import DEFAULT_SCHEDULER_NAME, SchedulerConfig
from ascheduler.features import Features, Release
from ascheduler.plugins import IN_TREE
from ascheduler.queue import QueueSettings
from tests.kit import pod_info


def sample(registry: CollectorRegistry, name: str, labels: dict[str, str]) -> float | None:
    return registry.get_sample_value(name, labels)


def test_a_kept_child_is_the_series_exported_and_each_label_set_its_own() -> None:
    registry = CollectorRegistry()
    attempts = Counter("t_attempts", "attempts", ["result", "profile"], registry=registry)
    first = metrics.labelled(attempts, "scheduled", "a")
    assert metrics.labelled(attempts, "scheduled", "a") is first
    first.inc()
    metrics.labelled(attempts, "scheduled", "a").inc()
    metrics.labelled(attempts, "error", "a").inc()
    assert sample(registry, "t_attempts_total", {"result": "scheduled", "profile": "a"}) == 2
    assert sample(registry, "t_attempts_total", {"result": "error", "profile": "a"}) == 1
    assert sample(registry, "t_attempts_total", {"result": "scheduled", "profile": "b"}) is None


def test_children_of_two_metrics_with_the_same_labels_are_kept_apart() -> None:
    registry = CollectorRegistry()
    one = Histogram("t_one_seconds", "one", ["result"], registry=registry)
    two = Histogram("t_two_seconds", "two", ["result"], registry=registry)
    metrics.labelled(one, "success").observe(0.5)
    assert sample(registry, "t_one_seconds_count", {"result": "success"}) == 1
    assert sample(registry, "t_two_seconds_count", {"result": "success"}) is None
    metrics.labelled(two, "success").observe(0.5)
    assert sample(registry, "t_two_seconds_count", {"result": "success"}) == 1


def test_a_release_s_metrics_are_exported_from_that_release_on() -> None:
    metrics.set_pending({"active": 2, "gated": 1})
    older = CollectorRegistry()
    metrics.behave_as(Features.defaults(Release(1, 36)), older)
    assert sample(older, "scheduler_queued_entities", {"queue": "active", "type": "pod"}) is None
    newer = CollectorRegistry()
    metrics.behave_as(Features.defaults(Release(1, 37)), newer)
    metrics.behave_as(Features.defaults(Release(1, 37)), newer)  # once
    assert sample(newer, "scheduler_queued_entities", {"queue": "active", "type": "pod"}) == 2
    assert sample(newer, "scheduler_queued_entities", {"queue": "gated", "type": "pod"}) == 1


def test_pod_scheduled_after_flush_is_exported_from_1_36() -> None:
    registries = {minor: CollectorRegistry() for minor in (35, 36, 37)}
    for minor, registry in registries.items():
        metrics.behave_as(Features.defaults(Release(1, minor)), registry)
    name = "scheduler_pod_scheduled_after_flush_total"
    assert sample(registries[35], name, {}) is None
    assert sample(registries[36], name, {}) is not None
    assert sample(registries[37], name, {}) is not None


def test_queue_incoming_entities_is_exported_from_1_37_as_the_queue_counts() -> None:
    """`scheduler_queue_incoming_entities_total{queue,event,type}`: the queue `ascheduler run`
    builds counts into it (a new pod, a gated one in the unschedulable pool)."""
    registries = {minor: CollectorRegistry() for minor in (36, 37)}
    for minor, registry in registries.items():
        metrics.behave_as(Features.defaults(Release(1, minor)), registry)
    name = "scheduler_queue_incoming_entities_total"
    labels = {"queue": "active", "event": "PodAdd", "type": "pod"}
    gated = {"queue": "unschedulable", "event": "PodAdd", "type": "pod"}
    before = (sample(registries[37], name, labels) or 0, sample(registries[37], name, gated) or 0)
    queue = build_queue(
        build_frameworks(SchedulerConfig(), IN_TREE, Cache(), None), QueueSettings()
    )
    queue.add(pod_info("a", namespace="ns", scheduler_name=DEFAULT_SCHEDULER_NAME))
    queue.add(pod_info("g", namespace="ns", scheduler_name=DEFAULT_SCHEDULER_NAME, gates=("x",)))
    assert sample(registries[36], name, labels) is None
    assert sample(registries[37], name, labels) == before[0] + 1
    assert sample(registries[37], name, gated) == before[1] + 1
