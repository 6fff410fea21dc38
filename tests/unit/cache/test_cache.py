"""The cache's pod state machine over the node table's columns."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from ascheduler.cache import Cache, CacheError
from ascheduler.framework.nodes import CPU, EPHEMERAL, MEMORY, PODS
from ascheduler.model import PodInfo, parse_pod
from ascheduler.model.quantity import MAX_QUANTITY
from tests.kit import node_info, pod_info

GI = 2**30
MI = 2**20


make_node = node_info


def make_pod(
    uid: str,
    *,
    node: str = "",
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    host_port: int | None = None,
    **extra: str,
) -> PodInfo:
    """A pod `pod-<uid>` in `ns`, 1 cpu and 1Gi unless told otherwise."""
    return pod_info(
        f"pod-{uid}",
        uid=uid,
        namespace="ns",
        node_name=node,
        cpu=cpu,
        memory=memory,
        host_port=host_port,
        extra=extra,
    )


def usage(cache: Cache, node: str) -> tuple[int, int, int]:
    """(cpu millis, memory bytes, pods) requested on `node`."""
    row = cache.table.index[node]
    req = cache.table.requested
    return int(req[CPU, row]), int(req[MEMORY, row]), int(req[PODS, row])


def nonzero(cache: Cache, node: str) -> tuple[int, int]:
    row = cache.table.index[node]
    return int(cache.table.nonzero[CPU, row]), int(cache.table.nonzero[MEMORY, row])


@pytest.fixture
def cache() -> Cache:
    c = Cache()
    c.add_node(make_node("n1"))
    c.add_node(make_node("n2"))
    return c


def test_assume_counts_the_pod(cache: Cache) -> None:
    pod = make_pod("p1", cpu="500m", memory="256Mi")
    cache.assume(pod, "n1")
    assert usage(cache, "n1") == (500, 256 * MI, 1)
    assert usage(cache, "n2") == (0, 0, 0)
    assert cache.is_assumed("p1")
    assert cache.has_pod("p1")
    assert cache.pod_node("p1") == "n1"
    assert cache.assumed_count() == 1
    assert cache.pods_on("n1") == [pod]


def test_watch_add_confirms_assumed_pod_without_double_counting(cache: Cache) -> None:
    pod = make_pod("p1")
    cache.assume(pod, "n1")
    assert cache.is_assumed("p1")
    cache.add_pod(make_pod("p1", node="n1"))
    assert usage(cache, "n1") == (1000, GI, 1)
    assert nonzero(cache, "n1") == (1000, GI)
    assert not cache.is_assumed("p1")
    assert cache.has_pod("p1")
    assert cache.pod_count() == 1
    assert cache.assumed_count() == 0


@dataclass(frozen=True)
class _App:
    """Pods of namespace `ns` labelled `app=<value>` (a count column's predicate)."""

    value: str

    @property
    def namespaces(self) -> frozenset[str]:
        return frozenset({"ns"})

    @property
    def hint(self) -> tuple[str, tuple[str, ...]]:
        return "app", (self.value,)

    def matches(self, pod: PodInfo) -> bool:
        return pod.namespace == "ns" and pod.labels.get("app") == self.value

    def matches_candidate(self, pod: PodInfo) -> bool:
        return True


def test_a_confirmation_replaces_the_pod_without_touching_its_row(cache: Cache) -> None:
    """The informer's copy of an assumed pod (bound, nothing counted changed) takes the
    assumed copy's place everywhere the table holds it, and the row is left as it was, so
    what is kept per row (scores of a pod shape) is not computed again."""
    pod = replace(make_pod("p1", cpu="500m", memory="256Mi"), labels={"app": "web"})
    cache.assume(pod, "n1")
    table = cache.table
    row = table.index["n1"]
    computed: list[int] = []

    def compute(rows: Any) -> Any:
        computed.append(len(rows))
        return rows * 0

    table.row_values("shape", compute)
    confirmed = replace(pod, node_name="n1", resource_version="2", phase="Running")
    cache.add_pod(confirmed)
    table.row_values("shape", compute)
    assert computed == [2]  # the first fill only
    assert not cache.is_assumed("p1")
    assert cache.pod("p1") is confirmed
    assert table.pods(row)["p1"] is confirmed
    assert usage(cache, "n1") == (500, 256 * MI, 1)
    # Counted once, under the newer copy, by a column built after the confirmation.
    assert dict(table.match_rows(_App("web"))) == {row: 1}


def test_a_confirmation_that_changes_what_is_counted_is_counted_again(cache: Cache) -> None:
    pod = replace(make_pod("p1", cpu="500m", memory="256Mi"), labels={"app": "web"})
    cache.assume(pod, "n1")
    row = cache.table.index["n1"]
    relabelled = replace(pod, node_name="n1", labels={"app": "api"})
    cache.add_pod(relabelled)
    assert dict(cache.table.match_rows(_App("web"))) == {}
    assert dict(cache.table.match_rows(_App("api"))) == {row: 1}
    resized = replace(relabelled, requests={"cpu": 700, "memory": 256 * MI})
    cache.add_pod(resized)
    assert usage(cache, "n1") == (700, 256 * MI, 1)
    assert cache.table.pods(row)["p1"] is resized


def test_forget_restores_usage(cache: Cache) -> None:
    cache.add_pod(make_pod("other", node="n1", cpu="250m"))
    before = usage(cache, "n1"), nonzero(cache, "n1")
    pod = make_pod("p1", host_port=8080)
    cache.assume(pod, "n1")
    assert usage(cache, "n1") != before[0]
    cache.forget(pod)
    assert (usage(cache, "n1"), nonzero(cache, "n1")) == before
    assert cache.table.ports[cache.table.index["n1"]] == {}
    assert not cache.has_pod("p1")
    assert cache.pod_node("p1") is None
    assert cache.pods_on("n1") == [make_pod("other", node="n1", cpu="250m")]


def test_forget_of_unknown_pod_raises(cache: Cache) -> None:
    with pytest.raises(CacheError):
        cache.forget(make_pod("p1"))


def test_forget_of_confirmed_pod_raises_and_keeps_it(cache: Cache) -> None:
    pod = make_pod("p1", node="n1")
    cache.add_pod(pod)
    with pytest.raises(CacheError):
        cache.forget(pod)
    assert usage(cache, "n1") == (1000, GI, 1)
    assert cache.has_pod("p1")


def test_assume_twice_raises_and_counts_once(cache: Cache) -> None:
    pod = make_pod("p1")
    cache.assume(pod, "n1")
    with pytest.raises(CacheError):
        cache.assume(pod, "n1")
    with pytest.raises(CacheError):
        cache.assume(pod, "n2")
    assert usage(cache, "n1") == (1000, GI, 1)
    assert usage(cache, "n2") == (0, 0, 0)


def test_assume_of_a_pod_already_seen_raises(cache: Cache) -> None:
    cache.add_pod(make_pod("p1", node="n1"))
    with pytest.raises(CacheError):
        cache.assume(make_pod("p1"), "n2")
    assert usage(cache, "n2") == (0, 0, 0)


def test_pod_landing_on_another_node_moves(cache: Cache) -> None:
    cache.assume(make_pod("p1"), "n1")
    cache.add_pod(make_pod("p1", node="n2"))
    assert usage(cache, "n1") == (0, 0, 0)
    assert usage(cache, "n2") == (1000, GI, 1)
    assert cache.pod_node("p1") == "n2"
    assert cache.pods_on("n1") == []
    assert [p.uid for p in cache.pods_on("n2")] == ["p1"]


def test_update_pod_replaces_its_usage(cache: Cache) -> None:
    cache.add_pod(make_pod("p1", node="n1", cpu="2"))
    cache.update_pod(make_pod("p1", node="n1", cpu="500m"))
    assert usage(cache, "n1") == (500, GI, 1)


def test_update_pod_counts_a_resize_reported_in_the_status(cache: Cache) -> None:
    """Only the status differs (the kubelet resized the container in place): the node's
    sums, exact and non-zero, follow the larger of spec and status."""
    from tests.kit import pod

    def resized(status_cpu: str | None) -> PodInfo:
        raw = pod("p1", uid="p1", namespace="ns", node_name="n1", cpu="1", memory="1Gi")
        if status_cpu is not None:
            raw["status"] = {
                "containerStatuses": [{"name": "c", "resources": {"requests": {"cpu": status_cpu}}}]
            }
        return parse_pod(raw)

    cache.add_pod(resized(None))
    cache.update_pod(resized("2500m"))
    assert usage(cache, "n1") == (2500, GI, 1)
    assert nonzero(cache, "n1") == (2500, GI)
    cache.update_pod(resized("1"))
    assert usage(cache, "n1") == (1000, GI, 1)
    assert nonzero(cache, "n1") == (1000, GI)


def test_remove_pod(cache: Cache) -> None:
    pod = make_pod("p1", node="n1")
    cache.add_pod(pod)
    cache.remove_pod(pod)
    assert usage(cache, "n1") == (0, 0, 0)
    assert nonzero(cache, "n1") == (0, 0)
    assert not cache.has_pod("p1")
    cache.remove_pod(pod)  # unknown: nothing happens
    assert cache.pod_count() == 0


def test_nonzero_columns_use_defaults(cache: Cache) -> None:
    cache.add_pod(make_pod("p1", node="n1", cpu=None, memory=None))
    assert usage(cache, "n1") == (0, 0, 1)
    assert nonzero(cache, "n1") == (100, 200 * MI)


def test_pods_arriving_before_their_node_are_counted_when_it_is_added(cache: Cache) -> None:
    cache.add_pod(make_pod("p1", node="late", cpu="1"))
    cache.add_pod(make_pod("p2", node="late", cpu="2", memory="2Gi"))
    assert "late" not in cache.table.index
    assert cache.pod_count() == 2
    cache.add_node(make_node("late"))
    assert usage(cache, "late") == (3000, 3 * GI, 2)
    assert usage(cache, "n1") == (0, 0, 0)
    cache.remove_pod(make_pod("p1", node="late"))
    assert usage(cache, "late") == (2000, 2 * GI, 1)


def test_assumed_pod_on_unknown_node_is_counted_when_it_appears() -> None:
    cache = Cache()
    cache.assume(make_pod("p1"), "n1")
    cache.add_node(make_node("n1"))
    assert usage(cache, "n1") == (1000, GI, 1)
    cache.forget(make_pod("p1"))
    assert usage(cache, "n1") == (0, 0, 0)


def test_node_removal_swaps_rows_and_keeps_names_and_usage() -> None:
    cache = Cache()
    for i, name in enumerate(["a", "b", "c", "d"], start=1):
        cache.add_node(make_node(name, cpu=str(10 * i), labels={"name": name}))
        cache.add_pod(make_pod(f"p-{name}", node=name, cpu=str(i), host_port=8000 + i))
    cache.remove_node("a")
    table = cache.table
    assert table.n == 3
    assert sorted(table.names) == ["b", "c", "d"]
    assert set(table.index) == {"b", "c", "d"}
    for name, i in (("b", 2), ("c", 3), ("d", 4)):
        row = table.index[name]
        assert table.names[row] == name
        assert table.infos[row].name == name
        assert table.infos[row].labels == {"name": name}
        assert int(table.alloc[CPU, row]) == 10_000 * i
        assert usage(cache, name) == (1000 * i, GI, 1)
        assert table.ports[row] == {("0.0.0.0", "TCP", 8000 + i): 1}
    assert table.alloc.shape[1] == 3
    assert table.requested.shape[1] == 3

    # The moved row is still the node's own: removing its pod updates the right row.
    cache.remove_pod(make_pod("p-d", node="d"))
    assert usage(cache, "d") == (0, 0, 0)
    assert usage(cache, "b") == (2000, GI, 1)
    assert usage(cache, "c") == (3000, GI, 1)

    # Removing the last row needs no swap.
    last = table.names[-1]
    cache.remove_node(last)
    assert last not in table.index
    assert table.n == 2
    for name in table.names:
        assert table.names[table.index[name]] == name


def test_removed_node_with_pods_comes_back_with_them() -> None:
    cache = Cache()
    cache.add_node(make_node("a"))
    cache.add_pod(make_pod("p1", node="a"))
    cache.remove_node("a")
    assert cache.node("a") is None
    assert cache.has_pod("p1")
    cache.add_node(make_node("a"))
    assert usage(cache, "a") == (1000, GI, 1)


def test_removing_unknown_node_is_harmless(cache: Cache) -> None:
    generation = cache.table.spec_generation
    cache.remove_node("nope")
    assert cache.table.n == 2
    assert cache.table.spec_generation == generation


def test_node_lookup(cache: Cache) -> None:
    info = cache.node("n1")
    assert info is not None
    assert info.name == "n1"
    assert cache.node("nope") is None


def test_update_node_label_change_bumps_spec_generation(cache: Cache) -> None:
    generation = cache.table.spec_generation
    cache.update_node(make_node("n1", labels={"zone": "a"}))
    assert cache.table.spec_generation > generation
    info = cache.node("n1")
    assert info is not None
    assert info.labels == {"zone": "a"}


@pytest.mark.parametrize(
    "changed",
    [
        {"taints": [{"key": "k", "effect": "NoSchedule"}]},
        {"unschedulable": True},
    ],
)
def test_update_node_spec_change_bumps_spec_generation(
    cache: Cache, changed: dict[str, Any]
) -> None:
    generation = cache.table.spec_generation
    cache.update_node(make_node("n1", **changed))
    assert cache.table.spec_generation > generation


def test_update_node_allocatable_only_keeps_spec_generation(cache: Cache) -> None:
    cache.add_pod(make_pod("p1", node="n1"))
    generation = cache.table.spec_generation
    cache.update_node(make_node("n1", cpu="16", memory="32Gi"))
    assert cache.table.spec_generation == generation
    row = cache.table.index["n1"]
    assert int(cache.table.alloc[CPU, row]) == 16_000
    assert int(cache.table.alloc[MEMORY, row]) == 32 * GI
    assert usage(cache, "n1") == (1000, GI, 1)  # usage survives the update


def test_update_node_unschedulable_column(cache: Cache) -> None:
    cache.update_node(make_node("n2", unschedulable=True))
    assert list(cache.table.unschedulable) == [False, True]
    cache.update_node(make_node("n2"))
    assert list(cache.table.unschedulable) == [False, False]


def test_update_of_unknown_node_adds_it_and_add_of_known_node_updates_it(cache: Cache) -> None:
    cache.update_node(make_node("n3", cpu="2"))
    assert cache.table.n == 3
    cache.add_node(make_node("n3", cpu="3"))
    assert cache.table.n == 3
    assert int(cache.table.alloc[CPU, cache.table.index["n3"]]) == 3000


def test_update_node_dropping_a_resource_zeroes_it(cache: Cache) -> None:
    cache.update_node(make_node("n1", **{"ephemeral-storage": "10Gi"}))
    row = cache.table.index["n1"]
    assert int(cache.table.alloc[EPHEMERAL, row]) == 10 * GI
    cache.update_node(make_node("n1"))
    assert int(cache.table.alloc[EPHEMERAL, row]) == 0


def test_add_and_remove_node_bump_spec_generation() -> None:
    cache = Cache()
    g0 = cache.table.spec_generation
    cache.add_node(make_node("a"))
    g1 = cache.table.spec_generation
    cache.remove_node("a")
    assert g0 < g1 < cache.table.spec_generation


def test_host_ports_counted_and_released(cache: Cache) -> None:
    port = ("0.0.0.0", "TCP", 8080)
    row = cache.table.index["n1"]
    first = make_pod("p1", host_port=8080)
    cache.assume(first, "n1")
    assert cache.table.ports[row] == {port: 1}
    cache.add_pod(make_pod("p2", node="n1", host_port=8080))
    assert cache.table.ports[row] == {port: 2}
    cache.forget(first)
    assert cache.table.ports[row] == {port: 1}
    cache.remove_pod(make_pod("p2", node="n1", host_port=8080))
    assert cache.table.ports[row] == {}
    assert cache.table.ports[cache.table.index["n2"]] == {}


def test_host_port_moves_with_the_pod(cache: Cache) -> None:
    cache.assume(make_pod("p1", host_port=9000), "n1")
    cache.add_pod(make_pod("p1", node="n2", host_port=9000))
    assert cache.table.ports[cache.table.index["n1"]] == {}
    assert cache.table.ports[cache.table.index["n2"]] == {("0.0.0.0", "TCP", 9000): 1}


def test_node_with_hugepages_like_every_kubelet_reports_adds_rows() -> None:
    cache = Cache()
    cache.add_pod(make_pod("p1", node="real"))
    # kubelet's allocatable, in the API's (sorted) key order
    cache.add_node(
        make_node(
            "real",
            **{"ephemeral-storage": "100Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0"},
        )
    )
    table = cache.table
    row = table.index["real"]
    assert {"hugepages-1Gi", "hugepages-2Mi"} <= set(table.resource_names)
    assert int(table.alloc[MEMORY, row]) == 8 * GI
    assert int(table.alloc[PODS, row]) == 110
    assert usage(cache, "real") == (1000, GI, 1)


def test_only_nodes_add_resource_rows(cache: Cache) -> None:
    table = cache.table
    rows_before = len(table.resource_names)
    # Pods (assumed, or bound by anyone) naming resources no node has add no row...
    cache.add_pod(make_pod("early", node="n1", **{"nvidia.com/gpu": "2"}))
    cache.assume(make_pod("odd", **{"example.com/made-up": "5"}), "n1")
    assert table.resource_row("nvidia.com/gpu") is None
    assert len(table.resource_names) == rows_before
    # ...but their usage is kept: a node advertising the resource later sees it.
    cache.add_node(make_node("big", **{"nvidia.com/gpu": "8"}))
    gpu = table.resource_row("nvidia.com/gpu")
    assert gpu is not None
    assert table.resource_names[gpu] == "nvidia.com/gpu"
    assert table.alloc.shape[0] == table.requested.shape[0] == gpu + 1
    n1, big = table.index["n1"], table.index["big"]
    assert int(table.alloc[gpu, n1]) == 0
    assert int(table.requested[gpu, n1]) == 2
    assert int(table.free[gpu, n1]) == -2
    assert int(table.alloc[gpu, big]) == 8
    cache.add_pod(make_pod("p1", node="big", **{"nvidia.com/gpu": "2"}))
    cache.assume(make_pod("p2", **{"nvidia.com/gpu": "3"}), "big")
    assert int(table.requested[gpu, big]) == 5
    cache.forget(make_pod("p2"))
    assert int(table.requested[gpu, big]) == 2
    assert int(table.free[gpu, big]) == 6
    # the base resources keep their rows
    assert (table.resource_index["cpu"], table.resource_index["pods"]) == (CPU, PODS)


def test_sums_saturate_and_unwind_exactly(cache: Cache) -> None:
    """Two containers of 4Ei each, on pods bound by anyone: nothing overflows, nothing is
    lost, and removing the pods restores the node exactly."""
    cache.add_node(make_node("dev", **{"example.com/foo": "8"}))
    table = cache.table
    foo = table.resource_row("example.com/foo")
    assert foo is not None
    row = table.index["dev"]
    huge = parse_pod(
        {
            "metadata": {"name": "huge", "namespace": "ns", "uid": "uid-huge"},
            "spec": {
                "nodeName": "dev",
                "containers": [
                    {"name": f"c{i}", "resources": {"requests": {"example.com/foo": "4Ei"}}}
                    for i in range(2)
                ],
            },
        }
    )
    assert huge.requests["example.com/foo"] == MAX_QUANTITY
    pods = [replace(huge, uid=f"uid-huge-{i}", name=f"huge-{i}") for i in range(200)]
    for pod in pods:
        cache.add_pod(pod)
    assert int(table.requested[foo, row]) == MAX_QUANTITY
    assert int(table.free[foo, row]) == 8 - MAX_QUANTITY
    assert int(table.requested[PODS, row]) == 200
    cache.assume(make_pod("small", **{"example.com/foo": "1"}), "dev")
    for pod in pods:
        cache.remove_pod(pod)
    assert int(table.requested[foo, row]) == 1
    assert int(table.free[foo, row]) == 7
    assert int(table.requested[PODS, row]) == 1


def test_table_grows_past_its_capacity() -> None:
    cache = Cache()
    cache.table = type(cache.table)(capacity=2)
    names = [f"n{i}" for i in range(5)]
    for i, name in enumerate(names):
        cache.add_node(make_node(name, cpu=str(i + 1), unschedulable=i == 3))
        cache.add_pod(make_pod(f"p{i}", node=name, cpu=f"{i + 1}00m"))
    assert cache.table.n == 5
    for i, name in enumerate(names):
        row = cache.table.index[name]
        assert int(cache.table.alloc[CPU, row]) == (i + 1) * 1000
        assert usage(cache, name)[0] == (i + 1) * 100
        assert nonzero(cache, name)[0] == (i + 1) * 100
    assert list(cache.table.unschedulable) == [False, False, False, True, False]
