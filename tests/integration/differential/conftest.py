"""The comparison's two schedulers, for the whole differential session: kube-scheduler built
from the plane's release (profile `diff-kube`, logging its scores: `scores.py`) and ascheduler
(profile `diff-asch`), both stopped by pid at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ascheduler.devcluster import ControlPlane
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import ApiError, KubeClient
from tests.integration.differential.harness import (
    ASCHEDULER,
    KUBE,
    PRIORITY_CLASSES,
    Runner,
)
from tests.integration.differential.scores import SCORE_LOG_ARGS


@pytest.fixture(scope="session")
def schedulers(plane: ControlPlane) -> Iterator[tuple[ProcessRecord, ProcessRecord]]:
    kube = plane.start_kube_scheduler(
        name="diff-kube-scheduler", scheduler_name=KUBE, extra_args=SCORE_LOG_ARGS
    )
    ours = plane.start_ascheduler(
        "diff-ascheduler", "--scheduler-name", ASCHEDULER, "--log-level", "debug"
    )
    try:
        yield kube, ours
    finally:
        plane.stop_process(ours)
        plane.stop_process(kube)


@pytest.fixture(scope="session")
async def priority_classes(kube: KubeClient) -> None:
    """The priority classes the preemption scenarios name (cluster-scoped, kept)."""
    for name, (value, policy) in PRIORITY_CLASSES.items():
        body = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "preemptionPolicy": policy,
        }
        try:
            await kube.post("/apis/scheduling.k8s.io/v1/priorityclasses", body)
        except ApiError as exc:
            if not exc.conflict:
                raise


@pytest.fixture
def runner(
    kube: KubeClient,
    plane: ControlPlane,
    schedulers: tuple[ProcessRecord, ProcessRecord],
    priority_classes: None,
) -> Runner:
    return Runner(kube, plane, logs={KUBE: schedulers[0].log})
