"""Raw JSON access to the API server.

kubernetes-asyncio loads kubeconfigs and in-cluster settings well; its generated model classes
are slow to build and some responses (a Binding's) do not even deserialize. So we take its
`Configuration` (server, TLS material, bearer token with its refresh hook) and speak JSON
ourselves, parsing with orjson: requests over a lean HTTP/1.1 pool (`transport`), watches over
an aiohttp session. A scheduler keeps two of these: one for long-lived watches, one for writes,
so a burst of binds never queues behind a watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import gc
import os
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import aiohttp
import orjson
from kubernetes_asyncio.client import Configuration
from kubernetes_asyncio.config import load_incluster_config, load_kube_config

from ascheduler.kube.transport import Garbled, Pool, Unanswered
from ascheduler.metrics import REST_CLIENT_REQUESTS

JSON = dict[str, Any]

_RESEND = 5
#: Seconds an idle pooled connection is kept.
KEEPALIVE = 60.0

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class Failure(enum.Enum):
    """What a failed request means for its caller, decided once, here."""

    #: Try again (after a pause): 429, 5xx, 408, the connection failed or the answer was cut.
    #: A write may or may not have landed; a retry of one that did answers CONFLICT.
    TRANSIENT = "transient"
    #: 409: the object changed since it was read, or already exists. Re-read and decide.
    CONFLICT = "conflict"
    #: The request itself is refused (400, 401, 403, 404, 422, ...); the same request fails
    #: the same way.
    PERMANENT = "permanent"


class KubeError(Exception):
    """Any failure of a request to the API server; `kind` says what to do about it."""

    kind: Failure = Failure.PERMANENT

    @property
    def transient(self) -> bool:
        return self.kind is Failure.TRANSIENT

    @property
    def conflict(self) -> bool:
        return self.kind is Failure.CONFLICT

    @property
    def not_found(self) -> bool:
        return False


class ApiError(KubeError):
    """A non-2xx answer. `status` is the HTTP code; `reason` the Status object's reason."""

    def __init__(self, status: int, reason: str, message: str, *, method: str, path: str) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        if status == 409:
            self.kind = Failure.CONFLICT
        elif status in (408, 429) or status >= 500:
            self.kind = Failure.TRANSIENT
        else:
            self.kind = Failure.PERMANENT
        super().__init__(f"{method} {path}: {status} {reason}: {message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


class CredentialsFailed(KubeError):
    """The credentials hook (a token file being rotated, an exec plugin) failed before the
    request could be sent. Transient: the next request asks again."""

    kind = Failure.TRANSIENT

    def __init__(self, method: str, path: str, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"{method} {path}: credentials: {type(cause).__name__}: {cause}")


class ConnectionFailed(KubeError):
    """No answer: the connection could not be made, broke, timed out, or the answer was cut
    or garbled. Always transient."""

    kind = Failure.TRANSIENT

    def __init__(self, method: str, path: str, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"{method} {path}: {type(cause).__name__}: {cause}")


#: Bodies at least this large are decoded with the cyclic garbage collector paused.
BULK_BYTES = 256 * 1024


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a bulk answer is decoded and parsed: a list of
    10,000 pods allocates millions of containers, and the collections they would trigger
    (none of which finds garbage) cost several times the decoding itself. Synchronous code
    only, so no other task runs meanwhile; nests."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes

    def json(self) -> JSON:
        """The body as a JSON object; `ConnectionFailed` if it is not one (a cut answer)."""
        try:
            if len(self.body) >= BULK_BYTES:
                with gc_paused():
                    data = orjson.loads(self.body)
            else:
                data = orjson.loads(self.body) if self.body else {}
        except orjson.JSONDecodeError as exc:
            raise ConnectionFailed("decode", "response body", exc) from exc
        if not isinstance(data, dict):
            raise ConnectionFailed(
                "decode", "response body", ValueError(f"not a JSON object: {type(data).__name__}")
            )
        return data


def _in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


async def load_configuration(
    kubeconfig: str | None = None, *, context: str | None = None
) -> Configuration:
    """A kubeconfig file if given (or `$KUBECONFIG`), else in-cluster settings when running in a
    pod, else `~/.kube/config`."""
    config = Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG")
    if path is None and _in_cluster():
        load_incluster_config(client_configuration=config)  # type: ignore[no-untyped-call]
    else:
        await load_kube_config(
            config_file=path, context=context, client_configuration=config, persist_config=False
        )
    return config


#: Characters a request path keeps as they are (RFC 3986's path characters, and `%` so that a
#: path already escaped is not escaped twice).
_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


def _header_value(value: str) -> str:
    """`value` as a header value; a line break in it (which would start a header of its own)
    or a character beyond Latin-1 is refused."""
    if "\r" in value or "\n" in value:
        raise ValueError("a header value may not contain a line break")
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        raise ValueError("a header value must be Latin-1 text") from None
    return value


def _ssl_context(config: Configuration) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=config.ssl_ca_cert)
    if config.cert_file:
        ctx.load_cert_chain(config.cert_file, keyfile=config.key_file)
    if not config.verify_ssl:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


class RateLimiter:
    """client-go's client-side limit: `qps` requests a second, bursts of up to `burst`.

    Each request reserves a token at once (the count may go negative) and sleeps off its debt,
    so concurrent callers are served in order without a lock.
    """

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._tokens = float(self.burst)
        self._last: float | None = None

    async def wait(self) -> None:
        now = asyncio.get_running_loop().time()
        if self._last is not None:
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1
        if self._tokens < 0:
            await asyncio.sleep(-self._tokens / self.qps)


