"""The kept label children of `ascheduler.metrics`."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from ascheduler import metrics
from ascheduler.features import Features, Release


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
