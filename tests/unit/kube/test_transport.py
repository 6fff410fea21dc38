"""The request pool's HTTP/1.1, against a raw TCP server that answers exactly the bytes a
test gives it: framings an API server (or a proxy in front of one) may use, answers cut or
garbled, and connections closed under a request."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from ascheduler.kube.transport import Garbled, Pool, Unanswered

#: Reads one request (head and body) off a connection; writes the answer. Returns False to
#: close the connection afterwards.
Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    return head + await reader.readexactly(length)


class Server:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    self.requests.append(await read_request(reader))
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if not await self.answer(reader, writer, len(self.requests)):
                    return
        finally:
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], Awaitable[tuple[Server, Pool]]]]:
    started: list[tuple[Server, Pool]] = []

    async def start(answer: Answer, size: int = 4) -> tuple[Server, Pool]:
        server = Server(answer)
        server.server = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        pool = Pool("127.0.0.1", server.port, ssl_context=None, size=size, keepalive=60.0)
        started.append((server, pool))
        return server, pool

    yield start
    for server, pool in started:
        pool.close()
        assert server.server is not None
        server.server.close()


def request(path: str = "/x") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: t\r\n\r\n".encode()


def replying(*chunks: bytes, keep: bool = True) -> Answer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
        for chunk in chunks:
            writer.write(chunk)
            await writer.drain()
        return keep

    return answer


def late_first(release: asyncio.Event) -> Answer:
    """Answers the first request only once `release` is set (`late`), the others at once
    (`fresh`)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
        if n == 1:
            await release.wait()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
        await writer.drain()
        return True

    return answer


def held_until(
    release: asyncio.Event, arrived: asyncio.Event, *, arrive_at: int, hold: int | None = None
) -> Answer:
    """Answers `ok`, holding back each request up to the `hold`-th (every one without) until
    `release` is set; sets `arrived` once the `arrive_at`-th request is in."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
        if n >= arrive_at:
            arrived.set()
        if hold is None or n <= hold:
            await release.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return True

    return answer


async def test_a_length_delimited_answer_is_read_and_its_connection_reused(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    server, pool = await serve(replying(b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello"))
    for _ in range(3):
        assert await pool.send(request()) == (201, b"hello")
    assert server.connections == 1
    assert pool.opened == 1


async def test_a_chunked_answer_in_pieces_is_reassembled(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    # Split mid-header, mid-size line, mid-chunk and mid-trailer, with a chunk extension.
    _, pool = await serve(
        replying(
            b"HTTP/1.1 200 OK\r\nTransfer-Enc",
            b"oding: chunked\r\n\r\n5;ext=1\r\nhel",
            b"lo\r\n1",
            b"0\r\n" + b"x" * 16 + b"\r\n0\r\nTrailer: t\r",
            b"\n\r\n",
        )
    )
    assert await pool.send(request()) == (200, b"hello" + b"x" * 16)
    # The connection is in step: the next answer on it is read whole too.
    assert await pool.send(request()) == (200, b"hello" + b"x" * 16)
    assert pool.opened == 1


async def test_a_gzipped_answer_is_decompressed(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    body = gzip.compress(b'{"items": []}')
    _, pool = await serve(
        replying(
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(body)
            + body
        )
    )
    assert await pool.send(request()) == (200, b'{"items": []}')


async def test_an_interim_answer_is_skipped_and_a_bodiless_one_ends_at_its_head(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    _, pool = await serve(replying(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"))
    assert await pool.send(request()) == (204, b"")
    assert await pool.send(request()) == (204, b"")
    assert pool.opened == 1


async def test_an_answer_without_length_runs_to_the_close_and_its_connection_is_dropped(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    server, pool = await serve(replying(b"HTTP/1.0 200 OK\r\n\r\nall of it", keep=False))
    assert await pool.send(request()) == (200, b"all of it")
    assert await pool.send(request()) == (200, b"all of it")
    assert server.connections == 2


async def test_connection_close_is_honoured(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    server, pool = await serve(
        replying(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", keep=False)
    )
    assert await pool.send(request()) == (200, b"ok")
    assert await pool.send(request()) == (200, b"ok")
    assert server.connections == 2
    assert pool.idle == 0


async def test_a_connection_closed_before_any_answer_is_unanswered(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    _, pool = await serve(replying(keep=False))
    with pytest.raises(Unanswered):
        await pool.send(request())


async def test_a_connection_cut_mid_answer_is_garbled(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    _, pool = await serve(
        replying(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"items"', keep=False)
    )
    with pytest.raises(Garbled):
        await pool.send(request())


@pytest.mark.parametrize(
    "answer",
    [
        b"<html>proxy error</html>\r\n\r\n",
        b"HTTP/1.1 abc OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXX",
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
    ],
)
async def test_a_garbled_answer_fails_and_its_connection_is_not_reused(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]], answer: bytes
) -> None:
    _, pool = await serve(replying(answer))
    with pytest.raises(Garbled):
        await pool.send(request())
    assert pool.idle == 0


async def test_a_stale_pooled_connection_fails_unanswered_and_is_dropped(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    """The server closes a kept-alive connection after its first answer: the pool does not
    know yet when the next request goes out on it."""
    closing = asyncio.Event()

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        closing.set()
        return False

    server, pool = await serve(once)
    assert await pool.send(request()) == (200, b"")
    await closing.wait()
    await asyncio.sleep(0.05)  # let the close arrive, or not: either way no answer comes
    try:
        assert await pool.send(request()) == (200, b"")
    except Unanswered:
        assert await pool.send(request()) == (200, b"")
    assert server.connections >= 2


async def test_a_cancelled_request_s_connection_is_never_reused(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    """An answer arriving after its request was given up must not be read as the next one's."""
    release = asyncio.Event()
    server, pool = await serve(late_first(release))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await pool.send(request())
    release.set()
    assert await pool.send(request()) == (200, b"fresh")
    assert server.connections == 2


