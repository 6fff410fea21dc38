"""The comparison's two schedulers, for the whole differential session: kube-scheduler built
from the plane's release (profile `diff-kube`) and ascheduler (profile `diff-asch`), both
stopped by pid at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient
from tests.integration.differential.harness import ASCHEDULER, KUBE, KUBE_PROFILE, Runner


@pytest.fixture(scope="session")
def schedulers(plane: ControlPlane) -> Iterator[tuple[ProcessRecord, ProcessRecord]]:
    kube = plane.start_kube_scheduler(
        name="diff-kube-scheduler", scheduler_name=KUBE, profile=KUBE_PROFILE
    )
    ours = plane.start_ascheduler(
        "diff-ascheduler", "--scheduler-name", ASCHEDULER, "--log-level", "debug"
    )
    try:
        yield kube, ours
    finally:
        plane.stop_process(ours)
        plane.stop_process(kube)


@pytest.fixture
def runner(
    kube: KubeClient, plane: ControlPlane, schedulers: tuple[ProcessRecord, ProcessRecord]
) -> Runner:
    return Runner(kube, plane)
