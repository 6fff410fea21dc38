"""Node selector requirements, terms, tolerations and taints, matched as the API defines them."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.model.affinity import (
    NodeSelectorTerm,
    Requirement,
    SpecError,
    Taint,
    Toleration,
    parse_taint,
    parse_term,
    parse_toleration,
    tolerated,
)

LABELS = {"zone": "a", "cores": "8", "gpu": "", "name": "web"}


@pytest.mark.parametrize(
    ("key", "op", "values", "matches"),
    [
        ("zone", "In", ("a", "b"), True),
        ("zone", "In", ("b", "c"), False),
        ("missing", "In", ("a",), False),
        ("gpu", "In", ("",), True),
        ("zone", "NotIn", ("a", "b"), False),
        ("zone", "NotIn", ("b",), True),
        ("missing", "NotIn", ("a",), True),
        ("zone", "Exists", (), True),
        ("gpu", "Exists", (), True),  # an empty value still exists
        ("missing", "Exists", (), False),
        ("zone", "DoesNotExist", (), False),
        ("missing", "DoesNotExist", (), True),
        ("cores", "Gt", ("4",), True),
        ("cores", "Gt", ("8",), False),
        ("cores", "Gt", ("16",), False),
        ("cores", "Gt", ("-1",), True),
        ("missing", "Gt", ("0",), False),
        ("zone", "Gt", ("0",), False),  # not an integer label
        ("gpu", "Gt", ("-5",), False),  # empty label is not an integer
        ("cores", "Lt", ("16",), True),
        ("cores", "Lt", ("8",), False),
        ("cores", "Lt", ("4",), False),
        ("missing", "Lt", ("100",), False),
        ("name", "Lt", ("100",), False),
    ],
)
def test_requirement(key: str, op: str, values: tuple[str, ...], matches: bool) -> None:
    assert Requirement(key, op, values).matches(LABELS) is matches


def test_gt_lt_do_not_accept_python_only_integer_syntax() -> None:
    assert not Requirement("n", "Gt", ("5",)).matches({"n": "1_0"})
    assert not Requirement("n", "Lt", ("100",)).matches({"n": "1_0"})


def test_term_ands_its_expressions() -> None:
    term = NodeSelectorTerm(
        (Requirement("zone", "In", ("a",)), Requirement("cores", "Gt", ("4",))), ()
    )
    assert term.matches("n1", LABELS)
    assert not term.matches("n1", {**LABELS, "cores": "2"})
    assert not term.matches("n1", {"cores": "16"})


def test_empty_term_matches_nothing() -> None:
    assert not NodeSelectorTerm((), ()).matches("n1", LABELS)
    assert not NodeSelectorTerm((), ()).matches("n1", {})


@pytest.mark.parametrize(
    ("op", "values", "name", "matches"),
    [
        ("In", ("n1", "n2"), "n1", True),
        ("In", ("n2",), "n1", False),
        ("NotIn", ("n2",), "n1", True),
        ("NotIn", ("n1",), "n1", False),
    ],
)
def test_term_fields_match_node_name(
    op: str, values: tuple[str, ...], name: str, matches: bool
) -> None:
    term = NodeSelectorTerm((), (Requirement("metadata.name", op, values),))
    assert term.matches(name, {}) is matches


def test_term_fields_and_expressions_both_hold() -> None:
    term = NodeSelectorTerm(
        (Requirement("zone", "In", ("a",)),), (Requirement("metadata.name", "In", ("n1",)),)
    )
    assert term.matches("n1", {"zone": "a"})
    assert not term.matches("n2", {"zone": "a"})
    assert not term.matches("n1", {"zone": "b"})


def test_fields_ignore_labels_named_like_the_field() -> None:
    term = NodeSelectorTerm((), (Requirement("metadata.name", "In", ("n1",)),))
    assert not term.matches("n2", {"metadata.name": "n1"})


# -- tolerations -----------------------------------------------------------------------------

TAINT = Taint("key", "value", "NoSchedule")


@pytest.mark.parametrize(
    ("toleration", "tolerates"),
    [
        (Toleration("key", "Equal", "value", "NoSchedule"), True),
        (Toleration("key", "Equal", "value", ""), True),  # empty effect: every effect
        (Toleration("key", "Equal", "other", "NoSchedule"), False),
        (Toleration("key", "Equal", "", "NoSchedule"), False),
        (Toleration("key", "Equal", "value", "NoExecute"), False),
        (Toleration("key", "Equal", "value", "PreferNoSchedule"), False),
        (Toleration("other", "Equal", "value", "NoSchedule"), False),
        (Toleration("key", "Exists", "", "NoSchedule"), True),
        (Toleration("key", "Exists", "", ""), True),
        (Toleration("key", "Exists", "", "NoExecute"), False),
        (Toleration("other", "Exists", "", ""), False),
        (Toleration("", "Exists", "", ""), True),  # tolerates everything
        (Toleration("", "Exists", "", "NoSchedule"), True),
        (Toleration("", "Exists", "", "NoExecute"), False),
    ],
)
def test_toleration(toleration: Toleration, tolerates: bool) -> None:
    assert toleration.tolerates(TAINT) is tolerates


def test_equal_with_empty_value_matches_empty_taint_value() -> None:
    taint = Taint("dedicated", "", "NoExecute")
    assert Toleration("dedicated", "Equal", "", "NoExecute").tolerates(taint)
    assert not Toleration("dedicated", "Equal", "x", "NoExecute").tolerates(taint)


def test_tolerated_is_any() -> None:
    wrong = Toleration("other", "Exists", "", "")
    right = Toleration("key", "Equal", "value", "")
    assert tolerated((wrong, right), TAINT)
    assert not tolerated((wrong,), TAINT)
    assert not tolerated((), TAINT)


# -- parsing ---------------------------------------------------------------------------------


def test_parse_term() -> None:
    term = parse_term(
        {
            "matchExpressions": [
                {"key": "zone", "operator": "In", "values": ["a"]},
                {"key": "cores", "operator": "Lt", "values": ["10"]},
                {"key": "gpu", "operator": "DoesNotExist"},
            ],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}],
        },
        "t",
    )
    assert term == NodeSelectorTerm(
        (
            Requirement("zone", "In", ("a",)),
            Requirement("cores", "Lt", ("10",)),
            Requirement("gpu", "DoesNotExist", ()),
        ),
        (Requirement("metadata.name", "NotIn", ("n9",)),),
    )


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ("zone", "t: expected an object"),
        ({"matchExpressions": {"key": "a"}}, "t: matchExpressions"),
        ({"matchExpressions": ["x"]}, "t.matchExpressions[0]: expected an object"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "t.matchExpressions[0].key"),
        ({"matchExpressions": [{"key": "a", "operator": "in"}]}, "t.matchExpressions[0].operator"),
        ({"matchExpressions": [{"key": "a"}]}, "t.matchExpressions[0].operator"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "t.matchExpressions[0].values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "DoesNotExist", "values": ["x"]}]},
            "t.matchExpressions[0].values",
        ),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn"}]}, "t.matchExpressions[0].values"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1", "2"]}]},
            "t.matchExpressions[0].values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "Lt", "values": ["1.5"]}]},
            "t.matchExpressions[0].values[0]",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]},
            "t.matchExpressions[0].values",
        ),
        (
            {"matchExpressions": [{"key": "a", "operator": "In", "values": "a"}]},
            "t.matchExpressions[0].values",
        ),
        (
            {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]},
            "t.matchFields[0].operator",
        ),
        (
            {"matchFields": [{"key": "spec.podCIDR", "operator": "In", "values": ["x"]}]},
            "t.matchFields[0].key",
        ),
    ],
)
def test_parse_term_errors_name_the_field(raw: Any, where: str) -> None:
    with pytest.raises(SpecError) as excinfo:
        parse_term(raw, "t")
    assert str(excinfo.value).startswith(where)


def test_parse_toleration_defaults() -> None:
    assert parse_toleration({"key": "k", "value": "v"}, "t") == Toleration("k", "Equal", "v", "")
    assert parse_toleration({"operator": "Exists"}, "t") == Toleration("", "Exists", "", "")


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (None, "t: expected an object"),
        ("k=v", "t: expected an object"),
        ({"key": "k", "operator": "Contains"}, "t.operator"),
        ({"key": "k", "operator": "Gt", "value": "1"}, "t.operator"),
        ({"key": "k", "effect": "Sometimes"}, "t.effect"),
        ({"value": "v"}, "t.operator"),
        ({"key": "", "operator": "Equal"}, "t.operator"),
    ],
)
def test_parse_toleration_errors(raw: Any, where: str) -> None:
    with pytest.raises(SpecError) as excinfo:
        parse_toleration(raw, "t")
    assert str(excinfo.value).startswith(where)


@pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule", "NoExecute"])
def test_parse_taint(effect: str) -> None:
    assert parse_taint({"key": "k", "value": "v", "effect": effect}, "t") == Taint("k", "v", effect)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"key": "k", "effect": "Never"}, "t.effect"),
        ({"key": "k"}, "t.effect"),
        ({"effect": "NoSchedule"}, "t.key"),
        ([], "t.key"),
    ],
)
def test_parse_taint_errors(raw: Any, where: str) -> None:
    with pytest.raises(SpecError) as excinfo:
        parse_taint(raw, "t")
    assert str(excinfo.value).startswith(where)
