"""`/metrics`, `/healthz`, `/livez` and `/readyz` on the scheduler's own event loop (aiohttp).

Ready means the informers have synced and their watches are getting through (the scheduler has
a complete, current picture and is placing pods; while the API server is unreachable it is not
ready, and says why); live means the scheduling loop is running. Pending-pod gauges are read
from the queue at scrape time, so the hot path pays nothing for them.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from ascheduler import metrics

DEFAULT_ADDRESS = "0.0.0.0:10251"


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:10251`) -> (host, port); ValueError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


class HealthServer:
    def __init__(
        self,
        address: str,
        *,
        not_ready: Callable[[], str] = lambda: "starting",
        live: Callable[[], bool] = lambda: True,
        pending: Callable[[], dict[str, int]] = dict,
    ) -> None:
        """`not_ready` (why not, or "" when ready), `live` and `pending` may be replaced once
        the scheduler runs."""
        self.host, self.port = parse_address(address)
        self.not_ready = not_ready
        self.live = live
        self.pending = pending
        app = self.app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._livez)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        self._runner = web.AppRunner(app, access_log=None)

    async def start(self) -> None:
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()

    async def stop(self) -> None:
        await self._runner.cleanup()

    async def _metrics(self, request: web.Request) -> web.Response:
        for queue, count in self.pending().items():
            metrics.PENDING_PODS.labels(queue).set(count)
        return web.Response(
            body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _livez(self, request: web.Request) -> web.Response:
        if self.live():
            return web.Response(text="ok")
        return web.Response(status=503, text="scheduling loop is not running")

    async def _readyz(self, request: web.Request) -> web.Response:
        reason = self.not_ready()
        if not reason:
            return web.Response(text="ok")
        return web.Response(status=503, text=reason)
