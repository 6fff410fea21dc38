"""Explain's dry run: rejected nodes grouped by verdict with the facts behind each, scores of
the feasible nodes, preemption's victims (nothing evicted), and what-if capacity."""

from __future__ import annotations

from typing import Any

from ascheduler.cache import Cache
from ascheduler.explain.core import capacity, explain
from ascheduler.explain.render import render, table
from ascheduler.framework import (
    CycleState,
    Framework,
    Handle,
    Registry,
    default_plugins,
    multipoint,
)
from ascheduler.model import PodInfo
from ascheduler.plugins import IN_TREE
from ascheduler.plugins.defaultpreemption import DefaultPreemption
from tests.kit import expr, make_cache, node, on, parsed, pod, term

TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


def framework(cache: Cache, name: str = "default-scheduler") -> Framework:
    handle = Handle(nodes=cache.table, storage=cache.storage, attachments=cache.attachments)
    return Framework(multipoint(name, default_plugins(IN_TREE)), Registry(IN_TREE.values()), handle)


def groups(exp: Any) -> dict[tuple[str, tuple[str, ...], str], dict[str, tuple[str, ...]]]:
    return {
        (g.plugin, g.reasons, g.code): {v.name: v.details for v in g.nodes} for g in exp.rejected
    }


def test_rejected_nodes_are_grouped_by_first_filter_with_their_numbers() -> None:
    cache = make_cache(
        [
            node("busy", cpu="4"),
            node("small", cpu="2"),
            node("infra-1", taints=[TAINT]),
            node("infra-2", taints=[TAINT]),
            node("free", cpu="8"),
        ],
        [on("busy", pod("hog", cpu="2800m"))],
    )
    fw = framework(cache)
    exp = explain(fw, parsed(pod("web", cpu="3", scheduler_name="default-scheduler")), cache.table)
    assert exp.message == ""
    assert exp.best == ["free"]
    got = groups(exp)
    assert got[
        ("TaintToleration", ("node(s) had untolerated taint(s)",), "UnschedulableAndUnresolvable")
    ] == {
        "infra-1": ("taint dedicated=infra:NoSchedule not tolerated",),
        "infra-2": ("taint dedicated=infra:NoSchedule not tolerated",),
    }
    # Room could be made on busy (preemption), never on small: two verdicts.
    assert got[("NodeResourcesFit", ("Insufficient cpu",), "Unschedulable")] == {
        "busy": ("cpu: requested 3, free 1.2 of 4",)
    }
    assert got[("NodeResourcesFit", ("Insufficient cpu",), "UnschedulableAndUnresolvable")] == {
        "small": ("cpu: requested 3, free 2 of 2",)
    }
    assert [g.count for g in exp.rejected] == [2, 1, 1]


def test_the_message_is_the_scheduler_s_and_groups_count_as_it_does() -> None:
    cache = make_cache([node(f"n{i}", cpu="1") for i in range(5)] + [node("t", taints=[TAINT])])
    fw = framework(cache)
    p = parsed(pod("big", cpu="2", memory="1Gi"))
    exp = explain(fw, p, cache.table, limit=2)
    result = fw.find_nodes(CycleState(), p, cache.table)
    assert exp.message == result.status.message
    assert exp.message.startswith("0/6 nodes are available: 1 node(s) had untolerated taint(s)")
    fit = next(g for g in exp.rejected if g.plugin == "NodeResourcesFit")
    assert fit.count == 5
    assert [v.name for v in fit.nodes] == ["n0", "n1"]
    assert fit.code == "UnschedulableAndUnresolvable"  # 2 cpus exceed every 1-cpu node
    assert not exp.best
    assert exp.feasible == 0


def test_scores_rank_feasible_nodes_and_name_the_runner_up() -> None:
    cache = make_cache(
        [node("a", cpu="4"), node("b", cpu="4"), node("c", cpu="16")],
        [on("a", pod("x", cpu="3"))],
    )
    fw = framework(cache)
    exp = explain(fw, parsed(pod("p", cpu="1")), cache.table)
    assert exp.best == ["c"]
    assert next(s.name for s in exp.scores) == "c"
    totals = {s.name: s.total for s in exp.scores}
    assert totals["c"] > totals["b"] > totals["a"]
    assert exp.runner_up is not None
    assert exp.runner_up.name == "b"
    parts = exp.scores[0].plugins
    assert sum(weighted for _, weighted in parts.values()) == exp.scores[0].total
    assert all(w == raw * exp.weights[name] for name, (raw, w) in parts.items())
    assert "NodeResourcesFit" in parts
    data = exp.to_dict()
    assert data["chosen"] == "c"
    assert data["runnerUp"]["behindBy"] == totals["c"] - totals["b"]


def test_totals_include_taint_toleration_without_taints() -> None:
    """kube-scheduler never skips TaintToleration's PreScore: on untainted nodes every node
    gets 100 x 3, and explain's totals (what /debug shows too) are kube-scheduler's."""
    cache = make_cache([node("a", cpu="4"), node("b", cpu="16")])
    exp = explain(framework(cache), parsed(pod("p", cpu="1")), cache.table)
    for score in exp.scores:
        assert score.plugins["TaintToleration"] == (100, 300)
        assert score.total == sum(weighted for _, weighted in score.plugins.values())
        assert score.total >= 300
    assert set(exp.scores[0].plugins) == {
        "TaintToleration",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DynamicResources",
    }


