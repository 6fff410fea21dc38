"""The node table's pod index: count columns per pod predicate kept up to date as pods come
and go and as rows move, pods grouped by their affinity terms, topology domain codes."""

from __future__ import annotations

from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.model.topology import parse_selector
from ascheduler.plugins.podtopologyspread import SpreadMatch
from tests.kit import make_cache, node, on, pod

# -- the pod index ----------------------------------------------------------------------------


def _labelled(name: str, where: str, app: str, namespace: str = "default") -> PodInfo:
    return parse_pod(on(where, pod(name, labels={"app": app}, namespace=namespace)))


def test_match_counts_follow_pods_and_survive_node_removal() -> None:
    cache = make_cache([node("a"), node("b"), node("c")])
    table = cache.table
    web = SpreadMatch(frozenset({"default"}), parse_selector({"matchLabels": {"app": "web"}}, "s"))
    cache.add_pod(_labelled("w1", "a", "web"))
    cache.add_pod(_labelled("w2", "c", "web"))
    cache.add_pod(_labelled("d1", "c", "db"))
    cache.add_pod(_labelled("w3", "b", "web", namespace="other"))

    def by_name() -> dict[str, int]:
        counts = table.match_counts(web)
        return {table.names[r]: int(counts[r]) for r in range(table.n)}

    assert by_name() == {"a": 1, "b": 0, "c": 1}
    cache.add_pod(_labelled("w4", "c", "web"))  # kept up to date once built
    assert by_name() == {"a": 1, "b": 0, "c": 2}
    cache.remove_node("a")  # c moves into a's row
    assert by_name() == {"b": 0, "c": 2}
    cache.remove_pod(_labelled("w4", "c", "web"))
    assert by_name() == {"b": 0, "c": 1}
    assert table.pod_row("uid-w1") is None
    assert table.pod_row("uid-w2") == table.index["c"]
    cache.add_node(parse_node(node("a")))  # its pods come back with it
    assert by_name() == {"b": 0, "c": 1, "a": 1}


def test_affinity_rows_group_pods_by_their_terms() -> None:
    cache = make_cache([node("a"), node("b")])
    table = cache.table
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "h"}
            ]
        }
    }
    for i, where in enumerate(["a", "a", "b"]):
        cache.add_pod(parse_pod(on(where, pod(f"g{i}", affinity=anti))))
    cache.add_pod(parse_pod(on("b", pod("plain"))))
    (rows,) = table.affinity_rows().values()
    assert {table.names[r]: c for r, c in rows.items()} == {"a": 2, "b": 1}
    cache.remove_node("a")
    (rows,) = table.affinity_rows().values()
    assert {table.names[r]: c for r, c in rows.items()} == {"b": 1}


def test_domains_code_each_row_s_value() -> None:
    cache = make_cache([node("a", labels={"z": "1"}), node("b"), node("c", labels={"z": "2"})])
    d = cache.table.domains("z")
    assert [d.values[c] if c >= 0 else None for c in d.codes] == ["1", None, "2"]


def test_the_index_agrees_with_a_brute_force_count_through_random_churn() -> None:
    import random

    from ascheduler.plugins.interpodaffinity import TermsMatch

    rng = random.Random(7)
    cache = make_cache([])
    table = cache.table
    apps = ["a", "b", "c"]
    selectors = [parse_selector({"matchLabels": {"app": a}}, "s") for a in apps]
    spread = [SpreadMatch(frozenset({"default"}), s) for s in selectors]
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "h"}
            ]
        }
    }
    live: dict[str, PodInfo] = {}
    nodes_up: set[str] = set()
    for step in range(1500):
        op = rng.random()
        if op < 0.1 or not nodes_up:
            name = f"n{rng.randint(0, 9)}"
            cache.add_node(parse_node(node(name)))
            nodes_up.add(name)
        elif op < 0.15:
            name = rng.choice(sorted(nodes_up))
            cache.remove_node(name)
            nodes_up.discard(name)
        elif op < 0.6:
            where = rng.choice(sorted(nodes_up))
            extra = {"affinity": anti} if rng.random() < 0.3 else {}
            raw = on(where, pod(f"p{step}", labels={"app": rng.choice(apps)}, **extra))
            info = parse_pod(raw)
            cache.add_pod(info)
            live[info.uid] = info
        elif live:
            uid = rng.choice(sorted(live))
            cache.remove_pod(live.pop(uid))
        if step % 25:
            continue
        # Brute force over the cache's own view: pods on nodes that are up.
        for predicate in (*spread, TermsMatch.of(())):
            want: dict[int, int] = {}
            for info in live.values():
                row = table.index.get(info.node_name)
                if row is not None and predicate.matches(info):
                    want[row] = want.get(row, 0) + 1
            assert dict(table.match_rows(predicate)) == want, step
            dense = table.match_counts(predicate)
            assert {r: int(c) for r, c in enumerate(dense) if c} == want, step
        shapes: dict[int, int] = {}
        for info in live.values():
            row = table.index.get(info.node_name)
            if row is not None and info.pod_affinity:
                shapes[row] = shapes.get(row, 0) + 1
        got = {r: c for rows in table.affinity_rows().values() for r, c in rows.items()}
        assert got == shapes, step
