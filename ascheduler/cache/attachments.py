"""CSI volumes attached to each node, counted per driver, for NodeVolumeLimits (which reads
them through `ascheduler.framework.listers.AttachmentsView`).

kube-scheduler counts, per node and filter, the unique CSI volumes (`driver/volumeHandle`)
of the pods on the node, walking them. Here the count is kept as pods come and go, in a node
table column per driver (one per unique volume however many pods on the node use it), so a
Filter reads columns. A pod's volumes are resolved as kube-scheduler resolves them:

* a claim bound to a CSI PersistentVolume: its driver and handle;
* a claim bound to a volume of an in-tree plugin migrated to CSI (AWS EBS, GCE PD, Azure
  Disk, Cinder): the CSI driver it migrated to, the in-tree volume's id as handle;
* an unbound claim: its StorageClass's provisioner (or the CSI driver a migrated in-tree
  provisioner maps to) with a handle of its own, so that it counts as one volume;
* generic ephemeral volumes through their claim (which the pod must own); inline GCE PD and
  AWS EBS volumes through their migrated driver;
* from 1.36 Portworx's in-tree volumes, inline ones and its provisioner's claims too, as
  `pxd.portworx.com`'s (`portworx`).

Whatever else (no claim, no class, no driver) is not counted. Resolutions depend on claims,
volumes and classes: when one changes, the pods using that claim are resolved again.
Migration is counted wherever a node has limits (those come from its CSINode, and
kube-scheduler counts migrated volumes wherever the node has a CSINode).

VolumeAttachments count too, as kube-scheduler counts them: one naming a CSI
PersistentVolume attaches `attacher/volumeHandle` to its node, once however many pods also
use that volume there. A new pod's volume is not counted again only where a pod uses it
(`rows_with`): attached by a VolumeAttachment alone, kube-scheduler counts it twice.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from ascheduler.cache.nodetable import MutableNodeTable
from ascheduler.cache.storage import StorageObjects
from ascheduler.framework.listers import ClaimError
from ascheduler.framework.nodes import IntArray
from ascheduler.model import PodInfo
from ascheduler.model.storage import (
    INLINE_DRIVERS,
    MIGRATED_PROVISIONERS,
    MIGRATED_SOURCES,
    PORTWORX_INLINE,
    PORTWORX_PROVISIONERS,
    PORTWORX_SOURCES,
    Volume,
    VolumeAttachment,
    VolumeClaim,
    not_found,
)
from ascheduler.model.volumes import CLAIM, EPHEMERAL


@dataclass(slots=True)
class _Use:
    driver: str
    #: How many of the node's pods use the volume, how many VolumeAttachments attach it.
    pods: int = 0
    attachments: int = 0


def column(driver: str) -> tuple[str, str]:
    """The node table column counting a driver's volumes attached per row."""
    return ("csi-attached", driver)


