"""Who may read what on the secure port: authentication and authorization delegated to the
API server, as kube-scheduler's secure port does (k8s.io/apiserver's
DelegatingAuthenticationOptions and DelegatingAuthorizationOptions).

A request is first authenticated:

* a client certificate the port verified (`--client-ca-file`) names the user (common name)
  and groups (organizations);
* a bearer token is sent to the API server in a TokenReview; one it does not authenticate is
  401, as is a review that fails;
* without either, the request is anonymous (`system:anonymous`, group
  `system:unauthenticated`) on the always-allowed paths only, and 401 anywhere else. This
  is kube-apiserver's anonymous authenticator with its paths conditioned; kube-scheduler
  lets anonymous requests reach the SubjectAccessReview everywhere (which then denies
  them, 403): here they cost no review, and the answer says what is missing.

Then authorized, the first that allows winning: the always-allowed paths
(`--authorization-always-allow-paths`, default `/healthz,/readyz,/livez`; a trailing `*`
matches a prefix), the group `system:masters`, then a SubjectAccessReview for the request's
method, lowercased, on its path (a non-resource URL: grant it with a ClusterRole rule
`nonResourceURLs: ["/metrics"], verbs: ["get"]`). A denial is 403 with kube's Status and
wording (`forbidden: User "NAME" cannot get path "/metrics"`); a review that fails is 500.

Answers are reused as kube reuses them: a token's review for 10 s, an allowed and a
denied access review for 10 s each; failures are not kept. Concurrent requests waiting on
the same review share it, so a scrape storm costs one review per token and path, not one
per request.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar

import orjson
import structlog
from aiohttp import web

from ascheduler.kube.client import KubeError

log = structlog.get_logger(__name__)

DEFAULT_ALWAYS_ALLOW_PATHS: Final = ("/healthz", "/readyz", "/livez")
ALWAYS_ALLOW_GROUPS: Final = ("system:masters",)
ANONYMOUS: Final = "system:anonymous"
UNAUTHENTICATED: Final = "system:unauthenticated"
AUTHENTICATED: Final = "system:authenticated"
#: Cached answers kept at most before the expired ones are dropped (and, if still too
#: many, all of them).
MAX_CACHED: Final = 10_000

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Reviewer(Protocol):
    """Where reviews are created: a `KubeClient`."""

    async def post(self, path: str, body: Any) -> Any: ...


class Unauthenticated(Exception):
    """The credentials were not accepted (or could not be checked): 401."""


class ReviewFailed(Exception):
    """The API server did not answer a review."""


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    #: Sorted (key, values) pairs, so a user is hashable and usable as a cache key.
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


ANONYMOUS_USER: Final = User(ANONYMOUS, groups=(UNAUTHENTICATED,))


@dataclass(frozen=True)
class AuthSettings:
    """kube's delegating options, by the flags that set them."""

    #: --authorization-always-allow-paths
    always_allow_paths: tuple[str, ...] = DEFAULT_ALWAYS_ALLOW_PATHS
    #: --authentication-token-webhook-cache-ttl
    token_ttl: float = 10.0
    #: --authorization-webhook-cache-authorized-ttl
    allowed_ttl: float = 10.0
    #: --authorization-webhook-cache-unauthorized-ttl
    denied_ttl: float = 10.0


class PathMatcher:
    """kube's path authorizer: exact paths, and prefixes written with a trailing `*`."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.exact: set[str] = set()
        self.prefixes: list[str] = []
        for pattern in patterns:
            p = pattern.strip().removeprefix("/")
            if "*" in p[:-1]:
                raise ValueError(f"only a trailing * is allowed in {pattern!r}")
            if p.endswith("*"):
                self.prefixes.append(p[:-1])
            else:
                self.exact.add(p)

    def __call__(self, path: str) -> bool:
        p = path.removeprefix("/")
        return p in self.exact or any(p.startswith(prefix) for prefix in self.prefixes)


@dataclass
class _Entry(Generic[V]):
    until: float
    value: V


@dataclass
class TTLCache(Generic[K, V]):
    """Answers kept for a time that depends on the answer; concurrent misses of one key
    wait on a single fetch."""

    ttl: Callable[[V], float]
    clock: Callable[[], float] = time.monotonic
    _kept: dict[K, _Entry[V]] = field(default_factory=dict)
    _fetching: dict[K, asyncio.Future[V]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._kept)

    async def get(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        now = self.clock()
        kept = self._kept.get(key)
        if kept is not None and kept.until > now:
            return kept.value
        pending = self._fetching.get(key)
        if pending is None:
            pending = self._fetching[key] = asyncio.ensure_future(self._fetch(key, fetch))
            # Read by the waiters; retrieved here too, for when every waiter has gone.
            pending.add_done_callback(_retrieve)
        # A caller that goes away must not cancel the others' fetch.
        return await asyncio.shield(pending)

    async def _fetch(self, key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        try:
            value = await fetch()
        finally:
            del self._fetching[key]
        ttl = self.ttl(value)
        if ttl > 0:
            now = self.clock()
            if len(self._kept) >= MAX_CACHED:
                self._kept = {k: e for k, e in self._kept.items() if e.until > now}
                if len(self._kept) >= MAX_CACHED:
                    self._kept.clear()
            self._kept[key] = _Entry(now + ttl, value)
        return value


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def status_body(code: int, reason: str, message: str) -> bytes:
    """kube's `metav1.Status` for a failed request, as its API server writes one."""
    return orjson.dumps(
        {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "details": {},
            "code": code,
        }
    )