def test_ties_are_reported_not_broken() -> None:
    cache = make_cache([node("a"), node("b")])
    exp = explain(framework(cache), parsed(pod("p", cpu="1")), cache.table)
    assert exp.best == ["a", "b"]
    assert exp.to_dict()["chosen"] == ""
    assert "a tie" in table(exp)


def test_node_affinity_ports_and_anti_affinity_say_what_is_in_the_way() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    cache = make_cache(
        [
            node("a", labels={"kubernetes.io/hostname": "a", "zone": "z1"}),
            node("b", labels={"kubernetes.io/hostname": "b", "zone": "z2"}),
            node("c", labels={"kubernetes.io/hostname": "c", "zone": "z2"}),
        ],
        [
            on("b", pod("db-0", labels={"app": "db"})),
            on("c", pod("proxy", host_port=8080)),
        ],
    )
    raw = pod(
        "db-1",
        labels={"app": "db"},
        host_port=8080,
        required=[term(expr("zone", "In", "z2"))],
    )
    raw["spec"]["affinity"].update(anti)
    p = parsed(raw)
    exp = explain(framework(cache), p, cache.table)
    got = {v.name: v.details for g in exp.rejected for v in g.nodes}
    assert got["a"] == ("none of the 1 required nodeSelectorTerm(s) matches (node has zone=z1)",)
    assert got["b"] == ("anti-affinity with pod default/db-0 in kubernetes.io/hostname=b",)
    assert got["c"] == ("host port 0.0.0.0:8080/TCP in use by pod default/proxy",)


def test_topology_spread_gives_the_skew() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    cache = make_cache(
        [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})],
        [on("a", pod("w1", labels={"app": "w"})), on("a", pod("w2", labels={"app": "w"}))],
    )
    p = parsed(pod("w3", labels={"app": "w"}, topologySpreadConstraints=spread))
    exp = explain(framework(cache), p, cache.table)
    assert exp.best == ["b"]
    (group,) = exp.rejected
    assert group.plugin == "PodTopologySpread"
    assert group.nodes[0].details == (
        "zone=z1: 2 matching pod(s), the fewest in a domain 0; one more makes skew 3 > maxSkew 1",
    )


class _Evictor:
    def __init__(self) -> None:
        self.started: list[str] = []

    def start(self, preemptor: PodInfo, node: str, victims: Any) -> None:
        self.started.append(node)

    def running(self, uid: str) -> bool:
        return False


def test_preemption_names_its_victims_and_evicts_none() -> None:
    cache = make_cache(
        [node("a", cpu="2"), node("b", cpu="2")],
        [
            on("a", pod("low", cpu="2", priority=0)),
            on("b", pod("mid", cpu="2", priority=50)),
        ],
    )
    fw = framework(cache)
    evictor = _Evictor()
    for plugin in fw.post_filter_plugins:
        if isinstance(plugin, DefaultPreemption):
            plugin.evictor = evictor
    exp = explain(fw, parsed(pod("vip", cpu="2", priority=100)), cache.table)
    assert exp.preemption is not None
    assert exp.preemption.node == "a"
    assert [v.name for v in exp.preemption.victims] == ["low"]
    assert evictor.started == []
    assert exp.to_dict()["preemption"]["victims"] == [
        {"namespace": "default", "name": "low", "priority": 0}
    ]


def test_capacity_places_copies_until_the_next_does_not_fit() -> None:
    cache = make_cache([node("a", cpu="4"), node("b", cpu="2")], [on("b", pod("x", cpu="1"))])
    fw = framework(cache)
    cap = capacity(fw, cache, parsed(pod("w", cpu="1")), 10)
    assert len(cap.placed) == 5
    assert cap.per_node == {"a": 4, "b": 1}
    assert cap.stopped == "0/2 nodes are available: 2 Insufficient cpu."
    assert cap.to_dict()["fit"] == 5


def test_invalid_and_gated_pods_are_said_to_be() -> None:
    cache = make_cache([node("a")])
    fw = framework(cache)
    gated = explain(fw, parsed(pod("g", gates=["example.com/wait"])), cache.table)
    assert gated.held == "scheduling gates: example.com/wait"
    bad = pod("bad")
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    from ascheduler.model import parse_pod

    invalid = explain(fw, parse_pod(bad), cache.table)
    assert invalid.reason == "SchedulerError"
    assert invalid.message.startswith("invalid pod default/bad:")


def test_json_and_yaml_carry_the_same_document() -> None:
    import json

    import yaml

    cache = make_cache([node("a", cpu="1")])
    exp = explain(framework(cache), parsed(pod("p", cpu="2")), cache.table)
    data = exp.to_dict()
    assert json.loads(render(data, "json")) == data
    assert yaml.safe_load(render(data, "yaml")) == data
    assert data["kind"] == "Explanation"
    assert data["schedulable"] is False
    assert data["rejected"][0]["nodes"][0]["details"] == ["cpu: requested 2, free 1 of 1"]
