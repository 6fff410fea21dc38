"""`--feature-gates`: kube-scheduler's syntax, the gates ascheduler knows, clear errors."""

from __future__ import annotations

import pytest

from ascheduler.config import Overrides, SchedulerConfig, apply
from ascheduler.features import STORAGE_CAPACITY_SCORING, defaults, parse_gates
from ascheduler.framework import ConfigError


def test_gates_parse_over_the_defaults() -> None:
    assert defaults() == frozenset()
    assert parse_gates("") == frozenset()
    assert parse_gates("StorageCapacityScoring=true") == {STORAGE_CAPACITY_SCORING}
    assert parse_gates(" StorageCapacityScoring = True ,") == {STORAGE_CAPACITY_SCORING}
    assert parse_gates("StorageCapacityScoring=true,StorageCapacityScoring=false") == frozenset()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Nope=true", "unrecognized feature gate: Nope"),
        ("StorageCapacityScoring", "missing bool value for StorageCapacityScoring"),
        ("StorageCapacityScoring=yes", "invalid value of StorageCapacityScoring=yes"),
    ],
)
def test_bad_gates_are_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gates(text)


def test_the_flag_sets_the_config_s_features() -> None:
    config = apply(SchedulerConfig(), Overrides(feature_gates="StorageCapacityScoring=true"))
    assert config.features == {STORAGE_CAPACITY_SCORING}
    with pytest.raises(ConfigError, match="--feature-gates: unrecognized feature gate: X"):
        apply(SchedulerConfig(), Overrides(feature_gates="X=true"))
