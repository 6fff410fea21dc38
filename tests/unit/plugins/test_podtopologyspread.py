"""PodTopologySpread: the skew filter over eligible domains (minDomains, inclusion policies,
nodes missing the key, pods of other namespaces or being deleted not counted), the spread
score with kube-scheduler's log weights and normalisation, and the default constraints."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.framework import Code
from ascheduler.model import parse_pod
from ascheduler.model.objects import parse_namespace, parse_selecting
from tests.kit import (
    make_cache,
    make_plugin,
    node,
    on,
    pod,
    rejected_reasons,
    rejection_codes,
    run_filter,
    run_score,
)

NAME = "PodTopologySpread"
REASON = "node(s) didn't match pod topology spread constraints"
MISSING = REASON + " (missing required label)"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
FOO = {"foo": "x"}


def zoned(name: str, zone: str | None, **kw: Any) -> dict[str, Any]:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    labels.update(kw.pop("labels", {}))
    return node(name, labels=labels, **kw)


def spread(
    key: str = ZONE,
    max_skew: int = 1,
    action: str = "DoNotSchedule",
    selector: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "maxSkew": max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": action,
        "labelSelector": selector if selector is not None else {"matchLabels": FOO},
        **extra,
    }


def placed(name: str, where: str, labels: dict[str, str] = FOO, **kw: Any) -> dict[str, Any]:
    return on(where, pod(name, labels=labels, **kw))


NODES = [zoned("a", "z1"), zoned("b", "z1"), zoned("x", "z2"), zoned("y", "z2")]
# z1 holds 3 matching pods, z2 one.
EXISTING = [placed("p1", "a"), placed("p2", "a"), placed("p3", "b"), placed("p4", "x")]


def filtered(nodes: list[Any], pods: list[Any], incoming: dict[str, Any]) -> dict[str, list[str]]:
    cache = make_cache(nodes, pods)
    return rejected_reasons(run_filter(make_plugin(NAME, cache), incoming, cache), cache)


def test_skew_rejects_the_crowded_domain() -> None:
    incoming = pod("new", labels=FOO, topologySpreadConstraints=[spread()])
    assert filtered(NODES, EXISTING, incoming) == {"a": [REASON], "b": [REASON]}


def test_a_pod_that_does_not_match_its_own_selector_adds_nothing() -> None:
    incoming = pod("new", labels={}, topologySpreadConstraints=[spread(max_skew=2)])
    # z1: 3 + 0 - 1 = 2 <= 2.
    assert filtered(NODES, EXISTING, incoming) == {}


def test_min_domains_counts_the_minimum_as_zero_while_domains_are_missing() -> None:
    incoming = pod("new", labels=FOO, topologySpreadConstraints=[spread(minDomains=3)])
    # Only 2 domains: the minimum is 0, so z2 (1 + 1 - 0 = 2) fails too.
    assert set(filtered(NODES, EXISTING, incoming)) == {"a", "b", "x", "y"}
    enough = pod("new", labels=FOO, topologySpreadConstraints=[spread(minDomains=2)])
    assert set(filtered(NODES, EXISTING, enough)) == {"a", "b"}


def test_a_node_without_the_key_is_unresolvable() -> None:
    nodes = [*NODES, zoned("bare", None)]
    cache = make_cache(nodes, EXISTING)
    incoming = pod("new", labels=FOO, topologySpreadConstraints=[spread()])
    result = run_filter(make_plugin(NAME, cache), incoming, cache)
    assert rejected_reasons(result, cache)["bare"] == [MISSING]
    codes = rejection_codes(result, cache)
    assert codes[("bare", MISSING)] is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert codes[("a", REASON)] is Code.UNSCHEDULABLE


def test_node_affinity_policy_honor_leaves_excluded_nodes_out_of_the_domains() -> None:
    only_z1 = {"nodeSelector": {ZONE: "z1"}}
    honor = pod("new", labels=FOO, topologySpreadConstraints=[spread()], **only_z1)
    # Only z1 is eligible: its minimum is its own count (3), so z1 nodes pass.
    assert filtered(NODES, EXISTING, honor) == {}
    ignore = pod(
        "new",
        labels=FOO,
        topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")],
        **only_z1,
    )
    assert set(filtered(NODES, EXISTING, ignore)) == {"a", "b"}


def test_node_taints_policy_honor_leaves_tainted_nodes_out() -> None:
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("x", "z2", taints=[taint])]
    pods = [placed("p1", "a"), placed("p2", "b")]
    ignore = pod("new", labels=FOO, topologySpreadConstraints=[spread()])
    # z2 (empty) is the minimum: z1 at 1 + 1 - 0 = 2 fails.
    assert set(filtered(nodes, pods, ignore)) == {"a", "b"}
    honor = pod("new", labels=FOO, topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")])
    # z2's only node is tainted and not tolerated: z1 alone, minimum 1: 1 + 1 - 1 = 1.
    assert filtered(nodes, pods, honor) == {}


def test_pods_being_deleted_or_in_other_namespaces_are_not_counted() -> None:
    gone = {**placed("p5", "x"), "metadata": {}}
    gone["metadata"] = {
        "name": "p5",
        "namespace": "default",
        "uid": "uid-p5",
        "labels": FOO,
        "deletionTimestamp": "2026-01-01T00:00:00Z",
    }
    pods = [*EXISTING, gone, placed("q1", "y", namespace="other"), placed("q2", "y", namespace="o")]
    incoming = pod("new", labels=FOO, topologySpreadConstraints=[spread()])
    assert filtered(NODES, pods, incoming) == {"a": [REASON], "b": [REASON]}


def test_match_label_keys_narrow_the_selector_to_the_pod_s_own_values() -> None:
    v1 = {"foo": "x", "rev": "1"}
    v2 = {"foo": "x", "rev": "2"}
    pods = [placed("p1", "a", v1), placed("p2", "b", v1), placed("p3", "x", v2)]
    plain = pod("new", labels=v2, topologySpreadConstraints=[spread()])
    assert set(filtered(NODES, pods, plain)) == {"a", "b"}
    keyed = pod("new", labels=v2, topologySpreadConstraints=[spread(matchLabelKeys=["rev"])])
    # Only rev=2 pods count: z2 has 1, z1 none; z2 at 1 + 1 - 0 = 2 fails.
    assert set(filtered(NODES, pods, keyed)) == {"x", "y"}


def test_constraints_are_checked_in_order_one_reason_per_node() -> None:
    nodes = [*NODES, node("nohost", labels={ZONE: "z2"})]
    both = [spread(), spread(key=HOST)]
    incoming = pod("new", labels=FOO, topologySpreadConstraints=both)
    got = filtered(nodes, EXISTING, incoming)
    # a and b fail the zone constraint first; nohost has the zone but not the hostname key.
    assert got == {"a": [REASON], "b": [REASON], "nohost": [MISSING], "x": [REASON]}


def test_schedule_anyway_does_not_filter() -> None:
    incoming = pod("new", labels=FOO, topologySpreadConstraints=[spread(action="ScheduleAnyway")])
    assert filtered(NODES, EXISTING, incoming) == {}


# -- scoring ---------------------------------------------------------------------------------


def scored(
    nodes: list[Any], pods: list[Any], incoming: dict[str, Any], **kw: Any
) -> dict[str, int] | None:
    cache = make_cache(nodes, pods)
    return run_score(make_plugin(NAME, cache), incoming, cache, **kw)


def test_hostname_score_prefers_the_emptiest_node() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")]
    pods = [placed("p1", "a"), placed("p2", "a"), placed("p3", "b")]
    c = [spread(key=HOST, action="ScheduleAnyway")]
    # weight ln(5): raw a = round(2 * 1.609) = 3, b = 2, c = 0; normalised 100 * (3 + 0 - s) / 3.
    assert scored(nodes, pods, pod("new", labels=FOO, topologySpreadConstraints=c)) == {
        "a": 0,
        "b": 33,
        "c": 100,
    }


def test_zone_score_counts_the_whole_domain() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")]
    pods = [placed("p1", "a"), placed("p2", "b"), placed("p3", "c")]
    c = [spread(action="ScheduleAnyway")]
    # weight ln(4): z1 = round(2 * 1.386) = 3, z2 = 1; 100 * (3 + 1 - s) / 3.
    assert scored(nodes, pods, pod("new", labels=FOO, topologySpreadConstraints=c)) == {
        "a": 33,
        "b": 33,
        "c": 100,
    }


def test_max_skew_shifts_raw_scores() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2")]
    pods = [placed("p1", "a")]
    c = [spread(action="ScheduleAnyway", max_skew=3)]
    # weight ln(4): a = round(1.386 + 2) = 3, b = 2; 100 * (3 + 2 - s) / 3.
    assert scored(nodes, pods, pod("new", labels=FOO, topologySpreadConstraints=c)) == {
        "a": 66,
        "b": 100,
    }


def test_nodes_missing_a_key_score_zero() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2"), zoned("bare", None)]
    pods = [placed("p1", "a")]
    c = [spread(action="ScheduleAnyway")]
    got = scored(nodes, pods, pod("new", labels=FOO, topologySpreadConstraints=c))
    assert got is not None
    assert got["bare"] == 0
    assert got["b"] == 100


def test_only_feasible_nodes_define_the_domains_scored() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2"), zoned("c", "z3")]
    pods = [placed("p1", "a"), placed("p2", "c")]
    c = [spread(action="ScheduleAnyway")]
    got = scored(
        nodes, pods, pod("new", labels=FOO, topologySpreadConstraints=c), feasible=["a", "b"]
    )
    # Two domains among the feasible nodes: weight ln(4); a = 1, b = 0 -> 100 * (1 - s) / 1.
    assert got == {"a": 0, "b": 100}


def test_no_soft_constraints_skips_the_score() -> None:
    assert scored(NODES, EXISTING, pod("new", labels=FOO)) is None


# -- default constraints -----------------------------------------------------------------------


def replicaset_pod(name: str, where: str | None = None) -> dict[str, Any]:
    raw = pod(name, labels={"app": "web"})
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "controller": True}
    ]
    return on(where, raw) if where else raw


def test_system_defaults_spread_a_replicaset_s_pods() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")]
    pods = [replicaset_pod("w1", "a"), replicaset_pod("w2", "a"), replicaset_pod("w3", "b")]
    cache = make_cache(nodes, pods)
    plugin = make_plugin(NAME, cache)
    incoming = replicaset_pod("w4")
    # Without the ReplicaSet known, nothing selects the pod: no default constraints.
    assert run_score(plugin, incoming, cache) is None
    rs = {
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    cache.objects.handlers["ReplicaSet"].on_add(parse_selecting("ReplicaSet", rs))
    got = run_score(plugin, incoming, cache)
    assert got is not None
    assert got["c"] == 100
    assert got["a"] < got["b"] < got["c"]
    # System defaults are ScheduleAnyway only: nothing is filtered.
    assert run_filter(plugin, incoming, cache) is None


def test_a_service_selecting_the_pod_gives_the_default_selector() -> None:
    nodes = [zoned("a", "z1"), zoned("c", "z2")]
    pods = [placed("w1", "a", {"app": "web"})]
    cache = make_cache(nodes, pods)
    svc = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"app": "web"}},
    }
    cache.objects.handlers["Service"].on_add(parse_selecting("Service", svc))
    got = run_score(make_plugin(NAME, cache), pod("new", labels={"app": "web"}), cache)
    # hostname (maxSkew 3) and zone (maxSkew 5), both weighted ln(4): a = 1.386 + 2 + 1.386 + 4
    # = round(8.77) = 9, c = 2 + 4 = 6; normalised 100 * (9 + 6 - s) / 9.
    assert got == {"a": 66, "c": 100}


def test_listed_default_constraints_filter() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    pods = [replicaset_pod("w1", "a"), replicaset_pod("w2", "b")]
    cache = make_cache(NODES, pods)
    rs = {
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }
    cache.objects.handlers["ReplicaSet"].on_add(parse_selecting("ReplicaSet", rs))
    plugin = make_plugin(NAME, cache, args)
    result = run_filter(plugin, replicaset_pod("w3"), cache)
    assert set(rejected_reasons(result, cache)) == {"a", "b"}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"defaultingType": "Sometimes"}, "defaultingType"),
        (
            {
                "defaultingType": "System",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            "when .defaultConstraints are not empty",
        ),
        # kube-scheduler defaults defaultingType to System, constraints or not.
        (
            {
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
            'defaultingType: "System" is invalid when .defaultConstraints are not empty',
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "x"}
                ],
            },
            "maxSkew",
        ),
        (
            {
                "defaultingType": "List",
                "defaultConstraints": [
                    {
                        "maxSkew": 1,
                        "topologyKey": ZONE,
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {},
                    }
                ],
            },
            "must not define a selector",
        ),
    ],
)
def test_invalid_args_are_refused(args: dict[str, Any], problem: str) -> None:
    from ascheduler.framework.errors import ConfigError
    from ascheduler.plugins import IN_TREE

    with pytest.raises(ConfigError, match=problem):
        IN_TREE[NAME].decode_args(args, "args")


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("constraint", "field"),
    [
        (spread(max_skew=0), "maxSkew"),
        (spread(max_skew=2**40), "maxSkew"),
        (spread(key=""), "topologyKey"),
        (spread(action="Sometimes"), "whenUnsatisfiable"),
        (spread(selector={"matchExpressions": [{"key": "a", "operator": "Near"}]}), "operator"),
        (spread(minDomains=0), "minDomains"),
        (spread(nodeTaintsPolicy="Maybe"), "nodeTaintsPolicy"),
    ],
)
def test_invalid_constraints_name_the_field(constraint: dict[str, Any], field: str) -> None:
    info = parse_pod(pod("new", topologySpreadConstraints=[constraint]))
    assert any(
        e.startswith("spec.topologySpreadConstraints[0].") and field in e for e in info.errors
    ), info.errors


def test_namespace_records_parse() -> None:
    ns = parse_namespace({"metadata": {"name": "team-a", "labels": {"team": "a"}}})
    assert ns.labels == {"team": "a"}


# -- queueing hints --------------------------------------------------------------------------


def test_hints_wake_the_pod_only_for_changes_that_can_help() -> None:
    from ascheduler.framework import ClusterEvent
    from ascheduler.model import parse_node

    cache = make_cache(NODES)
    plugin = make_plugin(NAME, cache)
    me = parse_pod(pod("new", labels=FOO, topologySpreadConstraints=[spread()]))
    matching = parse_pod(placed("m", "a"))
    unrelated = parse_pod(placed("u", "a", {"bar": "y"}))
    elsewhere = parse_pod(placed("e", "a", namespace="other"))
    add, delete = ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_DELETE
    assert plugin.queueing_hint(me, add, None, matching)
    assert plugin.queueing_hint(me, delete, matching, None)
    assert not plugin.queueing_hint(me, add, None, unrelated)
    assert not plugin.queueing_hint(me, delete, elsewhere, None)
    update = ClusterEvent.ASSIGNED_POD_UPDATE
    assert plugin.queueing_hint(me, update, unrelated, parse_pod(placed("u", "a")))
    assert not plugin.queueing_hint(me, update, unrelated, parse_pod(placed("u", "a", {"b": "z"})))
    keyed = parse_node(zoned("n", "z3"))
    bare = parse_node(zoned("n", None))
    assert plugin.queueing_hint(me, ClusterEvent.NODE_ADD, None, keyed)
    assert not plugin.queueing_hint(me, ClusterEvent.NODE_ADD, None, bare)
    assert plugin.queueing_hint(me, ClusterEvent.NODE_LABEL, bare, keyed)
    relabel = parse_node(zoned("n", "z3", labels={"other": "1"}))
    assert not plugin.queueing_hint(me, ClusterEvent.NODE_LABEL, keyed, relabel)
    assert plugin.queueing_hint(me, ClusterEvent.NODE_DELETE, keyed, None)


@pytest.mark.parametrize(("minor", "woken"), [(35, False), (36, True), (37, True)])
def test_a_nominated_pod_s_events_count_in_hints_from_1_36(minor: int, woken: bool) -> None:
    from ascheduler.features import Features, Release
    from ascheduler.framework import ClusterEvent

    cache = make_cache(NODES)
    plugin = make_plugin(NAME, cache, features=Features.defaults(Release(1, minor)))
    me = parse_pod(pod("new", labels=FOO, topologySpreadConstraints=[spread()]))
    raw = pod("n", labels=FOO)
    raw["status"] = {"nominatedNodeName": "a"}
    nominated = parse_pod(raw)
    add, delete = ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_DELETE
    assert plugin.queueing_hint(me, add, None, nominated) is woken
    assert plugin.queueing_hint(me, delete, nominated, None) is woken
    # Neither placed nor nominated: never.
    assert not plugin.queueing_hint(me, add, None, parse_pod(pod("u", labels=FOO)))