class KubeClient:
    """One connection pool to one API server."""

    def __init__(
        self,
        config: Configuration,
        *,
        pool_size: int = 64,
        user_agent: str = "ascheduler",
        limiter: RateLimiter | None = None,
    ) -> None:
        self.config = config
        self.limiter = limiter
        self.server = str(config.host).rstrip("/")
        self._host = self.server.split("://", 1)[-1]
        #: rest_client_requests_total's children by (method, code), so that counting a
        #: request is a dict lookup and an increment.
        self._requests: dict[tuple[str, str], Any] = {}
        # Idle connections stay open for a minute (aiohttp's default is 15 s), inside
        # kube-apiserver's 90 s idle timeout: a burst after a pause reuses them instead of
        # paying a TLS handshake per connection again.
        context = _ssl_context(config)
        connector = aiohttp.TCPConnector(limit=pool_size, ssl=context, keepalive_timeout=KEEPALIVE)
        url = urlsplit(self.server)
        secure = url.scheme == "https"
        self._prefix = url.path.rstrip("/")
        self._pool = Pool(
            url.hostname or "localhost",
            url.port or (443 if secure else 80),
            ssl_context=context if secure else None,
            size=pool_size,
            keepalive=KEEPALIVE,
        )
        #: What every request's head starts with after its request line.
        self._fixed = (
            f"Host: {url.netloc.rpartition('@')[2]}\r\nUser-Agent: {_header_value(user_agent)}\r\n"
            "Accept: application/json\r\nAccept-Encoding: gzip\r\n"
        )
        #: Streams (watches) only.
        self.session = aiohttp.ClientSession(
            connector=connector,
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            read_bufsize=2**21,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
        )

    @classmethod
    async def connect(
        cls,
        kubeconfig: str | None = None,
        *,
        context: str | None = None,
        pool_size: int = 64,
        user_agent: str = "ascheduler",
        limiter: RateLimiter | None = None,
    ) -> KubeClient:
        return cls(
            await load_configuration(kubeconfig, context=context),
            pool_size=pool_size,
            user_agent=user_agent,
            limiter=limiter,
        )

    async def close(self) -> None:
        self._pool.close()
        await self.session.close()

    @property
    def connections_opened(self) -> int:
        """Connections the request pool has opened so far (each one a handshake)."""
        return self._pool.opened

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def headers(self, content_type: str | None = None) -> dict[str, str]:
        headers: dict[str, str] = {}
        token = await self.config.get_api_key_with_prefix("BearerToken")
        if token:
            headers["Authorization"] = str(token)
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def count(self, method: str, code: int | str) -> None:
        """One request in `rest_client_requests_total` (client-go's name and labels)."""
        key = (method, str(code))
        child = self._requests.get(key)
        if child is None:
            if len(self._requests) >= 256:  # methods x codes is small; never let it grow
                self._requests.clear()
            child = REST_CLIENT_REQUESTS.labels(code=key[1], method=method, host=self._host)
            self._requests[key] = child
        child.inc()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | int] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 60.0,
    ) -> Response:
        """Send one request; raise `ApiError` for any status >= 400 and `ConnectionFailed`
        when there is no answer, so callers catch `KubeError` and look at its `kind`.

        Pooled keep-alive connections the server has closed (it restarted, or timed them out)
        fail before any answer; such a request is sent again, up to `_RESEND` times (each
        failure drops one stale connection from the pool). A write that did land the first
        time then answers 409, which callers already handle.
        """
        if self.limiter is not None:
            await self.limiter.wait()
        data = b"" if body is None else orjson.dumps(body)
        try:
            token = await self.config.get_api_key_with_prefix("BearerToken")
        except Exception as exc:  # whatever the credentials hook raises: never past this layer
            raise CredentialsFailed(method, path, exc) from exc
        target = self._prefix + quote(path, safe=_PATH_SAFE)
        if params:
            target += "?" + urlencode(params)
        head = f"{method} {target} HTTP/1.1\r\n{self._fixed}"
        if token:
            try:
                head += f"Authorization: {_header_value(str(token))}\r\n"
            except ValueError as exc:
                raise CredentialsFailed(method, path, exc) from exc
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
        request = head.encode("latin-1") + b"\r\n" + data
        for attempt in range(1, _RESEND + 1):
            try:
                status, payload = await self._pool.send(
                    request, bodiless=method == "HEAD", timeout=timeout
                )
            except Unanswered as exc:
                self.count(method, "<error>")
                if attempt == _RESEND:
                    raise ConnectionFailed(method, path, exc) from exc
                await asyncio.sleep(0.01 * attempt)
                continue
            except (Garbled, TimeoutError, OSError) as exc:
                self.count(method, "<error>")
                raise ConnectionFailed(method, path, exc) from exc
            self.count(method, status)
            if status >= 400:
                raise _api_error(status, payload, method=method, path=path)
            return Response(status, payload)
        raise AssertionError("unreachable")

    async def get(self, path: str, *, params: Mapping[str, str | int] | None = None) -> JSON:
        return (await self.request("GET", path, params=params)).json()

    async def post(self, path: str, body: Any) -> JSON:
        return (await self.request("POST", path, body=body)).json()

    async def put(self, path: str, body: Any) -> JSON:
        return (await self.request("PUT", path, body=body)).json()

    async def patch(self, path: str, body: Any, *, content_type: str = MERGE_PATCH) -> JSON:
        return (await self.request("PATCH", path, body=body, content_type=content_type)).json()

    async def delete(self, path: str, *, body: Any = None) -> JSON:
        return (await self.request("DELETE", path, body=body)).json()


def _api_error(status: int, payload: bytes, *, method: str, path: str) -> ApiError:
    reason, message = "", payload[:500].decode(errors="replace")
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        reason = str(data.get("reason", ""))
        message = str(data.get("message", message))
    return ApiError(status, reason, message, method=method, path=path)
