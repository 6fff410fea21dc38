"""NodeAffinity: nodeSelector and required node-affinity terms filter (terms ORed,
expressions ANDed, an empty term matches nothing); preferred terms score by the sum of
matching weights, normalized to 100 * raw / max."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from ascheduler.framework import Code, CycleState
from ascheduler.model import parse_node
from tests.kit import (
    expr,
    make_cache,
    make_plugin,
    node,
    parsed,
    pod,
    rejected_reasons,
    rejection_codes,
    run_score,
    term,
)
from tests.kit import run_filter as run

REASON = "node(s) didn't match Pod's node affinity/selector"
NODES = [
    node("a", labels={"zone": "a", "cores": "8", "disk": "ssd"}),
    node("b", labels={"zone": "b", "cores": "4"}),
    node("c", labels={"zone": "c"}),
    node("d"),
]
ALL = {"a", "b", "c", "d"}


def name_field(operator: str, *names: str) -> dict[str, Any]:
    return expr("metadata.name", operator, *names)


@pytest.mark.parametrize(
    ("selector", "required", "rejected"),
    [
        pytest.param({"zone": "a"}, None, {"b", "c", "d"}, id="selector"),
        pytest.param({"zone": "a", "disk": "ssd"}, None, {"b", "c", "d"}, id="selector-2"),
        pytest.param({"zone": "a", "disk": "hdd"}, None, ALL, id="selector-one-wrong"),
        pytest.param({"zone": ""}, None, ALL, id="selector-empty-value-needs-the-key"),
        pytest.param(None, [term(expr("zone", "In", "a", "b"))], {"c", "d"}, id="In"),
        pytest.param(None, [term(expr("zone", "NotIn", "a"))], {"a"}, id="NotIn-missing-ok"),
        pytest.param(None, [term(expr("cores", "Exists"))], {"c", "d"}, id="Exists"),
        pytest.param(None, [term(expr("cores", "DoesNotExist"))], {"a", "b"}, id="DoesNotExist"),
        pytest.param(None, [term(expr("cores", "Gt", "4"))], {"b", "c", "d"}, id="Gt"),
        pytest.param(None, [term(expr("cores", "Lt", "8"))], {"a", "c", "d"}, id="Lt"),
        pytest.param(None, [term(expr("cores", "Gt", "3"))], {"c", "d"}, id="Gt-missing-fails"),
        pytest.param(
            None,
            [term(expr("zone", "In", "a", "b"), expr("cores", "Gt", "5"))],
            {"b", "c", "d"},
            id="expressions-ANDed",
        ),
        pytest.param(
            None,
            [term(expr("zone", "In", "a")), term(expr("cores", "Lt", "5"))],
            {"c", "d"},
            id="terms-ORed",
        ),
        pytest.param(
            None, [term(fields=[name_field("In", "b", "c")])], {"a", "d"}, id="matchFields-In"
        ),
        pytest.param(
            None, [term(fields=[name_field("NotIn", "a")])], {"a"}, id="matchFields-NotIn"
        ),
        pytest.param(
            None,
            [term(expr("zone", "In", "a", "b"), fields=[name_field("In", "b", "c")])],
            {"a", "c", "d"},
            id="expressions-AND-fields",
        ),
        pytest.param(None, [term()], ALL, id="empty-term-matches-nothing"),
        pytest.param(
            None,
            [term(), term(expr("zone", "In", "c"))],
            {"a", "b", "d"},
            id="empty-term-ORed",
        ),
        pytest.param(
            {"zone": "a"},
            [term(expr("cores", "Lt", "5"))],
            ALL,
            id="selector-AND-affinity",
        ),
        pytest.param(
            {"zone": "b"},
            [term(expr("cores", "Lt", "5"))],
            {"a", "c", "d"},
            id="selector-AND-affinity-match",
        ),
    ],
)
def test_filter(
    selector: dict[str, str] | None, required: list[dict[str, Any]] | None, rejected: set[str]
) -> None:
    cache = make_cache(NODES)
    raw = pod(node_selector=selector, required=required)
    result = run(make_plugin("NodeAffinity", cache), raw, cache)
    assert rejected_reasons(result, cache) == {name: [REASON] for name in rejected}
    assert set(rejection_codes(result, cache).values()) <= {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


@pytest.mark.parametrize(
    ("label", "operator", "value", "matches"),
    [
        ("10", "Gt", "9", True),
        ("10", "Lt", "9", False),
        ("007", "Gt", "6", True),
        ("eight", "Gt", "1", False),
        ("eight", "Lt", "1", False),
        pytest.param(
            "1_0",
            "Gt",
            "5",
            False,
        ),
        pytest.param(
            "99999999999999999999",
            "Gt",
            "5",
            False,
        ),
    ],
)
def test_gt_lt_parse_labels_as_int64(label: str, operator: str, value: str, matches: bool) -> None:
    cache = make_cache([node("n", labels={"v": label})])
    raw = pod(required=[term(expr("v", operator, value))])
    result = run(make_plugin("NodeAffinity", cache), raw, cache)
    assert (result is None) is matches


def test_no_selector_nor_required_passes() -> None:
    cache = make_cache(NODES)
    raw = pod(preferred=[{"weight": 5, "preference": term(expr("zone", "In", "x"))}])
    assert run(make_plugin("NodeAffinity", cache), raw, cache) is None


def test_label_change_invalidates_cached_masks() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    raw = pod(node_selector={"zone": "a"})
    assert set(rejected_reasons(run(plugin, raw, cache), cache)) == {"b", "c", "d"}
    cache.update_node(parse_node(node("d", labels={"zone": "a"})))
    cache.update_node(parse_node(node("a", labels={"zone": "x"})))
    assert set(rejected_reasons(run(plugin, raw, cache), cache)) == {"a", "b", "c"}


def pref(weight: int, t: dict[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "preference": t}


@pytest.mark.parametrize(
    ("preferred", "expected"),
    [
        pytest.param(
            [pref(20, term(expr("zone", "In", "a"))), pref(50, term(expr("cores", "Exists")))],
            # raw a=70, b=50, c=0, d=0; 100*50//70 = 71
            {"a": 100, "b": 71, "c": 0, "d": 0},
            id="sum-of-weights",
        ),
        pytest.param(
            [pref(3, term(expr("zone", "In", "c")))],
            {"a": 0, "b": 0, "c": 100, "d": 0},
            id="single",
        ),
        pytest.param(
            [pref(10, term(expr("zone", "In", "x")))],
            {"a": 0, "b": 0, "c": 0, "d": 0},
            id="none-match",
        ),
        pytest.param(
            [
                pref(10, term(fields=[name_field("In", "d")])),
                pref(30, term(expr("zone", "Exists"))),
            ],
            # raw a=30, b=30, c=30, d=10; 100*10//30 = 33
            {"a": 100, "b": 100, "c": 100, "d": 33},
            id="matchFields",
        ),
        pytest.param(
            [pref(40, term()), pref(10, term(expr("disk", "In", "ssd")))],
            {"a": 100, "b": 0, "c": 0, "d": 0},
            id="empty-preference-matches-nothing",
        ),
        pytest.param(
            [pref(7, term(expr("zone", "In", "a", "b"), expr("cores", "Lt", "6")))],
            {"a": 0, "b": 100, "c": 0, "d": 0},
            id="expressions-ANDed",
        ),
    ],
)
def test_score(preferred: list[dict[str, Any]], expected: dict[str, int]) -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    assert run_score(plugin, pod(preferred=preferred), cache) == expected


def test_score_normalizes_over_feasible_nodes_only() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    preferred = [pref(20, term(expr("zone", "In", "a"))), pref(50, term(expr("cores", "Exists")))]
    scores = run_score(plugin, pod(preferred=preferred), cache, feasible=["b", "c"])
    assert scores == {"b": 100, "c": 0}


def test_score_skipped_without_preferred_terms() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    scores = run_score(plugin, pod(node_selector={"zone": "a"}), cache)
    assert scores is None or set(scores.values()) == {0}


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [([0, 0], [0, 0]), ([1, 2, 3], [33, 66, 100]), ([70, 50, 0], [100, 71, 0])],
)
def test_normalize(raw: list[int], normalized: list[int]) -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    out = plugin.normalize(CycleState(), parsed(pod()), np.array(raw, dtype=np.int64))
    assert out.tolist() == normalized


@pytest.mark.parametrize(
    ("selector", "required", "names"),
    [
        pytest.param({"zone": "a"}, None, None, id="selector-only-all-nodes"),
        pytest.param(None, [term(expr("zone", "In", "a"))], None, id="no-fields"),
        pytest.param(None, [term(fields=[name_field("In", "a", "b")])], {"a", "b"}, id="In"),
        pytest.param(
            None,
            [term(fields=[name_field("In", "a")]), term(fields=[name_field("In", "b", "c")])],
            {"a", "b", "c"},
            id="terms-union",
        ),
        pytest.param(
            None,
            [term(fields=[name_field("In", "a", "b"), name_field("In", "b", "c")])],
            {"b"},
            id="fields-intersection",
        ),
        pytest.param(
            None,
            [term(fields=[name_field("In", "a")]), term(expr("zone", "In", "b"))],
            None,
            id="one-term-without-names-allows-all",
        ),
        pytest.param(None, [term(fields=[name_field("NotIn", "a")])], None, id="NotIn-no-narrow"),
        pytest.param(None, [term(fields=[name_field("In", "ghost")])], {"ghost"}, id="unknown"),
    ],
)
def test_pre_filter_narrows_to_named_nodes(
    selector: dict[str, str] | None, required: list[dict[str, Any]] | None, names: set[str] | None
) -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    result, status = plugin.pre_filter(
        CycleState(), parsed(pod(node_selector=selector, required=required)), cache.table
    )
    assert status.ok
    got = None if result is None else result.node_names
    assert got == (None if names is None else frozenset(names))


def test_pre_filter_skips_pods_without_selector_or_required_terms() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    raw = pod(preferred=[{"weight": 1, "preference": term(expr("zone", "In", "a"))}])
    _, status = plugin.pre_filter(CycleState(), parsed(raw), cache.table)
    assert status.code is Code.SKIP


def test_pre_filter_conflicting_names() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache)
    raw = pod(required=[term(fields=[name_field("In", "a"), name_field("In", "b")])])
    result, status = plugin.pre_filter(CycleState(), parsed(raw), cache.table)
    assert result is None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("pod affinity terms conflict",)


# -- addedAffinity ---------------------------------------------------------------------------

ENFORCED = "node(s) didn't match scheduler-enforced node affinity"


def added(
    required: list[dict[str, Any]] | None = None, preferred: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    if required is not None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"addedAffinity": affinity}


def test_added_required_terms_are_anded_with_the_pods_own() -> None:
    """A node the profile excludes is rejected for that reason alone; among the others the
    pod's own selector still applies."""
    cache = make_cache(NODES)
    plugin = make_plugin(
        "NodeAffinity", cache, added(required=[term(expr("zone", "In", "a", "b", "c"))])
    )
    result = run(plugin, pod(node_selector={"zone": "b"}), cache)
    assert rejected_reasons(result, cache) == {"a": [REASON], "c": [REASON], "d": [ENFORCED]}
    assert set(rejection_codes(result, cache).values()) == {Code.UNSCHEDULABLE_AND_UNRESOLVABLE}


