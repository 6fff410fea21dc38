"""InterPodAffinity: required affinity (the first pod of a group, nodes missing the key),
required anti-affinity, existing pods' anti-affinity (symmetry), namespaces and namespace
selectors, one reason per node in kube-scheduler's order; the preferred score with existing
pods' terms and hardPodAffinityWeight."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.features import Features, Release
from ascheduler.framework import ClusterEvent, Code
from ascheduler.model import parse_pod
from ascheduler.model.objects import parse_namespace
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

NAME = "InterPodAffinity"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def zoned(name: str, zone: str | None) -> dict[str, Any]:
    labels = {HOST: name}
    if zone is not None:
        labels[ZONE] = zone
    return node(name, labels=labels)


NODES = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d", None)]


def aff_term(app: str, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key, **extra}


def with_affinity(
    name: str,
    labels: dict[str, str],
    *,
    required: list[Any] = (),  # type: ignore[assignment]
    anti: list[Any] = (),  # type: ignore[assignment]
    preferred: list[Any] = (),  # type: ignore[assignment]
    preferred_anti: list[Any] = (),  # type: ignore[assignment]
    namespace: str = "default",
) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    key_r = "requiredDuringSchedulingIgnoredDuringExecution"
    key_p = "preferredDuringSchedulingIgnoredDuringExecution"
    if required or preferred:
        affinity["podAffinity"] = {key_r: list(required), key_p: list(preferred)}
    if anti or preferred_anti:
        affinity["podAntiAffinity"] = {key_r: list(anti), key_p: list(preferred_anti)}
    return pod(name, labels=labels, namespace=namespace, affinity=affinity)


def weighted(weight: int, term: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": term}


def filtered(pods: list[Any], incoming: dict[str, Any], cache: Any = None) -> dict[str, list[str]]:
    cache = cache or make_cache(NODES, pods)
    return rejected_reasons(run_filter(make_plugin(NAME, cache), incoming, cache), cache)


def test_required_affinity_needs_a_matching_pod_in_the_domain() -> None:
    pods = [on("a", pod("db", labels={"app": "db"}))]
    incoming = with_affinity("web", {"app": "web"}, required=[aff_term("db")])
    got = filtered(pods, incoming)
    assert got == {"c": [AFFINITY], "d": [AFFINITY]}
    cache = make_cache(NODES, pods)
    result = run_filter(make_plugin(NAME, cache), incoming, cache)
    assert rejection_codes(result, cache)[("c", AFFINITY)] is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_the_first_pod_of_a_group_may_go_anywhere_with_the_key() -> None:
    incoming = with_affinity("db-0", {"app": "db"}, required=[aff_term("db")])
    assert filtered([], incoming) == {"d": [AFFINITY]}
    stranger = with_affinity("web", {"app": "web"}, required=[aff_term("db")])
    assert set(filtered([], stranger)) == {"a", "b", "c", "d"}


def test_required_affinity_terms_must_all_be_met_by_one_pod() -> None:
    pods = [
        on("a", pod("db", labels={"app": "db"})),
        on("c", pod("cache", labels={"app": "cache"})),
    ]
    incoming = with_affinity(
        "web", {"app": "web"}, required=[aff_term("db"), aff_term("cache", key=HOST)]
    )
    # No single pod matches both terms: nowhere.
    assert set(filtered(pods, incoming)) == {"a", "b", "c", "d"}


def test_required_anti_affinity_rejects_the_domain_of_a_matching_pod() -> None:
    pods = [on("a", pod("web-0", labels={"app": "web"}))]
    incoming = with_affinity("web-1", {"app": "web"}, anti=[aff_term("web", key=HOST)])
    assert filtered(pods, incoming) == {"a": [ANTI]}
    zone = with_affinity("web-1", {"app": "web"}, anti=[aff_term("web")])
    assert filtered(pods, zone) == {"a": [ANTI], "b": [ANTI]}


def test_existing_pods_anti_affinity_is_symmetric() -> None:
    guard = with_affinity("guard", {"app": "guard"}, anti=[aff_term("web")])
    pods = [on("a", guard)]
    assert filtered(pods, pod("web", labels={"app": "web"})) == {
        "a": [EXISTING],
        "b": [EXISTING],
    }
    assert filtered(pods, pod("other", labels={"app": "other"})) == {}


def test_one_reason_per_node_in_kube_scheduler_s_order() -> None:
    pods = [
        on("a", pod("db", labels={"app": "db"})),
        on("a", pod("web-0", labels={"app": "web"})),
        on("c", with_affinity("guard", {"app": "guard"}, anti=[aff_term("web", key=HOST)])),
    ]
    incoming = with_affinity(
        "web-1", {"app": "web"}, required=[aff_term("db")], anti=[aff_term("web", key=HOST)]
    )
    assert filtered(pods, incoming) == {"a": [ANTI], "c": [AFFINITY], "d": [AFFINITY]}


def test_terms_look_in_the_pod_s_own_namespace_unless_told_otherwise() -> None:
    pods = [on("a", pod("db", labels={"app": "db"}, namespace="data"))]
    here = with_affinity("web", {"app": "web"}, anti=[aff_term("db")])
    assert filtered(pods, here) == {}
    there = with_affinity("web", {"app": "web"}, anti=[aff_term("db", namespaces=["data"])])
    assert filtered(pods, there) == {"a": [ANTI], "b": [ANTI]}


def test_namespace_selector_resolves_through_namespace_labels() -> None:
    pods = [
        on("a", pod("db", labels={"app": "db"}, namespace="data")),
        on("c", pod("db2", labels={"app": "db"}, namespace="scratch")),
    ]
    cache = make_cache(NODES, pods)
    for name, labels in (("data", {"tier": "prod"}), ("scratch", {"tier": "dev"})):
        cache.objects.namespace_handler.on_add(
            parse_namespace({"metadata": {"name": name, "labels": labels}})
        )
    prod = with_affinity(
        "web",
        {"app": "web"},
        anti=[aff_term("db", namespaceSelector={"matchLabels": {"tier": "prod"}})],
    )
    assert filtered(pods, prod, cache) == {"a": [ANTI], "b": [ANTI]}
    everywhere = with_affinity("web", {"app": "web"}, anti=[aff_term("db", namespaceSelector={})])
    assert set(filtered(pods, everywhere, cache)) == {"a", "b", "c"}
    nowhere = with_affinity(
        "web",
        {"app": "web"},
        anti=[aff_term("db", namespaceSelector={"matchLabels": {"tier": "none"}})],
    )
    assert filtered(pods, nowhere, cache) == {}


def test_no_terms_anywhere_skips_the_filter() -> None:
    cache = make_cache(NODES, [on("a", pod("x", labels={"app": "x"}))])
    assert run_filter(make_plugin(NAME, cache), pod("y", labels={"app": "y"}), cache) is None


def test_a_pod_moving_away_frees_the_domain() -> None:
    web0 = on("a", pod("web-0", labels={"app": "web"}))
    cache = make_cache(NODES, [web0])
    incoming = with_affinity("web-1", {"app": "web"}, anti=[aff_term("web")])
    assert set(filtered([], incoming, cache)) == {"a", "b"}
    cache.remove_pod(parse_pod(web0))
    assert filtered([], incoming, cache) == {}
    cache.add_pod(parse_pod(on("c", pod("web-0", labels={"app": "web"}))))
    assert set(filtered([], incoming, cache)) == {"c"}


# -- scoring ---------------------------------------------------------------------------------


def scored(pods: list[Any], incoming: dict[str, Any], args: Any = None) -> dict[str, int] | None:
    cache = make_cache(NODES, pods)
    return run_score(make_plugin(NAME, cache, args), incoming, cache)


DB_ON_A = [on("a", pod("db", labels={"app": "db"}))]


def test_preferred_affinity_scores_the_domain() -> None:
    incoming = with_affinity("web", {"app": "web"}, preferred=[weighted(10, aff_term("db"))])
    assert scored(DB_ON_A, incoming) == {"a": 100, "b": 100, "c": 0, "d": 0}


def test_preferred_anti_affinity_scores_the_other_domains() -> None:
    incoming = with_affinity("web", {"app": "web"}, preferred_anti=[weighted(10, aff_term("db"))])
    assert scored(DB_ON_A, incoming) == {"a": 0, "b": 0, "c": 100, "d": 100}


def test_weights_add_up_per_domain() -> None:
    pods = [*DB_ON_A, on("c", pod("cache", labels={"app": "cache"}))]
    incoming = with_affinity(
        "web",
        {"app": "web"},
        preferred=[weighted(30, aff_term("db")), weighted(10, aff_term("cache", key=HOST))],
        preferred_anti=[weighted(20, aff_term("db", key=HOST))],
    )
    # a: 30 - 20 = 10, b: 30, c: 10, d: 0; normalised 100 * (s - 0) / 30.
    assert scored(pods, incoming) == {"a": 33, "b": 100, "c": 33, "d": 0}


def test_existing_pods_terms_score_the_incoming_pod() -> None:
    fan = with_affinity(
        "fan",
        {"app": "fan"},
        required=[aff_term("web")],
        preferred=[weighted(5, aff_term("web", key=HOST))],
    )
    pods = [on("c", fan)]
    # hardPodAffinityWeight 1 over z2, the preferred 5 on c: c = 6, others 0.
    assert scored(pods, pod("web", labels={"app": "web"})) == {"a": 0, "b": 0, "c": 100, "d": 0}
    # With the hard weight off, only the preferred term counts (still c).
    assert scored(pods, pod("web", labels={"app": "web"}), {"hardPodAffinityWeight": 0}) == {
        "a": 0,
        "b": 0,
        "c": 100,
        "d": 0,
    }
    ignoring = {"ignorePreferredTermsOfExistingPods": True}
    assert scored(pods, pod("web", labels={"app": "web"}), ignoring) is None


def test_no_affinity_anywhere_skips_the_score() -> None:
    assert scored(DB_ON_A, pod("web", labels={"app": "web"})) is None


# -- bad input -------------------------------------------------------------------------------


def test_invalid_terms_name_the_field() -> None:
    bad = with_affinity(
        "web",
        {"app": "web"},
        anti=[{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}],
    )
    info = parse_pod(bad)
    key = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
    assert any(e.startswith(key) for e in info.errors), info.errors


def test_many_terms_are_handled() -> None:
    terms = [aff_term(f"app-{i}", key=HOST) for i in range(2000)]
    incoming = with_affinity("web", {"app": "web"}, anti=terms)
    pods = [on("b", pod("x", labels={"app": "app-1999"}))]
    assert filtered(pods, incoming) == {"b": [ANTI]}


# -- queueing hints --------------------------------------------------------------------------


def test_hints_wake_the_pod_only_for_changes_that_can_help() -> None:
    from ascheduler.framework import ClusterEvent
    from ascheduler.model import parse_node

    cache = make_cache(NODES)
    plugin = make_plugin(NAME, cache)
    me = parse_pod(
        with_affinity(
            "web", {"app": "web"}, required=[aff_term("db")], anti=[aff_term("web", key=HOST)]
        )
    )
    db = parse_pod(on("a", pod("db", labels={"app": "db"})))
    other = parse_pod(on("a", pod("x", labels={"app": "x"})))
    web = parse_pod(on("a", pod("web-0", labels={"app": "web"})))
    unbound = parse_pod(pod("db-1", labels={"app": "db"}))
    add, delete = ClusterEvent.ASSIGNED_POD_ADD, ClusterEvent.ASSIGNED_POD_DELETE
    assert plugin.queueing_hint(me, add, None, db)
    assert not plugin.queueing_hint(me, add, None, other)
    assert not plugin.queueing_hint(me, add, None, unbound)
    assert plugin.queueing_hint(me, delete, web, None)
    assert not plugin.queueing_hint(me, delete, db, None)
    relabelled = parse_pod(on("a", pod("x", labels={"app": "db"})))
    assert plugin.queueing_hint(me, ClusterEvent.ASSIGNED_POD_UPDATE, other, relabelled)
    # The guard's own anti-affinity kept `me` away: its deletion helps.
    guard = parse_pod(on("c", with_affinity("g", {"app": "g"}, anti=[aff_term("web")])))
    plain = parse_pod(pod("plain", labels={"app": "web"}))
    assert plugin.queueing_hint(plain, delete, guard, None)
    # Nodes: a new node with the affinity key; a relabel moving a node between zones.
    z3 = parse_node(zoned("e", "z3"))
    bare = parse_node(zoned("e", None))
    assert plugin.queueing_hint(me, ClusterEvent.NODE_ADD, None, z3)
    moved = parse_node(zoned("a", "z9"))
    assert plugin.queueing_hint(me, ClusterEvent.NODE_LABEL, parse_node(zoned("a", "z1")), moved)
    only_affinity = parse_pod(with_affinity("w", {"app": "w"}, required=[aff_term("db")]))
    assert not plugin.queueing_hint(only_affinity, ClusterEvent.NODE_ADD, None, bare)


# -- per release -----------------------------------------------------------------------------

R35, R36, R37 = (Features.defaults(Release(1, m)) for m in (35, 36, 37))


def labelled_namespaces(cache: Any) -> None:
    """data (tier=prod), scratch (tier=dev) and default (no labels)."""
    for name, labels in (("data", {"tier": "prod"}), ("scratch", {"tier": "dev"}), ("default", {})):
        cache.objects.namespace_handler.on_add(
            parse_namespace({"metadata": {"name": name, "labels": labels}})
        )


#: Satisfied by an empty label set: up to 1.36 the kept selector matches every namespace.
NOT_DEV = {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["dev"]}]}
DBS = [
    on("a", pod("db", labels={"app": "db"}, namespace="data")),
    on("c", pod("db2", labels={"app": "db"}, namespace="scratch")),
]


@pytest.mark.parametrize(
    ("features", "rejected"),
    [
        pytest.param(R35, {"a", "b", "c"}, id="1.35-selector-kept"),
        pytest.param(R36, {"a", "b", "c"}, id="1.36-selector-kept"),
        pytest.param(R37, {"a", "b"}, id="1.37-resolved-namespaces-only"),
    ],
)
def test_a_resolved_namespace_selector_is_cleared_from_1_37(
    features: Features, rejected: set[str]
) -> None:
    cache = make_cache(NODES, DBS)
    labelled_namespaces(cache)
    term = aff_term("db", namespaceSelector=NOT_DEV)
    incoming = with_affinity("web", {"app": "web"}, anti=[term])
    plugin = make_plugin(NAME, cache, features=features)
    result = rejected_reasons(run_filter(plugin, incoming, cache), cache)
    assert result == {name: [ANTI] for name in rejected}


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        pytest.param(R35, {"a": 100, "b": 100, "c": 100, "d": 0}, id="1.35"),
        pytest.param(R37, {"a": 100, "b": 100, "c": 0, "d": 0}, id="1.37"),
    ],
)
def test_preferred_terms_clear_the_selector_from_1_37(
    features: Features, expected: dict[str, int]
) -> None:
    cache = make_cache(NODES, DBS)
    labelled_namespaces(cache)
    term = aff_term("db", namespaceSelector=NOT_DEV)
    incoming = with_affinity("web", {"app": "web"}, preferred=[weighted(10, term)])
    assert run_score(make_plugin(NAME, cache, features=features), incoming, cache) == expected


def test_the_pod_s_own_relabelling_wakes_it_from_1_36() -> None:
    cache = make_cache(NODES)
    before = parse_pod(with_affinity("web", {"app": "web"}, anti=[aff_term("web")]))
    after = parse_pod(with_affinity("web", {"app": "web", "v": "2"}, anti=[aff_term("web")]))
    event = ClusterEvent.UNSCHEDULED_POD_UPDATE
    for features, woken in ((R35, False), (R36, True), (R37, True)):
        plugin = make_plugin(NAME, cache, features=features)
        assert (event in plugin.events_to_register()) is woken
        assert plugin.queueing_hint(after, event, before, after) is woken


def nominated(raw: dict[str, Any], node_name: str) -> Any:
    raw["status"] = {"nominatedNodeName": node_name}
    return parse_pod(raw)


def test_a_nominated_pod_counts_as_placed_in_hints_from_1_36() -> None:
    cache = make_cache(NODES)
    me = parse_pod(with_affinity("web", {"app": "web"}, required=[aff_term("db")]))
    db = nominated(pod("db", labels={"app": "db"}), "a")
    for features, woken in ((R35, False), (R36, True), (R37, True)):
        plugin = make_plugin(NAME, cache, features=features)
        assert plugin.queueing_hint(me, ClusterEvent.ASSIGNED_POD_ADD, None, db) is woken
    bare = parse_pod(pod("db", labels={"app": "db"}))
    for features in (R35, R36, R37):
        plugin = make_plugin(NAME, cache, features=features)
        assert not plugin.queueing_hint(me, ClusterEvent.ASSIGNED_POD_ADD, None, bare)


def two_anti(name: str, labels: dict[str, str], **where: Any) -> dict[str, Any]:
    """Anti-affinity to app=web and to tier=front, one term each."""
    terms = [
        aff_term("web", key=HOST),
        {"labelSelector": {"matchLabels": {"tier": "front"}}, "topologyKey": HOST},
    ]
    raw = with_affinity(name, labels, anti=terms)
    return on(where["node"], raw) if "node" in where else raw


def test_anti_affinity_hints_ask_all_terms_then_any_from_1_37() -> None:
    cache = make_cache(NODES)
    delete, update = ClusterEvent.ASSIGNED_POD_DELETE, ClusterEvent.ASSIGNED_POD_UPDATE
    # The target's two anti terms; the other pod matches only the first.
    me = parse_pod(two_anti("me", {"app": "me"}))
    web = parse_pod(on("a", pod("w", labels={"app": "web"})))
    relabelled = parse_pod(on("a", pod("w", labels={"app": "other"})))
    # A placed pod whose two anti terms only the first of which the target matches.
    guard = parse_pod(two_anti("g", {"app": "g"}, node="a"))
    target = parse_pod(pod("t", labels={"app": "web"}))
    for features, woken in ((R35, False), (R36, False), (R37, True)):
        plugin = make_plugin(NAME, cache, features=features)
        assert plugin.queueing_hint(me, delete, web, None) is woken
        assert plugin.queueing_hint(me, update, web, relabelled) is woken
    for features, woken in ((R36, False), (R37, True)):
        plugin = make_plugin(NAME, cache, features=features)
        assert plugin.queueing_hint(target, delete, guard, None) is woken
    # Matching every term of the deleted pod's anti-affinity wakes the target from 1.36.
    both = parse_pod(pod("t", labels={"app": "web", "tier": "front"}))
    for features in (R36, R37):
        assert make_plugin(NAME, cache, features=features).queueing_hint(both, delete, guard, None)
