"""Row-at-a-time plugins run through the framework like columnar ones: their per-node
answers become the same masks, messages and scores."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.framework import (
    Code,
    CycleState,
    Handle,
    NoArgs,
    NodeInfo,
    PluginRef,
    PodInfo,
    Registration,
    Registry,
    RowFilterPlugin,
    RowScorePlugin,
    Status,
    default_normalize,
    default_plugins,
    multipoint,
)
from ascheduler.framework.runtime import Framework
from ascheduler.plugins import IN_TREE
from tests.kit import make_cache, node, on, parsed, pod

MAINTENANCE = "example.com/maintenance"


class Maintenance(RowFilterPlugin):
    """Nodes annotated for maintenance reject pods; `drain` ones for good."""

    name = "Maintenance"

    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        mode = node.annotations.get(MAINTENANCE)
        if mode == "drain":
            return Status.unschedulable("node(s) are being drained", resolvable=False)
        if mode:
            return Status.unschedulable("node(s) are in maintenance")
        return Status()


class FewestPods(RowScorePlugin):
    name = "FewestPods"

    def score_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return len(node.pods)

    def normalize(self, state: CycleState, pod: PodInfo, scores: Any) -> Any:
        return default_normalize(scores, reverse=True)


class Broken(RowFilterPlugin):
    name = "Broken"

    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        return Status.error("cannot read the node's inventory")


def framework(cache: Any, *plugins: Any, only: bool = False) -> Framework:
    registry = Registry(
        [*IN_TREE.values(), *(Registration(p.name, lambda a, h, p=p: p, NoArgs) for p in plugins)]
    )
    refs = [PluginRef(p.name) for p in plugins]
    base = [
        r
        for r in default_plugins(IN_TREE)
        if not only or r.name in ("PrioritySort", "DefaultBinder")
    ]
    return Framework(
        multipoint("x", (*base, *refs)),
        registry,
        Handle(nodes=cache.table, storage=cache.storage, attachments=cache.attachments),
    )


def annotated(name: str, value: str | None) -> dict[str, Any]:
    raw = node(name)
    if value is not None:
        raw["metadata"]["annotations"] = {MAINTENANCE: value}
    return raw


def test_a_row_filter_rejects_node_by_node_with_kube_schedulers_message() -> None:
    cache = make_cache([annotated("a", "true"), annotated("b", "drain"), annotated("c", "true")])
    fw = framework(cache, Maintenance())
    result = fw.find_nodes(CycleState(), parsed(pod(cpu="100m")), cache.table)
    assert result.node is None
    assert result.status.message == (
        "0/3 nodes are available: 1 node(s) are being drained, 2 node(s) are in maintenance. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    assert result.diagnosis is not None
    statuses = result.diagnosis.statuses(cache.table.names)
    assert statuses["b"].code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert statuses["a"].code is Code.UNSCHEDULABLE
    assert statuses["a"].plugin == "Maintenance"


def test_a_row_filter_lets_the_other_nodes_through() -> None:
    cache = make_cache([annotated("a", "true"), annotated("b", None)])
    fw = framework(cache, Maintenance())
    assert fw.find_nodes(CycleState(), parsed(pod(cpu="100m")), cache.table).node == "b"


def test_a_row_score_sees_each_nodes_pods() -> None:
    busy = [on("busy", pod(f"p{i}", cpu="10m")) for i in range(3)]
    cache = make_cache([node("busy"), node("idle")], busy)
    fw = framework(cache, FewestPods(), only=True)
    result = fw.find_nodes(CycleState(), parsed(pod("new", cpu="10m")), cache.table)
    assert result.node == "idle"


def test_node_info_reads_the_row() -> None:
    cache = make_cache([node("n", cpu="4")], [on("n", pod("a", cpu="1500m"))])
    info = NodeInfo(cache.table, cache.table.index["n"])
    assert (info.name, info.allocatable("cpu"), info.requested("cpu"), info.free("cpu")) == (
        "n",
        4000,
        1500,
        2500,
    )
    assert [p.name for p in info.pods.values()] == ["a"]
    assert info.requested("pods") == 1
    assert info.requested("example.com/none") == 0


def test_an_error_from_a_row_filter_fails_the_attempt() -> None:
    cache = make_cache([node("a")])
    fw = framework(cache, Broken())
    with pytest.raises(RuntimeError, match="cannot read the node's inventory"):
        fw.find_nodes(CycleState(), parsed(pod(cpu="100m")), cache.table)