async def test_requests_beyond_the_pool_size_wait_for_a_connection(
    serve: Callable[..., Awaitable[tuple[Server, Pool]]],
) -> None:
    release = asyncio.Event()
    two_in = asyncio.Event()
    server, pool = await serve(held_until(release, two_in, arrive_at=2), 2)
    sends = [asyncio.create_task(pool.send(request())) for _ in range(5)]
    await two_in.wait()
    await asyncio.sleep(0.05)
    assert len(server.requests) == 2  # the other three wait for a slot
    sends[2].cancel()  # one gives up waiting: its place goes to the next
    release.set()
    results = await asyncio.gather(*sends, return_exceptions=True)
    assert isinstance(results[2], asyncio.CancelledError)
    assert [r for i, r in enumerate(results) if i != 2] == [(200, b"ok")] * 4
    assert pool.opened == 2


async def test_nothing_listening_is_unanswered() -> None:
    pool = Pool("127.0.0.1", 9, ssl_context=None, size=1, keepalive=60.0)
    with pytest.raises(Unanswered):
        await pool.send(request())
    with pytest.raises(Unanswered):  # and the slot it held was given back
        await pool.send(request())


async def test_a_request_past_its_deadline_times_out_and_its_connection_is_dropped(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    release = asyncio.Event()
    server, pool = await serve(late_first(release))
    with pytest.raises(TimeoutError):
        await pool.send(request(), timeout=0.05)
    release.set()
    assert await pool.send(request(), timeout=5.0) == (200, b"fresh")
    assert server.connections == 2
    assert pool.idle == 1


async def test_a_deadline_met_leaves_nothing_behind_to_fail_the_connection_s_next_request(
    serve: Callable[[Answer], Awaitable[tuple[Server, Pool]]],
) -> None:
    """The first request's timer must stop with its answer: the second, on the same
    connection, outlives the first one's deadline."""

    async def second_slow(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int
    ) -> bool:
        if n == 2:
            await asyncio.sleep(0.2)
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n{n}".encode())
        await writer.drain()
        return True

    server, pool = await serve(second_slow)
    assert await pool.send(request(), timeout=0.1) == (200, b"1")
    assert await pool.send(request()) == (200, b"2")
    assert server.connections == 1


async def test_a_request_waiting_for_a_slot_past_its_deadline_gives_up_its_place(
    serve: Callable[..., Awaitable[tuple[Server, Pool]]],
) -> None:
    release = asyncio.Event()
    first_in = asyncio.Event()
    server, pool = await serve(held_until(release, first_in, arrive_at=1, hold=1), 1)
    first = asyncio.create_task(pool.send(request()))
    await first_in.wait()
    with pytest.raises(TimeoutError):
        await pool.send(request(), timeout=0.05)  # the one slot stays taken
    # Giving up did not free a slot it never had: the next request still waits.
    third = asyncio.create_task(pool.send(request()))
    await asyncio.sleep(0.05)
    assert len(server.requests) == 1
    release.set()
    assert await first == (200, b"ok")
    assert await asyncio.wait_for(third, 5.0) == (200, b"ok")
    assert len(server.requests) == 2
    assert pool.opened == 1