def test_added_required_terms_filter_a_pod_with_none_of_its_own() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache, added(required=[term(expr("cores", "Exists"))]))
    raw = pod()
    _, status = plugin.pre_filter(CycleState(), parsed(raw), cache.table)
    assert status.code is not Code.SKIP
    assert rejected_reasons(run(plugin, raw, cache), cache) == {"c": [ENFORCED], "d": [ENFORCED]}


def test_added_required_of_only_empty_terms_matches_no_node() -> None:
    """component-helpers drops empty terms: what is left matches nothing."""
    cache = make_cache(NODES)
    plugin = make_plugin("NodeAffinity", cache, added(required=[{}]))
    assert rejected_reasons(run(plugin, pod(), cache), cache) == {n: [ENFORCED] for n in ALL}


def test_added_preferred_terms_score_every_pod() -> None:
    cache = make_cache(NODES)
    plugin = make_plugin(
        "NodeAffinity", cache, added(preferred=[pref(30, term(expr("cores", "Exists")))])
    )
    assert run_score(plugin, pod(), cache) == {"a": 100, "b": 100, "c": 0, "d": 0}
    # Added to the pod's own: a 30 + 60, b 30, c 60.
    own = [pref(60, term(expr("zone", "In", "a", "c")))]
    assert run_score(plugin, pod(preferred=own), cache) == {"a": 100, "b": 33, "c": 66, "d": 0}


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (added(required=[term(expr("zone", "Near", "a"))]), "operator: unsupported value"),
        (added(required=[term(expr("-zone", "Exists"))]), "key: invalid value '-zone'"),
        (added(required=[term(expr("zone", "In"))]), "values set can't be empty"),
        (
            added(preferred=[pref(1, term(expr("cores", "Gt", "many")))]),
            "the value must be an integer",
        ),
        (
            added(required=[term(fields=[name_field("In", "a", "b")])]),
            "matchFields[0].values: must have one element",
        ),
        ({"addedAffinity": {"required": {}}}, "addedAffinity.required: unknown field"),
    ],
)
def test_invalid_added_affinity_is_refused_with_its_path(
    args: dict[str, Any], problem: str
) -> None:
    from ascheduler.framework.errors import ConfigError
    from ascheduler.plugins import IN_TREE

    with pytest.raises(ConfigError) as err:
        IN_TREE["NodeAffinity"].decode_args(args, "args")
    (message,) = err.value.problems
    assert message.startswith("args.addedAffinity.")
    assert problem in message


def test_a_preferred_term_of_weight_zero_is_not_even_checked() -> None:
    from ascheduler.plugins import IN_TREE

    args = IN_TREE["NodeAffinity"].decode_args(
        added(preferred=[pref(0, term(expr("zone", "Near")))]), "args"
    )
    assert args.added.preferred == ()
