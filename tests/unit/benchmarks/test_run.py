"""What a benchmark run does to the plane before it measures."""

from __future__ import annotations

from typing import Any

from ascheduler.kube import ApiError
from benchmarks.run import collect_apiserver_garbage


class Kube:
    def __init__(self, fail: int | None = None) -> None:
        self.fail = fail
        self.sent: list[tuple[str, str, Any]] = []

    async def request(self, method: str, path: str, **kw: Any) -> None:
        self.sent.append((method, path, kw.get("params")))
        if self.fail is not None:
            raise ApiError(self.fail, "", "no", method=method, path=path)


async def test_the_apiserver_is_asked_to_collect_its_garbage() -> None:
    kube = Kube()
    await collect_apiserver_garbage(kube)  # type: ignore[arg-type]
    assert kube.sent == [("GET", "/debug/pprof/heap", {"gc": "1"})]


async def test_a_cluster_without_profiling_is_measured_as_it_is() -> None:
    for code in (403, 404):
        kube = Kube(fail=code)
        await collect_apiserver_garbage(kube)  # type: ignore[arg-type]
        assert len(kube.sent) == 1
