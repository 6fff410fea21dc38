"""VolumeZone: bound volumes' zone and region labels against the nodes'; multi-zone values,
beta labels met by GA ones, unlabelled nodes, and the PreFilter messages for what is missing."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.cache import Cache
from ascheduler.framework import ClusterEvent, Code, CycleState
from ascheduler.model import parse_node, parse_pod
from ascheduler.model.storage import parse_claim, parse_storage_class, parse_volume
from ascheduler.plugins.volumezone import BETA_ZONE, REASON, REGION, ZONE, zones
from tests.kit import explained, make_cache, make_plugin, node, pod, rejected_reasons
from tests.kit import run_filter as run

NAME = "VolumeZone"


def nodes() -> Cache:
    return make_cache(
        [
            node("a1", labels={ZONE: "a", REGION: "r1"}),
            node("b1", labels={ZONE: "b", REGION: "r1"}),
            node("c2", labels={ZONE: "c", REGION: "r2"}),
            node("beta", labels={BETA_ZONE: "b"}),
            node("bare"),
        ]
    )


def claiming(*claims: str) -> dict[str, Any]:
    raw = pod("x", namespace="ns")
    raw["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return raw


def bound(
    cache: Cache,
    claim: str,
    volume: str | None,
    labels: dict[str, str] | None = None,
    klass: str | None = None,
) -> None:
    spec: dict[str, Any] = {}
    if volume is not None:
        spec["volumeName"] = volume
    if klass is not None:
        spec["storageClassName"] = klass
    cache.storage.handlers["PersistentVolumeClaim"].on_add(
        parse_claim({"metadata": {"namespace": "ns", "name": claim}, "spec": spec})
    )
    if volume is not None and labels is not None:
        cache.storage.handlers["PersistentVolume"].on_add(
            parse_volume({"metadata": {"name": volume, "labels": labels}, "spec": {}})
        )


def test_zones_split_on_the_double_underscore() -> None:
    assert zones("a__b") == {"a", "b"}
    assert zones(" a ") == {"a"}
    assert zones("a____b") is None


def test_a_volume_s_zones_admit_matching_and_unlabelled_nodes() -> None:
    cache = nodes()
    bound(cache, "data", "pv", {ZONE: "a__b"})
    got = run(make_plugin(NAME, cache), claiming("data"), cache)
    # bare has no zone labels at all; beta's beta label does not meet a GA volume label
    # (only the other way round).
    assert rejected_reasons(got, cache) == {"c2": [REASON], "beta": [REASON]}


def test_every_key_must_match_and_beta_volume_labels_read_ga_node_labels() -> None:
    cache = nodes()
    bound(cache, "data", "pv", {BETA_ZONE: "b", REGION: "r1"})
    got = run(make_plugin(NAME, cache), claiming("data"), cache)
    # beta carries no region label: rejected on the region.
    assert rejected_reasons(got, cache) == {"a1": [REASON], "c2": [REASON], "beta": [REASON]}


def test_unlabelled_volumes_and_delayed_claims_skip() -> None:
    cache = nodes()
    bound(cache, "plain", "pv", {"other": "x"})
    bound(cache, "later", None, klass="wffc")
    cache.storage.handlers["StorageClass"].on_add(
        parse_storage_class(
            {"metadata": {"name": "wffc"}, "volumeBindingMode": "WaitForFirstConsumer"}
        )
    )
    assert run(make_plugin(NAME, cache), claiming("plain", "later"), cache) is None


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("none", 'persistentvolumeclaim "data" not found'),
        ("no-class", "PersistentVolumeClaim had no pv name and storageClass name"),
        ("missing-class", 'storageclass.storage.k8s.io "std" not found'),
        ("immediate", "PersistentVolume had no name"),
        ("missing-volume", 'persistentvolume "pv" not found'),
    ],
)
def test_what_is_missing_is_unresolvable(setup: str, message: str) -> None:
    cache = nodes()
    if setup == "no-class":
        bound(cache, "data", None)
    elif setup == "missing-class":
        bound(cache, "data", None, klass="std")
    elif setup == "immediate":
        bound(cache, "data", None, klass="std")
        cache.storage.handlers["StorageClass"].on_add(
            parse_storage_class({"metadata": {"name": "std"}})
        )
    elif setup == "missing-volume":
        bound(cache, "data", "pv")
    plugin = make_plugin(NAME, cache)
    _, status = plugin.pre_filter(CycleState(), parse_pod(claiming("data")), cache.table)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == message


# -- queueing hints ------------------------------------------------------------------------------


def test_hints_follow_the_pods_claims_classes_and_volume_topology() -> None:
    cache = nodes()
    plugin = make_plugin(NAME, cache)
    waiting = parse_pod(claiming("data"))
    ns_claim = parse_claim({"metadata": {"namespace": "ns", "name": "data"}, "spec": {}})
    other_ns = parse_claim({"metadata": {"namespace": "elsewhere", "name": "data"}, "spec": {}})
    unrelated = parse_claim({"metadata": {"namespace": "ns", "name": "logs"}, "spec": {}})
    hint = plugin.queueing_hint
    assert hint(waiting, ClusterEvent.CLAIM_ADD, None, ns_claim)
    assert hint(waiting, ClusterEvent.CLAIM_UPDATE, ns_claim, ns_claim)
    assert not hint(waiting, ClusterEvent.CLAIM_ADD, None, other_ns)
    assert not hint(waiting, ClusterEvent.CLAIM_ADD, None, unrelated)
    # A generic ephemeral volume's claim does not count for VolumeZone (it reads only
    # persistentVolumeClaim volumes).
    eph = pod("x", namespace="ns")
    eph["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]
    eph_claim = parse_claim({"metadata": {"namespace": "ns", "name": "x-scratch"}, "spec": {}})
    assert not hint(parse_pod(eph), ClusterEvent.CLAIM_ADD, None, eph_claim)

    def klass(mode: str) -> Any:
        return parse_storage_class(
            {"metadata": {"name": "c"}, "provisioner": "p", "volumeBindingMode": mode}
        )

    assert hint(waiting, ClusterEvent.STORAGE_CLASS_ADD, None, klass("WaitForFirstConsumer"))
    assert not hint(waiting, ClusterEvent.STORAGE_CLASS_ADD, None, klass("Immediate"))

    def pv(labels: dict[str, str]) -> Any:
        return parse_volume({"metadata": {"name": "v", "labels": labels}, "spec": {}})

    assert hint(waiting, ClusterEvent.VOLUME_ADD, None, pv({}))
    assert hint(waiting, ClusterEvent.VOLUME_UPDATE, pv({ZONE: "a"}), pv({ZONE: "b"}))
    assert hint(waiting, ClusterEvent.VOLUME_UPDATE, pv({}), pv({REGION: "r1"}))
    assert not hint(waiting, ClusterEvent.VOLUME_UPDATE, pv({ZONE: "a", "x": "1"}), pv({ZONE: "a"}))
    # The same zones written differently are the same topology.
    assert not hint(waiting, ClusterEvent.VOLUME_UPDATE, pv({ZONE: "a__b"}), pv({ZONE: "b__ a"}))
    node_body = parse_node(node("n"))
    assert hint(waiting, ClusterEvent.NODE_ADD, None, node_body)


def test_explain_names_the_volume_its_zones_and_the_node_s_label() -> None:
    cache = nodes()
    bound(cache, "data", "pv", {ZONE: "a__b", REGION: "r1"})
    assert explained(make_plugin(NAME, cache), claiming("data"), cache) == {
        "c2": [
            f"persistentvolume pv is in {ZONE} a, b: node has {ZONE}=c",
            f"persistentvolume pv is in {REGION} r1: node has {REGION}=r2",
        ],
        "beta": [
            f"persistentvolume pv is in {ZONE} a, b: node has no {ZONE} label",
            f"persistentvolume pv is in {REGION} r1: node has no {REGION} label",
        ],
    }
