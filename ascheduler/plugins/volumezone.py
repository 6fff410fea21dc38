"""VolumeZone: a pod's bound PersistentVolumes' zone and region labels must match the node's
(kube-scheduler v1.35's rules).

For each claim the pod names directly (`persistentVolumeClaim`), the bound volume's labels
`topology.kubernetes.io/zone`, `.../region` and their `failure-domain.beta.kubernetes.io`
forms are read, a value being one zone or several joined by `__`. A node with none of the four
labels passes (a single-zone cluster); any other node must carry each such key (a beta key
may be met by its GA form) with one of the volume's values, else `node(s) had no available
volume zone` (unresolvable). An unbound claim of a `WaitForFirstConsumer` class is left to
VolumeBinding; any other unbound claim, or a missing claim, class or volume, rejects the pod
in PreFilter with kube-scheduler's message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from ascheduler.framework import (
    SKIP,
    SUCCESS,
    BoolArray,
    ClusterEvent,
    Code,
    CycleState,
    ExplainFilterPlugin,
    FilterResult,
    Handle,
    NoArgs,
    NodeTable,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHintPlugin,
    Registration,
    Rejection,
    Status,
)
from ascheduler.model import PodInfo
from ascheduler.model.storage import StorageClass, Volume, VolumeClaim, not_found
from ascheduler.model.volumes import CLAIM, names_claim

NAME: Final = "VolumeZone"
REASON: Final = "node(s) had no available volume zone"
ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
BETA_ZONE: Final = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION: Final = "failure-domain.beta.kubernetes.io/region"
#: In kube-scheduler's order.
TOPOLOGY_LABELS: Final = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA: Final = {BETA_ZONE: ZONE, BETA_REGION: REGION}
#: Several zones in one label value are joined by this.
MULTI_ZONE_DELIMITER: Final = "__"


def zones(value: str) -> frozenset[str] | None:
    """A label value as a set of zones; None when one of them is empty (the label is then
    ignored, as kube-scheduler ignores it)."""
    out = set()
    for part in value.split(MULTI_ZONE_DELIMITER):
        zone = part.strip()
        if not zone:
            return None
        out.add(zone)
    return frozenset(out)


def topologies(volume: Volume) -> list[tuple[str, frozenset[str]]]:
    out = []
    for key in TOPOLOGY_LABELS:
        value = volume.labels.get(key)
        if value is not None:
            allowed = zones(value)
            if allowed is not None:
                out.append((key, allowed))
    return out


def _missing(kind: str, name: str) -> Status:
    return Status.unschedulable(not_found(kind, name), resolvable=False)


@dataclass
class _State:
    topologies: list[tuple[str, frozenset[str]]]
    #: The volume each entry of `topologies` comes from.
    volumes: list[str]


class VolumeZone(PreFilterPlugin, ExplainFilterPlugin, QueueingHintPlugin):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def queueing_hint(self, pod: PodInfo, event: ClusterEvent, old: Any, new: Any) -> bool:
        """kube-scheduler's hints: a claim the pod names (directly) was created or changed; a
        WaitForFirstConsumer class was created; a volume was created, or its zone or region
        labels changed."""
        if event in (ClusterEvent.CLAIM_ADD, ClusterEvent.CLAIM_UPDATE):
            claim: VolumeClaim = new
            return claim.namespace == pod.namespace and names_claim(
                pod.volumes, claim.name, ephemeral=False
            )
        if event is ClusterEvent.STORAGE_CLASS_ADD:
            klass: StorageClass = new
            return klass.delayed
        if event is ClusterEvent.VOLUME_UPDATE:
            before: Volume = old
            after: Volume = new
            return topologies(before) != topologies(after)
        return True

    def _topologies(self, pod: PodInfo) -> _State | Status:
        storage = self.handle.storage
        out = _State([], [])
        for v in pod.volumes:
            if v.kind != CLAIM:
                continue
            claim = storage.claim(pod.namespace, v.claim)
            if claim is None:
                return _missing("persistentvolumeclaim", v.claim)
            if not claim.volume_name:
                class_name = claim.class_name
                if not class_name:
                    return Status.unschedulable(
                        "PersistentVolumeClaim had no pv name and storageClass name",
                        resolvable=False,
                    )
                klass = storage.storage_class(class_name)
                if klass is None:
                    return _missing("storageclass.storage.k8s.io", class_name)
                if klass.delayed:
                    continue
                return Status.unschedulable("PersistentVolume had no name", resolvable=False)
            volume = storage.volume(claim.volume_name)
            if volume is None:
                return _missing("persistentvolume", claim.volume_name)
            found = topologies(volume)
            out.topologies.extend(found)
            out.volumes.extend(volume.name for _ in found)
        return out

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.volumes:
            return None, SKIP
        found = self._topologies(pod)
        if isinstance(found, Status):
            return None, found
        if not found.topologies:
            return None, SKIP
        state.write(NAME, found)
        return None, SUCCESS

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult | None:
        s: _State | None = state.read(NAME)
        if s is None:
            return None
        constrained = np.zeros(nodes.n, dtype=np.bool_)
        for key in TOPOLOGY_LABELS:
            constrained |= nodes.domains(key).codes >= 0
        rejected = np.zeros(nodes.n, dtype=np.bool_)
        for key, allowed in s.topologies:
            rejected |= ~self._matches(nodes, key, allowed)
        rejected &= constrained
        if not rejected.any():
            return None
        return FilterResult.of(
            rejected, Rejection(REASON, rejected, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        )

    def explain(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> list[str]:
        """Per volume label the node does not meet: the volume, its zones, the node's value."""
        s: _State | None = state.read(NAME)
        if s is None:
            return []
        labels = nodes.infos[row].labels
        lines = []
        for (key, allowed), volume in zip(s.topologies, s.volumes, strict=True):
            if self._matches(nodes, key, allowed)[row]:
                continue
            shown = key if key in labels else _GA.get(key, key)
            have = (
                f"node has {shown}={labels[shown]}"
                if shown in labels
                else f"node has no {key} label"
            )
            lines.append(
                f"persistentvolume {volume} is in {key} {', '.join(sorted(allowed))}: {have}"
            )
        return lines

    @staticmethod
    def _matches(nodes: NodeTable, key: str, allowed: frozenset[str]) -> BoolArray:
        """Rows whose `key` label (or, missing that, its GA form) is one of `allowed`."""

        def ok(label: str) -> tuple[BoolArray, BoolArray]:
            d = nodes.domains(label)
            good = np.array([v in allowed for v in d.values] + [False], dtype=np.bool_)
            return d.codes >= 0, good[d.codes]  # code -1 reads the trailing False

        has, good = ok(key)
        ga = _GA.get(key)
        if ga is None:
            return good
        _, ga_good = ok(ga)
        return np.where(has, good, ga_good)


def new(args: NoArgs, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)


REGISTRATION: Final = Registration(
    NAME,
    new,
    NoArgs,
    events=frozenset(
        {
            ClusterEvent.NODE_ADD,
            ClusterEvent.NODE_LABEL,
            ClusterEvent.STORAGE_CLASS_ADD,
            ClusterEvent.CLAIM_ADD,
            ClusterEvent.CLAIM_UPDATE,
            ClusterEvent.VOLUME_ADD,
            ClusterEvent.VOLUME_UPDATE,
        }
    ),
    default_weight=1,
)
