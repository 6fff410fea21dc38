"""DefaultBinder: transient failures are retried, and a 409 is settled by reading the pod back
(a retry of a bind whose answer was lost answers 409)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from ascheduler.framework import CycleState, Handle
from ascheduler.framework.interface import Code
from ascheduler.kube import ApiError, ConnectionFailed
from ascheduler.plugins import defaultbinder
from ascheduler.plugins.defaultbinder import DefaultBinder
from tests.kit import pod_info

POD = pod_info("p", namespace="ns", uid="uid-1")
BINDING = "/api/v1/namespaces/ns/pods/p/binding"


class Kube:
    """Answers the binding POST from a script, and the pod GET with `pod`."""

    def __init__(self, answers: list[BaseException | None], pod: dict[str, Any]) -> None:
        self.answers = answers
        self.pod = pod
        self.posts = 0

    async def request(self, method: str, path: str, **kwargs: Any) -> None:
        assert (method, path) == ("POST", BINDING)
        self.posts += 1
        answer = self.answers.pop(0)
        if answer is not None:
            raise answer

    async def get(self, path: str) -> dict[str, Any]:
        return self.pod


def lost() -> ConnectionFailed:
    return ConnectionFailed("POST", BINDING, aiohttp.ServerDisconnectedError())


def conflict() -> ApiError:
    return ApiError(409, "Conflict", "already assigned", method="POST", path=BINDING)


def bound(node: str, uid: str = "uid-1") -> dict[str, Any]:
    return {"metadata": {"uid": uid}, "spec": {"nodeName": node}}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(defaultbinder, "FIRST_RETRY_DELAY", 0.001)


async def bind(kube: Kube) -> Any:
    handle = Handle(kube=kube)  # type: ignore[arg-type]
    return await DefaultBinder(handle).bind(CycleState(), POD, "n1")


async def test_a_lost_answer_then_409_is_a_success_when_the_pod_is_on_our_node() -> None:
    kube = Kube([lost(), conflict()], bound("n1"))
    status = await bind(kube)
    assert status.ok
    assert kube.posts == 2


@pytest.mark.parametrize(
    ("pod", "says"),
    [
        (bound("n2"), "is bound to n2"),
        (bound("n1", uid="uid-2"), "was recreated"),
        (bound(""), "binding refused"),
    ],
)
async def test_a_409_for_a_pod_bound_elsewhere_or_recreated_is_an_error(
    pod: dict[str, Any], says: str
) -> None:
    status = await bind(Kube([conflict()], pod))
    assert status.code is Code.ERROR
    assert says in status.message


async def test_transient_failures_are_retried_and_permanent_ones_are_not() -> None:
    unavailable = ApiError(503, "ServiceUnavailable", "", method="POST", path=BINDING)
    kube = Kube([unavailable, lost(), None], bound(""))
    assert (await bind(kube)).ok
    assert kube.posts == 3
    forbidden = ApiError(403, "Forbidden", "no", method="POST", path=BINDING)
    kube = Kube([forbidden], bound(""))
    status = await bind(kube)
    assert not status.ok
    assert kube.posts == 1
    assert "permanent" in status.message


async def test_retries_are_bounded() -> None:
    kube = Kube([lost() for _ in range(defaultbinder.ATTEMPTS)], bound(""))
    status = await bind(kube)
    assert not status.ok
    assert kube.posts == defaultbinder.ATTEMPTS
