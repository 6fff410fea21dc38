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


def test_from_1_37_a_prefilter_narrows_the_cycle_to_the_named_node() -> None:
    """kube-scheduler 1.37's `NodeName.PreFilter`: every other node is then rejected as
    `didn't satisfy plugin(s) [NodeName]` before any Filter; earlier releases have no
    PreFilter and the Filter's own message."""
    from ascheduler.features import Features, Release
    from ascheduler.framework import CycleState, PreFilterPlugin, PreFilterResult
    from tests.kit.objects import parsed

    cache = make_cache(NODES)
    for minor in (35, 36):
        plugin = make_plugin("NodeName", cache, features=Features.defaults(Release(1, minor)))
        assert not isinstance(plugin, PreFilterPlugin)
    plugin = make_plugin("NodeName", cache, features=Features.defaults(Release(1, 37)))
    assert isinstance(plugin, PreFilterPlugin)
    result, status = plugin.pre_filter(CycleState(), parsed(pod(node_name="n2")), cache.table)
    assert status.ok
    assert result == PreFilterResult(frozenset({"n2"}))
    # No node named: no narrowing, and not Skip (the Filter still runs).
    result, status = plugin.pre_filter(CycleState(), parsed(pod()), cache.table)
    assert result is None
    assert status.code is Code.SUCCESS


@pytest.mark.parametrize(
    ("minor", "reason"),
    [
        pytest.param(35, REASON, id="1.35-filter"),
        pytest.param(37, "node(s) didn't satisfy plugin(s) [NodeName]", id="1.37-prefilter"),
    ],
)
def test_the_release_s_default_profile_charges_other_nodes_to_node_name(
    minor: int, reason: str
) -> None:
    from ascheduler.features import Features, Release
    from ascheduler.framework import CycleState, Handle
    from ascheduler.framework.profile import default_plugins, multipoint
    from ascheduler.framework.registry import Registry
    from ascheduler.framework.runtime.framework import Framework
    from ascheduler.plugins import IN_TREE
    from tests.kit.objects import parsed

    features = Features.defaults(Release(1, minor))
    cache = make_cache(NODES)
    fw = Framework(
        multipoint("x", tuple(default_plugins(IN_TREE, features))),
        Registry(list(IN_TREE.values())),
        Handle(nodes=cache.table, storage=cache.storage, features=features),
    )
    assert fw.find_nodes(CycleState(), parsed(pod(node_name="n2")), cache.table).node == "n2"
    result = fw.find_nodes(CycleState(), parsed(pod(node_name="gone")), cache.table)
    assert result.node is None
    assert result.status.message.startswith(f"0/3 nodes are available: 3 {reason}.")
