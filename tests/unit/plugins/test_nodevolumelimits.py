"""NodeVolumeLimits: CSINode counts per driver against the unique CSI volumes of the pods on
each node (kept as pods come and go and as claims bind), a volume already attached not
counted twice, unbound claims counted by their class's provisioner, ephemeral claims the pod
must own, and what-if for preemption."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.cache import Cache
from ascheduler.features import Features, Release, parse_gates
from ascheduler.framework import ClusterEvent, Code, CycleState, Handle
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.model.storage import (
    parse_claim,
    parse_csi_driver,
    parse_csi_node,
    parse_storage_class,
    parse_volume,
    parse_volume_attachment,
)
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.nodevolumelimits import NOT_INSTALLED, REASON
from tests.kit import make_cache, make_plugin, node, on, pod, rejected_reasons
from tests.kit import run_filter as run

NAME = "NodeVolumeLimits"
DRIVER = "ebs.csi.aws.com"


def add(cache: Cache, kind: str, obj: Any) -> None:
    """As the informers deliver it (the store, then the cache's recount)."""
    cache.storage.handlers[kind].on_add(obj)
    cache.storage_changed(kind, None, obj)


def csi_node(cache: Cache, name: str, count: int | None) -> None:
    driver: dict[str, Any] = {"name": DRIVER, "nodeID": name}
    if count is not None:
        driver["allocatable"] = {"count": count}
    add(
        cache,
        "CSINode",
        parse_csi_node({"metadata": {"name": name}, "spec": {"drivers": [driver]}}),
    )


def csi_claim(cache: Cache, name: str, handle: str | None = None, owner: str = "") -> None:
    """A claim bound to a CSI volume with `handle`, or unbound (class `ebs`) without."""
    meta: dict[str, Any] = {"namespace": "ns", "name": name, "resourceVersion": "1"}
    if owner:
        meta["ownerReferences"] = [{"kind": "Pod", "uid": owner, "controller": True}]
    spec: dict[str, Any] = {"storageClassName": "ebs"}
    if handle is not None:
        add(
            cache,
            "PersistentVolume",
            parse_volume(
                {
                    "metadata": {"name": f"pv-{handle}", "resourceVersion": "1"},
                    "spec": {"csi": {"driver": DRIVER, "volumeHandle": handle}},
                }
            ),
        )
        spec["volumeName"] = f"pv-{handle}"
    add(cache, "PersistentVolumeClaim", parse_claim({"metadata": meta, "spec": spec}))


def using(name: str, *claims: str, where: str | None = None) -> dict[str, Any]:
    raw = pod(name, namespace="ns")
    raw["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return on(where, raw) if where else raw


def setup() -> Cache:
    cache = make_cache([node("a"), node("b"), node("free")])
    csi_node(cache, "a", 2)
    csi_node(cache, "b", 1)
    csi_node(cache, "free", None)  # the driver, but no count: no limit
    add(
        cache,
        "StorageClass",
        parse_storage_class({"metadata": {"name": "ebs"}, "provisioner": "kubernetes.io/aws-ebs"}),
    )
    for handle in ("h1", "h2", "h3"):
        csi_claim(cache, f"c-{handle}", handle)
    return cache


def test_nodes_at_their_limit_are_rejected_and_shared_volumes_count_once() -> None:
    cache = setup()
    cache.add_pod(parse_pod(using("p1", "c-h1", where="a")))
    cache.add_pod(parse_pod(using("p2", "c-h1", where="a")))  # the same volume: one
    plugin = make_plugin(NAME, cache)
    assert run(plugin, using("x", "c-h2"), cache) is None  # a: 1 + 1 <= 2
    cache.add_pod(parse_pod(using("p3", "c-h2", where="b")))
    got = run(plugin, using("x", "c-h3"), cache)
    assert rejected_reasons(got, cache) == {"b": [REASON]}
    got = run(plugin, using("x", "c-h2", "c-h3"), cache)
    # a: 1 attached + 2 new > 2; b: h2 already there, only h3 is new: 1 + 1 > 1.
    assert rejected_reasons(got, cache) == {"a": [REASON], "b": [REASON]}
    # A pod using only what b already has attached adds nothing there.
    assert "b" not in rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache)
    cache.remove_pod(parse_pod(using("p3", "c-h2", where="b")))
    assert run(plugin, using("x", "c-h3"), cache) is None


def test_unbound_claims_count_by_their_class_and_binding_recounts() -> None:
    cache = setup()
    csi_claim(cache, "later")  # unbound: counted as one EBS volume of its own
    cache.add_pod(parse_pod(using("p", "later", where="b")))
    plugin = make_plugin(NAME, cache)
    assert rejected_reasons(run(plugin, using("x", "c-h1"), cache), cache) == {"b": [REASON]}
    # The claim binds to h1: the pod on b now holds h1, which x may share.
    csi_claim(cache, "later", "h1")
    assert run(plugin, using("x", "c-h1"), cache) is None
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}


