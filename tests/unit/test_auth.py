"""The secure port's gate, as kube-scheduler's delegating authenticator and authorizer: who
gets 401, 403 or through, what is asked of the API server and how long its answers are
reused. The reviews are answered by a table standing in for the API server's reviewers
(the integration test asks the real one)."""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any

import aiohttp
import pytest

from ascheduler.auth import (
    ANONYMOUS_USER,
    AuthSettings,
    DelegatedAuth,
    PathMatcher,
    Unauthenticated,
    User,
    user_of_certificate,
)
from ascheduler.devcluster.plane import free_port
from ascheduler.http import HealthServer, SecurePort
from ascheduler.kube.client import ApiError
from ascheduler.tls import ServingCertificate, server_context

TOKENS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
READER = "system:serviceaccount:mon:prometheus"
NOBODY = "system:serviceaccount:mon:nobody"


class Reviews:
    """Answers TokenReviews and SubjectAccessReviews from tables, counting each, as the API
    server would for these users: `reader` may get /metrics, `nobody` nothing, `admin` is in
    system:masters."""

    def __init__(self) -> None:
        self.users = {
            "reader-token": {"username": READER, "uid": "u1", "groups": ["system:serviceaccounts"]},
            "nobody-token": {"username": NOBODY, "uid": "u2", "groups": []},
            "admin-token": {"username": "admin", "groups": ["system:masters"]},
        }
        self.grants = {(READER, "get", "/metrics")}
        self.calls: list[tuple[str, Any]] = []
        self.failing = False
        self.gate: asyncio.Event | None = None

    async def post(self, path: str, body: Any) -> Any:
        self.calls.append((path, body))
        if self.gate is not None:
            await self.gate.wait()
        if self.failing:
            raise ApiError(503, "ServiceUnavailable", "down", method="POST", path=path)
        spec = body["spec"]
        if path == TOKENS:
            user = self.users.get(spec["token"])
            return {"status": {"authenticated": user is not None, "user": user or {}}}
        assert path == ACCESS
        attrs = spec["nonResourceAttributes"]
        allowed = (spec["user"], attrs["verb"], attrs["path"]) in self.grants
        return {"status": {"allowed": allowed}}

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.calls if p == path)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def gate(reviews: Reviews, clock: Clock, **settings: Any) -> DelegatedAuth:
    return DelegatedAuth(reviews, reviews, AuthSettings(**settings), clock=clock)


@pytest.mark.parametrize(
    ("patterns", "path", "allowed"),
    [
        (("/healthz", "/readyz", "/livez"), "/healthz", True),
        (("/healthz", "/readyz", "/livez"), "/livez", True),
        (("/healthz", "/readyz", "/livez"), "/metrics", False),
        (("/healthz", "/readyz", "/livez"), "/healthz/extra", False),
        (("/debug/*",), "/debug/queue", True),
        (("/debug/*",), "/debugx", False),
        (("/",), "/", True),
        (("/",), "/metrics", False),
    ],
)
def test_always_allowed_paths_are_exact_or_trailing_star_prefixes(
    patterns: tuple[str, ...], path: str, allowed: bool
) -> None:
    assert PathMatcher(patterns)(path) is allowed


def test_a_star_anywhere_but_the_end_is_refused() -> None:
    with pytest.raises(ValueError, match="only a trailing"):
        PathMatcher(["/debug/*/x"])


async def test_no_credentials_are_anonymous_on_the_always_allowed_paths_only() -> None:
    reviews = Reviews()
    auth = gate(reviews, Clock())
    assert await auth.authenticate("", None, "/readyz") == ANONYMOUS_USER
    assert await auth.authorize(ANONYMOUS_USER, "get", "/readyz") == (True, "")
    with pytest.raises(Unauthenticated):
        await auth.authenticate("", None, "/metrics")
    with pytest.raises(Unauthenticated):
        await auth.authenticate("Basic dXNlcjpwYXNz", None, "/metrics")
    assert reviews.calls == []  # nothing asked of the API server


async def test_a_token_is_reviewed_and_its_answer_reused_for_the_ttl() -> None:
    reviews, clock = Reviews(), Clock()
    auth = gate(reviews, clock, token_ttl=10.0)
    user = await auth.authenticate("Bearer reader-token", None, "/metrics")
    assert user == User(READER, uid="u1", groups=("system:serviceaccounts",))
    assert reviews.calls[0][1]["spec"] == {"token": "reader-token"}
    with pytest.raises(Unauthenticated):
        await auth.authenticate("Bearer forged", None, "/metrics")
    clock.now += 9.0
    await auth.authenticate("Bearer reader-token", None, "/metrics")
    with pytest.raises(Unauthenticated):
        await auth.authenticate("Bearer forged", None, "/healthz")  # a bad token is 401 anywhere
    assert reviews.count(TOKENS) == 2
    clock.now += 2.0
    await auth.authenticate("Bearer reader-token", None, "/metrics")
    assert reviews.count(TOKENS) == 3


