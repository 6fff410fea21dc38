"""NodeName: a pod naming a node in spec.nodeName fits only that node."""

from __future__ import annotations

import pytest

from ascheduler.framework import Code
from tests.kit import make_cache, make_plugin, node, pod, rejected_reasons, rejection_codes
from tests.kit import run_filter as run

REASON = "node(s) didn't match the requested node name"
NODES = [node("n1"), node("n2"), node("n3")]


@pytest.mark.parametrize(
    ("node_name", "rejected"),
    [
        pytest.param("n2", {"n1", "n3"}, id="named-node"),
        pytest.param("gone", {"n1", "n2", "n3"}, id="unknown-node"),
        pytest.param("N2", {"n1", "n2", "n3"}, id="case-sensitive"),
    ],
)
def test_filter(node_name: str, rejected: set[str]) -> None:
    cache = make_cache(NODES)
    result = run(make_plugin("NodeName", cache), pod(node_name=node_name), cache)
    assert rejected_reasons(result, cache) == {name: [REASON] for name in rejected}
    codes = rejection_codes(result, cache)
    assert set(codes.values()) == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


@pytest.mark.parametrize("node_name", [None, ""])
def test_no_node_name_passes_everywhere(node_name: str | None) -> None:
    cache = make_cache(NODES)
    assert run(make_plugin("NodeName", cache), pod(node_name=node_name), cache) is None
