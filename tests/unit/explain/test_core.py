"""Explain's dry run: rejected nodes grouped by verdict with the facts behind each, scores of
the feasible nodes, preemption's victims (nothing evicted), what-if capacity, and what each
HTTP extender's filter, prioritize and preempt verbs said."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from ascheduler.cache import Cache
from ascheduler.explain.core import capacity, explain, explain_with_extenders
from ascheduler.explain.render import render, table
from ascheduler.features import SUPPORTED, Features, Release
from ascheduler.framework import CycleState, Handle, Registry, default_plugins, multipoint
from ascheduler.framework.args import decode
from ascheduler.framework.extender import ExtenderConfig, Extenders
from ascheduler.framework.runtime import Framework
from ascheduler.model import PodInfo
from ascheduler.plugins import IN_TREE
from tests.kit import expr, make_cache, node, on, parsed, pod, term
from tests.kit.http import serve

TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}


def framework(
    cache: Cache, name: str = "default-scheduler", features: Features | None = None
) -> Framework:
    """The default profile at `features`' release (the default release's when None)."""
    gates = features or Features.defaults()
    handle = Handle(
        nodes=cache.table, storage=cache.storage, attachments=cache.attachments, features=gates
    )
    profile = multipoint(name, default_plugins(IN_TREE, gates))
    return Framework(profile, Registry(IN_TREE.values()), handle)


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


@pytest.mark.parametrize("release", SUPPORTED, ids=str)
def test_totals_include_taint_toleration_without_taints(release: Release) -> None:
    """kube-scheduler never skips TaintToleration's PreScore: on untainted nodes every node
    gets 100 x 3, and explain's totals (what /debug shows too) are kube-scheduler's. From
    1.37 (StorageCapacityScoring on) VolumeBinding scores too, 0 for a pod without claims."""
    cache = make_cache([node("a", cpu="4"), node("b", cpu="16")])
    fw = framework(cache, features=Features.defaults(release))
    exp = explain(fw, parsed(pod("p", cpu="1")), cache.table)
    for score in exp.scores:
        assert score.plugins["TaintToleration"] == (100, 300)
        assert score.total == sum(weighted for _, weighted in score.plugins.values())
        assert score.total >= 300
    scored = {
        "TaintToleration",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DynamicResources",
    }
    if release >= Release(1, 37):
        scored.add("VolumeBinding")
        assert all(s.plugins["VolumeBinding"] == (0, 0) for s in exp.scores)
    assert set(exp.scores[0].plugins) == scored


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
    fw.handle.set_evictor(evictor)
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


# -- HTTP extenders ------------------------------------------------------------------------


class FakeExtender:
    """An extender on a free port: fails `failed` nodes, fails `hopeless` ones for good,
    scores the rest from `scores`, and keeps preemption off `refused` nodes."""

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.hopeless: dict[str, str] = {}
        self.scores: dict[str, int] = {}
        self.refused: set[str] = set()
        self.status = 200
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        if self.status != 200:
            return web.Response(status=self.status)
        verb = request.match_info["verb"]
        body = await request.json()
        if verb == "preempt":
            meta = body["NodeNameToMetaVictims"]
            kept = {n: v for n, v in meta.items() if n not in self.refused}
            return web.json_response({"NodeNameToMetaVictims": kept})
        names = body["NodeNames"]
        if verb == "filter":
            out = {n: r for n, r in self.failed.items() if n in names}
            gone = {n: r for n, r in self.hopeless.items() if n in names}
            keep = [n for n in names if n not in out and n not in gone]
            return web.json_response(
                {"NodeNames": keep, "FailedNodes": out, "FailedAndUnresolvableNodes": gone}
            )
        return web.json_response([{"Host": n, "Score": self.scores.get(n, 0)} for n in names])


@pytest.fixture
async def extender() -> AsyncIterator[FakeExtender]:
    ext = FakeExtender()
    async with serve("/ext/{verb}", ext.handle) as base:
        ext.url = f"{base}/ext"
        yield ext


@contextlib.asynccontextmanager
async def with_extender(
    cache: Cache, extender: FakeExtender, **fields: Any
) -> AsyncIterator[Framework]:
    fw = framework(cache)
    settings = {"urlPrefix": extender.url, "nodeCacheCapable": True, **fields}
    fw.extenders = Extenders([decode(ExtenderConfig, settings, "extenders[0]")])
    try:
        yield fw
    finally:
        await fw.extenders.close()


async def test_each_extender_s_filter_and_prioritize_are_shown_per_node(
    extender: FakeExtender,
) -> None:
    cache = make_cache([node(n) for n in ("a", "b", "c", "d")])
    extender.failed = {"b": "node(s) had no free device"}
    extender.hopeless = {"c": "node(s) are in the wrong rack"}
    extender.scores = {"a": 3, "d": 7}
    p = parsed(pod("web", cpu="1"))
    plain = explain(framework(cache), p, cache.table)
    async with with_extender(
        cache, extender, filterVerb="filter", prioritizeVerb="prioritize", weight=2
    ) as fw:
        exp = await explain_with_extenders(fw, p, cache.table)
    assert exp.feasible == 2
    assert exp.best == ["d"]
    plugin_total = {s.name: s.total for s in plain.scores}
    by_node = {s.name: s for s in exp.scores}
    # Weighted as kube-scheduler does: score x weight x (100 / 10), added to the total.
    assert by_node["a"].extenders == {extender.url: (3, 60)}
    assert by_node["d"].extenders == {extender.url: (7, 140)}
    assert by_node["d"].total == plugin_total["d"] + 140
    assert by_node["a"].total == plugin_total["a"] + 60
    name = f"Extender {extender.url}"
    assert groups(exp) == {
        (name, ("node(s) had no free device",), "Unschedulable"): {"b": ()},
        (name, ("node(s) are in the wrong rack",), "UnschedulableAndUnresolvable"): {"c": ()},
    }
    (said,) = exp.to_dict()["extenders"]
    assert said["filter"] == {
        "sent": 4,
        "passed": 2,
        "passedNodes": ["a", "d"],
        "failed": {"b": "node(s) had no free device"},
        "failedAndUnresolvable": {"c": "node(s) are in the wrong rack"},
        "error": "",
    }
    assert said["prioritize"]["scores"]["d"] == {"score": 7, "weighted": 140}
    assert exp.to_dict()["scores"]["nodes"][0]["extenders"] == {
        extender.url: {"score": 7, "weighted": 140}
    }
    text = table(exp)
    assert "ext1x2" in text
    assert f"ext1 {extender.url}" in text
    assert "filter: 4 node(s) sent, 2 passed, 2 failed" in text
    assert f"{name}: node(s) had no free device" in text
    assert json.loads(render(exp.to_dict(), "json"))["extenders"][0]["name"] == extender.url


async def test_nodes_the_extenders_all_turn_away_give_the_scheduler_s_message(
    extender: FakeExtender,
) -> None:
    cache = make_cache([node(n) for n in ("a", "b")])
    extender.failed = {"a": "node(s) had no free device"}
    extender.hopeless = {"b": "node(s) are in the wrong rack"}
    p = parsed(pod("web", cpu="1"))
    async with with_extender(cache, extender, filterVerb="filter") as fw:
        exp = await explain_with_extenders(fw, p, cache.table)
        result = await fw.find_nodes_with_extenders(CycleState(), p, cache.table)
    assert not exp.schedulable
    assert exp.message == result.status.message
    assert "1 node(s) had no free device" in exp.message
    assert [g.count for g in exp.rejected] == [1, 1]


async def test_an_ignorable_extender_that_fails_is_shown_and_skipped(
    extender: FakeExtender,
) -> None:
    cache = make_cache([node(n) for n in ("a", "b")])
    extender.status = 503
    p = parsed(pod("web", cpu="1"))
    async with with_extender(
        cache,
        extender,
        filterVerb="filter",
        prioritizeVerb="prioritize",
        weight=1,
        ignorable=True,
    ) as fw:
        exp = await explain_with_extenders(fw, p, cache.table)
    assert exp.feasible == 2
    (said,) = exp.extenders
    assert "code 503" in said.filter_error
    assert "code 503" in said.prioritize_error
    assert all(s.extenders == {} for s in exp.scores)
    text = table(exp)
    assert "filter failed (skipped)" in text
    assert "prioritize failed (ignored)" in text


async def test_preemption_shown_is_the_one_the_preempt_verb_leaves(
    extender: FakeExtender,
) -> None:
    cache = make_cache(
        [node("a", cpu="1"), node("b", cpu="1")],
        [
            on("a", pod("cheap", cpu="1", priority=1)),
            on("b", pod("dear", cpu="1", priority=5)),
        ],
    )
    p = parsed(pod("vip", cpu="1", priority=100))
    assert explain(framework(cache), p, cache.table).preemption.node == "a"  # type: ignore[union-attr]
    extender.refused = {"a"}
    async with with_extender(cache, extender, preemptVerb="preempt") as fw:
        exp = await explain_with_extenders(fw, p, cache.table)
    assert exp.preemption is not None
    assert exp.preemption.node == "b"
    assert [v.name for v in exp.preemption.victims] == ["dear"]
    assert cache.table.pods(cache.table.index["a"])  # nothing evicted


async def test_an_extender_the_pod_is_no_business_of_is_shown_as_not_asked(
    extender: FakeExtender,
) -> None:
    cache = make_cache([node(n) for n in ("a", "b")])
    extender.failed = {"a": "node(s) had no free device"}
    p = parsed(pod("web", cpu="1"))
    managed = [{"name": "example.com/gpu"}]
    async with with_extender(cache, extender, filterVerb="filter", managedResources=managed) as fw:
        exp = await explain_with_extenders(fw, p, cache.table)
    assert exp.feasible == 2  # never asked, so "a" was not failed
    (said,) = exp.to_dict()["extenders"]
    assert said["interested"] is False
    assert said["filter"] is None
    assert "not asked: the pod asks for none of its managedResources" in table(exp)
