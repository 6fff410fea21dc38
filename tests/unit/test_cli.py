"""`ascheduler config defaults|validate --emulated-version`: a configuration read as the named
release's kube-scheduler reads it (its default profile, its plugins' args)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ascheduler.cli import main


def _defaults(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    assert main(["config", "defaults", *flags]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert isinstance(document, dict)
    return document


def _multipoint(document: dict[str, Any]) -> list[str]:
    return [p["name"] for p in document["profiles"][0]["plugins"]["multiPoint"]["enabled"]]


def _args(document: dict[str, Any], plugin: str) -> dict[str, Any]:
    configs = document["profiles"][0]["pluginConfig"]
    found = [c["args"] for c in configs if c["name"] == plugin]
    assert len(found) == 1, plugin
    return dict(found[0])


@pytest.mark.parametrize(
    ("flags", "declared_features", "unschedulable_after_name", "shape"),
    [
        ((), True, True, True),
        (("--emulated-version", "1.35"), False, False, False),
        (("--emulated-version", "1.36"), True, False, False),
        (("--emulated-version", "1.37"), True, True, True),
    ],
    ids=["default-is-1.37", "1.35", "1.36", "1.37"],
)
def test_defaults_are_the_release_s(
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str, ...],
    declared_features: bool,
    unschedulable_after_name: bool,
    shape: bool,
) -> None:
    document = _defaults(capsys, *flags)
    names = _multipoint(document)
    assert ("NodeDeclaredFeatures" in names) == declared_features
    assert (names.index("NodeName") < names.index("NodeUnschedulable")) == unschedulable_after_name
    # VolumeBinding's default shape comes with StorageCapacityScoring (on from 1.37).
    assert ("shape" in _args(document, "VolumeBinding")) == shape


def test_a_gate_changes_the_release_s_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    document = _defaults(
        capsys, "--emulated-version", "1.37", "--feature-gates", "StorageCapacityScoring=false"
    )
    assert "shape" not in _args(document, "VolumeBinding")


def test_gates_are_checked_at_the_default_release_when_none_is_named(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """SchedulerQueueingHints is gone from 1.37's table (the default release): `ascheduler
    run` would leave it to the API server's release, the config commands have none to ask."""
    gate = ("--feature-gates", "SchedulerQueueingHints=true")
    assert main(["config", "defaults", *gate]) == 2
    assert "unrecognized feature gate: SchedulerQueueingHints" in capsys.readouterr().err
    assert "NodeDeclaredFeatures" in _multipoint(
        _defaults(capsys, *gate, "--emulated-version", "1.36")
    )


def test_an_unknown_release_is_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["config", "defaults", "--emulated-version", "1.20"]) == 2
    assert "--emulated-version" in capsys.readouterr().err


def test_validate_reads_the_file_as_the_release(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """VolumeBinding's `shape` needs StorageCapacityScoring, off before 1.37 (the default
    release)."""
    path = tmp_path / "shape.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "pluginConfig": [
                            {
                                "name": "VolumeBinding",
                                "args": {"shape": [{"utilization": 0, "score": 10}]},
                            }
                        ],
                    }
                ],
            }
        )
    )
    for release in ("1.35", "1.36"):
        assert main(["config", "validate", str(path), "--emulated-version", release]) == 2
        assert "shape" in capsys.readouterr().err
    assert main(["config", "validate", str(path), "--emulated-version", "1.37"]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["config", "validate", str(path)]) == 0
    assert "valid" in capsys.readouterr().out
