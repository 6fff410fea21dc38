"""VolumeRestrictions: in-tree disk conflicts with the pods placed on each node, and
ReadWriteOncePod claims already used by a placed pod; missing claims; what-if for
preemption."""

from __future__ import annotations

from typing import Any

from ascheduler.cache import Cache
from ascheduler.framework import ClusterEvent, Code, CycleState
from ascheduler.model import parse_pod
from ascheduler.model.storage import parse_claim
from ascheduler.plugins.volumerestrictions import REASON_DISK, REASON_RWOP
from tests.kit import explained, make_cache, make_plugin, node, on, pod, rejected_reasons
from tests.kit import run_filter as run

NAME = "VolumeRestrictions"


def with_volumes(name: str, *volumes: Any, where: str | None = None) -> dict[str, Any]:
    raw = pod(name, namespace="ns")
    raw["spec"]["volumes"] = list(volumes)
    return on(where, raw) if where else raw


def gce(pd: str, read_only: bool = False) -> dict[str, Any]:
    return {"name": f"v-{pd}", "gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}


def claim_volume(claim: str) -> dict[str, Any]:
    return {"name": f"v-{claim}", "persistentVolumeClaim": {"claimName": claim}}


def add_claim(cache: Cache, name: str, *modes: str) -> None:
    cache.storage.handlers["PersistentVolumeClaim"].on_add(
        parse_claim(
            {
                "metadata": {"namespace": "ns", "name": name, "resourceVersion": "1"},
                "spec": {"accessModes": list(modes)},
            }
        )
    )


def three_nodes() -> Cache:
    return make_cache(
        [node("a"), node("b"), node("c")],
        [
            with_volumes("ro", gce("pd-1", read_only=True), where="a"),
            with_volumes("rw", gce("pd-2"), where="b"),
            with_volumes("plain", where="c"),
        ],
    )


def test_a_pod_without_disks_or_claims_is_skipped() -> None:
    cache = three_nodes()
    assert run(make_plugin(NAME, cache), with_volumes("x"), cache) is None


def test_a_disk_mounted_elsewhere_conflicts_unless_both_read_only() -> None:
    cache = three_nodes()
    plugin = make_plugin(NAME, cache)
    got = run(plugin, with_volumes("x", gce("pd-1", read_only=True), gce("pd-2")), cache)
    assert rejected_reasons(got, cache) == {"b": [REASON_DISK]}
    got = run(plugin, with_volumes("y", gce("pd-1")), cache)
    assert rejected_reasons(got, cache) == {"a": [REASON_DISK]}
    cache.remove_pod(parse_pod(with_volumes("ro", gce("pd-1", read_only=True), where="a")))
    assert run(plugin, with_volumes("y", gce("pd-1")), cache) is None


def test_a_missing_claim_is_unresolvable() -> None:
    cache = three_nodes()
    plugin = make_plugin(NAME, cache)
    _, status = plugin.pre_filter(
        CycleState(), parse_pod(with_volumes("x", claim_volume("data"))), cache.table
    )
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == 'persistentvolumeclaim "data" not found'


def test_a_read_write_once_pod_claim_in_use_rejects_every_node() -> None:
    cache = three_nodes()
    add_claim(cache, "solo", "ReadWriteOncePod")
    add_claim(cache, "shared", "ReadWriteOnce")
    plugin = make_plugin(NAME, cache)
    wanting = with_volumes("x", claim_volume("solo"), claim_volume("shared"))
    assert run(plugin, wanting, cache) is None  # nobody uses them yet: skipped
    cache.add_pod(parse_pod(with_volumes("user", claim_volume("shared"), where="a")))
    assert run(plugin, wanting, cache) is None  # ReadWriteOnce: not this plugin's concern
    user = parse_pod(with_volumes("owner", claim_volume("solo"), where="b"))
    cache.add_pod(user)
    got = run(plugin, wanting, cache)
    assert rejected_reasons(got, cache) == {n: [REASON_RWOP] for n in ("a", "b", "c")}
    # Preemption's what-if: with the user evicted, the node is fine again.
    state = CycleState()
    info = parse_pod(wanting)
    plugin.pre_filter(state, info, cache.table)
    row = cache.table.index["b"]
    assert not plugin.filter_what_if(state, info, cache.table, row, (), ()).ok
    assert plugin.filter_what_if(state, info, cache.table, row, (user,), ()).ok
    cache.remove_pod(user)
    assert run(plugin, wanting, cache) is None


def test_what_if_sees_disks_of_pods_removed_and_added() -> None:
    cache = three_nodes()
    plugin = make_plugin(NAME, cache)
    state = CycleState()
    info = parse_pod(with_volumes("x", gce("pd-2")))
    plugin.pre_filter(state, info, cache.table)
    b, c = cache.table.index["b"], cache.table.index["c"]
    placed = cache.table.pods(b)
    assert not plugin.filter_what_if(state, info, cache.table, b, (), ()).ok
    assert plugin.filter_what_if(state, info, cache.table, b, tuple(placed.values()), ()).ok
    other = parse_pod(with_volumes("z", gce("pd-2"), where="c"))
    assert plugin.filter_what_if(state, info, cache.table, c, (), ()).ok
    assert not plugin.filter_what_if(state, info, cache.table, c, (), (other,)).ok


# -- queueing hints ------------------------------------------------------------------------------


def test_hints_wake_a_pod_for_its_own_claims_and_disks_only() -> None:
    cache = three_nodes()
    plugin = make_plugin(NAME, cache)
    waiting = parse_pod(with_volumes("x", gce("pd-2"), claim_volume("data")))

    def claim(namespace: str, name: str) -> Any:
        return parse_claim({"metadata": {"namespace": namespace, "name": name}, "spec": {}})

    hint = plugin.queueing_hint
    assert hint(waiting, ClusterEvent.CLAIM_ADD, None, claim("ns", "data"))
    assert not hint(waiting, ClusterEvent.CLAIM_ADD, None, claim("ns", "other"))
    assert not hint(waiting, ClusterEvent.CLAIM_ADD, None, claim("elsewhere", "data"))

    def gone(*volumes: Any, namespace: str = "ns") -> Any:
        raw = with_volumes("g", *volumes, where="b")
        raw["metadata"]["namespace"] = namespace
        return parse_pod(raw)

    # The pod that held the disk (read-write) went: the conflict may be over.
    assert hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, gone(gce("pd-2")), None)
    # One that shared the claim went (a ReadWriteOncePod claim may be free now).
    assert hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, gone(claim_volume("data")), None)
    # Another disk, another claim, a pod without volumes: nothing changes for this pod.
    assert not hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, gone(gce("pd-9")), None)
    assert not hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, gone(claim_volume("x")), None)
    assert not hint(waiting, ClusterEvent.ASSIGNED_POD_DELETE, gone(), None)
    # kube-scheduler looks only at pods of the pod's own namespace.
    assert not hint(
        waiting, ClusterEvent.ASSIGNED_POD_DELETE, gone(gce("pd-2"), namespace="o"), None
    )
    # Two read-only mounts never conflicted, so the other one going changes nothing.
    reader = parse_pod(with_volumes("r", gce("pd-1", read_only=True)))
    assert not hint(
        reader, ClusterEvent.ASSIGNED_POD_DELETE, gone(gce("pd-1", read_only=True)), None
    )


def test_explain_names_the_pods_holding_the_disk_or_the_claim() -> None:
    cache = three_nodes()
    plugin = make_plugin(NAME, cache)
    assert explained(plugin, with_volumes("y", gce("pd-1"), gce("pd-2")), cache) == {
        "a": ["gcePersistentDisk pd-1 is mounted by pod ns/ro"],
        "b": ["gcePersistentDisk pd-2 is mounted by pod ns/rw"],
    }
    add_claim(cache, "solo", "ReadWriteOncePod")
    cache.add_pod(parse_pod(with_volumes("owner", claim_volume("solo"), where="c")))
    line = "persistentvolumeclaim solo (ReadWriteOncePod) is used by pod ns/owner on c"
    assert explained(plugin, with_volumes("x", claim_volume("solo")), cache) == {
        n: [line] for n in "abc"
    }
