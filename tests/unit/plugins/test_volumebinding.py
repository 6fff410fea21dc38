"""VolumeBinding's PreFilter and Filter: claims missing, lost, deleting, not owned or unbound
Immediate; bound volumes' node affinity; WaitForFirstConsumer claims matched to local
volumes (smallest first, never one volume twice), pre-bound volumes, a claim selected for
another node, and dynamic provisioning with allowedTopologies and storage capacity."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ascheduler.cache import Cache
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import ClusterEvent, Code, CycleState
from ascheduler.framework.errors import ConfigError
from ascheduler.framework.handle import Handle
from ascheduler.model import parse_pod
from ascheduler.model.storage import (
    BIND_COMPLETED,
    SELECTED_NODE,
    parse_capacity,
    parse_claim,
    parse_csi_driver,
    parse_csi_node,
    parse_storage_class,
    parse_volume,
)
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.volumebinding import (
    REASON_BIND_CONFLICT,
    REASON_NO_SPACE,
    REASON_NODE_CONFLICT,
    REASON_PV_MISSING,
    UNBOUND_IMMEDIATE,
)
from tests.kit import explained, make_cache, make_plugin, node, pod, rejected_reasons
from tests.kit import run_filter as run

NAME = "VolumeBinding"
HOST = "kubernetes.io/hostname"


def add(cache: Cache, kind: str, obj: Any) -> None:
    cache.storage.handlers[kind].on_add(obj)


def cluster() -> Cache:
    cache = make_cache(
        [node(n, labels={HOST: n, "zone": z}) for n, z in (("a", "z1"), ("b", "z1"), ("c", "z2"))]
    )
    add(
        cache,
        "StorageClass",
        parse_storage_class(
            {
                "metadata": {"name": "local"},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        ),
    )
    add(
        cache,
        "StorageClass",
        parse_storage_class(
            {
                "metadata": {"name": "fast"},
                "provisioner": "csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer",
                "allowedTopologies": [
                    {"matchLabelExpressions": [{"key": "zone", "values": ["z1"]}]}
                ],
            }
        ),
    )
    add(
        cache,
        "StorageClass",
        parse_storage_class({"metadata": {"name": "std"}, "provisioner": "x"}),
    )
    return cache


def local_pv(cache: Cache, name: str, host: str, size: str, **spec: Any) -> None:
    body = {
        "metadata": {"name": name, "resourceVersion": "1"},
        "spec": {
            "storageClassName": "local",
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": HOST, "operator": "In", "values": [host]}]}
                    ]
                }
            },
            **spec,
        },
        "status": {"phase": "Available"},
    }
    add(cache, "PersistentVolume", parse_volume(body))


def claim(cache: Cache, name: str, klass: str = "local", size: str = "1Gi", **extra: Any) -> None:
    meta: dict[str, Any] = {
        "namespace": "ns",
        "name": name,
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        **extra.pop("meta", {}),
    }
    spec = {
        "storageClassName": klass,
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        **extra,
    }
    add(
        cache,
        "PersistentVolumeClaim",
        parse_claim({"metadata": meta, "spec": spec, "status": extra.pop("status", {})}),
    )


def using(*claims: str, ephemeral: str = "") -> dict[str, Any]:
    raw = pod("p", namespace="ns")
    raw["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    if ephemeral:
        raw["spec"]["volumes"].append({"name": ephemeral, "ephemeral": {}})
    return raw


def prefilter_message(cache: Cache, raw: dict[str, Any]) -> str:
    _, status = make_plugin(NAME, cache).pre_filter(CycleState(), parse_pod(raw), cache.table)
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    return status.message


def test_prefilter_rejections() -> None:
    cache = cluster()
    assert prefilter_message(cache, using("nope")) == 'persistentvolumeclaim "nope" not found'
    assert prefilter_message(cache, using(ephemeral="scratch")) == (
        'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"'
    )
    claim(cache, "p-scratch", meta={"ownerReferences": [{"uid": "other", "controller": True}]})
    assert prefilter_message(cache, using(ephemeral="scratch")) == (
        "PVC ns/p-scratch was not created for pod ns/p (pod is not owner)"
    )
    claim(cache, "gone", meta={"deletionTimestamp": "2026-01-01T00:00:00Z"})
    assert (
        prefilter_message(cache, using("gone")) == 'persistentvolumeclaim "gone" is being deleted'
    )
    claim(cache, "now", klass="std")
    assert prefilter_message(cache, using("now")) == UNBOUND_IMMEDIATE
    # Pre-bound to a volume but not yet bound: Immediate, even in a delayed class.
    claim(cache, "pre", volumeName="pv-x")
    assert prefilter_message(cache, using("pre")) == UNBOUND_IMMEDIATE


def test_a_pod_without_claims_is_skipped() -> None:
    cache = cluster()
    assert run(make_plugin(NAME, cache), pod("p", namespace="ns"), cache) is None


def test_bound_volumes_node_affinity_and_missing_volumes() -> None:
    cache = cluster()
    local_pv(cache, "pv-a", "a", "1Gi", claimRef={"namespace": "ns", "name": "data"})
    claim(cache, "data", volumeName="pv-a", meta={"annotations": {BIND_COMPLETED: "yes"}})
    got = run(make_plugin(NAME, cache), using("data"), cache)
    assert rejected_reasons(got, cache) == {
        "b": [REASON_NODE_CONFLICT],
        "c": [REASON_NODE_CONFLICT],
    }
    claim(cache, "orphan", volumeName="pv-none", meta={"annotations": {BIND_COMPLETED: "yes"}})
    got = run(make_plugin(NAME, cache), using("orphan"), cache)
    assert rejected_reasons(got, cache) == {n: [REASON_PV_MISSING] for n in "abc"}


def test_delayed_claims_take_the_smallest_local_volume_each_once() -> None:
    cache = cluster()
    local_pv(cache, "a-small", "a", "1Gi")
    local_pv(cache, "a-big", "a", "10Gi")
    local_pv(cache, "b-small", "b", "1Gi")
    local_pv(cache, "c-tiny", "c", "100Mi")  # too small
    claim(cache, "one")
    claim(cache, "two", size="2Gi")
    plugin = make_plugin(NAME, cache)
    assert rejected_reasons(run(plugin, using("one"), cache), cache) == {
        "c": [REASON_BIND_CONFLICT]
    }
    # Two claims: only a has two volumes that fit (1Gi -> a-small, 2Gi -> a-big).
    got = run(plugin, using("one", "two"), cache)
    assert rejected_reasons(got, cache) == {
        "b": [REASON_BIND_CONFLICT],
        "c": [REASON_BIND_CONFLICT],
    }
    # Two claims of 1Gi on b: one volume, not both.
    claim(cache, "three")
    got = run(plugin, using("one", "three"), cache)
    assert rejected_reasons(got, cache) == {
        "b": [REASON_BIND_CONFLICT],
        "c": [REASON_BIND_CONFLICT],
    }


def test_volumes_taken_released_or_mismatched_are_not_candidates() -> None:
    cache = cluster()
    local_pv(cache, "taken", "a", "1Gi", claimRef={"namespace": "ns", "name": "someone"})
    local_pv(cache, "rox", "b", "1Gi", accessModes=["ReadOnlyMany"])
    local_pv(cache, "blocky", "c", "1Gi", volumeMode="Block")
    claim(cache, "one")
    got = run(make_plugin(NAME, cache), using("one"), cache)
    assert rejected_reasons(got, cache) == {n: [REASON_BIND_CONFLICT] for n in "abc"}


def test_a_volume_pre_bound_to_the_claim_wins_or_nothing_does() -> None:
    cache = cluster()
    local_pv(cache, "a-any", "a", "1Gi")
    local_pv(cache, "b-mine", "b", "5Gi", claimRef={"namespace": "ns", "name": "one"})
    claim(cache, "one")
    got = run(make_plugin(NAME, cache), using("one"), cache)
    assert rejected_reasons(got, cache) == {
        "a": [REASON_BIND_CONFLICT],
        "c": [REASON_BIND_CONFLICT],
    }


def test_a_claim_selected_for_a_node_fails_the_others() -> None:
    cache = cluster()
    claim(cache, "picked", klass="fast", meta={"annotations": {SELECTED_NODE: "b"}})
    got = run(make_plugin(NAME, cache), using("picked"), cache)
    assert rejected_reasons(got, cache) == {
        "a": [REASON_BIND_CONFLICT],
        "c": [REASON_BIND_CONFLICT],
    }


def with_capacity(cache: Cache) -> None:
    """csi.example.com publishes capacity: 10Gi on a, volumes up to 1Gi on b, none on c."""
    add(
        cache,
        "CSIDriver",
        parse_csi_driver(
            {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}}
        ),
    )
    add(
        cache,
        "CSIStorageCapacity",
        parse_capacity(
            {
                "metadata": {"namespace": "kube-system", "name": "cap-a"},
                "storageClassName": "fast",
                "capacity": "10Gi",
                "nodeTopology": {"matchLabels": {HOST: "a"}},
            }
        ),
    )
    add(
        cache,
        "CSIStorageCapacity",
        parse_capacity(
            {
                "metadata": {"namespace": "kube-system", "name": "cap-b"},
                "storageClassName": "fast",
                "capacity": "100Gi",
                "maximumVolumeSize": "1Gi",
                "nodeTopology": {"matchLabels": {HOST: "b"}},
            }
        ),
    )


@pytest.mark.parametrize("capacity", [False, True])
def test_dynamic_provisioning_topology_and_capacity(capacity: bool) -> None:
    cache = cluster()
    claim(cache, "dyn", klass="fast", size="5Gi")
    if capacity:
        with_capacity(cache)
    got = run(make_plugin(NAME, cache), using("dyn"), cache)
    expected = {"c": [REASON_BIND_CONFLICT]}  # outside the class's allowedTopologies
    if capacity:
        expected["b"] = [REASON_NO_SPACE]  # its largest volume is 1Gi
    assert rejected_reasons(got, cache) == expected


# -- Reserve, Unreserve, PreBind ----------------------------------------------------------------


def reserved(cache: Cache, raw: dict[str, Any], node_name: str) -> tuple[Any, CycleState]:
    plugin = make_plugin(NAME, cache, {"bindTimeoutSeconds": 1})
    state = CycleState()
    info = parse_pod(raw)
    plugin.pre_filter(state, info, cache.table)
    plugin.filter(state, info, cache.table)
    assert plugin.reserve(state, info, node_name).ok
    return plugin, state


def test_reserve_assumes_the_node_s_volumes_and_claims_and_unreserve_undoes_it() -> None:
    cache = cluster()
    local_pv(cache, "a-pv", "a", "1Gi")
    claim(cache, "static")
    claim(cache, "dyn", klass="fast")
    raw = using("static", "dyn")
    plugin, state = reserved(cache, raw, "a")
    taken = cache.storage.volume("a-pv")
    assert taken is not None
    assert taken.claim_ref is not None
    assert (taken.claim_ref.name, taken.claim_ref.uid) == ("static", "uid-static")
    assert taken.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    dyn = cache.storage.claim("ns", "dyn")
    assert dyn is not None
    assert dyn.annotations[SELECTED_NODE] == "a"
    # The next pod meets them taken: the volume is no candidate anywhere.
    claim(cache, "other")
    got = run(make_plugin(NAME, cache), using("other"), cache)
    assert rejected_reasons(got, cache) == {n: [REASON_BIND_CONFLICT] for n in "abc"}
    plugin.unreserve(state, parse_pod(raw), "a")
    restored = cache.storage.volume("a-pv")
    assert restored is not None
    assert restored.claim_ref is None
    assert SELECTED_NODE not in cache.storage.claim("ns", "dyn").annotations  # type: ignore[union-attr]
    assert run(make_plugin(NAME, cache), using("other"), cache) is not None  # b, c only


def test_pre_bind_pre_flight_has_work_only_for_volumes_to_bind() -> None:
    """kube-scheduler's PreBindPreFlight: Skip without claims or with all of them bound,
    Success with a volume to bind (the pod is then cancellable in PreBind, 1.36 on)."""
    cache = cluster()
    local_pv(cache, "a-pv", "a", "1Gi")
    claim(cache, "static")
    plugin, state = reserved(cache, using("static"), "a")
    assert plugin.pre_bind_pre_flight(state, parse_pod(using("static")), "a").ok
    plain = pod("p", namespace="ns")
    plugin, state = reserved(cache, plain, "a")
    assert plugin.pre_bind_pre_flight(state, parse_pod(plain), "a").code is Code.SKIP
    local_pv(
        cache,
        "b-pv",
        "b",
        "1Gi",
        claimRef={"namespace": "ns", "name": "bound", "uid": "uid-bound"},
    )
    claim(cache, "bound", volumeName="b-pv", meta={"annotations": {BIND_COMPLETED: "yes"}})
    plugin, state = reserved(cache, using("bound"), "b")
    assert plugin.pre_bind_pre_flight(state, parse_pod(using("bound")), "b").code is Code.SKIP


async def test_prebind_waits_for_the_controller_then_succeeds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ascheduler.plugins import volumebinding, volumeprebind

    monkeypatch.setattr(volumeprebind, "POLL_INTERVAL", 0.01)
    cache = cluster()
    local_pv(cache, "a-pv", "a", "1Gi")
    claim(cache, "static")
    raw = using("static")
    plugin, state = reserved(cache, raw, "a")
    info = parse_pod(raw)
    # Nothing bound yet: the wait runs out.
    plugin.args = volumebinding.VolumeBindingArgs(bind_timeout_seconds=0)
    status = await plugin.pre_bind(state, info, "a")
    assert status.message == "binding volumes: context deadline exceeded"
    # The controller binds both sides (as the informers then show it).
    plugin.args = volumebinding.VolumeBindingArgs(bind_timeout_seconds=5)
    local_pv(
        cache,
        "a-pv",
        "a",
        "1Gi",
        claimRef={"namespace": "ns", "name": "static", "uid": "uid-static"},
    )
    claim(cache, "static", volumeName="a-pv", meta={"annotations": {BIND_COMPLETED: "yes"}})
    assert (await plugin.pre_bind(state, info, "a")).ok


async def test_prebind_fails_when_provisioning_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    from ascheduler.plugins import volumeprebind

    monkeypatch.setattr(volumeprebind, "POLL_INTERVAL", 0.01)
    cache = cluster()
    claim(cache, "dyn", klass="fast")
    raw = using("dyn")
    plugin, state = reserved(cache, raw, "a")
    # The provisioner gave up and took the annotation off (a new version of the claim).
    claim(cache, "dyn", klass="fast", meta={"resourceVersion": "2", "annotations": {"x": "y"}})
    status = await plugin.pre_bind(state, parse_pod(raw), "a")
    assert status.message == 'binding volumes: provisioning failed for PVC "dyn"'


def test_unreadable_claims_and_volumes_are_named() -> None:
    cache = cluster()
    claim(cache, "odd", resources={"requests": {"storage": "lots"}})
    assert prefilter_message(cache, using("odd")).startswith(
        'persistentvolumeclaim "odd": spec.resources.requests.storage'
    )
    add(
        cache,
        "PersistentVolume",
        parse_volume(
            {
                "metadata": {"name": "bad"},
                "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": "x"}}},
            }
        ),
    )
    claim(cache, "on-bad", volumeName="bad", meta={"annotations": {BIND_COMPLETED: "yes"}})
    assert prefilter_message(cache, using("on-bad")) == (
        'persistentvolume "bad": spec.nodeAffinity.required.nodeSelectorTerms: expected a list'
    )


# -- queueing hints ------------------------------------------------------------------------------


def test_hints_follow_kube_schedulers() -> None:
    cache = make_cache([node("n")])
    plugin = make_plugin(NAME, cache)
    raw = pod("x", namespace="ns")
    raw["spec"]["volumes"] = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
        {"name": "inline", "csi": {"driver": "inline.csi"}},
    ]
    waiting = parse_pod(raw)
    hint = plugin.queueing_hint

    def claim(namespace: str, name: str) -> Any:
        return parse_claim({"metadata": {"namespace": namespace, "name": name}, "spec": {}})

    for event in (ClusterEvent.CLAIM_ADD, ClusterEvent.CLAIM_UPDATE):
        assert hint(waiting, event, None, claim("ns", "data"))
        assert hint(waiting, event, None, claim("ns", "x-scratch"))  # the ephemeral one
        assert not hint(waiting, event, None, claim("ns", "other"))
        assert not hint(waiting, event, None, claim("elsewhere", "data"))

    def klass(zones: list[str] | None) -> Any:
        body: dict[str, Any] = {"metadata": {"name": "c"}, "provisioner": "p"}
        if zones is not None:
            body["allowedTopologies"] = [
                {"matchLabelExpressions": [{"key": "zone", "values": zones}]}
            ]
        return parse_storage_class(body)

    assert hint(waiting, ClusterEvent.STORAGE_CLASS_ADD, None, klass(None))
    assert hint(waiting, ClusterEvent.STORAGE_CLASS_UPDATE, klass(["a"]), klass(["a", "b"]))
    assert hint(waiting, ClusterEvent.STORAGE_CLASS_UPDATE, klass(None), klass(["a"]))
    assert not hint(waiting, ClusterEvent.STORAGE_CLASS_UPDATE, klass(["a"]), klass(["a"]))

    def csinode(migrated: str | None) -> Any:
        meta: dict[str, Any] = {"name": "n"}
        if migrated is not None:
            meta["annotations"] = {"storage.alpha.kubernetes.io/migrated-plugins": migrated}
        return parse_csi_node({"metadata": meta, "spec": {"drivers": []}})

    assert hint(waiting, ClusterEvent.CSI_NODE_ADD, None, csinode(None))
    migrated = csinode("kubernetes.io/gce-pd")
    assert hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode(None), migrated)
    assert not hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode("a"), csinode("a"))

    def capacity(size: str | None, maximum: str | None = None) -> Any:
        body: dict[str, Any] = {"metadata": {"name": "cap"}, "storageClassName": "c"}
        if size is not None:
            body["capacity"] = size
        if maximum is not None:
            body["maximumVolumeSize"] = maximum
        return parse_capacity(body)

    update = ClusterEvent.CAPACITY_UPDATE
    assert hint(waiting, ClusterEvent.CAPACITY_ADD, None, capacity("1Gi"))
    assert hint(waiting, update, capacity("1Gi"), capacity("2Gi"))
    assert hint(waiting, update, capacity(None), capacity("1Gi"))
    assert not hint(waiting, update, capacity("2Gi"), capacity("1Gi"))
    assert not hint(waiting, update, capacity("1Gi"), capacity(None))
    # The maximum volume size, when given, is what counts.
    assert not hint(waiting, update, capacity("1Gi", "5Gi"), capacity("9Gi", "5Gi"))
    assert hint(waiting, update, capacity("1Gi", "5Gi"), capacity("1Gi", "6Gi"))

    def driver(name: str, publishes: bool) -> Any:
        spec = {"storageCapacity": publishes}
        return parse_csi_driver({"metadata": {"name": name}, "spec": spec})

    csi_update = ClusterEvent.CSI_DRIVER_UPDATE
    assert hint(waiting, csi_update, driver("inline.csi", True), driver("inline.csi", False))
    assert not hint(waiting, csi_update, driver("inline.csi", False), driver("inline.csi", True))
    assert not hint(waiting, csi_update, driver("other.csi", True), driver("other.csi", False))

    assert hint(waiting, ClusterEvent.VOLUME_ADD, None, parse_volume({"metadata": {"name": "v"}}))


def test_args_refuse_a_shape_and_a_negative_timeout_as_kube_scheduler_does() -> None:
    registration = IN_TREE[NAME]
    assert registration.decode_args({"bindTimeoutSeconds": 5}, "args").bind_timeout_seconds == 5
    with pytest.raises(ConfigError, match="bindTimeoutSeconds: invalid BindTimeoutSeconds"):
        registration.decode_args({"bindTimeoutSeconds": -1}, "args")
    shape = [{"utilization": 0, "score": 10}, {"utilization": 0, "score": 5}]
    with pytest.raises(ConfigError, match=r"shape\[1\]\.utilization: values must be sorted"):
        registration.decode_args({"shape": shape}, "args")
    with pytest.raises(ConfigError, match=r"score: must be an integer in 0\.\.10"):
        registration.decode_args({"shape": [{"utilization": 0, "score": 11}]}, "args")
    # A shape without the gate: refused when the plugin is built, kube-scheduler's words.
    with pytest.raises(ConfigError, match="unexpected field `shape`, remove it or turn on"):
        scoring(cluster(), {"shape": [{"utilization": 0, "score": 10}]}, gate=False)


# -- Score (StorageCapacityScoring) -------------------------------------------------------------


def scoring(cache: Cache, args: dict[str, Any] | None = None, *, gate: bool = True) -> Any:
    registration = IN_TREE[NAME]
    gates = parse_gates(f"StorageCapacityScoring={str(gate).lower()}")
    handle = Handle(
        nodes=cache.table,
        objects=cache.objects,
        storage=cache.storage,
        attachments=cache.attachments,
        features=gates,
    )
    return registration.build(registration.decode_args(args, "args", gates), handle)


def scores(plugin: Any, raw: dict[str, Any], cache: Cache) -> dict[str, int] | None:
    """PreFilter, Filter (unless PreFilter skips it), PreScore and Score on one cycle state,
    over the nodes the Filter keeps; None when PreScore skips."""
    state = CycleState()
    info = parse_pod(raw)
    _, status = plugin.pre_filter(state, info, cache.table)
    result = None if status.code is Code.SKIP else plugin.filter(state, info, cache.table)
    rejected = np.zeros(cache.table.n, dtype=np.bool_) if result is None else result.rejected
    rows = np.flatnonzero(~rejected)
    if plugin.pre_score(state, info, cache.table, rows).code is Code.SKIP:
        return None
    got = plugin.score(state, info, cache.table, rows)
    return {cache.table.names[r]: int(v) for r, v in zip(rows, got, strict=True)}


def test_without_the_gate_there_is_no_score() -> None:
    cache = cluster()
    local_pv(cache, "pv-a", "a", "2Gi")
    claim(cache, "data")
    assert scores(scoring(cache, gate=False), using("data"), cache) is None
    assert scores(scoring(cache, gate=False), pod("plain", namespace="ns"), cache) is None


def test_with_the_gate_a_pod_without_a_claim_to_bind_scores_zero_everywhere() -> None:
    """kube-scheduler's PreScore skips only without the gate: with it, every node scores 0
    for a pod without claims (Score finds no volumes for the node)."""
    cache = cluster()
    local_pv(cache, "pv-a", "a", "2Gi")
    assert scores(scoring(cache), pod("plain", namespace="ns"), cache) == dict.fromkeys(
        cache.table.names, 0
    )


def test_static_bindings_score_the_volume_s_emptiness_per_class() -> None:
    cache = cluster()
    local_pv(cache, "pv-a", "a", "2Gi")
    local_pv(cache, "pv-b", "b", "10Gi")
    local_pv(cache, "pv-c", "c", "1Gi")
    claim(cache, "data")
    # Default shape 0% -> 100, 100% -> 0: a 1Gi claim fills half of a's, a tenth of b's.
    assert scores(scoring(cache), using("data"), cache) == {"a": 50, "b": 90, "c": 0}
    # A shape of its own (scores 0..10, scaled to 0..100), integer arithmetic as Go's.
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    assert scores(scoring(cache, {"shape": shape}), using("data"), cache) == {
        "a": 50,
        "b": 10,
        "c": 100,
    }
    # Two claims of one class on a node: their requests against their volumes' sum.
    local_pv(cache, "pv-b2", "b", "3Gi")
    claim(cache, "more", size="3Gi")
    # b: (1 + 3) / (10 + 3) = 30%; a, c: no volume for the 3Gi claim (filtered out).
    assert scores(scoring(cache), using("data", "more"), cache) == {"b": 70}


def test_provisioned_claims_score_the_node_s_storage_capacity() -> None:
    cache = cluster()
    claim(cache, "dyn", klass="fast", size="5Gi")
    add(
        cache,
        "CSIDriver",
        parse_csi_driver(
            {"metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}}
        ),
    )
    for name, host, size, maximum in (
        ("cap-a", "a", "10Gi", None),
        ("cap-b", "b", "8Gi", "6Gi"),
    ):
        body: dict[str, Any] = {
            "metadata": {"namespace": "kube-system", "name": name},
            "storageClassName": "fast",
            "capacity": size,
            "nodeTopology": {"matchLabels": {HOST: host}},
        }
        if maximum:
            body["maximumVolumeSize"] = maximum
        add(cache, "CSIStorageCapacity", parse_capacity(body))
    # 5Gi of a's 10Gi: 50%; of b's 8Gi (the capacity, not the maximum size): 62% -> 38.
    assert scores(scoring(cache), using("dyn"), cache) == {"a": 50, "b": 38}
    # A static volume on a node wins over provisioning there: only it is scored (full: 0;
    # with the provisioned class too it would be the mean, 25). b has no volume: filtered.
    local_pv(cache, "pv-a", "a", "1Gi")
    claim(cache, "data")
    assert scores(scoring(cache), using("dyn", "data"), cache) == {"a": 0}


def test_explain_names_the_claim_its_volumes_and_what_the_class_cannot_do() -> None:
    cache = cluster()
    local_pv(cache, "pv-a", "a", "1Gi", claimRef={"namespace": "ns", "name": "data"})
    claim(cache, "data", volumeName="pv-a", meta={"annotations": {BIND_COMPLETED: "yes"}})
    plugin = make_plugin(NAME, cache)
    affinity = (
        "persistentvolumeclaim data: persistentvolume pv-a's node affinity excludes this node "
        f"(node has {HOST}="
    )
    assert explained(plugin, using("data"), cache) == {
        "b": [affinity + "b)"],
        "c": [affinity + "c)"],
    }
    claim(cache, "orphan", volumeName="pv-none", meta={"annotations": {BIND_COMPLETED: "yes"}})
    gone = "persistentvolumeclaim orphan is bound to persistentvolume pv-none, which does not exist"
    assert explained(plugin, using("orphan"), cache) == {n: [gone] for n in "abc"}
    claim(cache, "picked", klass="fast", meta={"annotations": {SELECTED_NODE: "b"}})
    picked = "persistentvolumeclaim picked is being provisioned for node b"
    assert explained(plugin, using("picked"), cache) == {"a": [picked], "c": [picked]}


def test_explain_of_claims_to_bind_says_which_volumes_and_why_not_provisioned() -> None:
    cache = cluster()
    local_pv(cache, "a-small", "a", "1Gi")
    local_pv(cache, "b-small", "b", "1Gi")
    claim(cache, "one")
    claim(cache, "two")
    plugin = make_plugin(NAME, cache)
    head = "persistentvolumeclaim two (1Gi of class local): "
    tail = ", and the class does not provision"
    assert explained(plugin, using("one", "two"), cache) == {
        "a": [head + "the 1 volume(s) that fit it here go to the pod's other claims" + tail],
        "b": [head + "the 1 volume(s) that fit it here go to the pod's other claims" + tail],
        "c": [
            "persistentvolumeclaim one (1Gi of class local): none of the 2 volume(s) that fit "
            "it reaches this node" + tail,
            head + "none of the 2 volume(s) that fit it reaches this node" + tail,
        ],
    }
    claim(cache, "dyn", klass="fast", size="5Gi")
    with_capacity(cache)
    head = "persistentvolumeclaim dyn (5Gi of class fast): no available volume fits it, and "
    assert explained(plugin, using("dyn"), cache) == {
        "b": [
            head + "no CSIStorageCapacity of csi.example.com for this node admits a volume "
            "that large"
        ],
        "c": [head + "the class's allowedTopologies exclude this node"],
    }


@pytest.mark.parametrize(
    ("release", "scored"),
    [(Release(1, 35), False), (Release(1, 36), False), (Release(1, 37), True)],
    ids=["1.35", "1.36", "1.37"],
)
def test_a_release_s_default_gates_decide_the_score(release: Release, scored: bool) -> None:
    """StorageCapacityScoring is beta and on from 1.37: by default VolumeBinding scores there,
    with the default shape (0% -> 10, 100% -> 0, scaled to 0..100)."""
    cache = cluster()
    local_pv(cache, "pv-a", "a", "2Gi")
    local_pv(cache, "pv-b", "b", "10Gi")
    claim(cache, "data")
    plugin = make_plugin(NAME, cache, features=Features.defaults(release))
    got = scores(plugin, using("data"), cache)
    assert got == ({"a": 50, "b": 90} if scored else None)
    shape = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    if scored:
        own = make_plugin(NAME, cache, shape, features=Features.defaults(release))
        assert scores(own, using("data"), cache) == {"a": 50, "b": 10}
    else:
        with pytest.raises(ConfigError, match="unexpected field `shape`"):
            make_plugin(NAME, cache, shape, features=Features.defaults(release))


def test_the_gate_turned_off_in_1_37_refuses_a_shape_again() -> None:
    off = parse_gates("StorageCapacityScoring=false", Release(1, 37))
    cache = cluster()
    assert scores(make_plugin(NAME, cache, features=off), pod("p", namespace="ns"), cache) is None
    with pytest.raises(ConfigError, match="unexpected field `shape`"):
        make_plugin(NAME, cache, {"shape": [{"utilization": 0, "score": 10}]}, features=off)
