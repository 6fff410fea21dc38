"""Selector results that are no bool fail with kube-scheduler's words for each type."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.dra.cel import EvalError, compile_selector, evaluate, quantity_bytes, semver_bytes
from ascheduler.model.dra import parse_semver

DEVICE: dict[str, Any] = {
    "driver": "d",
    "attributes": {
        "d": {"s": "x", "i": 3, "v": semver_bytes(parse_semver("1.2.3")), "ok": True},
    },
    "capacity": {"d": {"m": quantity_bytes(1)}},
}


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        (
            'device.attributes["d"].s',
            "CEL result of type string could not be converted to bool: "
            "unsupported native conversion from string to 'bool'",
        ),
        (
            'device.attributes["d"].i',
            "CEL result of type int could not be converted to bool: "
            "unsupported type conversion from 'int' to bool",
        ),
        (
            'device.capacity["d"].m',
            "CEL result of type kubernetes.Quantity could not be converted to bool: "
            "type conversion error from 'Quantity' to 'bool'",
        ),
        (
            'device.attributes["d"].v',
            "CEL result of type kubernetes.Semver could not be converted to bool: "
            "type conversion error from 'Semver' to 'bool'",
        ),
    ],
)
def test_a_result_that_is_no_bool_says_so_as_kube_scheduler_does(
    expression: str, words: str
) -> None:
    with pytest.raises(EvalError) as caught:
        evaluate(compile_selector(expression), DEVICE)
    assert str(caught.value) == words


def test_a_bool_attribute_is_the_verdict() -> None:
    assert evaluate(compile_selector('device.attributes["d"].ok'), DEVICE) is True
