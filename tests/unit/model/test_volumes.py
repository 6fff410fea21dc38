"""A pod's volumes: claims (direct and generic ephemeral), in-tree disks and their conflict
rules, inline CSI, and malformed entries reported by path."""

from __future__ import annotations

from typing import Any

from ascheduler.model import parse_pod
from ascheduler.model.volumes import AWS_EBS, CLAIM, CSI, EPHEMERAL, GCE_PD, OTHER, PodVolume
from tests.kit import pod


def with_volumes(*volumes: Any, name: str = "web") -> Any:
    raw = pod(name)
    raw["spec"]["volumes"] = list(volumes)
    return parse_pod(raw)


def test_claims_direct_and_ephemeral() -> None:
    p = with_volumes(
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-0", "readOnly": True}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "cfg", "configMap": {"name": "x"}},
    )
    assert p.errors == ()
    data, scratch, cfg = p.volumes
    assert (data.kind, data.claim, data.read_only) == (CLAIM, "data-0", True)
    # The ephemeral volume controller names the claim after the pod and the volume.
    assert (scratch.kind, scratch.claim) == (EPHEMERAL, "web-scratch")
    assert (cfg.kind, cfg.has_claim) == (OTHER, False)
    assert [v.has_claim for v in p.volumes] == [True, True, False]


def test_inline_csi_keeps_its_driver() -> None:
    (v,) = with_volumes({"name": "s", "csi": {"driver": "secrets.example.com"}}).volumes
    assert (v.kind, v.driver) == (CSI, "secrets.example.com")


def disk(kind: str, **fields: Any) -> PodVolume:
    (v,) = with_volumes({"name": "d", kind: fields}).volumes
    return v


def test_the_same_disk_conflicts_unless_every_mount_is_read_only() -> None:
    rw = disk(GCE_PD, pdName="pd-1")
    ro = disk(GCE_PD, pdName="pd-1", readOnly=True)
    assert rw.conflicts(ro)
    assert not ro.conflicts(ro)
    assert not rw.conflicts(disk(GCE_PD, pdName="pd-2"))
    # EBS: one attachment, read-only or not.
    ebs_ro = disk(AWS_EBS, volumeID="vol-1", readOnly=True)
    assert ebs_ro.conflicts(ebs_ro)
    assert not ebs_ro.conflicts(rw)
    # iSCSI by IQN.
    assert disk("iscsi", iqn="iqn.a", lun=0).conflicts(disk("iscsi", iqn="iqn.a", lun=1))
    assert not disk("iscsi", iqn="iqn.a", readOnly=True).conflicts(
        disk("iscsi", iqn="iqn.a", readOnly=True)
    )


def test_rbd_images_are_one_when_they_share_a_monitor_the_pool_and_the_image() -> None:
    a = disk("rbd", monitors=["m1", "m2"], image="img")
    assert a.pool == "rbd"  # the API's default
    assert a.conflicts(disk("rbd", monitors=["m2", "m3"], image="img"))
    assert not a.conflicts(disk("rbd", monitors=["m3"], image="img"))
    assert not a.conflicts(disk("rbd", monitors=["m1"], image="img", pool="other"))
    assert not a.conflicts(disk("rbd", monitors=["m1"], image="img2"))


def test_malformed_volumes_are_reported_by_path_and_the_rest_kept() -> None:
    p = with_volumes(
        {"name": "a", "persistentVolumeClaim": {}},
        "not an object",
        {"persistentVolumeClaim": {"claimName": "x"}},
        {"name": "b", "gcePersistentDisk": {"pdName": "pd", "readOnly": "yes"}},
        {"name": "c", "persistentVolumeClaim": {"claimName": "ok"}},
    )
    assert p.errors == (
        "spec.volumes[0].persistentVolumeClaim.claimName: required",
        "spec.volumes[1]: expected an object",
        "spec.volumes[2].name: required",
        "spec.volumes[3].gcePersistentDisk.readOnly: expected a boolean, got 'yes'",
    )
    assert [v.name for v in p.volumes] == ["b", "c"]
    raw = pod("x")
    raw["spec"]["volumes"] = {"not": "a list"}
    assert parse_pod(raw).errors == ("spec.volumes: expected a list",)
