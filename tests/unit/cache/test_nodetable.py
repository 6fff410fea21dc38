"""The node table's pod index: count columns per pod predicate kept up to date as pods come
and go and as rows move, pods grouped by their affinity terms, topology domain codes; the
nodes' declared features column."""

from __future__ import annotations

import dataclasses

from ascheduler.model import PodInfo, parse_node, parse_pod
from ascheduler.model.nodefeatures import mask
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


def test_dense_columns_follow_the_table_when_it_grows() -> None:
    """A count column and a shape's column made dense before the table doubles its capacity
    keep counting pods placed on the rows beyond the old capacity."""
    cache = make_cache([node("n0", labels={"zone": "z"})])
    table = cache.table
    web = SpreadMatch(frozenset({"default"}), parse_selector({"matchLabels": {"app": "web"}}, "s"))
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "h"}
            ]
        }
    }
    first = parse_pod(on("n0", pod("g0", labels={"app": "web"}, affinity=anti)))
    cache.add_pod(first)
    (shape,) = table.affinity_rows()
    zone = table.domains("zone")
    assert table.match_counts(web).tolist() == [1]
    table.shape_domain_sums(shape, zone)  # both columns dense now
    for i in range(1, 300):  # past the initial capacity
        cache.add_node(parse_node(node(f"n{i}", labels={"zone": "z"})))
    cache.add_pod(parse_pod(on("n299", pod("g1", labels={"app": "web"}, affinity=anti))))
    counts = table.match_counts(web)
    assert int(counts.sum()) == 2
    assert counts[table.index["n299"]] == 1
    zone = table.domains("zone")
    sums = table.shape_domain_sums(shape, zone)
    assert int(sums.sum()) == 2


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
            extra["priority"] = rng.choice([0, 5, 10])
            raw = on(where, pod(f"p{step}", labels={"app": rng.choice(apps)}, **extra))
            info = parse_pod(raw)
            cache.add_pod(info)
            live[info.uid] = info
        elif op < 0.75 and live:
            # A newer copy of a placed pod: a status update (counted as it was), relabelled,
            # or being deleted (spreading stops counting it).
            old = live[rng.choice(sorted(live))]
            change = rng.random()
            if change < 0.5:
                newer = dataclasses.replace(old, phase="Running")
            elif change < 0.8:
                newer = dataclasses.replace(old, labels={"app": rng.choice(apps)})
            else:
                newer = dataclasses.replace(old, deleting=True)
            cache.update_pod(newer)
            live[newer.uid] = newer
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
        for below in (0, 5, 10, 11):
            placed = {
                i.uid for i in live.values() if i.node_name in nodes_up and i.priority < below
            }
            assert {i.uid for i in table.pods_below(below)} == placed, step


def test_many_pods_taken_off_together_and_put_back_leave_the_table_as_it_was() -> None:
    import numpy as np

    cache = make_cache([node("a", cpu="8"), node("b", cpu="8")])
    table = cache.table
    spread = SpreadMatch(
        frozenset({"default"}), parse_selector({"matchLabels": {"app": "web"}}, "s")
    )
    pods = [
        parse_pod(
            on(where, pod(f"p{i}", cpu="1", labels={"app": "web"}, priority=i, host_port=80 + i))
        )
        for i, where in enumerate(["a", "a", "b", "a"])
    ]
    for info in pods:
        cache.add_pod(info)
    table.match_counts(spread)  # a count column kept up to date from here on

    def state() -> tuple[object, ...]:
        return (
            table.requested.copy(),
            table.free.copy(),
            table.nonzero.copy(),
            [dict(table.pods(r)) for r in range(table.n)],
            [dict(table.ports[r]) for r in range(table.n)],
            table.match_counts(spread).copy(),
            sorted(i.uid for i in table.pods_below(100)),
        )

    before = state()
    placed = [(table.pod_row(i.uid) or 0, i) for i in pods]
    table.add_usages(placed, -1)
    # As if no pod were there: every row's usage, ports, counts and index empty.
    assert np.array_equal(table.free, table.alloc)
    assert [len(table.pods(r)) for r in range(table.n)] == [0, 0]
    assert not any(table.ports[r] for r in range(table.n))
    assert not table.match_counts(spread).any()
    assert list(table.pods_below(100)) == []
    table.add_usages(placed, 1)
    after = state()
    for was, now in zip(before, after, strict=True):
        if isinstance(was, np.ndarray):
            assert np.array_equal(was, now)
        else:
            assert was == now