class AttachedVolumes:
    def __init__(
        self, storage: StorageObjects, table: MutableNodeTable, *, portworx: bool = False
    ) -> None:
        self.storage = storage
        self.table = table
        #: Whether Portworx counts as migrated (1.36 on).
        self._sources = PORTWORX_SOURCES if portworx else MIGRATED_SOURCES
        self._provisioners = PORTWORX_PROVISIONERS if portworx else MIGRATED_PROVISIONERS
        self._inline = PORTWORX_INLINE if portworx else INLINE_DRIVERS
        #: Unbound claims get handles no real volume has.
        self._prefix = secrets.token_hex(16)
        #: uid -> (pod, node, unique name -> driver)
        self._pods: dict[str, tuple[PodInfo, str, dict[str, str]]] = {}
        #: node -> unique name -> its driver and how many of the node's pods use it
        self._nodes: dict[str, dict[str, _Use]] = {}
        #: unique name -> the nodes where pods use it
        self._where: dict[str, set[str]] = {}
        #: VolumeAttachment name -> (node, unique name, driver)
        self._attached: dict[str, tuple[str, str, str]] = {}
        #: (namespace, claim) -> uids of placed pods naming it
        self._claim_pods: dict[tuple[str, str], set[str]] = {}

    # -- resolution ---------------------------------------------------------------------------

    def _from_volume(self, volume: Volume) -> tuple[str, str] | None:
        if volume.csi_driver:
            return (volume.csi_driver, volume.csi_handle) if volume.csi_handle else None
        driver = self._sources.get(volume.in_tree)
        if driver is None or not volume.in_tree_id:
            return None
        return driver, volume.in_tree_id

    def _from_class(self, claim: VolumeClaim) -> tuple[str, str] | None:
        if not claim.class_name:
            return None
        klass = self.storage.storage_class(claim.class_name)
        if klass is None or not klass.provisioner:
            return None
        driver = self._provisioners.get(klass.provisioner, klass.provisioner)
        return driver, f"{self._prefix}-{claim.namespace}/{claim.name}"

    def resolve(self, pod: PodInfo, *, new: bool) -> dict[str, str]:
        """Unique volume name -> driver for the pod's countable volumes. For a `new` pod a
        claim that is missing or not its own raises ClaimError; for a placed one it is not
        counted."""
        out: dict[str, str] = {}
        for v in pod.volumes:
            found: tuple[str, str] | None = None
            if v.kind in (CLAIM, EPHEMERAL):
                claim = self.storage.claim(pod.namespace, v.claim)
                if claim is None:
                    if new:
                        raise ClaimError(
                            f"looking up PVC {pod.namespace}/{v.claim}: "
                            + not_found("persistentvolumeclaim", v.claim)
                        )
                    continue
                if v.kind == EPHEMERAL and claim.owner_uid != pod.uid:
                    if new:
                        raise ClaimError(
                            f"PVC {claim.namespace}/{claim.name} was not created for pod "
                            f"{pod.namespace}/{pod.name} (pod is not owner)"
                        )
                    continue
                volume = self.storage.volume(claim.volume_name) if claim.volume_name else None
                # Unbound, or bound to a volume not (yet) seen: counted by its class.
                found = self._from_volume(volume) if volume else self._from_class(claim)
            elif v.kind in self._inline and v.disk:
                found = (self._inline[v.kind], v.disk)
            if found is not None:
                driver, handle = found
                out[f"{driver}/{handle}"] = driver
        return out

    # -- placed pods -----------------------------------------------------------------------

    def _take(self, node: str, unique: str, driver: str, *, pod: bool) -> None:
        on_node = self._nodes.setdefault(node, {})
        entry = on_node.get(unique)
        if entry is None:
            entry = on_node[unique] = _Use(driver)
            row = self.table.index.get(node)
            if row is not None:
                self.table.add_extra(column(driver), row, 1)
        if pod:
            entry.pods += 1
            if entry.pods == 1:
                self._where.setdefault(unique, set()).add(node)
        else:
            entry.attachments += 1

    def _drop(self, node: str, unique: str, *, pod: bool) -> None:
        on_node = self._nodes.get(node, {})
        entry = on_node.get(unique)
        if entry is None:
            return
        if pod:
            entry.pods -= 1
            if entry.pods == 0:
                where = self._where.get(unique)
                if where is not None:
                    where.discard(node)
                    if not where:
                        del self._where[unique]
        else:
            entry.attachments -= 1
        if entry.pods <= 0 and entry.attachments <= 0:
            del on_node[unique]
            row = self.table.index.get(node)
            if row is not None:
                self.table.add_extra(column(entry.driver), row, -1)
            if not on_node:
                self._nodes.pop(node, None)

    def add(self, pod: PodInfo, node: str) -> None:
        if not pod.volumes:
            return
        for v in pod.volumes:
            if v.kind in (CLAIM, EPHEMERAL):
                self._claim_pods.setdefault((pod.namespace, v.claim), set()).add(pod.uid)
        volumes = self.resolve(pod, new=False)
        self._pods[pod.uid] = (pod, node, volumes)
        for unique, driver in volumes.items():
            self._take(node, unique, driver, pod=True)

    def remove(self, uid: str) -> None:
        placed = self._pods.pop(uid, None)
        if placed is None:
            return
        pod, node, volumes = placed
        for v in pod.volumes:
            if v.kind in (CLAIM, EPHEMERAL):
                users = self._claim_pods.get((pod.namespace, v.claim))
                if users is not None:
                    users.discard(uid)
                    if not users:
                        del self._claim_pods[(pod.namespace, v.claim)]
        for unique in volumes:
            self._drop(node, unique, pod=True)

    # -- VolumeAttachments -------------------------------------------------------------------

    def _from_attachment(self, va: VolumeAttachment) -> tuple[str, str] | None:
        """(unique name, driver) of what a VolumeAttachment attaches, as kube-scheduler reads
        it: the attacher and the named PersistentVolume's CSI handle."""
        if not va.attacher or not va.volume_name or not va.node_name:
            return None
        volume = self.storage.volume(va.volume_name)
        if volume is None or not volume.csi_driver:
            return None
        return f"{va.attacher}/{volume.csi_handle}", va.attacher

    def attachment_changed(
        self, old: VolumeAttachment | None, new: VolumeAttachment | None
    ) -> None:
        for va in (old, new):
            if va is not None:
                placed = self._attached.pop(va.name, None)
                if placed is not None:
                    self._drop(placed[0], placed[1], pod=False)
        if new is not None:
            found = self._from_attachment(new)
            if found is not None:
                unique, driver = found
                self._attached[new.name] = (new.node_name, unique, driver)
                self._take(new.node_name, unique, driver, pod=False)

    def volume_changed(self, name: str) -> None:
        """A PersistentVolume changed: the VolumeAttachments naming it are read again."""
        for va in self.storage.attachments_of_volume(name):
            self.attachment_changed(None, va)

    def claims_changed(self, claims: Iterable[tuple[str, str]]) -> None:
        """Claims (namespace, name) whose object, volume or class changed: their pods are
        resolved again."""
        uids = {uid for key in claims for uid in self._claim_pods.get(key, ())}
        for uid in uids:
            pod, node, _ = self._pods[uid]
            self.remove(uid)
            self.add(pod, node)

    def claims_of_class(self, name: str) -> list[tuple[str, str]]:
        return [
            key
            for key in self._claim_pods
            if (c := self.storage.claim(*key)) is not None and c.class_name == name
        ]

    def node_added(self, node: str) -> None:
        """A node (back) in the table: its column values from the pods already on it."""
        row = self.table.index.get(node)
        if row is None:
            return
        for use in self._nodes.get(node, {}).values():
            self.table.add_extra(column(use.driver), row, 1)

    # -- reads ---------------------------------------------------------------------------------

    def attached(self, driver: str) -> IntArray:
        """Per row, how many unique volumes of `driver` are attached."""
        return self.table.extra_counts(column(driver))

    def on_node(self, node: str) -> dict[str, tuple[str, int, int]]:
        """A copy of what is attached to a node: unique name -> (driver, pods using it,
        VolumeAttachments attaching it)."""
        return {
            u: (use.driver, use.pods, use.attachments)
            for u, use in self._nodes.get(node, {}).items()
        }

    def volumes_of(self, uid: str) -> dict[str, str]:
        """A placed pod's counted volumes: unique name -> driver."""
        placed = self._pods.get(uid)
        return dict(placed[2]) if placed is not None else {}

    def rows_with(self, unique: str) -> list[int]:
        """The rows where a pod uses the volume `unique`."""
        rows = []
        for node in self._where.get(unique, ()):
            row = self.table.index.get(node)
            if row is not None:
                rows.append(row)
        return rows