async def test_access_is_reviewed_for_the_method_on_the_path_and_reused() -> None:
    reviews, clock = Reviews(), Clock()
    auth = gate(reviews, clock, allowed_ttl=10.0, denied_ttl=5.0)
    reader = await auth.authenticate("Bearer reader-token", None, "/metrics")
    nobody = await auth.authenticate("Bearer nobody-token", None, "/metrics")
    assert await auth.authorize(reader, "get", "/metrics") == (True, "")
    assert await auth.authorize(nobody, "get", "/metrics") == (False, "")
    sent = [body["spec"] for path, body in reviews.calls if path == ACCESS]
    assert sent[0] == {
        "user": READER,
        "uid": "u1",
        "groups": ["system:serviceaccounts"],
        "extra": {},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    clock.now += 6.0  # the denial has expired, the allowance has not
    assert await auth.authorize(reader, "get", "/metrics") == (True, "")
    assert await auth.authorize(nobody, "get", "/metrics") == (False, "")
    assert reviews.count(ACCESS) == 3
    # Health needs no review; system:masters needs none either.
    assert await auth.authorize(nobody, "get", "/livez") == (True, "")
    admin = await auth.authenticate("Bearer admin-token", None, "/debug/cache")
    assert await auth.authorize(admin, "get", "/debug/cache") == (True, "")
    assert reviews.count(ACCESS) == 3


async def test_failed_reviews_are_refusals_and_are_not_kept() -> None:
    reviews, clock = Reviews(), Clock()
    auth = gate(reviews, clock)
    reviews.failing = True
    with pytest.raises(Unauthenticated):
        await auth.authenticate("Bearer reader-token", None, "/metrics")
    reviews.failing = False
    reader = await auth.authenticate("Bearer reader-token", None, "/metrics")
    reviews.failing = True
    with pytest.raises(Exception, match="503"):
        await auth.authorize(reader, "get", "/metrics")
    reviews.failing = False
    assert await auth.authorize(reader, "get", "/metrics") == (True, "")


async def test_concurrent_requests_share_one_review() -> None:
    reviews, clock = Reviews(), Clock()
    auth = gate(reviews, clock)
    reviews.gate = asyncio.Event()
    waiting = [
        asyncio.create_task(auth.authenticate("Bearer reader-token", None, "/metrics"))
        for _ in range(20)
    ]
    await asyncio.sleep(0)
    reviews.gate.set()
    users = await asyncio.gather(*waiting)
    assert {u.name for u in users} == {READER}
    assert reviews.count(TOKENS) == 1


def test_a_verified_client_certificate_names_its_user_and_groups() -> None:
    peer = {
        "subject": (
            (("organizationName", "monitoring"),),
            (("organizationName", "ops"),),
            (("commonName", "prometheus"),),
        )
    }
    user = user_of_certificate(peer)
    assert user == User("prometheus", groups=("monitoring", "ops", "system:authenticated"))
    assert user_of_certificate(None) is None
    assert user_of_certificate({}) is None


# -- over TLS, end to end ---------------------------------------------------------------------


async def get(
    session: aiohttp.ClientSession, url: str, token: str | None = None
) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(url, headers=headers, ssl=False) as resp:
        return resp.status, await resp.text()


async def test_the_secure_port_answers_as_kube_scheduler_s() -> None:
    reviews = Reviews()
    port = free_port()
    secure = SecurePort(
        "127.0.0.1",
        port,
        server_context(ServingCertificate(), "127.0.0.1"),
        gate(reviews, Clock()),
    )
    server = HealthServer(secure=secure, not_ready=lambda: "")
    await server.start()
    base = f"https://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as session:
            for path in ("/healthz", "/readyz", "/livez"):
                assert await get(session, base + path) == (200, "ok")
            status, text = await get(session, f"{base}/metrics")
            assert status == 401
            assert json.loads(text) == {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "details": {},
                "code": 401,
            }
            status, text = await get(session, f"{base}/metrics", "nobody-token")
            assert status == 403
            assert json.loads(text)["message"] == (
                f'forbidden: User "{NOBODY}" cannot get path "/metrics"'
            )
            status, text = await get(session, f"{base}/metrics", "reader-token")
            assert status == 200
            assert "scheduler_pending_pods" in text
            # Plain HTTP is not spoken on the secure port.
            with pytest.raises(aiohttp.ClientError):
                await get(session, f"http://127.0.0.1:{port}/healthz")
    finally:
        await server.stop()


def test_a_certificate_made_at_start_is_for_loopback_and_kept_in_cert_dir(
    tmp_path: Any,
) -> None:
    from cryptography import x509

    context = server_context(ServingCertificate(cert_dir=str(tmp_path)), "0.0.0.0")
    assert isinstance(context, ssl.SSLContext)
    cert = tmp_path / "ascheduler.crt"
    key = tmp_path / "ascheduler.key"
    assert key.stat().st_mode & 0o077 == 0
    first = cert.read_bytes()
    leaf = x509.load_pem_x509_certificate(first)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    server_context(ServingCertificate(cert_dir=str(tmp_path)), "0.0.0.0")
    assert cert.read_bytes() == first  # read back, not made again
    # Given files are used as they are.
    given = server_context(ServingCertificate(cert_file=str(cert), key_file=str(key)), "::")
    assert isinstance(given, ssl.SSLContext)
    with pytest.raises(ValueError, match="go together"):
        server_context(ServingCertificate(cert_file=str(cert)), "::")
