"""Set-up every benchmark shares: a plane in benchmark mode with fake nodes, and ascheduler
processes started against it."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import platform
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import aiohttp

from ascheduler.devcluster import ControlPlane, ensure_built, versions
from ascheduler.devcluster.nodes import FakeNodes, create_fake_nodes, wait_nodes_ready
from ascheduler.devcluster.plane import ascheduler_argv as plane_argv
from ascheduler.devcluster.plane import free_port
from ascheduler.devcluster.processes import ProcessRecord
from ascheduler.kube import KubeClient

RESULTS = Path(__file__).parent / "results"


def context() -> dict[str, Any]:
    """When and where a result was measured: the date, the versions, the machine."""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": {
            "kubernetes": versions.release().kubernetes,
            "etcd": versions.release().etcd,
            "kwok": versions.release().kwok,
            "python": platform.python_version(),
        },
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
    }


def save(benchmark: str, result: dict[str, Any], out: Path = RESULTS) -> Path:
    """`result` as `<out>/<date>-<benchmark>.json`, from which benchmarks/README.md's tables
    are made."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result['date'][:10]}-{benchmark}.json"
    path.write_text(json.dumps({"benchmark": benchmark, **result}, indent=2) + "\n")
    return path


@contextmanager
def bench_plane(
    prefix: str,
    nodes: int = 0,
    feature_gates: str = "",
    controllers: tuple[str, ...] = (),
) -> Iterator[ControlPlane]:
    """A plane without API priority-and-fairness or inflight limits, `nodes` SchedulingBasic
    nodes Ready on it, its apiserver run with `feature_gates`, kube-controller-manager only
    with `controllers`; every process it ran is stopped on the way out."""
    plane = ControlPlane(
        Path(tempfile.mkdtemp(prefix=f"ascheduler-{prefix}-")),
        bins=ensure_built(),
        benchmark=True,
        die_with_parent=True,
        feature_gates=feature_gates,
        controllers=controllers or None,
    )
    state = plane.up()
    try:
        if nodes:

            async def create() -> None:
                async with await KubeClient.connect(str(state.admin_kubeconfig)) as kube:
                    names = await create_fake_nodes(kube, FakeNodes(count=nodes), concurrency=64)
                    await wait_nodes_ready(kube, names, timeout=600)

            asyncio.run(create())
        yield plane
    finally:
        plane.down()


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    """The process's resident memory now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


#: What kube-scheduler is run with in the benchmarks, and ascheduler too: the secure port on
#: loopback, /metrics readable without a token so the harness scrapes both the same way.
OPEN_METRICS: Final = "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics"


def ascheduler_argv(kubeconfig: str, *args: str, port: int = 0, command: str = "run") -> list[str]:
    """`ascheduler run` (or `command`) against `kubeconfig`, quiet, serving on the secure
    port `port` of 127.0.0.1 (0: a free one) as kube-scheduler is served here (see
    `scrape`); `args` add to it."""
    return plane_argv(
        kubeconfig,
        "--log-level",
        "warning",
        OPEN_METRICS,
        *args,
        http_address=None,
        secure_port=port or free_port(),
        command=command,
    )


def start_ascheduler(plane: ControlPlane, name: str, *args: str, port: int = 0) -> ProcessRecord:
    """`ascheduler_argv` as the plane's admin, one of the plane's processes."""
    kubeconfig = str(plane.require_state().admin_kubeconfig)
    return plane.start_process(name, ascheduler_argv(kubeconfig, *args, port=port))


async def scrape(session: aiohttp.ClientSession, port: int, path: str = "/metrics") -> str:
    """`path` from a scheduler's secure port on 127.0.0.1 (its certificate is self-signed)."""
    async with session.get(f"https://127.0.0.1:{port}{path}", ssl=False) as resp:
        resp.raise_for_status()
        return await resp.text()
