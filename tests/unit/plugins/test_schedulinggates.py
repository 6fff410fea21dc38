"""SchedulingGates: a gated pod stays out of the active queue
(`waiting for scheduling gates: [a b]`, UnschedulableAndUnresolvable)."""

from __future__ import annotations

import pytest

from ascheduler.framework import Code
from tests.kit import make_cache, make_plugin, parsed, pod


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        pytest.param(["example.com/quota"], "waiting for scheduling gates: [example.com/quota]"),
        pytest.param(["b", "a"], "waiting for scheduling gates: [b a]"),
    ],
)
def test_gated(gates: list[str], message: str) -> None:
    plugin = make_plugin("SchedulingGates", make_cache([]))
    status = plugin.pre_enqueue(parsed(pod(gates=gates)))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (message,)
    assert status.plugin == "SchedulingGates"


def test_ungated_passes() -> None:
    plugin = make_plugin("SchedulingGates", make_cache([]))
    assert plugin.pre_enqueue(parsed(pod())).ok
