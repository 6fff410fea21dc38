"""The ceilings: binders with no scheduling logic at all, to measure what the plane itself can
take. Each watches the unscheduled pods of one schedulerName and POSTs their Bindings
round-robin over the nodes, with the same bounded concurrency as ascheduler's binding cycles,
and serves its request count as `rest_client_requests_total` on `--metrics-port`, like the
schedulers'.

Two of them, because a binder shares the limits of its client: `ceiling-python` (this module)
uses ascheduler's own Python client (HTTP/1.1, JSON), and `ceiling-go` (`ceiling_go/main.go`,
built by `go_binary()` with client-go of the plane's Kubernetes release from the module proxy,
cached like the plane's binaries) uses client-go as kube-scheduler does: HTTP/2, protobuf, no
client-side rate limit. Where the two agree, the plane is the limit; where the Go one is
faster, the Python client is.

A pod with ResourceClaims gets what a scheduler must write for them first (`ceiling_dra`):
its claims allocated on the node it is given, from that node's free devices, and reserved for
it, with kube-scheduler's requests; so a DRA workload's ceiling is the plane's limit for that
work, not for a bare Binding.

    python -m benchmarks.ceiling --kubeconfig FILE --scheduler-name NAME \\
        [--concurrency 256] [--node-selector LABELS] [--metrics-port PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
import prometheus_client

from ascheduler.devcluster import versions
from ascheduler.devcluster.build import ensure_go_program, staging_version
from ascheduler.kube import ApiError, KubeClient, KubeError
from benchmarks.ceiling_dra import ClaimWriter, claim_names

GO_SOURCE = Path(__file__).resolve().parent / "ceiling_go"


def go_binary(progress: Callable[[str], None] | None = None) -> Path:
    """The Go ceiling, built on first use (seconds with a warm module cache) with client-go of
    the plane's release (`versions.release()`, as the plane's binaries are chosen)."""
    return ensure_go_program(
        "ceiling",
        GO_SOURCE,
        {"k8s.io/client-go": staging_version(versions.release().kubernetes)},
        progress=progress,
    )


class Ceiling:
    def __init__(
        self,
        watch: KubeClient,
        writes: KubeClient,
        scheduler_name: str,
        concurrency: int,
        node_selector: str = "",
    ) -> None:
        self.node_selector = node_selector
        self.watch = watch
        self.writes = writes
        self.selector = f"spec.schedulerName={scheduler_name},spec.nodeName="
        self.gate = asyncio.Semaphore(concurrency)
        self.tasks: set[asyncio.Task[None]] = set()
        self.sent: set[str] = set()  # pod uids a Binding was posted for
        self.targets: Iterator[str] = iter(())
        self.nodes: list[str] = []
        #: Started on the first pod with claims.
        self.claims: ClaimWriter | None = None
        self.claims_started = asyncio.Lock()

    async def run(self) -> None:
        params = {"labelSelector": self.node_selector} if self.node_selector else None
        listing = await self.watch.get("/api/v1/nodes", params=params)
        nodes = [n["metadata"]["name"] for n in listing["items"]]
        if not nodes:
            raise SystemExit("ceiling: no nodes")
        self.targets = itertools.cycle(nodes)
        self.nodes = nodes
        try:
            await self._list_and_watch_again()
        finally:
            if self.claims is not None:
                await self.claims.stop()

    async def _list_and_watch_again(self) -> None:
        while True:  # list, then watch from there; again whenever the watch ends
            try:
                await self._list_and_watch()
            except (TimeoutError, ApiError, OSError, ValueError) as exc:
                print(f"ceiling: watch failed, listing again: {exc!r}", file=sys.stderr)
                await asyncio.sleep(0.5)

    async def _list_and_watch(self) -> None:
        listing = await self.watch.get("/api/v1/pods", params={"fieldSelector": self.selector})
        # The watch opens at once and the listed pods are bound meanwhile, as a scheduler's
        # informer does: the events its own binds make are then read (and paid for, by the
        # API server) while it binds. Bound first and watched after, a backlog's events would
        # all come after its last bind, outside the span a run measures.
        listed = asyncio.create_task(self._dispatch_all(listing["items"]))
        try:
            await self._watch(listing["metadata"]["resourceVersion"])
        finally:
            listed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listed

    async def _dispatch_all(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            await self._dispatch(pod)

    async def _watch(self, version: str) -> None:
        params = {
            "watch": "true",
            "resourceVersion": version,
            "fieldSelector": self.selector,
            "timeoutSeconds": "300",
        }
        async with self.watch.session.get(
            self.watch.server + "/api/v1/pods", params=params, headers=await self.watch.headers()
        ) as resp:
            self.watch.count("GET", resp.status)
            if resp.status >= 400:
                raise ApiError(
                    resp.status,
                    "",
                    (await resp.read())[:300].decode(errors="replace"),
                    method="WATCH",
                    path="/api/v1/pods",
                )
            async for line in resp.content:
                event = orjson.loads(line)
                # A pod whose claims its status names only later comes again as MODIFIED.
                if event.get("type") in ("ADDED", "MODIFIED"):
                    await self._dispatch(event["object"])
                elif event.get("type") == "ERROR":
                    raise ApiError(
                        410,
                        "Expired",
                        str(event.get("object")),
                        method="WATCH",
                        path="/api/v1/pods",
                    )

    async def _dispatch(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        if meta["uid"] in self.sent:
            return
        names = claim_names(pod)
        if names is None:  # a claim of a template not made yet: its pod comes again
            return
        self.sent.add(meta["uid"])
        try:
            if names:
                await self._start_claims()
            await self.gate.acquire()
        except (asyncio.CancelledError, KubeError, TimeoutError, OSError, ValueError):
            self.sent.discard(meta["uid"])  # not sent after all: the next listing has it again
            raise
        task = asyncio.create_task(self._bind(pod, names))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _start_claims(self) -> None:
        async with self.claims_started:
            if self.claims is None:
                claims = ClaimWriter(self.watch, self.writes, self.nodes)
                await claims.start()
                self.claims = claims

    async def _bind(self, pod: dict[str, Any], names: list[str]) -> None:
        """The pod's claims written (in its own task: a claim not made yet holds up this pod
        alone), then its Binding."""
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
        try:
            if not names:
                node = next(self.targets)
            else:
                assert self.claims is not None
                placement = await self.claims.place(pod, names)
                if placement is None:
                    print(f"ceiling: {meta['name']}: no node has its devices free", file=sys.stderr)
                    return
                try:
                    await self.claims.write(pod, placement)
                except (KubeError, TimeoutError, OSError) as exc:
                    print(f"ceiling: {meta['name']}: claims: {exc!r}", file=sys.stderr)
                    return
                node = placement.node
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": meta["name"], "uid": meta["uid"]},
                "target": {"kind": "Node", "name": node},
            }
            for attempt in range(5):  # transient failures only; a 409 means it is bound
                try:
                    await self.writes.request("POST", path, body=body)
                    return
                except ApiError as exc:
                    if exc.status in (404, 409) or attempt == 4:
                        print(f"ceiling: {meta['name']}: {exc}", file=sys.stderr)
                        return
                except (TimeoutError, OSError) as exc:
                    print(f"ceiling: {meta['name']}: {exc!r}", file=sys.stderr)
                await asyncio.sleep(0.1)
        finally:
            self.gate.release()


async def run(kubeconfig: str, scheduler_name: str, concurrency: int, node_selector: str) -> None:
    async with (
        await KubeClient.connect(kubeconfig, pool_size=8, user_agent="ceiling") as watch,
        await KubeClient.connect(kubeconfig, pool_size=concurrency, user_agent="ceiling") as writes,
    ):
        ceiling = Ceiling(watch, writes, scheduler_name, concurrency, node_selector)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        runner = asyncio.create_task(ceiling.run())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({runner, stopping}, return_when=asyncio.FIRST_COMPLETED)
        runner.cancel()
        stopping.cancel()
        await asyncio.gather(*ceiling.tasks, return_exceptions=True)
        if runner.done() and not runner.cancelled() and runner.exception():
            raise runner.exception()  # type: ignore[misc]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ceiling", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--scheduler-name", required=True)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--node-selector", default="", help="bind only to nodes it selects")
    parser.add_argument("--metrics-port", type=int, default=0, help="0: no metrics endpoint")
    args = parser.parse_args(argv)
    if args.metrics_port:
        prometheus_client.start_http_server(args.metrics_port, addr="127.0.0.1")
    asyncio.run(run(args.kubeconfig, args.scheduler_name, args.concurrency, args.node_selector))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