def test_domain_rows_agree_with_a_brute_force_over_every_key_layout() -> None:
    """Rows in a domain holding a match: hostname-like keys (a domain per row), a few zones,
    many values; nodes lacking the key; sparse and dense columns; placed pods' shapes."""
    import random

    import numpy as np

    from ascheduler.framework import NodeTable

    rng = random.Random(11)
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "z"}
            ]
        }
    }
    for trial in range(60):
        n = rng.randint(1, 40)
        nodes = []
        for i in range(n):
            labels = {"h": f"h{i}"}
            if rng.random() < 0.8:
                labels["z"] = f"z{rng.randint(0, 2)}"
            if rng.random() < 0.9:
                labels["r"] = f"r{rng.randint(0, 11)}"
            nodes.append(node(f"n{i}", labels=labels))
        cache = make_cache(nodes)
        table: NodeTable = cache.table
        shaped: set[int] = set()
        for j in range(rng.randint(0, 3 * n)):
            where = rng.randrange(n)
            extra = {"affinity": anti} if rng.random() < 0.2 else {}
            app = rng.choice("ab")
            cache.add_pod(parse_pod(on(f"n{where}", pod(f"p{j}", labels={"app": app}, **extra))))
            if extra:
                shaped.add(table.index[f"n{where}"])
        match = SpreadMatch(
            frozenset({"default"}), parse_selector({"matchLabels": {"app": "a"}}, "s")
        )
        holding = set(table.match_rows(match))
        for key in ("h", "z", "r"):
            d = table.domains(key)
            values = [table.infos[r].labels.get(key) for r in range(n)]

            def expected(rows: set[int], values: list[str | None] = values) -> list[bool]:
                hit = {values[r] for r in rows} - {None}
                return [v is not None and v in hit for v in values]

            assert table.domain_rows(match, d).tolist() == expected(holding), (trial, key)
            (shape,) = table.affinity_rows() or (None,)
            if shape is not None:
                got = table.shape_domain_rows(shape, d).tolist()
                assert got == expected(shaped), (trial, key)
            flags = np.array([rng.random() < 0.3 for _ in d.values], dtype=np.bool_)
            want = [v is not None and bool(flags[d.index[v]]) for v in values]
            assert d.rows_in(flags).tolist() == want, (trial, key)
        table.match_counts(match)  # the column turns dense: the other path, same answer
        for key in ("h", "z", "r"):
            d = table.domains(key)
            values = [table.infos[r].labels.get(key) for r in range(n)]
            hit = {values[r] for r in holding} - {None}
            want = [v is not None and v in hit for v in values]
            assert table.domain_rows(match, d).tolist() == want, (trial, key)


def test_row_values_recompute_a_single_touched_row_the_same_either_way() -> None:
    import numpy as np

    cache = make_cache([node("a"), node("b"), node("c")])
    table = cache.table

    def pods_on(rows: np.ndarray) -> np.ndarray:
        return np.array([len(table.pods(int(r))) for r in rows], dtype=np.int64)

    def one(row: int) -> int:
        return len(table.pods(row))

    assert table.row_values("k", pods_on, one).tolist() == [0, 0, 0]
    assert table.row_values("plain", pods_on).tolist() == [0, 0, 0]
    cache.add_pod(parse_pod(on("b", pod("x"))))
    assert table.row_values("k", pods_on, one).tolist() == [0, 1, 0]
    cache.add_pod(parse_pod(on("c", pod("y"))))
    cache.add_pod(parse_pod(on("c", pod("z"))))
    assert table.row_values("k", pods_on, one).tolist() == [0, 1, 2]
    assert table.row_values("plain", pods_on).tolist() == [0, 1, 2]


def test_declared_features_column_follows_updates_growth_and_removals() -> None:
    restart, every = (
        ["RestartAllContainersOnContainerExits"],
        [
            "RestartAllContainersOnContainerExits",
            "UserNamespacesHostNetworkSupport",
            "VolumeBindMountOptions",
        ],
    )
    cache = make_cache([node("n0", declared_features=every)])
    table = cache.table
    for i in range(1, 300):  # past the initial capacity
        cache.add_node(parse_node(node(f"n{i}", declared_features=restart if i % 2 else None)))
    expected = {
        name: mask(every if name == "n0" else restart if int(name[1:]) % 2 else [])
        for name in table.names
    }
    assert {n: int(table.declared_features[table.index[n]]) for n in table.names} == expected
    cache.update_node(parse_node(node("n1", declared_features=["SomethingElse"])))
    cache.remove_node("n0")  # n299 moves into row 0
    assert int(table.declared_features[table.index["n1"]]) == 0
    assert int(table.declared_features[table.index["n299"]]) == mask(restart)
    assert table.declared_features.shape == (299,)
