"""What one request costs the scheduler's own process: the client's CPU per request.

ascheduler sends its requests (Bindings, Events, lock writes) over its own HTTP/1.1 pool
(`ascheduler/kube/transport.py`); its watches, and before that pool every request, go over
aiohttp. This sends the same `Scheduled` Event `--count` times, 64 at a time, once through
`KubeClient.request` and once through the client's aiohttp session (with the same headers and
body, the way `KubeClient.request` sent it before), alternating `--repeat` times on one plane,
and reads the process's CPU time around each batch. The plane's share is in `apicost`. Prints
a JSON summary line, then a table.

    .venv/bin/python -m benchmarks client --count 3000 --repeat 3

Without `--kubeconfig` it starts a local plane in benchmark mode.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import aiohttp
import orjson
import uvloop

from ascheduler.kube import KubeClient
from benchmarks.apicost import event_request
from benchmarks.common import bench_plane

CONCURRENCY: Final = 64

#: One request, `i` of a batch in namespace `ns`.
Send = Callable[[KubeClient, str, int], Awaitable[Any]]


async def _through_pool(kube: KubeClient, ns: str, i: int) -> Any:
    path, body = event_request(ns, i, 1)
    return await kube.request("POST", path, body=body)


async def _through_aiohttp(kube: KubeClient, ns: str, i: int) -> Any:
    """The same request as `KubeClient.request` sent it on aiohttp."""
    path, body = event_request(ns, i, 1)
    headers = await kube.headers("application/json")
    async with kube.session.request(
        "POST",
        kube.server + path,
        data=orjson.dumps(body),
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=60.0),
    ) as resp:
        kube.count("POST", resp.status)
        payload = await resp.read()
    if resp.status >= 400:
        raise RuntimeError(f"POST {path}: {resp.status}: {payload[:200]!r}")
    return payload


WAYS: Final[dict[str, Send]] = {"pool": _through_pool, "aiohttp": _through_aiohttp}


async def _batch(kube: KubeClient, ns: str, send: Send, count: int) -> tuple[float, float]:
    """CPU µs per request of this process, and requests per second."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with gate:
            await send(kube, ns, i)

    # Warm: the connections each way needs, opened outside the measured batch.
    await asyncio.gather(*(one(count + i) for i in range(CONCURRENCY)))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(count)))
    cpu1, wall1 = time.process_time(), time.perf_counter()
    return (cpu1 - cpu0) * 1e6 / count, count / (wall1 - wall0)


async def measure(kubeconfig: str, count: int, repeat: int) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    async with await KubeClient.connect(kubeconfig, pool_size=CONCURRENCY) as kube:
        for r in range(repeat):
            for way, send in WAYS.items():
                ns = f"client-{way}-{r}-{uuid.uuid4().hex[:6]}"
                await kube.post("/api/v1/namespaces", {"metadata": {"name": ns}})
                try:
                    out[way].append(await _batch(kube, ns, send, count))
                finally:
                    await kube.request("DELETE", f"/api/v1/namespaces/{ns}")
    return out


def report(results: dict[str, list[tuple[float, float]]], count: int) -> str:
    rows = [
        f"{count} Events a batch, {CONCURRENCY} at a time; median (min-max) of "
        f"{len(results['pool'])} batches each way, alternating",
        "",
        "| client | CPU µs per request | requests/s |",
        "| --- | ---: | ---: |",
    ]
    for way, runs in results.items():
        cpu = [c for c, _ in runs]
        rate = [r for _, r in runs]
        rows.append(
            f"| {way} | {statistics.median(cpu):.0f} ({min(cpu):.0f}-{max(cpu):.0f}) "
            f"| {statistics.median(rate):.0f} ({min(rate):.0f}-{max(rate):.0f}) |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks client", description=__doc__)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kubeconfig", help="use this cluster instead of a local plane")
    args = parser.parse_args(argv)
    if args.kubeconfig:
        results = uvloop.run(measure(args.kubeconfig, args.count, args.repeat))
    else:
        with bench_plane("client") as plane:
            kubeconfig = str(plane.require_state().admin_kubeconfig)
            results = uvloop.run(measure(kubeconfig, args.count, args.repeat))
    summary = {
        "count": args.count,
        "concurrency": CONCURRENCY,
        "cpu_us_per_request": {w: [round(c, 1) for c, _ in runs] for w, runs in results.items()},
        "requests_per_second": {w: [round(r) for _, r in runs] for w, runs in results.items()},
    }
    print(json.dumps(summary))
    print(report(results, args.count))
    return 0
