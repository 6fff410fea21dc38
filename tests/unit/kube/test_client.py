"""The client's one classification of failures, against a local HTTP server that misbehaves
the ways an API server under load or restarting does (not an API server: only transport)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web
from kubernetes_asyncio.client import Configuration

from ascheduler.kube import (
    ApiError,
    ConnectionFailed,
    CredentialsFailed,
    Failure,
    KubeClient,
    KubeError,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[KubeClient]]]:
    runners: list[web.AppRunner] = []
    clients: list[KubeClient] = []

    async def start(handler: Handler) -> KubeClient:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        config = Configuration()
        config.host = f"http://127.0.0.1:{port}"
        client = KubeClient(config)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()
    for runner in runners:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (409, Failure.CONFLICT),
        (429, Failure.TRANSIENT),
        (500, Failure.TRANSIENT),
        (503, Failure.TRANSIENT),
        (504, Failure.TRANSIENT),
        (400, Failure.PERMANENT),
        (403, Failure.PERMANENT),
        (404, Failure.PERMANENT),
        (422, Failure.PERMANENT),
    ],
)
async def test_statuses_are_classified(
    serve: Callable[[Handler], Awaitable[KubeClient]], status: int, kind: Failure
) -> None:
    async def answer(request: web.Request) -> web.Response:
        return web.json_response({"reason": "Why", "message": "because"}, status=status)

    client = await serve(answer)
    with pytest.raises(ApiError) as err:
        await client.get("/api/v1/pods")
    assert err.value.kind is kind
    assert err.value.status == status
    assert err.value.not_found == (status == 404)


async def test_a_connection_cut_mid_answer_is_transient(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    async def cut(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Length": "1000"})
        await response.prepare(request)
        await response.write(b'{"items": [')
        assert request.transport is not None
        request.transport.close()
        return response

    client = await serve(cut)
    with pytest.raises(ConnectionFailed) as err:
        await client.post("/api/v1/namespaces/ns/pods/p/binding", {})
    assert err.value.transient


async def test_a_dropped_connection_is_transient(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    async def drop(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    client = await serve(drop)
    with pytest.raises(KubeError) as err:
        await client.request("PATCH", "/api/v1/nodes/n", body={})
    assert err.value.transient


async def test_a_garbled_answer_is_transient(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    async def garbled(request: web.Request) -> web.Response:
        return web.Response(text="<html>proxy error</html>", content_type="text/html")

    client = await serve(garbled)
    with pytest.raises(ConnectionFailed):
        await client.get("/api/v1/nodes")


async def test_a_request_past_its_timeout_is_transient(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    released = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await released.wait()
        return web.Response()

    client = await serve(hang)
    with pytest.raises(ConnectionFailed) as err:
        await client.request("GET", "/api/v1/nodes", timeout=0.1)
    released.set()
    assert err.value.transient


async def test_nothing_listening_is_transient() -> None:
    config = Configuration()
    config.host = "http://127.0.0.1:9"  # discard: nothing listens there
    async with KubeClient(config) as client:
        with pytest.raises(ConnectionFailed) as err:
            await client.get("/api/v1/nodes")
    assert err.value.transient


async def test_a_failing_credentials_hook_is_transient(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    client = await serve(ok)

    def rotate(config: Configuration) -> None:
        raise OSError("token file is being rotated")

    client.config.refresh_api_key_hook = rotate
    with pytest.raises(CredentialsFailed) as err:
        await client.get("/api/v1/nodes")
    assert err.value.transient
    client.config.refresh_api_key_hook = None
    assert await client.get("/api/v1/nodes") == {}


def test_gc_is_paused_for_bulk_work_and_restored_even_on_error() -> None:
    import gc

    from ascheduler.kube.client import gc_paused

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause still holds
    assert gc.isenabled()
    with pytest.raises(ValueError, match="boom"), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


async def test_requests_share_the_pools_connections(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    """At most `pool_size` requests are in flight, each on a connection of its own, and the
    connections are kept and reused: a burst never opens more than the pool holds."""
    peers: list[int] = []
    in_flight = 0
    most = 0
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        nonlocal in_flight, most
        peers.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        in_flight += 1
        most = max(most, in_flight)
        if in_flight == 2:
            release.set()
        await release.wait()
        in_flight -= 1
        return web.json_response({})

    server = await serve(handler)
    async with KubeClient(server.config, pool_size=2) as client:
        await asyncio.gather(*(client.get(f"/p/{i}") for i in range(6)))
        await client.get("/after")
    assert most == 2
    assert len(peers) == 7
    assert len(set(peers)) == 2


async def test_the_request_line_keeps_the_server_s_path_and_encodes_the_query(
    serve: Callable[[Handler], Awaitable[KubeClient]],
) -> None:
    """A server behind a path prefix (a proxy's `https://host/k8s/clusters/c1`), selectors
    with characters a query must escape, the bearer token and the body's type."""
    seen: list[tuple[str, dict[str, str], str, bytes]] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(
            (request.path, dict(request.query), request.headers.get("Authorization", ""), b"")
        )
        seen[-1] = (*seen[-1][:3], await request.read())
        return web.json_response({"ok": True}, status=201)

    server = await serve(record)
    config = server.config
    config.host = f"{config.host}/k8s/clusters/c1/"
    config.api_key = {"BearerToken": "Bearer t0ken"}
    async with KubeClient(config) as client:
        answer = await client.request(
            "POST",
            "/api/v1/namespaces/n s/pods",
            params={"labelSelector": "app in (a,b),tier!=x", "limit": 5},
            body={"a": 1},
        )
    assert answer.status == 201
    assert answer.json() == {"ok": True}
    assert seen == [
        (
            "/k8s/clusters/c1/api/v1/namespaces/n s/pods",
            {"labelSelector": "app in (a,b),tier!=x", "limit": "5"},
            "Bearer t0ken",
            b'{"a":1}',
        )
    ]


@pytest.mark.parametrize("token", ["Bearer a\r\nX-Evil: 1", "Bearer \u2603"])
async def test_a_token_that_is_no_header_value_fails_as_credentials(
    serve: Callable[[Handler], Awaitable[KubeClient]], token: str
) -> None:
    calls = 0

    async def ok(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return web.json_response({})

    server = await serve(ok)
    server.config.api_key = {"BearerToken": token}
    with pytest.raises(CredentialsFailed):
        await server.get("/api/v1/nodes")
    assert calls == 0
