"""Releases and `--feature-gates`: kube-scheduler's syntax and messages, each release's
defaults, locked gates, dependencies, and the release chosen from the API server's."""

from __future__ import annotations

import re

import pytest

from ascheduler import features
from ascheduler.config import Overrides, SchedulerConfig, apply
from ascheduler.features import (
    NODE_DECLARED_FEATURES,
    STORAGE_CAPACITY_SCORING,
    Features,
    Release,
    cluster_release,
    parse_emulated_version,
    parse_gates,
    spec_at,
)
from ascheduler.framework import ConfigError

R35, R36, R37 = Release(1, 35), Release(1, 36), Release(1, 37)


def test_gates_parse_over_the_defaults() -> None:
    base = Features.defaults(R35).enabled
    assert STORAGE_CAPACITY_SCORING not in base
    assert parse_gates("", R35).enabled == base
    assert parse_gates("StorageCapacityScoring=true", R35).enabled == base | {
        STORAGE_CAPACITY_SCORING
    }
    assert STORAGE_CAPACITY_SCORING in parse_gates(" StorageCapacityScoring = True ,", R35)
    assert STORAGE_CAPACITY_SCORING in parse_gates("StorageCapacityScoring=1", R35)
    last_wins = parse_gates("StorageCapacityScoring=true,StorageCapacityScoring=f", R35)
    assert STORAGE_CAPACITY_SCORING not in last_wins


@pytest.mark.parametrize(
    ("release", "on", "off"),
    [
        (R35, {"SchedulerQueueingHints", "ImageVolume"}, {NODE_DECLARED_FEATURES}),
        (R36, {NODE_DECLARED_FEATURES, features.POD_LEVEL_RESIZE}, {STORAGE_CAPACITY_SCORING}),
        (R37, {STORAGE_CAPACITY_SCORING, features.VOLUME_LIMIT_SCALING}, {"GenericWorkload"}),
    ],
)
def test_each_release_has_its_own_defaults(release: Release, on: set[str], off: set[str]) -> None:
    defaults = Features.defaults(release)
    assert defaults.release == release
    assert on <= defaults.enabled
    assert not off & defaults.enabled


@pytest.mark.parametrize(
    ("text", "release", "message"),
    [
        ("Nope=true", R35, "unrecognized feature gate: Nope"),
        # Known from 1.36 on, gone from 1.37's table.
        ("TopologyAwareWorkloadScheduling=true", R35, "unrecognized feature gate"),
        ("SchedulerQueueingHints=true", R37, "unrecognized feature gate: SchedulerQueueingHints"),
        ("StorageCapacityScoring", R35, "missing bool value for StorageCapacityScoring"),
        (
            "StorageCapacityScoring=yes",
            R35,
            'invalid value of StorageCapacityScoring=yes, err: strconv.ParseBool: parsing "yes"',
        ),
        (
            "NodeDeclaredFeatures=false",
            R37,
            "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true",
        ),
        # On by default in 1.36, two other gates on by default need it.
        (
            "NodeDeclaredFeatures=false",
            R36,
            "InPlacePodLevelResourcesVerticalScaling is enabled, but depends on features that "
            "are disabled: [NodeDeclaredFeatures]",
        ),
        (
            "GangScheduling=true",
            R35,
            "GangScheduling is enabled, but depends on features that are disabled: "
            "[GenericWorkload]",
        ),
    ],
)
def test_bad_gates_are_named(text: str, release: Release, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_gates(text, release)


def test_a_gate_off_with_what_needs_it_is_accepted() -> None:
    gates = parse_gates(
        "NodeDeclaredFeatures=false,InPlacePodLevelResourcesVerticalScaling=false,"
        "RestartAllContainersOnContainerExits=false",
        R36,
    )
    assert NODE_DECLARED_FEATURES not in gates


def test_setting_a_locked_gate_to_its_default_warns_only() -> None:
    gates = parse_gates("NodeDeclaredFeatures=true", R37)
    assert NODE_DECLARED_FEATURES in gates
    assert any("GA feature gate NodeDeclaredFeatures" in w for w in gates.warnings)


def test_all_alpha_turns_on_the_alpha_gates_not_named() -> None:
    gates = parse_gates(
        "AllAlpha=true,GenericWorkload=true,InterPodAffinityHostnameFastPath=false", R37
    )
    assert features.SCHEDULER_PREEMPTION_FOR_RESIZE in gates
    assert "InterPodAffinityHostnameFastPath" not in gates
    assert STORAGE_CAPACITY_SCORING in gates  # beta, on by default


def test_specs_follow_the_versioned_table() -> None:
    spec = spec_at(NODE_DECLARED_FEATURES, R37)
    assert spec is not None
    assert spec.locked
    assert spec.default
    assert spec_at("CSIMigrationPortworx", R35) is not None
    assert spec_at("CSIMigrationPortworx", R36) is None
    assert spec_at(features.SCHEDULER_PREEMPTION_FOR_RESIZE, R36) is None


def test_features_say_which_release() -> None:
    gates = Features.defaults(R36)
    assert gates.since(1, 35)
    assert gates.since(1, 36)
    assert not gates.since(1, 37)


@pytest.mark.parametrize(
    ("text", "release"), [("1.36", R36), ("kube=1.37", R37), ("v1.35", R35), (" 1.36.3 ", R36)]
)
def test_the_emulated_version_names_a_supported_release(text: str, release: Release) -> None:
    assert parse_emulated_version(text) == release


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.34", "emulation version 1.34 is not between [1.35, 1.37]"),
        ("1.38", "emulation version 1.38 is not between [1.35, 1.37]"),
        ("etcd=1.36", "unknown component 'etcd'"),
        ("latest", "not a Kubernetes version"),
    ],
)
def test_a_bad_emulated_version_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_emulated_version(text)


