"""The binder process's service as the shared runner drives it: whatever way serving ends,
its release lets go of the locks the request binder still holds."""

from __future__ import annotations

from typing import cast

from ascheduler.binding.service import Binding, RequestBinder
from ascheduler.kube import KubeClient


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
