"""PrioritySort: higher spec.priority first (unset = 0), then the earlier queue timestamp."""

from __future__ import annotations

import pytest

from ascheduler.framework import QueuedPodInfo
from tests.kit import make_cache, make_plugin, parsed, pod


@pytest.mark.parametrize(
    ("queued", "order"),
    [
        pytest.param([("low", 1, 0.0), ("high", 10, 5.0)], ["high", "low"], id="priority"),
        pytest.param([("late", 5, 2.0), ("early", 5, 1.0)], ["early", "late"], id="timestamp"),
        pytest.param(
            [("neg", -5, 0.0), ("unset", None, 9.0), ("pos", 1, 10.0)],
            ["pos", "unset", "neg"],
            id="unset-is-zero",
        ),
        pytest.param(
            [("a", 0, 3.0), ("b", 100, 4.0), ("c", 0, 1.0), ("d", 100, 2.0)],
            ["d", "b", "c", "a"],
            id="mixed",
        ),
        pytest.param(
            [("x", 2_000_000_000, 9.0), ("y", 1_000_000_000, 1.0)],
            ["x", "y"],
            id="system-critical",
        ),
    ],
)
def test_order(queued: list[tuple[str, int | None, float]], order: list[str]) -> None:
    plugin = make_plugin("PrioritySort", make_cache([]))
    infos = [
        QueuedPodInfo(parsed(pod(name, priority=prio)), timestamp=ts) for name, prio, ts in queued
    ]
    ranked = sorted(infos, key=plugin.sort_key)
    assert [qp.pod.name for qp in ranked] == order
