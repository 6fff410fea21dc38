"""`/metrics`, `/healthz`, `/livez`, `/readyz` (and `/debug/*` when on) on the scheduler's own
event loop (aiohttp), behind kube-scheduler's secure port.

Two listeners, each optional:

* the secure port (`--bind-address`, `--secure-port`, default 0.0.0.0:10259; 0 turns it
  off): TLS with the given certificate or one made at start (`ascheduler.tls`), every
  request authenticated and authorized by the API server (`ascheduler.auth`): health open
  to anyone, `/metrics` and `/debug/*` to users granted `get` on them;
* a plain HTTP listener (`--http-address`), off unless asked for, with no authentication
  at all: so it must be on a loopback address unless `--allow-non-loopback-http` says
  otherwise (kube-scheduler dropped its plain port in v1.23; this one serves what is local
  to the node, as a kubelet probe or a sidecar on loopback would use it).

Ready means the informers have synced and their watches are getting through (the scheduler has
a complete, current picture and is placing pods; while the API server is unreachable it is not
ready, and says why); live means the scheduling loop is running. Pending-pod gauges are read
from the queue at scrape time, so the hot path pays nothing for them.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from ascheduler import metrics
from ascheduler.auth import AuthSettings, DelegatedAuth
from ascheduler.kube import KubeClient
from ascheduler.tls import ServingCertificate, server_context

log = structlog.get_logger(__name__)

DEFAULT_SECURE_PORT: Final = 10259
#: Where `/debug/*` is served: off, on the plain listener on loopback, or on the secure port
#: to users the API server authorizes (`ascheduler.debug`).
DEBUG_MODES: Final = ("off", "loopback", "authorized")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:10251`) -> (host, port); ValueError otherwise."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"not HOST:PORT: {text!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass(frozen=True)
class SecureServing:
    """kube-scheduler's secure serving, authentication and authorization options."""

    bind_address: str = "0.0.0.0"
    #: 0: no secure port.
    port: int = DEFAULT_SECURE_PORT
    certificate: ServingCertificate = field(default_factory=ServingCertificate)
    #: The clients of the reviews (None: the scheduler's own kubeconfig).
    authentication_kubeconfig: str | None = None
    authorization_kubeconfig: str | None = None
    auth: AuthSettings = field(default_factory=AuthSettings)


@dataclass
class SecurePort:
    """The secure listener, ready to open: where, its TLS and its gate."""

    host: str
    port: int
    context: ssl.SSLContext
    gate: DelegatedAuth
    #: The review clients, closed with the server.
    clients: tuple[KubeClient, ...] = ()


async def open_secure_port(
    settings: SecureServing,
    *,
    kubeconfig: str | None,
    context: str | None = None,
    user_agent: str = "ascheduler/auth",
) -> SecurePort:
    """The secure port's TLS context (a certificate made now if none is given) and review
    clients: one shared when both reviews go to the same kubeconfig, of their own so scrapes
    never queue behind binds."""
    tls = server_context(settings.certificate, settings.bind_address)
    authn_config = settings.authentication_kubeconfig or kubeconfig
    authz_config = settings.authorization_kubeconfig or kubeconfig
    # Another kubeconfig than the scheduler's: its own current context.
    authn = await KubeClient.connect(
        authn_config,
        context=context if authn_config == kubeconfig else None,
        pool_size=4,
        user_agent=user_agent,
    )
    authz = authn
    if authz_config != authn_config:
        authz = await KubeClient.connect(
            authz_config,
            context=context if authz_config == kubeconfig else None,
            pool_size=4,
            user_agent=user_agent,
        )
    return SecurePort(
        settings.bind_address,
        settings.port,
        tls,
        DelegatedAuth(authn, authz, settings.auth),
        clients=(authn,) if authz is authn else (authn, authz),
    )


async def open_server(
    plain: str | None,
    secure: SecureServing,
    *,
    kubeconfig: str | None,
    context: str | None = None,
    user_agent: str = "ascheduler/auth",
    not_ready: Callable[[], str] = lambda: "starting",
    pending: Callable[[], dict[str, int]] = dict,
) -> HealthServer | None:
    """The server of `ascheduler run` and `binder`, not started yet (None: neither
    listener is asked for)."""
    if not plain and not secure.port:
        return None
    port = None
    if secure.port:
        port = await open_secure_port(
            secure, kubeconfig=kubeconfig, context=context, user_agent=user_agent
        )
    return HealthServer(plain, secure=port, not_ready=not_ready, pending=pending)


class HealthServer:
    def __init__(
        self,
        plain: str | None = None,
        *,
        secure: SecurePort | None = None,
        not_ready: Callable[[], str] = lambda: "starting",
        live: Callable[[], bool] = lambda: True,
        pending: Callable[[], dict[str, int]] = dict,
    ) -> None:
        """`plain`: the HTTP address (None: none); `secure`: the secure port (None: none).
        `not_ready` (why not, or "" when ready), `live` and `pending` may be replaced once
        the scheduler runs."""
        self.plain = parse_address(plain) if plain else None
        self.secure = secure
        self.not_ready = not_ready
        self.live = live
        self.pending = pending
        self.plain_app = self._app() if self.plain is not None else None
        self.secure_app = self._app(secure.gate) if secure is not None else None
        self._runners: list[web.AppRunner] = []

    def _app(self, gate: DelegatedAuth | None = None) -> web.Application:
        app = web.Application(middlewares=[gate.middleware] if gate is not None else [])
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._livez)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        return app

    async def start(self) -> None:
        listeners: list[tuple[web.Application, str, int, ssl.SSLContext | None]] = []
        if self.secure_app is not None and self.secure is not None:
            s = self.secure
            listeners.append((self.secure_app, s.host, s.port, s.context))
        if self.plain_app is not None and self.plain is not None:
            listeners.append((self.plain_app, *self.plain, None))
        for app, host, port, context in listeners:
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            self._runners.append(runner)
            await web.TCPSite(runner, host, port, ssl_context=context).start()
            log.info(
                "serving",
                scheme="https" if context is not None else "http",
                address=f"{host}:{port}",
            )

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
        if self.secure is not None:
            for client in self.secure.clients:
                await client.close()

    async def _metrics(self, request: web.Request) -> web.Response:
        metrics.set_pending(self.pending())
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
