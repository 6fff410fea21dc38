"""The storage store: the assume cache's rules (assume over the current version only; the
informer's newer version wins; restore undoes), and the by-class indexes."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ascheduler.cache.storage import StorageObjects
from ascheduler.framework import AssumeError
from ascheduler.model.storage import ClaimRef, Volume, parse_capacity, parse_volume


def pv(name: str, rv: str, klass: str = "local", **spec: Any) -> Volume:
    return parse_volume(
        {
            "metadata": {"name": name, "resourceVersion": rv},
            "spec": {"storageClassName": klass, **spec},
        }
    )


def test_an_assumed_volume_stands_until_the_informer_catches_up() -> None:
    store = StorageObjects()
    handler = store.handlers["PersistentVolume"]
    handler.on_add(pv("a", "10"))
    taken = dataclasses.replace(pv("a", "10"), claim_ref=ClaimRef("ns", "c"))
    store.volumes.assume(taken)
    assert store.volume("a") is taken
    assert store.volumes.assumed("a")
    # An older version (a late event) does not replace it...
    handler.on_update(pv("a", "9"), pv("a", "9"))
    assert store.volume("a") is taken
    # ...the written version does.
    written = pv("a", "11", claimRef={"namespace": "ns", "name": "c"})
    handler.on_update(pv("a", "10"), written)
    assert store.volume("a") is written
    assert not store.volumes.assumed("a")


def test_restore_undoes_an_assumption_and_a_changed_object_is_not_assumed_over() -> None:
    store = StorageObjects()
    handler = store.handlers["PersistentVolume"]
    original = pv("a", "10")
    handler.on_add(original)
    store.volumes.assume(dataclasses.replace(original, claim_ref=ClaimRef("ns", "c")))
    store.volumes.restore("a")
    assert store.volume("a") is original
    with pytest.raises(AssumeError, match="version 9 does not match 10"):
        store.volumes.assume(pv("a", "9"))
    with pytest.raises(AssumeError, match="not found"):
        store.volumes.assume(pv("b", "1"))
    handler.on_delete(original)
    assert store.volume("a") is None
    store.volumes.restore("a")
    assert store.volume("a") is None


def test_volumes_and_capacities_are_indexed_by_class() -> None:
    store = StorageObjects()
    handler = store.handlers["PersistentVolume"]
    handler.on_add(pv("a", "1"))
    handler.on_add(pv("b", "1", klass="fast"))
    handler.on_add(pv("c", "1"))
    assert sorted(v.name for v in store.volumes_of_class("local")) == ["a", "c"]
    handler.on_update(pv("c", "1"), pv("c", "2", klass="fast"))  # reclassified
    assert sorted(v.name for v in store.volumes_of_class("local")) == ["a"]
    assert sorted(v.name for v in store.volumes_of_class("fast")) == ["b", "c"]
    handler.on_delete(pv("b", "1", klass="fast"))
    assert [v.name for v in store.volumes_of_class("fast")] == ["c"]

    generation = store.generation
    raw = {"metadata": {"namespace": "s", "name": "cap"}, "storageClassName": "local"}
    store.handlers["CSIStorageCapacity"].on_add(parse_capacity(raw))
    assert [c.name for c in store.capacities_of_class("local")] == ["cap"]
    assert store.generation > generation
    store.handlers["CSIStorageCapacity"].on_delete(parse_capacity(raw))
    assert list(store.capacities_of_class("local")) == []