def test_claims_missing_or_not_owned_reject_every_node() -> None:
    cache = setup()
    plugin = make_plugin(NAME, cache)
    raw = pod("x", namespace="ns")  # uid uid-x
    raw["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]
    got = run(plugin, raw, cache)
    expected = 'looking up PVC ns/x-scratch: persistentvolumeclaim "x-scratch" not found'
    assert rejected_reasons(got, cache) == {n: [expected] for n in ("a", "b", "free")}
    assert got is not None
    assert {r.code for r in got.rejections} == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}
    csi_claim(cache, "x-scratch", "h9", owner="someone-else")
    got = run(plugin, raw, cache)
    expected = "PVC ns/x-scratch was not created for pod ns/x (pod is not owner)"
    assert rejected_reasons(got, cache) == {n: [expected] for n in ("a", "b", "free")}
    csi_claim(cache, "x-scratch", "h9", owner="uid-x")
    assert run(plugin, raw, cache) is None


def test_pods_without_counted_volumes_are_skipped_and_nodes_without_csinodes_unlimited() -> None:
    cache = setup()
    plugin = make_plugin(NAME, cache)
    assert run(plugin, pod("plain", namespace="ns"), cache) is None
    bare = make_cache([node("n")])
    csi_claim(bare, "c", "h")
    bare.add_pod(parse_pod(using("p", "c", where="n")))
    assert run(make_plugin(NAME, bare), using("x", "c"), bare) is None


def test_the_count_follows_a_node_that_goes_and_comes_back() -> None:
    cache = setup()
    cache.add_pod(parse_pod(using("p", "c-h1", where="b")))
    plugin = make_plugin(NAME, cache)
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}
    cache.remove_node("a")  # rows move
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}
    cache.remove_node("b")
    cache.add_node(parse_node(node("b")))
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}


def test_what_if_frees_the_volumes_of_removed_pods() -> None:
    cache = setup()
    victim: PodInfo = parse_pod(using("v", "c-h1", where="b"))
    cache.add_pod(victim)
    plugin = make_plugin(NAME, cache)
    state = CycleState()
    wanting = parse_pod(using("x", "c-h2"))
    plugin.pre_filter(state, wanting, cache.table)
    row = cache.table.index["b"]
    assert not plugin.filter_what_if(state, wanting, cache.table, row, (), ()).ok
    assert plugin.filter_what_if(state, wanting, cache.table, row, (victim,), ()).ok
    a = cache.table.index["a"]
    other = parse_pod(using("o", "c-h3", where="a"))
    assert plugin.filter_what_if(state, wanting, cache.table, a, (), ()).ok
    assert not plugin.filter_what_if(state, wanting, cache.table, a, (), (other, victim)).ok


# -- VolumeAttachments ---------------------------------------------------------------------------


