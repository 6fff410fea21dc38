"""The binder process's service as the shared runner drives it: whatever way serving ends,
its release lets go of the locks the request binder still holds."""

from __future__ import annotations

from typing import cast

import pytest

from ascheduler.binding.binder import BindSettings, LockedBinder
from ascheduler.binding.service import Binding, RequestBinder
from ascheduler.features import Features, Release
from ascheduler.framework.runtime import Framework
from ascheduler.kube import KubeClient
from ascheduler.model.resources import RequestsRule
from tests.unit.explain.test_cold import RESIZED


class _Locks:
    def __init__(self) -> None:
        self.released = 0

    async def release_all(self) -> dict[str, str]:
        self.released += 1
        return {}


class _Service:
    def __init__(self) -> None:
        self.binder = _Locks()


async def test_release_lets_go_of_the_locks_still_held() -> None:
    service = _Service()
    binding = Binding(
        cast(RequestBinder, service),
        cast(KubeClient, None),
        cast(KubeClient, None),
        grace=1.0,
    )
    await binding.release()
    assert service.binder.released == 1


def _request_binder(rule: RequestsRule) -> RequestBinder:
    kube = cast(KubeClient, None)
    fw = cast(Framework, None)
    return RequestBinder(kube, kube, LockedBinder(kube, BindSettings()), fw, requests_rule=rule)


@pytest.mark.parametrize(
    ("release", "cpu"),
    [(Release(1, 35), 4000), (Release(1, 36), 4000), (Release(1, 37), 3000)],
    ids=str,
)
def test_pods_are_read_as_the_api_server_s_release(release: Release, cpu: int) -> None:
    """A resized pod's requests (what a re-validation fits against) per release: 1.37 takes
    the largest whole-pod aggregate, earlier releases the largest per container."""
    service = _request_binder(RequestsRule.of(Features.defaults(release)))
    pods = next(i for i in service.informers if i.name == "pods")
    assert pods.parse(RESIZED).requests["cpu"] == cpu
