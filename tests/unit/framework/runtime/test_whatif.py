"""Filters asked about one node as it would be with some pods gone and others added (what
preemption and nominated pods need) answer exactly as the columnar Filter does on a cluster
where that really happened."""

from __future__ import annotations

import random
from typing import Any

from ascheduler.cache import Cache
from ascheduler.framework import CycleState, Handle, NodeInfo, RowFilterPlugin, Status
from ascheduler.framework.profile import multipoint
from ascheduler.framework.runtime import Framework
from ascheduler.framework.runtime.outcomes import ScheduleResult
from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.plugins import IN_TREE
from tests.kit import node, on, pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def _nodes(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for i in range(rng.randint(2, 7)):
        labels = {HOST: f"n{i}"}
        if rng.random() < 0.85:
            labels[ZONE] = f"z{rng.randint(0, 2)}"
        out.append(
            node(
                f"n{i}", cpu=str(rng.choice([1, 2, 4])), pods=str(rng.randint(2, 6)), labels=labels
            )
        )
    return out


def _pod(rng: random.Random, name: str) -> dict[str, Any]:
    app = rng.choice("ab")
    spec: dict[str, Any] = {}
    if rng.random() < 0.3:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": rng.randint(1, 2),
                "topologyKey": rng.choice([ZONE, HOST]),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": rng.choice("ab")}},
                **({"minDomains": rng.randint(1, 4)} if rng.random() < 0.3 else {}),
            }
        ]
    terms: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.25:
            terms[kind] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": rng.choice("ab")}},
                        "topologyKey": rng.choice([ZONE, HOST]),
                    }
                ]
            }
    if terms:
        spec["affinity"] = terms
    return pod(
        name,
        cpu=f"{rng.choice([100, 500, 900])}m",
        labels={"app": app},
        host_port=rng.choice([None, None, None, 8080]),
        **spec,
    )


def _cache(nodes: list[dict[str, Any]], pods: list[PodInfo]) -> Cache:
    cache = Cache()
    for raw in nodes:
        cache.add_node(parse_node(raw))
    for info in pods:
        cache.add_pod(info)
    return cache


def _verdict(
    cache: Cache, incoming: PodInfo, name: str, skipped: set[str]
) -> tuple[bool, str, tuple[str, ...]]:
    """The columnar Filter's verdict on node `name` (its first rejecting plugin's reasons),
    leaving out the plugins whose PreFilter skipped them on the cluster before the change:
    as in kube-scheduler, a PreFilter's Skip holds for the whole cycle."""
    fw = Framework(multipoint("s"), IN_TREE, Handle(nodes=cache.table, objects=cache.objects))
    filtered = fw._filter(CycleState(), incoming, cache.table)
    if isinstance(filtered, ScheduleResult):
        assert filtered.diagnosis is not None
        applied = list(filtered.diagnosis.filtered)
    else:
        applied = filtered.applied
    kept = [(plugin, result) for plugin, result in applied if plugin not in skipped]
    status = fw._diagnose(cache.table.n, None, [], kept).statuses(cache.table.names).get(name)
    if status is None:
        return (True, "", ())
    return (False, status.plugin, tuple(sorted(status.reasons)))


def _what_if(
    cache: Cache, incoming: PodInfo, name: str, removed: list[PodInfo], added: list[PodInfo]
) -> tuple[bool, str, tuple[str, ...]]:
    fw = Framework(multipoint("s"), IN_TREE, Handle(nodes=cache.table, objects=cache.objects))
    state = CycleState()
    filtered = fw._filter(state, incoming, cache.table)
    if isinstance(filtered, ScheduleResult):
        assert filtered.diagnosis is not None
        recorded = filtered.diagnosis.filtered
    else:
        recorded = filtered.applied
    row = cache.table.index[name]
    status = fw.filter_what_if(state, incoming, cache.table, row, recorded, removed, added)
    return (status.ok, status.plugin, tuple(sorted(status.reasons)))


def test_what_if_agrees_with_the_columnar_filter_on_the_changed_cluster() -> None:
    rng = random.Random(5)
    checked = rejected = 0
    for trial in range(400):
        nodes = _nodes(rng)
        names = [n["metadata"]["name"] for n in nodes]
        placed = [
            parse_pod(on(rng.choice(names), _pod(rng, f"p{j}"))) for j in range(rng.randint(0, 12))
        ]
        incoming = parse_pod(_pod(rng, "incoming"))
        target = rng.choice(names)
        here = [p for p in placed if p.node_name == target]
        removed = [p for p in here if rng.random() < 0.6]
        added = [
            parse_pod(on(target, _pod(rng, f"extra{k}"))) for k in range(rng.choice([0, 0, 1, 2]))
        ]
        before = _cache(nodes, placed)
        pre_state = CycleState()
        fw = Framework(multipoint("s"), IN_TREE, Handle(nodes=before.table, objects=before.objects))
        prefiltered = fw._filter(pre_state, incoming, before.table)
        if isinstance(prefiltered, ScheduleResult) and (
            prefiltered.diagnosis is None or prefiltered.diagnosis.prefilter_status is not None
        ):
            continue  # rejected by a PreFilter: no per-node verdict to compare
        got = _what_if(before, incoming, target, removed, added)
        gone = {p.uid for p in removed}
        after = _cache(nodes, [p for p in placed if p.uid not in gone] + added)
        want = _verdict(after, incoming, target, pre_state.skip_filter)
        assert got == want, (trial, target, [p.name for p in removed], [p.name for p in added])
        checked += 1
        rejected += not want[0]
    # The generator exercises both outcomes, not just one.
    assert checked > 300, checked
    assert 50 < rejected < checked - 50, (checked, rejected)


class _CountsPods(RowFilterPlugin):
    name = "CountsPods"

    def filter_node(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        if len(node.pods) >= 2 or node.requested("pods") >= 2:
            return Status.unschedulable("node(s) are crowded")
        return Status()


def test_a_row_filter_sees_the_node_as_it_would_be() -> None:
    cache = _cache(
        [node("a")], [parse_pod(on("a", pod("x", cpu="1"))), parse_pod(on("a", pod("y", cpu="1")))]
    )
    plugin = _CountsPods()
    x = next(p for p in cache.table.pods(0).values() if p.name == "x")
    incoming = parse_pod(pod("p"))
    assert not plugin.filter_what_if(CycleState(), incoming, cache.table, 0, [], []).ok
    assert plugin.filter_what_if(CycleState(), incoming, cache.table, 0, [x], []).ok