def attachment(name: str, node_name: str, volume: str, attacher: str = DRIVER) -> Any:
    return parse_volume_attachment(
        {
            "metadata": {"name": name},
            "spec": {
                "attacher": attacher,
                "nodeName": node_name,
                "source": {"persistentVolumeName": volume},
            },
        }
    )


def delete(cache: Cache, kind: str, obj: Any) -> None:
    cache.storage.handlers[kind].on_delete(obj)
    cache.storage_changed(kind, obj, None)


def test_volume_attachments_count_on_their_node() -> None:
    cache = setup()
    plugin = make_plugin(NAME, cache)
    # h1 still attached to b, though no pod there uses it (its pod went first).
    va = attachment("va-1", "b", "pv-h1")
    add(cache, "VolumeAttachment", va)
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}
    # kube-scheduler does not take a new pod's volume as already there when only an
    # attachment holds it: b counts h1 twice (1 attached + 1 new > 1).
    assert rejected_reasons(run(plugin, using("x", "c-h1"), cache), cache) == {"b": [REASON]}
    # Where a pod uses the volume too, it is one volume, and a pod sharing it adds nothing.
    cache.add_pod(parse_pod(using("p", "c-h1", where="b")))
    assert cache.attachments.attached(DRIVER)[cache.table.index["b"]] == 1
    assert run(plugin, using("x", "c-h1"), cache) is None
    cache.remove_pod(parse_pod(using("p", "c-h1", where="b")))
    # Detached: nothing left on b.
    delete(cache, "VolumeAttachment", va)
    assert cache.attachments.attached(DRIVER)[cache.table.index["b"]] == 0
    assert run(plugin, using("x", "c-h2"), cache) is None


def test_attachments_resolve_through_their_volume_and_skip_what_kube_skips() -> None:
    cache = setup()
    plugin = make_plugin(NAME, cache)
    b = cache.table.index["b"]
    # The volume is not known yet: not counted until it is.
    add(cache, "VolumeAttachment", attachment("va-9", "b", "pv-h9"))
    assert cache.attachments.attached(DRIVER)[b] == 0
    csi_claim(cache, "c-h9", "h9")
    assert cache.attachments.attached(DRIVER)[b] == 1
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}
    delete(cache, "PersistentVolume", cache.storage.volume("pv-h9"))
    assert cache.attachments.attached(DRIVER)[b] == 0
    # No attacher, no volume name, or a volume that is not CSI: not counted.
    add(cache, "VolumeAttachment", attachment("va-x", "b", "pv-h2", attacher=""))
    add(cache, "VolumeAttachment", attachment("va-y", "b", ""))
    add(
        cache,
        "PersistentVolume",
        parse_volume({"metadata": {"name": "nfs"}, "spec": {"nfs": {"path": "/"}}}),
    )
    add(cache, "VolumeAttachment", attachment("va-z", "b", "nfs"))
    assert cache.attachments.attached(DRIVER)[b] == 0
    # Counted under its attacher's name.
    add(cache, "VolumeAttachment", attachment("va-o", "b", "pv-h3", attacher="other.csi"))
    assert cache.attachments.attached(DRIVER)[b] == 0
    assert cache.attachments.attached("other.csi")[b] == 1


def test_what_if_counts_attachments_too() -> None:
    cache = setup()
    plugin = make_plugin(NAME, cache)
    victim: PodInfo = parse_pod(using("v", "c-h1", where="b"))
    cache.add_pod(victim)
    add(cache, "VolumeAttachment", attachment("va-1", "b", "pv-h1"))
    state = CycleState()
    wanting = parse_pod(using("x", "c-h2"))
    plugin.pre_filter(state, wanting, cache.table)
    row = cache.table.index["b"]
    # The victim goes, the attachment stays: b is still full.
    assert not plugin.filter_what_if(state, wanting, cache.table, row, (victim,), ()).ok
    state = CycleState()
    sharing = parse_pod(using("y", "c-h1"))
    plugin.pre_filter(state, sharing, cache.table)
    assert plugin.filter_what_if(state, sharing, cache.table, row, (), ()).ok
    # Without the pod, the attachment alone holds h1: counted twice, as the Filter does.
    assert not plugin.filter_what_if(state, sharing, cache.table, row, (victim,), ()).ok


