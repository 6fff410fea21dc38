"""Plugin arguments decode by their declared types, refuse what the type does not take (with
the path), and encode back to a document that decodes to the same value."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from ascheduler.framework import ConfigError
from ascheduler.framework.args import Seconds, decode, encode


class Mode(enum.Enum):
    ONE = 1
    TWO = 2


HALF_MINUTE = Seconds(30)


@dataclass(frozen=True)
class Args:
    timeout: Seconds = HALF_MINUTE
    ratio: float = 0.5
    mode: Mode = Mode.ONE
    shape: Literal[1, "wide"] = 1
    limit: int | str = 10
    note: str | None = "kept"
    hint: str | None = None


def decoded(**raw: Any) -> Args:
    return decode(Args, raw, "args")


def refusal(**raw: Any) -> list[str]:
    with pytest.raises(ConfigError) as err:
        decoded(**raw)
    return err.value.problems


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("90s", 90.0), ("250ms", 0.25), ("1m30s", 90.0), (45, 45.0), (1.5, 1.5)],
)
def test_a_duration_is_a_number_or_go_text(raw: Any, seconds: float) -> None:
    assert decoded(timeout=raw).timeout == pytest.approx(seconds)


@pytest.mark.parametrize("raw", [float("nan"), float("inf"), "nan", True, "soon", [1]])
def test_a_duration_that_is_not_one_is_refused(raw: Any) -> None:
    (problem,) = refusal(timeout=raw)
    assert problem.startswith("args.timeout: not a duration")


@pytest.mark.parametrize("raw", [float("nan"), float("-inf"), True, "0.5"])
def test_a_float_must_be_a_finite_number(raw: Any) -> None:
    (problem,) = refusal(ratio=raw)
    assert problem.startswith("args.ratio: expected a finite number")


@pytest.mark.parametrize("raw", [True, 1.0, "1", 3])
def test_an_enum_takes_its_values_with_their_types(raw: Any) -> None:
    assert refusal(mode=raw) == [f"args.mode: must be one of 1, 2, got {raw!r}"]


def test_an_enum_value_decodes_to_its_member() -> None:
    assert decoded(mode=2).mode is Mode.TWO


@pytest.mark.parametrize("raw", [True, 1.0, "1"])
def test_a_literal_takes_its_choices_with_their_types(raw: Any) -> None:
    assert refusal(shape=raw) == [f"args.shape: must be one of 1, 'wide', got {raw!r}"]


def test_a_union_takes_the_first_member_that_fits() -> None:
    assert decoded(limit=7).limit == 7
    assert decoded(limit="all").limit == "all"
    assert refusal(limit=[1]) == ["args.limit: expected an integer or a string, got list [1]"]


def test_encode_round_trips_every_field() -> None:
    value = decoded(timeout="250ms", mode=2, shape="wide", limit="all", note=None)
    document = encode(value)
    assert document["timeout"] == "250ms"
    # None where the default is not None is written, so that it reads back as None.
    assert document["note"] is None
    assert "hint" not in document
    assert decode(Args, document, "args") == value


@pytest.mark.parametrize("seconds", [30.0, 0.25, 90.0, 1e-3, 5400.5])
def test_a_duration_encodes_exactly(seconds: float) -> None:
    document = encode(Args(timeout=Seconds(seconds)))
    assert decode(Args, document, "args").timeout == pytest.approx(seconds)
