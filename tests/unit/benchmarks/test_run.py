"""What a benchmark run does to the plane before it measures, and the arguments it refuses
before it starts anything."""

from __future__ import annotations

import os
from typing import Any

import pytest

from ascheduler.kube import ApiError
from benchmarks.objects import collect_apiserver_garbage
from benchmarks.run import main


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


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--kubeconfig", "/nowhere", "--plane-cpus", "0"], "needs the local plane"),
        (["--plane-cpus", "4096"], "CPU 4096 is not one of"),
        (["--plane-cpus", "zero"], "not a CPU list"),
        ([f"--plane-cpus={','.join(map(str, sorted(os.sched_getaffinity(0))))}"], "no CPU"),
    ],
)
def test_a_split_the_harness_cannot_make_is_refused_before_anything_starts(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--workload", "Smoke_10Nodes_40Pods", *args])
    assert exited.value.code == 2
    assert says in capsys.readouterr().err