# -- queueing hints ------------------------------------------------------------------------------


def test_hints_wake_a_pod_only_for_what_frees_or_raises_a_count() -> None:
    cache = setup()
    plugin = make_plugin(NAME, cache)
    waiting = parse_pod(using("x", "c-h2"))
    hint = plugin.queueing_hint

    def csinode(**counts: int | None) -> Any:
        drivers = [
            {"name": d, "nodeID": "n", **({"allocatable": {"count": c}} if c is not None else {})}
            for d, c in counts.items()
        ]
        return parse_csi_node({"metadata": {"name": "n"}, "spec": {"drivers": drivers}})

    assert hint(waiting, ClusterEvent.CSI_NODE_ADD, None, csinode(a=1))
    assert hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode(a=1), csinode(a=2))
    assert hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode(a=1), csinode(a=1, b=1))
    assert hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode(a=None), csinode(a=1))
    assert not hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode(a=2), csinode(a=1))
    assert not hint(waiting, ClusterEvent.CSI_NODE_UPDATE, csinode(a=1), csinode(a=1))

    deleted = parse_pod(using("gone", "c-h1", where="a"))
    plain = parse_pod(pod("plain", namespace="ns", node_name="a"))
    assert hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, deleted, None)
    assert not hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, plain, None)

    def claim(namespace: str, name: str) -> Any:
        return parse_claim({"metadata": {"namespace": namespace, "name": name}, "spec": {}})

    assert hint(waiting, ClusterEvent.CLAIM_ADD, None, claim("ns", "c-h2"))
    assert not hint(waiting, ClusterEvent.CLAIM_ADD, None, claim("ns", "c-h1"))
    assert not hint(waiting, ClusterEvent.CLAIM_ADD, None, claim("o", "c-h2"))
    eph = pod("e", namespace="ns")
    eph["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}]
    assert hint(parse_pod(eph), ClusterEvent.CLAIM_ADD, None, claim("ns", "e-scratch"))

    va = attachment("va", "a", "pv-h1")
    assert hint(waiting, ClusterEvent.VOLUME_ATTACHMENT_DELETE, va, None)
    assert not hint(plain, ClusterEvent.VOLUME_ATTACHMENT_DELETE, va, None)
    inline = pod("i", namespace="ns")
    inline["spec"]["volumes"] = [{"name": "d", "gcePersistentDisk": {"pdName": "disk"}}]
    gce = attachment("va-g", "a", "pv-g", attacher="pd.csi.storage.gke.io")
    assert hint(parse_pod(inline), ClusterEvent.VOLUME_ATTACHMENT_DELETE, gce, None)
    assert not hint(parse_pod(inline), ClusterEvent.VOLUME_ATTACHMENT_DELETE, va, None)


def test_explain_gives_attached_new_and_the_limit() -> None:
    cache = setup()
    cache.add_pod(parse_pod(using("p1", "c-h1", where="b")))
    plugin = make_plugin(NAME, cache)
    state = CycleState()
    x = parse_pod(using("x", "c-h2", "c-h3"))
    plugin.pre_filter(state, x, cache.table)
    row = cache.table.index["b"]
    assert plugin.explain(state, x, cache.table, row) == [
        f"{DRIVER}: 1 volume(s) attached, 2 more would exceed its limit of 1"
    ]
    assert plugin.explain(state, x, cache.table, cache.table.index["free"]) == []


def test_a_handle_without_the_caches_attachments_skips_every_pod() -> None:
    """Without a cache counting attachments (a handle that only computes), PreFilter skips:
    nothing is attached to count against."""
    cache = setup()
    cache.add_pod(parse_pod(using("p1", "c-h1", where="b")))
    raw = using("x", "c-h2")
    assert rejected_reasons(run(make_plugin(NAME, cache), raw, cache), cache) == {"b": [REASON]}
    registration = IN_TREE[NAME]
    bare = registration.build(
        registration.decode_args(None, "args"), Handle(nodes=cache.table, storage=cache.storage)
    )
    _, status = bare.pre_filter(CycleState(), parse_pod(raw), cache.table)
    assert status.code is Code.SKIP


# -- VolumeLimitScaling: the driver installed -------------------------------------------------


def csi_driver(cache: Cache, prevent: bool | None) -> None:
    spec: dict[str, Any] = {}
    if prevent is not None:
        spec["preventPodSchedulingIfMissing"] = prevent
    add(cache, "CSIDriver", parse_csi_driver({"metadata": {"name": DRIVER}, "spec": spec}))


def driverless() -> Cache:
    """setup()'s nodes, and `bare` (no CSINode) and `other` (a CSINode of another driver)."""
    cache = setup()
    cache.add_node(parse_node(node("bare")))
    cache.add_node(parse_node(node("other")))
    other = {"metadata": {"name": "other"}, "spec": {"drivers": [{"name": "x.csi.io"}]}}
    add(cache, "CSINode", parse_csi_node(other))
    cache.add_pod(parse_pod(using("p1", "c-h1", where="b")))  # b at its limit
    return cache


MISSING = NOT_INSTALLED.format(DRIVER)
GATE_AT_1_35 = parse_gates("VolumeLimitScaling=true", Release(1, 35))
GATE_AT_1_36 = parse_gates("VolumeLimitScaling=true", Release(1, 36))
AT_1_37 = Features.defaults(Release(1, 37))


@pytest.mark.parametrize(
    ("features", "prevent", "missing"),
    [
        # 1.37: the gate is on; only a driver opting in is checked.
        pytest.param(AT_1_37, True, True, id="1.37-opted-in"),
        pytest.param(AT_1_37, False, False, id="1.37-opted-out"),
        pytest.param(AT_1_37, None, False, id="1.37-unset"),
        pytest.param(GATE_AT_1_36, True, True, id="1.36-gate-opted-in"),
        pytest.param(GATE_AT_1_36, None, False, id="1.36-gate-unset"),
        # 1.35 with the gate: a CSIDriver object is enough.
        pytest.param(GATE_AT_1_35, None, True, id="1.35-gate"),
        pytest.param(GATE_AT_1_35, False, True, id="1.35-gate-field-ignored"),
        # The gate off (1.35 and 1.36 default): never checked.
        pytest.param(Features.defaults(Release(1, 35)), True, False, id="1.35-default"),
        pytest.param(Features.defaults(Release(1, 36)), True, False, id="1.36-default"),
    ],
)
def test_nodes_without_the_driver_installed(
    features: Features, prevent: bool | None, missing: bool
) -> None:
    cache = driverless()
    csi_driver(cache, prevent)
    plugin = make_plugin(NAME, cache, features=features)
    got = rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache)
    expected = {"b": [REASON]}
    if missing:
        # Checked before the count, on nodes without a CSINode or not listing the driver.
        expected |= {"bare": [MISSING], "other": [MISSING]}
    assert got == expected