def _status(code: int, reason: str, message: str) -> web.Response:
    return web.Response(
        status=code,
        body=status_body(code, reason, message),
        content_type="application/json",
        headers={"X-Content-Type-Options": "nosniff"},
    )


def unauthorized() -> web.Response:
    return _status(401, "Unauthorized", "Unauthorized")


def forbidden(user: str, verb: str, path: str, reason: str = "") -> web.Response:
    message = f"forbidden: User {_quote(user)} cannot {verb} path {_quote(path)}"
    if reason:
        message = f"{message}: {reason}"
    return _status(403, "Forbidden", message)


def _quote(text: str) -> str:
    """Go's %q for the names kube puts in its messages."""
    return orjson.dumps(text).decode()


def user_of_certificate(peer: Mapping[str, Any] | None) -> User | None:
    """kube's x509 authenticator: common name as the user, organizations as groups."""
    if not peer:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peer.get("subject", ()):
        for attribute, value in rdn:
            if attribute == "commonName":
                name = str(value)
            elif attribute == "organizationName":
                groups.append(str(value))
    return User(name, groups=(*groups, AUTHENTICATED)) if name else None


class DelegatedAuth:
    """The secure port's gate: `middleware` answers 401 or 403 itself, or lets the
    request through."""

    def __init__(
        self,
        authentication: Reviewer,
        authorization: Reviewer,
        settings: AuthSettings = AuthSettings(),
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.authentication = authentication
        self.authorization = authorization
        self.settings = settings
        self.always_allowed = PathMatcher(settings.always_allow_paths)
        self.tokens: TTLCache[str, User | None] = TTLCache(
            lambda _: settings.token_ttl, clock=clock
        )
        self.access: TTLCache[tuple[User, str, str], tuple[bool, str]] = TTLCache(
            lambda answer: settings.allowed_ttl if answer[0] else settings.denied_ttl,
            clock=clock,
        )

    @web.middleware
    async def middleware(
        self,
        request: web.Request,
        handler: Callable[[web.Request], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        refused = await self.check(request)
        if refused is not None:
            return refused
        return await handler(request)

    async def check(self, request: web.Request) -> web.Response | None:
        """None when the request may go on; else the answer refusing it."""
        path, verb = request.path, request.method.lower()
        try:
            user = await self.authenticate(
                request.headers.get("Authorization", ""),
                request.transport.get_extra_info("peercert") if request.transport else None,
                path,
            )
        except Unauthenticated as exc:
            log.debug("unauthenticated", path=path, reason=str(exc))
            return unauthorized()
        try:
            allowed, reason = await self.authorize(user, verb, path)
        except ReviewFailed as exc:
            log.warning("authorization_failed", path=path, user=user.name, error=str(exc))
            return _status(500, "InternalError", f"Internal Server Error: {path!r}: {exc}")
        if allowed:
            return None
        return forbidden(user.name, verb, path, reason)

    async def authenticate(self, header: str, peer: Mapping[str, Any] | None, path: str) -> User:
        """The request's user; Unauthenticated when its credentials fail or, outside the
        always-allowed paths, it has none."""
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() == "bearer" and token:
            digest = hashlib.sha256(token.encode()).hexdigest()
            user = await self.tokens.get(digest, lambda: self._review_token(token))
            if user is None:
                raise Unauthenticated("the token was not authenticated")
            return user
        if header:
            raise Unauthenticated("not a bearer token")
        certified = user_of_certificate(peer)
        if certified is not None:
            return certified
        if self.always_allowed(path):
            return ANONYMOUS_USER
        raise Unauthenticated("no credentials")

    async def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        """(allowed, the reviewer's reason); ReviewFailed when the API server did not say."""
        if self.always_allowed(path):
            return True, ""
        if any(g in ALWAYS_ALLOW_GROUPS for g in user.groups):
            return True, ""
        return await self.access.get(
            (user, verb, path), lambda: self._review_access(user, verb, path)
        )

    async def _review_token(self, token: str) -> User | None:
        try:
            review = await self.authentication.post(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenReview",
                    "spec": {"token": token},
                },
            )
        except (KubeError, TimeoutError) as exc:
            log.warning("token_review_failed", error=str(exc))
            raise Unauthenticated(f"TokenReview failed: {exc}") from exc
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(
            name=str(user.get("username", "")),
            uid=str(user.get("uid", "")),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(v) for v in vs)) for k, vs in extra.items())),
        )

    async def _review_access(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        try:
            review = await self.authorization.post(
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                {
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SubjectAccessReview",
                    "spec": {
                        "user": user.name,
                        "uid": user.uid,
                        "groups": list(user.groups),
                        "extra": {k: list(v) for k, v in user.extra},
                        "nonResourceAttributes": {"path": path, "verb": verb},
                    },
                },
            )
        except (KubeError, TimeoutError) as exc:
            raise ReviewFailed(str(exc)) from exc
        status = review.get("status") or {}
        return bool(status.get("allowed")), str(status.get("reason") or "")
