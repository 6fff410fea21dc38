"""Kubernetes quantities as exact integers: millis for cpu, base units otherwise, rounded up."""

from __future__ import annotations

import math

import pytest

from ascheduler.model.quantity import (
    MAX_QUANTITY,
    QuantityError,
    parse_fraction,
    parse_milli,
    parse_resource,
    parse_value,
    saturating_add,
)

GI = 2**30
MI = 2**20


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("100m", 100, 1),  # a tenth of a core is 1 in base units (rounded up)
        ("1m", 1, 1),
        ("1", 1000, 1),
        ("0", 0, 0),
        ("0.5", 500, 1),
        (".5", 500, 1),
        ("+1", 1000, 1),
        ("1.", 1000, 1),
        ("1.0001", 1001, 2),  # 1000.1 millis and 1.0001 both round up
        ("1u", 1, 1),  # a millionth rounds up to one milli
        ("100n", 1, 1),
        ("1k", 1_000_000, 1000),
        ("1M", 10**9, 10**6),
        ("1G", 10**12, 10**9),
        ("1T", 10**15, 10**12),
        ("1P", MAX_QUANTITY, 10**15),  # its millis are clamped
        ("1E", MAX_QUANTITY, MAX_QUANTITY),  # exa (not an exponent), past the clamp
        ("1Ki", 1024 * 1000, 1024),
        ("500Mi", 500 * MI * 1000, 500 * MI),
        ("1.5Gi", 1536 * MI * 1000, 1536 * MI),
        ("1Ti", 2**40 * 1000, 2**40),
        ("2e3", 2_000_000, 2000),
        ("2E3", 2_000_000, 2000),
        ("2e+3", 2_000_000, 2000),
        ("1e-3", 1, 1),
        ("12e-1", 1200, 2),
        ("1.5e2", 150_000, 150),
        ("5e0", 5000, 5),
        (3, 3000, 3),  # plain numbers are accepted as they are
        (0.25, 250, 1),
    ],
)
def test_valid_quantities(text: object, milli: int, value: int) -> None:
    assert parse_milli(text) == milli
    assert parse_value(text) == value


def test_fraction_is_exact() -> None:
    assert parse_fraction("1.5Gi") == 3 * 2**29
    assert parse_fraction("100m") * 10 == 1
    assert parse_fraction("1e-3") * 1000 == 1


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("cpu", "250m", 250),
        ("cpu", "2", 2000),
        ("memory", "1Gi", GI),
        ("memory", "250m", 1),
        ("ephemeral-storage", "10G", 10 * 10**9),
        ("pods", "110", 110),
        ("nvidia.com/gpu", "2", 2),
        ("hugepages-2Mi", "4Mi", 4 * MI),
    ],
)
def test_parse_resource_uses_millis_for_cpu_only(name: str, text: str, expected: int) -> None:
    assert parse_resource(name, text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "lots",
        "1.2.3",
        "10 Gi",
        "",
        " ",
        "1Qi",
        "1KI",
        "1ki",
        "1e",
        "e3",
        "Mi",
        "1Gi2",
        "1e3Mi",
        "0x10",
        "1,5",
        "--1",
        "nan",
        "inf",
        "1" * 65,
        True,
        False,
        None,
        math.nan,
        math.inf,
        -math.inf,
        [],
        {},
        ["1"],
    ],
    ids=repr,
)
def test_invalid_quantities_raise(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_milli(text)
    with pytest.raises(QuantityError):
        parse_value(text)
    with pytest.raises(QuantityError):
        parse_resource("memory", text)


def test_quantity_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_value("lots")


def test_exponent_out_of_range_is_rejected_not_computed() -> None:
    with pytest.raises(QuantityError, match="exponent"):
        parse_value("1e999999999")


@pytest.mark.parametrize(
    "text", ["1000000Ei", "9" * 60, "1e30", "8Ei", 10**40, 1e300, "99999999999999999999k"]
)
def test_enormous_values_are_clamped(text: object) -> None:
    assert parse_value(text) == MAX_QUANTITY
    assert parse_milli(text) == MAX_QUANTITY
    assert parse_resource("cpu", text) == MAX_QUANTITY


def test_enormous_negative_values_are_clamped() -> None:
    assert parse_value("-1000000Ei") == -MAX_QUANTITY
    assert parse_milli("-1e30") == -MAX_QUANTITY


def test_values_just_below_the_clamp_are_exact() -> None:
    assert parse_value("63Pi") == 63 * 2**50
    assert parse_milli("60Ti") == 60 * 2**40 * 1000
    # 64Pi is exactly 2**56: the clamp itself.
    assert parse_value("64Pi") == MAX_QUANTITY
    assert parse_value("4Ei") == MAX_QUANTITY


def test_saturating_add_never_leaves_the_range() -> None:
    assert saturating_add(MAX_QUANTITY, MAX_QUANTITY) == MAX_QUANTITY
    assert saturating_add(-MAX_QUANTITY, -1) == -MAX_QUANTITY
    assert saturating_add(MAX_QUANTITY, -MAX_QUANTITY) == 0
    assert saturating_add(2, 3) == 5