def test_a_driver_without_a_csidriver_object_is_taken_to_be_installed() -> None:
    cache = driverless()
    plugin = make_plugin(NAME, cache, features=GATE_AT_1_35)
    assert rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache) == {"b": [REASON]}


def test_a_missing_driver_wins_over_the_count_and_preemption_cannot_help() -> None:
    cache = driverless()
    csi_driver(cache, True)
    # b's CSINode loses the driver: b is refused for that, not for its count.
    add(cache, "CSINode", parse_csi_node({"metadata": {"name": "b"}, "spec": {"drivers": []}}))
    plugin = make_plugin(NAME, cache, features=AT_1_37)
    got = rejected_reasons(run(plugin, using("x", "c-h2"), cache), cache)
    assert got == {"b": [MISSING], "bare": [MISSING], "other": [MISSING]}
    state = CycleState()
    wanting = parse_pod(using("x", "c-h2"))
    plugin.pre_filter(state, wanting, cache.table)
    row = cache.table.index["bare"]
    victim = parse_pod(using("p1", "c-h1", where="b"))
    status = plugin.filter_what_if(state, wanting, cache.table, row, (victim,), ())
    assert (status.code, status.message) == (Code.UNSCHEDULABLE, MISSING)
    assert plugin.filter_what_if(state, wanting, cache.table, cache.table.index["a"], (), ()).ok
    assert plugin.explain(state, wanting, cache.table, row) == [
        f"{DRIVER}: the node's CSINode does not list this CSI driver"
    ]


