"""The storage objects the volume plugins read (`ascheduler.framework.listers.StorageView`),
kept by their informers, with indexes and the assume cache VolumeBinding writes into.

Indexes: volumes by storage class (the candidates of a delayed claim), capacities by storage
class, and the pods using each claim (ReadWriteOncePod).

The assume cache (kube-scheduler's `AssumeCache`): VolumeBinding's Reserve records the
PersistentVolumes it is about to bind (`claimRef` set) and the claims it is about to annotate
(`selected-node`), so the next cycles see them taken before the API writes land. An assumed
object stands until the informer brings a version at least as new as the one it was assumed
from (the write landed, or someone else's did), or until `restore` puts the informer's back
(Unreserve, a failed bind). Assuming needs the object at the version the informer has: an
object changed meanwhile is not assumed over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import structlog

from ascheduler.framework.listers import AssumeError
from ascheduler.model import version_number
from ascheduler.model.storage import (
    CSIDriver,
    CSINode,
    StorageCapacity,
    StorageClass,
    Volume,
    VolumeAttachment,
    VolumeClaim,
)

log = structlog.get_logger(__name__)


class _Versioned(Protocol):
    @property
    def resource_version(self) -> str: ...


T = TypeVar("T", bound=_Versioned)


class AssumeCache(Generic[T]):
    """Objects by key as the informer has them, overlaid by assumed versions."""

    def __init__(self, kind: str, key: Callable[[T], str]) -> None:
        self.kind = kind
        self.key = key
        #: What the informer last brought.
        self.informed: dict[str, T] = {}
        #: What the cache answers (an assumed version or the informer's).
        self.latest: dict[str, T] = {}

    def __len__(self) -> int:
        return len(self.latest)

    def get(self, key: str) -> T | None:
        return self.latest.get(key)

    def values(self) -> Iterable[T]:
        return self.latest.values()

    def assumed(self, key: str) -> bool:
        a, b = self.latest.get(key), self.informed.get(key)
        return a is not None and a is not b

    def on_add(self, obj: T) -> None:
        key = self.key(obj)
        self.informed[key] = obj
        current = self.latest.get(key)
        if current is not None and version_number(obj) < version_number(current):
            return  # an assumed version newer than this one stands
        self.latest[key] = obj

    def on_update(self, old: T, new: T) -> None:
        self.on_add(new)

    def on_delete(self, obj: T) -> None:
        key = self.key(obj)
        self.informed.pop(key, None)
        self.latest.pop(key, None)

    def assume(self, obj: T) -> None:
        """`obj` as it will be once written; it must come from the version the cache has."""
        key = self.key(obj)
        current = self.latest.get(key)
        if current is None:
            raise AssumeError(f"{self.kind} {key!r} not found")
        if version_number(obj) != version_number(current):
            raise AssumeError(
                f"{self.kind} {key!r}: version {obj.resource_version} does not match "
                f"{current.resource_version}"
            )
        self.latest[key] = obj

    def restore(self, key: str) -> None:
        """The informer's version again (an assumption undone)."""
        informed = self.informed.get(key)
        if informed is None:
            self.latest.pop(key, None)
        else:
            self.latest[key] = informed


class _Plain(Generic[T]):
    """Objects by key, no assumptions."""

    def __init__(self, key: Callable[[T], str], changed: Callable[[T | None, T | None], None]):
        self.key = key
        self.items: dict[str, T] = {}
        self._changed = changed

    def on_add(self, obj: T) -> None:
        before = self.items.get(self.key(obj))
        self.items[self.key(obj)] = obj
        self._changed(before, obj)

    def on_update(self, old: T, new: T) -> None:
        self.on_add(new)

    def on_delete(self, obj: T) -> None:
        before = self.items.pop(self.key(obj), None)
        self._changed(before, None)


class _Indexed(Generic[T]):
    """Forwards informer events to an assume cache and keeps an index by storage class."""

    def __init__(
        self, cache: AssumeCache[T], index: dict[str, set[str]], klass: Callable[[T], str]
    ) -> None:
        self.cache = cache
        self.index = index
        self.klass = klass

    def _unindex(self, key: str) -> None:
        old = self.cache.informed.get(key)
        if old is not None:
            members = self.index.get(self.klass(old))
            if members is not None:
                members.discard(key)
                if not members:
                    del self.index[self.klass(old)]

    def on_add(self, obj: T) -> None:
        key = self.cache.key(obj)
        self._unindex(key)
        self.cache.on_add(obj)
        self.index.setdefault(self.klass(obj), set()).add(key)

    def on_update(self, old: T, new: T) -> None:
        self.on_add(new)

    def on_delete(self, obj: T) -> None:
        key = self.cache.key(obj)
        self._unindex(key)
        self.cache.on_delete(obj)


