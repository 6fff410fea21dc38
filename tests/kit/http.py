"""A small HTTP(S) server on a free loopback port, for tests that play an extender."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextlib.asynccontextmanager
async def serve(
    route: str, handler: Handler, *, ssl_context: ssl.SSLContext | None = None
) -> AsyncIterator[str]:
    """Serve POST `route` (an aiohttp pattern such as `/ext/{verb}`) with `handler`; yields
    the base URL (`http://127.0.0.1:PORT`, https with `ssl_context`). Stopped on exit."""
    app = web.Application()
    app.router.add_post(route, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        scheme = "https" if ssl_context is not None else "http"
        yield f"{scheme}://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