def test_the_driver_field_is_parsed() -> None:
    on = parse_csi_driver(
        {"metadata": {"name": "d"}, "spec": {"preventPodSchedulingIfMissing": True}}
    )
    assert on.prevent_scheduling_if_missing
    assert not parse_csi_driver(
        {"metadata": {"name": "d"}, "spec": {}}
    ).prevent_scheduling_if_missing


# -- Portworx: migrated from 1.36 ---------------------------------------------------------------

PX = "pxd.portworx.com"


def portworx_cluster(release: Release) -> Cache:
    """a and b take one Portworx volume each; a holds px-1 through a claim, b px-3 inline."""
    cache = Cache(Features.defaults(release))
    for name in ("a", "b"):
        cache.add_node(parse_node(node(name)))
        body = {"name": PX, "nodeID": name, "allocatable": {"count": 1}}
        add(
            cache,
            "CSINode",
            parse_csi_node({"metadata": {"name": name}, "spec": {"drivers": [body]}}),
        )
    add(
        cache,
        "StorageClass",
        parse_storage_class(
            {"metadata": {"name": "px"}, "provisioner": "kubernetes.io/portworx-volume"}
        ),
    )
    for handle in ("px-1", "px-2"):
        pv = {"metadata": {"name": handle}, "spec": {"portworxVolume": {"volumeID": handle}}}
        add(cache, "PersistentVolume", parse_volume(pv))
        spec = {"storageClassName": "px", "volumeName": handle}
        add(
            cache,
            "PersistentVolumeClaim",
            parse_claim({"metadata": {"namespace": "ns", "name": handle}, "spec": spec}),
        )
    add(
        cache,
        "PersistentVolumeClaim",
        parse_claim(
            {"metadata": {"namespace": "ns", "name": "unbound"}, "spec": {"storageClassName": "px"}}
        ),
    )
    cache.add_pod(parse_pod(using("p1", "px-1", where="a")))
    cache.add_pod(parse_pod(inline_px("p3", "px-3", where="b")))
    return cache


def inline_px(name: str, volume_id: str, where: str | None = None) -> dict[str, Any]:
    raw = pod(name, namespace="ns")
    raw["spec"]["volumes"] = [{"name": "px", "portworxVolume": {"volumeID": volume_id}}]
    return on(where, raw) if where else raw


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(using("x", "px-2"), id="claim"),
        pytest.param(using("x", "unbound"), id="provisioner"),
        pytest.param(inline_px("x", "px-4"), id="inline"),
    ],
)
def test_portworx_volumes_count_as_their_csi_driver_s_from_1_36(raw: dict[str, Any]) -> None:
    for release in (Release(1, 36), Release(1, 37)):
        cache = portworx_cluster(release)
        plugin = make_plugin(NAME, cache, features=Features.defaults(release))
        assert rejected_reasons(run(plugin, raw, cache), cache) == {"a": [REASON], "b": [REASON]}
        # A volume a node already has is not new there.
        assert rejected_reasons(run(plugin, using("y", "px-1"), cache), cache) == {"b": [REASON]}
    # 1.35 without the CSINode's migrated-plugins annotation: not counted.
    cache = portworx_cluster(Release(1, 35))
    assert run(make_plugin(NAME, cache), raw, cache) is None
