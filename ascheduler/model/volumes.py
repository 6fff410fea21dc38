"""A pod's volumes as the volume plugins read them (`spec.volumes`).

Only what scheduling depends on is kept:

* claims: `persistentVolumeClaim.claimName`, and generic ephemeral volumes, whose claim is
  named `<pod>-<volume>` and created by the ephemeral volume controller;
* the in-tree disks VolumeRestrictions still checks for conflicts (GCE PD, AWS EBS, iSCSI,
  RBD) with the fields that identify them;
* inline CSI volumes (`csi:`), which NodeVolumeLimits counts per driver, and inline Portworx
  volumes (`volumeID`), which it counts as their CSI driver's from 1.36.

Every other source (emptyDir, configMap, secret, hostPath, projected...) needs nothing from
the scheduler and is kept only by name and kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

#: Kinds of volume the plugins tell apart.
CLAIM: Final = "persistentVolumeClaim"
EPHEMERAL: Final = "ephemeral"
GCE_PD: Final = "gcePersistentDisk"
AWS_EBS: Final = "awsElasticBlockStore"
ISCSI: Final = "iscsi"
RBD: Final = "rbd"
CSI: Final = "csi"
PORTWORX: Final = "portworxVolume"
OTHER: Final = ""
#: In-tree disks that conflict when two pods on a node mount them (VolumeRestrictions).
DISKS: Final = (GCE_PD, AWS_EBS, ISCSI, RBD)


@dataclass(frozen=True, slots=True)
class PodVolume:
    name: str
    kind: str
    #: The claim's name, for claims and generic ephemeral volumes.
    claim: str = ""
    read_only: bool = False
    #: An in-tree disk's identity: GCE `pdName`, EBS `volumeID`, iSCSI `iqn`, RBD `image`.
    disk: str = ""
    #: RBD: the pool and the Ceph monitors (two RBD volumes are one image when they share a
    #: monitor, the pool and the image).
    pool: str = ""
    monitors: tuple[str, ...] = ()
    #: Inline CSI: the driver.
    driver: str = ""

    @property
    def has_claim(self) -> bool:
        return self.kind in (CLAIM, EPHEMERAL)

    def conflicts(self, other: PodVolume) -> bool:
        """kube-scheduler's isVolumeConflict for one pair of in-tree disks: the same disk
        mounted twice, unless both mounts are read-only (EBS: even then)."""
        if self.kind != other.kind or self.kind not in DISKS:
            return False
        both_read_only = self.read_only and other.read_only
        if self.kind == GCE_PD or self.kind == ISCSI:
            return self.disk == other.disk and not both_read_only
        if self.kind == AWS_EBS:
            return self.disk == other.disk
        return (
            bool(set(self.monitors) & set(other.monitors))
            and self.pool == other.pool
            and self.disk == other.disk
            and not both_read_only
        )


def string_field(raw: Mapping[str, Any], key: str, path: str, errors: list[str]) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.append(f"{path}.{key}: expected a string, got {value!r}")
        return ""
    return value


def _flag(raw: Mapping[str, Any], key: str, path: str, errors: list[str]) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        errors.append(f"{path}.{key}: expected a boolean, got {value!r}")
        return False
    return value


def parse_volume(raw: Any, pod_name: str, path: str, errors: list[str]) -> PodVolume | None:
    """One entry of `spec.volumes`; None (and an error naming the field) when it cannot be
    read."""
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected an object")
        return None
    name = string_field(raw, "name", path, errors)
    if not name:
        errors.append(f"{path}.name: required")
        return None
    for kind in (CLAIM, EPHEMERAL, GCE_PD, AWS_EBS, ISCSI, RBD, CSI, PORTWORX):
        source = raw.get(kind)
        if source is None:
            continue
        where = f"{path}.{kind}"
        if not isinstance(source, Mapping):
            errors.append(f"{where}: expected an object")
            return None
        read_only = _flag(source, "readOnly", where, errors)
        if kind == CLAIM:
            claim = string_field(source, "claimName", where, errors)
            if not claim:
                errors.append(f"{where}.claimName: required")
                return None
            return PodVolume(name, kind, claim=claim, read_only=read_only)
        if kind == EPHEMERAL:
            return PodVolume(name, kind, claim=f"{pod_name}-{name}", read_only=read_only)
        if kind == CSI:
            return PodVolume(name, kind, driver=string_field(source, "driver", where, errors))
        key = {GCE_PD: "pdName", AWS_EBS: "volumeID", ISCSI: "iqn", RBD: "image"}.get(
            kind, "volumeID"
        )
        disk = string_field(source, key, where, errors)
        if kind != RBD:
            return PodVolume(name, kind, read_only=read_only, disk=disk)
        monitors = source.get("monitors") or []
        if not isinstance(monitors, Sequence) or isinstance(monitors, str):
            errors.append(f"{where}.monitors: expected a list of strings")
            monitors = []
        return PodVolume(
            name,
            kind,
            read_only=read_only,
            disk=disk,
            pool=string_field(source, "pool", where, errors) or "rbd",
            monitors=tuple(str(m) for m in monitors),
        )
    return PodVolume(name, OTHER)


def parse_volumes(raw: Any, pod_name: str, errors: list[str]) -> tuple[PodVolume, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        errors.append("spec.volumes: expected a list")
        return ()
    out = []
    for i, item in enumerate(raw):
        volume = parse_volume(item, pod_name, f"spec.volumes[{i}]", errors)
        if volume is not None:
            out.append(volume)
    return tuple(out)


def names_claim(volumes: Sequence[PodVolume], name: str, *, ephemeral: bool = True) -> bool:
    """Whether one of the volumes names the claim `name` (`persistentVolumeClaim`, and generic
    ephemeral volumes' claims unless `ephemeral` is False)."""
    kinds = (CLAIM, EPHEMERAL) if ephemeral else (CLAIM,)
    return any(v.kind in kinds and v.claim == name for v in volumes)
