"""The views of the cache's stores: a `Handle` built without a cache reads empty stores that
answer as the cache's do when they hold nothing, and the cache's stores are what a `Handle`
of the running scheduler gives."""

from __future__ import annotations

import pytest

from ascheduler.cache import Cache
from ascheduler.cache.gangs import Gang
from ascheduler.framework import AssumeError, GangView, Handle
from ascheduler.model.podgroups import POD_GROUP_LABEL
from ascheduler.model.storage import parse_claim
from ascheduler.model.topology import parse_selector
from tests.kit import parsed, pod


def test_a_handle_without_a_cache_reads_stores_that_answer_as_empty_ones_do() -> None:
    handle, cache = Handle(), Cache()
    member = parsed(pod("m", labels={POD_GROUP_LABEL: "pg"}))
    selector = parse_selector({"matchLabels": {"a": "b"}}, "selector")
    for objects in (handle.objects, cache.objects):
        assert objects.namespace_labels("ns") == {}
        assert objects.namespaces_matching(selector) == frozenset()
        assert objects.budgets_for(["default"]) == []
        assert objects.default_selector(member) == cache.objects.default_selector(member)
    for gangs in (handle.gangs, cache.gangs):
        assert (gangs.of(member), gangs.get("PodGroup:default/pg"), len(gangs)) == (None, None, 0)
        assert gangs.sort_position(member, 7.0) == (7.0, "")
        assert (dict(gangs.pod_groups), dict(gangs.workloads)) == ({}, {})
    claim = parse_claim({"metadata": {"name": "c", "namespace": "ns", "resourceVersion": "1"}})
    for storage in (handle.storage, cache.storage):
        assert storage.claim("ns", "c") is None
        assert list(storage.volumes_of_class("fast")) == []
        with pytest.raises(AssumeError):
            storage.claims.assume(claim)
    assert handle.attachments is None


def test_a_group_event_carries_a_view_of_the_group() -> None:
    """Coscheduling tells a group's events from others' by the view (`isinstance`)."""
    assert isinstance(Gang("PodGroup:ns/pg"), GangView)
    assert not isinstance(parsed(pod("p")), GangView)
