"""Lock values, durations, settings from the environment, and the fit re-validation."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from ascheduler.binding.binder import BindSettings, shortfall
from ascheduler.binding.nodelock import (
    DEFAULT_TIMEOUT,
    EXPIRE_ENV,
    Holder,
    LockSettings,
    parse_seconds,
)
from ascheduler.model import parse_pod


def test_holder_round_trips_hami_format() -> None:
    when = dt.datetime(2026, 11, 22, 5, 0, 1, tzinfo=dt.UTC)
    value = Holder(when, "ns", "pod-a").format()
    assert value == "2026-11-22T05:00:01Z,ns,pod-a"
    assert Holder.parse(value) == Holder(when, "ns", "pod-a")
    offset = Holder.parse("2026-11-22T07:00:01+02:00,ns,p")
    assert offset is not None
    assert offset.time == when


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "garbage",
        "2026-11-22T05:00:01Z,ns",
        "yesterday,ns,pod",
        "2026-11-22T05:00:01,ns,pod",
        "2026-11-22T05:00:01Z,,pod",
        "2026-11-22T05:00:01Z,ns,pod,extra",
    ],
)
def test_garbage_values_do_not_parse(garbage: str) -> None:
    assert Holder.parse(garbage) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300.0),
        ("2.5", 2.5),
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
    ],
)
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("bad", ["", "five", "5x", "m5", "1m30"])
def test_parse_seconds_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(bad)


def test_timeout_from_env_and_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXPIRE_ENV, raising=False)
    assert LockSettings.from_env().timeout == DEFAULT_TIMEOUT
    monkeypatch.setenv(EXPIRE_ENV, "2m")
    assert LockSettings.from_env().timeout == 120.0
    assert LockSettings.from_env(timeout=7.0).timeout == 7.0  # the flag wins
    monkeypatch.setenv(EXPIRE_ENV, "soon")
    with pytest.raises(ValueError, match="not a duration"):
        LockSettings.from_env()


def test_policy_is_validated() -> None:
    with pytest.raises(ValueError, match="policy must be one of"):
        BindSettings(policy="sometimes")


def _pod(uid: str, requests: dict[str, str], phase: str = "Running") -> Any:
    return parse_pod(
        {
            "metadata": {"name": uid, "namespace": "x", "uid": uid},
            "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]},
            "status": {"phase": phase},
        }
    )


def test_shortfall_counts_the_pods_already_on_the_node() -> None:
    alloc = {"cpu": 4000, "memory": 8 << 30, "pods": 3, "nvidia.com/gpu": 2}
    gpu = {"cpu": "1", "nvidia.com/gpu": "1"}
    incoming = _pod("new", gpu)
    assert shortfall(incoming, alloc, [_pod("a", gpu)]) == []
    assert shortfall(incoming, alloc, [_pod("a", gpu), _pod("b", gpu)]) == ["nvidia.com/gpu"]
    # Finished pods and the pod itself do not count.
    assert (
        shortfall(incoming, alloc, [_pod("a", gpu), _pod("b", gpu, "Succeeded"), _pod("new", gpu)])
        == []
    )
    crowded = [_pod(f"p{i}", {"cpu": "1500m"}) for i in range(3)]
    assert shortfall(incoming, alloc, crowded) == ["pods", "cpu"]
