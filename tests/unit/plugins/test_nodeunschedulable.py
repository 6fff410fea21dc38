"""NodeUnschedulable: `spec.unschedulable` nodes reject pods that do not tolerate
`node.kubernetes.io/unschedulable:NoSchedule` (UnschedulableAndUnresolvable)."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.framework import Code
from ascheduler.model import parse_node
from tests.kit import make_cache, make_plugin, node, pod, rejected_reasons, rejection_codes
from tests.kit import run_filter as run

REASON = "node(s) were unschedulable"
KEY = "node.kubernetes.io/unschedulable"
NODES = [node("cordoned", unschedulable=True), node("open")]


@pytest.mark.parametrize(
    ("tolerations", "rejected"),
    [
        pytest.param([], {"cordoned"}, id="no-tolerations"),
        pytest.param(
            [{"key": KEY, "operator": "Exists", "effect": "NoSchedule"}], set(), id="exists"
        ),
        pytest.param([{"key": KEY, "operator": "Exists"}], set(), id="exists-any-effect"),
        pytest.param([{"operator": "Exists"}], set(), id="tolerate-everything"),
        pytest.param([{"operator": "Exists", "effect": "NoSchedule"}], set(), id="all-noschedule"),
        pytest.param(
            [{"key": KEY, "operator": "Equal", "value": "", "effect": "NoSchedule"}],
            set(),
            id="equal-empty-value",
        ),
        pytest.param(
            [{"key": KEY, "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
            {"cordoned"},
            id="equal-wrong-value",
        ),
        pytest.param(
            [{"key": KEY, "operator": "Exists", "effect": "NoExecute"}],
            {"cordoned"},
            id="wrong-effect",
        ),
        pytest.param(
            [{"key": "other", "operator": "Exists", "effect": "NoSchedule"}],
            {"cordoned"},
            id="wrong-key",
        ),
    ],
)
def test_filter(tolerations: list[dict[str, Any]], rejected: set[str]) -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeUnschedulable", cache)
    result = run(plugin, pod(tolerations=tolerations), cache)
    assert rejected_reasons(result, cache) == {name: [REASON] for name in rejected}
    assert set(rejection_codes(result, cache).values()) <= {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_no_cordoned_node_rejects_nothing() -> None:
    cache = make_cache([node("a"), node("b")])
    assert run(make_plugin("NodeUnschedulable", cache), pod(), cache) is None


def test_taint_with_the_same_key_is_not_this_plugins_business() -> None:
    """Only spec.unschedulable counts here; a taint is TaintToleration's to judge."""
    cache = make_cache([node("tainted", taints=[{"key": KEY, "effect": "NoSchedule"}])])
    assert run(make_plugin("NodeUnschedulable", cache), pod(), cache) is None


def test_uncordon_takes_effect() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeUnschedulable", cache)
    assert rejected_reasons(run(plugin, pod(), cache), cache) == {"cordoned": [REASON]}
    cache.update_node(parse_node(node("cordoned")))
    assert run(plugin, pod(), cache) is None
