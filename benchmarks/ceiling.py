"""The ceiling: a binder with no scheduling logic at all, to measure what the plane itself can
take. It watches unscheduled pods of one schedulerName and POSTs their Bindings round-robin
over the nodes, with the same bounded concurrency as ascheduler's binding cycles.

    python -m benchmarks.ceiling --kubeconfig FILE --scheduler-name NAME [--concurrency 256]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
from collections.abc import Sequence

import orjson

from ascheduler.kube import ApiError, KubeClient


async def run(kubeconfig: str, scheduler_name: str, concurrency: int) -> None:
    async with (
        await KubeClient.connect(kubeconfig, pool_size=8) as watch,
        await KubeClient.connect(kubeconfig, pool_size=concurrency) as writes,
    ):
        nodes = [n["metadata"]["name"] for n in (await watch.get("/api/v1/nodes"))["items"]]
        targets = itertools.cycle(nodes)
        gate = asyncio.Semaphore(concurrency)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        tasks: set[asyncio.Task[None]] = set()

        async def bind(pod: dict[str, object], node: str) -> None:
            meta = pod["metadata"]
            assert isinstance(meta, dict)
            try:
                await writes.request(
                    "POST",
                    f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding",
                    body={
                        "apiVersion": "v1",
                        "kind": "Binding",
                        "metadata": {"name": meta["name"], "uid": meta["uid"]},
                        "target": {"kind": "Node", "name": node},
                    },
                )
            except ApiError:
                pass  # already bound or gone: a ceiling does not retry
            finally:
                gate.release()

        async def watch_pods() -> None:
            listing = await watch.get(
                "/api/v1/pods",
                params={"fieldSelector": f"spec.schedulerName={scheduler_name},spec.nodeName="},
            )
            version = listing["metadata"]["resourceVersion"]
            pending = list(listing["items"])
            headers = await watch.headers()
            params = {
                "watch": "true",
                "resourceVersion": version,
                "fieldSelector": f"spec.schedulerName={scheduler_name},spec.nodeName=",
            }
            async with watch.session.get(
                watch.server + "/api/v1/pods", params=params, headers=headers
            ) as resp:
                for pod in pending:
                    await gate.acquire()
                    tasks.add(task := asyncio.create_task(bind(pod, next(targets))))
                    task.add_done_callback(tasks.discard)
                async for line in resp.content:
                    event = orjson.loads(line)
                    if event.get("type") == "ADDED":
                        await gate.acquire()
                        tasks.add(task := asyncio.create_task(bind(event["object"], next(targets))))
                        task.add_done_callback(tasks.discard)

        watcher = asyncio.create_task(watch_pods())
        await stop.wait()
        watcher.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ceiling", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", required=True)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args(argv)
    asyncio.run(run(args.kubeconfig, args.scheduler_name, args.concurrency))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