def test_the_release_follows_the_api_server() -> None:
    assert cluster_release("v1.36.3", None) == (R36, None)
    assert cluster_release("v1.37.0-rc.1", None) == (R37, None)
    release, warning = cluster_release("v1.38.1", None)
    assert release == R37
    assert warning is not None
    assert "v1.38.1" in warning
    release, warning = cluster_release("v1.37.2", R35)
    assert release == R35
    assert warning is not None
    for too_far in ("v1.34.9", "v1.39.0"):
        with pytest.raises(ValueError, match="--emulated-version"):
            cluster_release(too_far, None)
    assert cluster_release("v1.34.9", R35)[0] == R35


def test_the_flags_set_the_config_s_release_and_features() -> None:
    config = apply(SchedulerConfig(), Overrides(feature_gates="StorageCapacityScoring=true"))
    assert STORAGE_CAPACITY_SCORING in config.features
    assert config.feature_gates == "StorageCapacityScoring=true"
    assert config.emulated_version is None
    config = apply(SchedulerConfig(), Overrides(emulated_version="1.37"))
    assert config.emulated_version == R37
    assert config.features == Features.defaults(R37)
    config = apply(
        SchedulerConfig(),
        Overrides(
            emulated_version="1.36",
            feature_gates="GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
        ),
    )
    assert features.TOPOLOGY_AWARE_WORKLOAD_SCHEDULING in config.features
    with pytest.raises(ConfigError, match="--feature-gates: unrecognized feature gate: X"):
        apply(SchedulerConfig(), Overrides(feature_gates="X=true"))
    # Without --emulated-version the API server decides the release later: a later
    # release's gate passes the flag; pinned to 1.35 it does not.
    later = "InPlacePodVerticalScalingSchedulerPreemption=true"
    config = apply(SchedulerConfig(), Overrides(feature_gates=later))
    assert config.feature_gates == later  # read again at the API server's release
    assert features.SCHEDULER_PREEMPTION_FOR_RESIZE in parse_gates(config.feature_gates, R37)
    # So does a gate the default release (the newest) no longer lists, read meanwhile as the
    # newest release that lists it reads it; pinned to 1.37 it does not.
    earlier = "SchedulerQueueingHints=true"
    config = apply(SchedulerConfig(), Overrides(feature_gates=earlier))
    assert (config.feature_gates, config.features.release) == (earlier, R36)
    with pytest.raises(ConfigError, match="unrecognized feature gate: SchedulerQueueingHints"):
        apply(SchedulerConfig(), Overrides(emulated_version="1.37", feature_gates=earlier))
    # Refused by each release its own way (unknown to 1.35, its dependency off from 1.36):
    # the API server's release says which (`app.behave_as`); pinned, the release says it.
    topology = "TopologyAwareWorkloadScheduling=true"
    config = apply(SchedulerConfig(), Overrides(feature_gates=topology))
    assert (config.feature_gates, config.features) == (topology, Features.defaults())
    with pytest.raises(ConfigError, match="depends on features that are disabled"):
        apply(SchedulerConfig(), Overrides(emulated_version="1.37", feature_gates=topology))
    # A gate no release knows, or a bad value, still stops it here.
    with pytest.raises(ConfigError, match="unrecognized feature gate: X"):
        apply(SchedulerConfig(), Overrides(feature_gates=f"{later},X=true"))
    with pytest.raises(ConfigError, match="invalid value of GenericWorkload=maybe"):
        apply(SchedulerConfig(), Overrides(feature_gates=f"{later},GenericWorkload=maybe"))
    with pytest.raises(ConfigError, match="unrecognized feature gate"):
        apply(SchedulerConfig(), Overrides(emulated_version="1.35", feature_gates=later))
    with pytest.raises(ConfigError, match=r"--emulated-version: emulation version 1\.30"):
        apply(SchedulerConfig(), Overrides(emulated_version="1.30"))
