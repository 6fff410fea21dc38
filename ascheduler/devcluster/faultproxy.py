"""A fault-injecting HTTP proxy in front of the plane's kube-apiserver, for tests.

Clients talk plain HTTP to it on loopback (`kubeconfig()` writes a kubeconfig for that); it
forwards every request to the real API server over TLS as the plane's admin, and on the way
it can:

* fail a chosen share of writes (POST, PUT, PATCH, DELETE, optionally only on some paths):
  answer 409, 429, 500 or 503 without forwarding, drop the connection without forwarding
  (`drop`), or forward and then drop the connection so the write lands and its answer is lost
  (`lost`);
* delay requests matching a method and path, and deliver watch events late (`watch_delay`),
  so a client's view of the cluster lags behind its own writes;
* cut every open watch (now, or every few seconds), refuse new watches (503), or answer the
  next watch of given paths with `410 Gone` as an ERROR event, which is how the API server
  reports a resourceVersion it no longer holds.

It keeps what it saw: requests by method, faults injected by kind, watches cut, and for each
pod the number of Bindings the API server accepted (`bindings`), which is how a test proves
"bound exactly once".

The proxy runs on a thread of its own with its own event loop, so a test that blocks (stopping
a process by pid, restarting the API server) never stalls the traffic passing through it.
`start()` and `stop()` are called from the test; settings may be changed at any time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import ssl
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiohttp
from aiohttp import web

WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
FAULT_KINDS: Final = ("409", "429", "500", "503", "drop", "lost")
_BINDING = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$")
_HOP_BY_HOP: Final = frozenset(
    {"host", "connection", "keep-alive", "transfer-encoding", "content-length", "authorization"}
)


@dataclass(frozen=True)
class WriteFaults:
    """Fail `share` of the writes whose path matches `path` (a regular expression searched
    in the path; None: all), each with one of `kinds`, picked at random. With
    `once_per_path`, each path fails at most once (its retry gets through)."""

    share: float
    kinds: tuple[str, ...] = FAULT_KINDS
    path: str | None = None
    once_per_path: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.kinds) - set(FAULT_KINDS)
        if unknown or not self.kinds:
            raise ValueError(f"fault kinds must be among {FAULT_KINDS}, got {self.kinds}")


@dataclass(frozen=True)
class Delay:
    seconds: float
    methods: frozenset[str] = WRITE_METHODS
    path: str | None = None


@dataclass
class ProxyStats:
    requests: Counter[str] = field(default_factory=Counter)
    injected: Counter[str] = field(default_factory=Counter)
    delayed: int = 0
    #: Delayed requests whose client gave up meanwhile (not forwarded)
    abandoned: int = 0
    watches_cut: int = 0
    watches_gone: int = 0
    watches_refused: int = 0
    #: "namespace/name" -> Bindings the API server accepted for that pod
    bindings: Counter[str] = field(default_factory=Counter)


def _status(code: int, reason: str, message: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


_REASONS: Final = {
    "409": "Conflict",
    "429": "TooManyRequests",
    "500": "InternalError",
    "503": "ServiceUnavailable",
}


class FaultProxy:
    def __init__(
        self,
        upstream: str,
        *,
        ca: Path,
        cert: Path,
        key: Path,
        seed: int | None = None,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self._tls = (ca, cert, key)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.stats = ProxyStats()
        self.write_faults: WriteFaults | None = None
        self._faulted: set[str] = set()
        self.delays: list[Delay] = []
        self.refuse_watches = False
        #: Seconds every watch event is held back before it reaches the client.
        self.watch_delay = 0.0
        self._gone_once: set[str] = set()
        self._cut_every: float | None = None
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopping: asyncio.Event | None = None
        self._watches: set[asyncio.Task[None]] = set()
        self._error: BaseException | None = None

    # -- control (from the test's thread) -----------------------------------------------------

    def start(self) -> int:
        """Serve on a free loopback port; returns it."""
        self._thread = threading.Thread(target=self._serve_forever, name="faultproxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30) or self._error is not None:
            raise RuntimeError(f"fault proxy did not start: {self._error!r}")
        return self.port

    def stop(self) -> None:
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stopping.set)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __enter__(self) -> FaultProxy:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: Path) -> Path:
        """A kubeconfig that reaches the API server through this proxy."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "proxy", "cluster": {"server": self.url}}],
            "users": [{"name": "proxy", "user": {}}],
            "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "proxy"}}],
            "current-context": "proxy",
        }
        path.write_text(json.dumps(config, indent=2) + "\n")
        return path

    def cut_watches(self) -> None:
        """Drop every watch open now (clients see the stream end mid-way)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._cut_all)

    def cut_watches_every(self, seconds: float | None) -> None:
        """Drop every open watch every `seconds` (None: stop doing so)."""
        with self._lock:
            self._cut_every = seconds

    def gone_once(self, *paths: str) -> None:
        """Answer the next watch of each of `paths` (`/api/v1/pods`, say) with 410 Gone."""
        with self._lock:
            self._gone_once.update(paths)

    @property
    def open_watches(self) -> int:
        """Watches being relayed right now."""
        return len(self._watches)

    def clear_faults(self) -> None:
        with self._lock:
            self.write_faults = None
            self.delays = []
            self.refuse_watches = False
            self.watch_delay = 0.0
            self._gone_once.clear()
            self._cut_every = None

    @contextlib.contextmanager
    def faults(self, faults: WriteFaults) -> Iterator[None]:
        with self._lock:
            self._faulted.clear()
        self.write_faults = faults
        try:
            yield
        finally:
            self.write_faults = None

    # -- the server (on the proxy's own thread) -----------------------------------------------

    def _serve_forever(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
        finally:
            # Connections still open (cut watches) leave handler tasks behind: end them here.
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending))
            loop.close()

    async def _main(self) -> None:
        self._stopping = asyncio.Event()
        ca, cert, key = self._tls
        context = ssl.create_default_context(cafile=str(ca))
        context.load_cert_chain(str(cert), str(key))
        connector = aiohttp.TCPConnector(ssl=context, limit=256)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=True) as session:
            self._session = session
            app = web.Application(client_max_size=64 * 2**20)
            app.router.add_route("*", "/{tail:.*}", self._handle)
            runner = web.AppRunner(app, access_log=None, handle_signals=False)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            cutter = asyncio.create_task(self._cut_periodically())
            self._ready.set()
            try:
                await self._stopping.wait()
            finally:
                cutter.cancel()
                self._cut_all()
                await runner.cleanup()

    async def _cut_periodically(self) -> None:
        while True:
            with self._lock:
                every = self._cut_every
            await asyncio.sleep(every or 0.5)
            if every:
                self._cut_all()

    def _cut_all(self) -> None:
        for task in list(self._watches):
            task.cancel()
            with self._lock:
                self.stats.watches_cut += 1

    def _pick_fault(self, method: str, path: str) -> str | None:
        faults = self.write_faults
        if faults is None or method not in WRITE_METHODS:
            return None
        if faults.path is not None and not re.search(faults.path, path):
            return None
        with self._lock:
            if faults.once_per_path and path in self._faulted:
                return None
            if self._rng.random() >= faults.share:
                return None
            kind = self._rng.choice(faults.kinds)
            self.stats.injected[kind] += 1
            self._faulted.add(path)
            return kind

    def _delay_for(self, method: str, path: str) -> float:
        return sum(
            d.seconds
            for d in list(self.delays)
            if method in d.methods and (d.path is None or re.search(d.path, path))
        )

    def _headers(self, request: web.Request) -> dict[str, str]:
        return {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path
        with self._lock:
            self.stats.requests[method] += 1
        delay = self._delay_for(method, path)
        if delay:
            with self._lock:
                self.stats.delayed += 1
            await asyncio.sleep(delay)
            if request.transport is None or request.transport.is_closing():
                with self._lock:
                    self.stats.abandoned += 1
                return web.Response(status=499)  # the client gave up: nothing is forwarded
        if method == "GET" and request.query.get("watch") in ("true", "1"):
            return await self._watch(request)
        fault = self._pick_fault(method, path)
        if fault in _REASONS:
            assert fault is not None
            code = int(fault)
            return web.json_response(
                _status(code, _REASONS[fault], f"injected by the fault proxy ({fault})"),
                status=code,
            )
        if fault == "drop":
            return self._drop(request)
        body = await request.read()
        async with self._session.request(
            method,
            self.upstream + request.path_qs,
            data=body or None,
            headers=self._headers(request),
            timeout=aiohttp.ClientTimeout(total=120),
        ) as upstream:
            payload = await upstream.read()
            status = upstream.status
            content_type = upstream.headers.get("Content-Type", "application/json")
        if method == "POST" and 200 <= status < 300 and (m := _BINDING.match(path)):
            with self._lock:
                self.stats.bindings[f"{m.group(1)}/{m.group(2)}"] += 1
        if fault == "lost":
            return self._drop(request)
        return web.Response(body=payload, status=status, headers={"Content-Type": content_type})

    @staticmethod
    def _drop(request: web.Request) -> web.Response:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=500)

    async def _relay(self, upstream: aiohttp.ClientResponse, response: web.StreamResponse) -> None:
        """Copy the stream, each chunk `watch_delay` seconds after it arrived (a constant
        lag, not one that grows with the number of chunks)."""
        loop = asyncio.get_running_loop()
        chunks: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for chunk in upstream.content.iter_any():
                    await chunks.put((loop.time(), chunk))
            finally:
                await chunks.put(None)

        reader = asyncio.create_task(read())
        try:
            while (item := await chunks.get()) is not None:
                arrived, chunk = item
                wait = arrived + self.watch_delay - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                await response.write(chunk)
            await reader  # its error, if the stream broke
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await reader

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        with self._lock:
            refuse = self.refuse_watches
            gone = request.path in self._gone_once
            if gone and not refuse:
                self._gone_once.discard(request.path)
        if refuse:
            with self._lock:
                self.stats.watches_refused += 1
            return web.json_response(
                _status(503, "ServiceUnavailable", "watches refused by the fault proxy"),
                status=503,
            )
        if gone:
            with self._lock:
                self.stats.watches_gone += 1
            event = {
                "type": "ERROR",
                "object": _status(410, "Expired", "too old resource version (fault proxy)"),
            }
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            await response.write(json.dumps(event).encode() + b"\n")
            await response.write_eof()
            return response
        task = asyncio.current_task()
        assert task is not None
        self._watches.add(task)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        try:
            async with self._session.get(
                self.upstream + request.path_qs,
                headers=self._headers(request),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
            ) as upstream:
                response.set_status(upstream.status)
                await response.prepare(request)
                await self._relay(upstream, response)
                await response.write_eof()
        except asyncio.CancelledError:
            # Cut on purpose: the client sees its stream end without a clean close.
            if request.transport is not None:
                request.transport.abort()
            uncancel = getattr(task, "uncancel", None)
            if uncancel is not None:
                uncancel()
        except (aiohttp.ClientError, ConnectionError, OSError):
            if request.transport is not None:
                request.transport.abort()
        finally:
            self._watches.discard(task)
        return response