def _claim_key(c: VolumeClaim) -> str:
    return c.key


def _volume_key(v: Volume) -> str:
    return v.name


class StorageObjects:
    def __init__(self) -> None:
        self.claims: AssumeCache[VolumeClaim] = AssumeCache("persistentvolumeclaim", _claim_key)
        self.volumes: AssumeCache[Volume] = AssumeCache("persistentvolume", _volume_key)
        self._volumes_by_class: dict[str, set[str]] = {}
        self._capacities_by_class: dict[str, set[str]] = {}
        self.classes: _Plain[StorageClass] = _Plain(lambda c: c.name, self._bump)
        self.csi_nodes: _Plain[CSINode] = _Plain(lambda n: n.name, self._bump)
        self.csi_drivers: _Plain[CSIDriver] = _Plain(lambda d: d.name, self._bump)
        self.capacities: _Plain[StorageCapacity] = _Plain(lambda c: c.key, self._capacity)
        self.volume_attachments: _Plain[VolumeAttachment] = _Plain(
            lambda a: a.name, self._attachment
        )
        self._attachments_by_volume: dict[str, set[str]] = {}
        #: Informer handlers by kind.
        self.handlers: dict[str, Any] = {
            "PersistentVolumeClaim": _Indexed(self.claims, {}, lambda c: c.class_name),
            "PersistentVolume": _Indexed(
                self.volumes, self._volumes_by_class, lambda v: v.storage_class
            ),
            "StorageClass": self.classes,
            "CSINode": self.csi_nodes,
            "CSIDriver": self.csi_drivers,
            "CSIStorageCapacity": self.capacities,
            "VolumeAttachment": self.volume_attachments,
        }
        #: Bumped whenever a class, CSINode, CSIDriver or capacity changes.
        self.generation = 0
        #: Bumped whenever a CSINode changes.
        self.csi_node_generation = 0

    def _bump(self, before: object, after: object) -> None:
        self.generation += 1
        if isinstance(before, CSINode) or isinstance(after, CSINode):
            self.csi_node_generation += 1

    def _attachment(self, before: VolumeAttachment | None, after: VolumeAttachment | None) -> None:
        if before is not None:
            members = self._attachments_by_volume.get(before.volume_name)
            if members is not None:
                members.discard(before.name)
                if not members:
                    del self._attachments_by_volume[before.volume_name]
        if after is not None and after.volume_name:
            self._attachments_by_volume.setdefault(after.volume_name, set()).add(after.name)

    def _capacity(self, before: StorageCapacity | None, after: StorageCapacity | None) -> None:
        self.generation += 1
        if before is not None:
            members = self._capacities_by_class.get(before.storage_class)
            if members is not None:
                members.discard(before.key)
                if not members:
                    del self._capacities_by_class[before.storage_class]
        if after is not None:
            self._capacities_by_class.setdefault(after.storage_class, set()).add(after.key)

    # -- reads --------------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> VolumeClaim | None:
        return self.claims.get(f"{namespace}/{name}")

    def volume(self, name: str) -> Volume | None:
        return self.volumes.get(name)

    def storage_class(self, name: str) -> StorageClass | None:
        return self.classes.items.get(name)

    def csi_node(self, name: str) -> CSINode | None:
        return self.csi_nodes.items.get(name)

    def csi_driver(self, name: str) -> CSIDriver | None:
        return self.csi_drivers.items.get(name)

    def attachments_of_volume(self, name: str) -> list[VolumeAttachment]:
        """The VolumeAttachments naming the PersistentVolume `name`."""
        items = self.volume_attachments.items
        return [items[a] for a in self._attachments_by_volume.get(name, ()) if a in items]

    def volumes_of_class(self, name: str) -> Iterator[Volume]:
        """The volumes of a storage class as the cache has them (assumed ones included)."""
        for key in self._volumes_by_class.get(name, ()):
            volume = self.volumes.get(key)
            if volume is not None and volume.storage_class == name:
                yield volume

    def capacities_of_class(self, name: str) -> Iterator[StorageCapacity]:
        for key in self._capacities_by_class.get(name, ()):
            capacity = self.capacities.items.get(key)
            if capacity is not None:
                yield capacity
