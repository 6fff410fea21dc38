"""TaintToleration: untolerated NoSchedule / NoExecute taints reject a node
(`node(s) had untolerated taint(s)`, UnschedulableAndUnresolvable); untolerated
PreferNoSchedule taints only lower the score, normalized in reverse."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ascheduler.framework import Code, CycleState
from ascheduler.model import parse_node
from tests.kit import (
    make_cache,
    make_plugin,
    node,
    parsed,
    pod,
    rejected_reasons,
    rejection_codes,
    run_score,
)
from tests.kit import run_filter as run

REASON = "node(s) had untolerated taint(s)"

FILTER_NODES = [
    node("clean"),
    node("dedicated", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
    node("draining", taints=[{"key": "maintenance", "effect": "NoExecute"}]),
    node("soft", taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}]),
    node(
        "both",
        taints=[
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "maintenance", "effect": "NoExecute"},
        ],
    ),
]


@pytest.mark.parametrize(
    ("tolerations", "rejected"),
    [
        pytest.param([], {"dedicated", "draining", "both"}, id="none"),
        pytest.param(
            [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
            {"draining", "both"},
            id="equal-exact",
        ),
        pytest.param(
            [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            {"draining", "both"},
            id="operator-defaults-to-equal",
        ),
        pytest.param(
            [{"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}],
            {"dedicated", "draining", "both"},
            id="equal-wrong-value",
        ),
        pytest.param(
            [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"}],
            {"dedicated", "draining", "both"},
            id="equal-wrong-effect",
        ),
        pytest.param(
            [{"key": "dedicated", "operator": "Exists"}],
            {"draining", "both"},
            id="exists-empty-effect",
        ),
        pytest.param(
            [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}],
            {"dedicated", "both"},
            id="noexecute-tolerated",
        ),
        pytest.param(
            [
                {
                    "key": "maintenance",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 30,
                }
            ],
            {"dedicated", "both"},
            id="toleration-seconds-still-tolerates",
        ),
        pytest.param(
            [{"operator": "Exists", "effect": "NoSchedule"}],
            {"draining", "both"},
            id="empty-key-one-effect",
        ),
        pytest.param([{"operator": "Exists"}], set(), id="empty-key-everything"),
        pytest.param(
            [
                {"key": "dedicated", "operator": "Exists"},
                {"key": "maintenance", "operator": "Exists"},
            ],
            set(),
            id="every-taint-of-a-node",
        ),
        pytest.param(
            [{"key": "soft", "operator": "Exists", "effect": "PreferNoSchedule"}],
            {"dedicated", "draining", "both"},
            id="prefer-toleration-irrelevant",
        ),
    ],
)
def test_filter(tolerations: list[dict[str, Any]], rejected: set[str]) -> None:
    cache = make_cache(FILTER_NODES)
    result = run(make_plugin("TaintToleration", cache), pod(tolerations=tolerations), cache)
    assert rejected_reasons(result, cache) == {name: [REASON] for name in rejected}
    codes = set(rejection_codes(result, cache).values())
    assert codes <= {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_prefer_no_schedule_never_filters() -> None:
    cache = make_cache(
        [node("soft", taints=[{"key": "a", "effect": "PreferNoSchedule"}] * 1), node("clean")]
    )
    assert run(make_plugin("TaintToleration", cache), pod(), cache) is None


def test_taint_change_invalidates_cached_masks() -> None:
    cache = make_cache(FILTER_NODES)
    plugin = make_plugin("TaintToleration", cache)
    p = pod()
    assert "dedicated" in rejected_reasons(run(plugin, p, cache), cache)
    cache.update_node(parse_node(node("dedicated")))
    cache.update_node(parse_node(node("clean", taints=[{"key": "k", "effect": "NoSchedule"}])))
    assert set(rejected_reasons(run(plugin, p, cache), cache)) == {"clean", "draining", "both"}


SCORE_NODES = [
    node("untainted"),
    node("one", taints=[{"key": "a", "value": "1", "effect": "PreferNoSchedule"}]),
    node(
        "two",
        taints=[
            {"key": "a", "value": "1", "effect": "PreferNoSchedule"},
            {"key": "b", "effect": "PreferNoSchedule"},
        ],
    ),
    node("hard", taints=[{"key": "h", "effect": "NoSchedule"}]),
]


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        pytest.param([], {"untainted": 100, "one": 50, "two": 0, "hard": 100}, id="no-tolerations"),
        pytest.param(
            [{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}],
            {"untainted": 100, "one": 100, "two": 0, "hard": 100},
            id="tolerate-a",
        ),
        pytest.param(
            [{"key": "a", "operator": "Equal", "value": "1"}],
            {"untainted": 100, "one": 100, "two": 0, "hard": 100},
            id="tolerate-a-any-effect",
        ),
        pytest.param(
            [{"key": "a", "operator": "Equal", "value": "2"}],
            {"untainted": 100, "one": 50, "two": 0, "hard": 100},
            id="wrong-value",
        ),
        pytest.param(
            [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}],
            {"untainted": 100, "one": 50, "two": 0, "hard": 100},
            id="noschedule-toleration-does-not-cover-prefer",
        ),
        pytest.param(
            [{"key": "b", "operator": "Exists"}],
            {"untainted": 100, "one": 0, "two": 0, "hard": 100},
            id="tolerate-b",
        ),
    ],
)
def test_score(tolerations: list[dict[str, Any]], expected: dict[str, int]) -> None:
    cache = make_cache(SCORE_NODES)
    plugin = make_plugin("TaintToleration", cache)
    assert run_score(plugin, pod(tolerations=tolerations), cache) == expected


def test_score_only_over_feasible_nodes() -> None:
    """The max used to normalize is over the feasible nodes only."""
    cache = make_cache(SCORE_NODES)
    plugin = make_plugin("TaintToleration", cache)
    scores = run_score(plugin, pod(), cache, feasible=["one", "untainted"])
    assert scores == {"one": 0, "untainted": 100}


@pytest.mark.parametrize(
    ("nodes", "tolerations"),
    [
        pytest.param(SCORE_NODES, [{"operator": "Exists"}], id="all-tolerated"),
        pytest.param([node("x"), node("y")], [], id="no-taints"),
        pytest.param(
            [node("x"), node("y", taints=[{"key": "h", "effect": "NoSchedule"}])],
            [],
            id="only-hard-taints",
        ),
    ],
)
def test_score_never_skips(nodes: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> None:
    """kube-scheduler's PreScore never skips: with no untolerated PreferNoSchedule taint on
    any node, every node scores 100 (300 with the default weight)."""
    cache = make_cache(nodes)
    plugin = make_plugin("TaintToleration", cache)
    scores = run_score(plugin, pod(tolerations=tolerations), cache)
    assert scores == {n["metadata"]["name"]: 100 for n in nodes}


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ([0, 0, 0], [100, 100, 100]),
        ([0, 1, 3], [100, 67, 0]),
        ([2, 2], [0, 0]),
        ([1, 2, 3, 6], [84, 67, 50, 0]),
    ],
)
def test_normalize_reverse(raw: list[int], normalized: list[int]) -> None:
    cache = make_cache([node("n")])
    plugin = make_plugin("TaintToleration", cache)
    out = plugin.normalize(CycleState(), parsed(pod()), np.array(raw, dtype=np.int64))
    assert out.tolist() == normalized
