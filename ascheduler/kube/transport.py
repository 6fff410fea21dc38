"""HTTP/1.1 requests to one server over a pool of keep-alive connections, with little more
than the protocol itself.

A scheduler's hot path is small requests: a Binding, an Event, a Lease. aiohttp spends about
as much CPU building, sending and reading one of those as the TLS and the JSON around it do
together; here a request is one header block formatted in one go, written with its body in
one call, and its answer read by a small parser (a length-delimited or chunked body, gzip
when the server compresses). Long-lived streams (watches) stay on aiohttp.

Failures are reported in three kinds, so that the caller can tell whether a write may have
landed:

- `Unanswered`: the connection broke (or could not be made) before any byte of the answer
  came back. A pooled connection the server has closed fails this way; sending again on
  another is how a client recovers.
- `Garbled`: the answer was cut after it started, or is not HTTP. The request may have been
  served.
- `TimeoutError` (the request's deadline passed: waiting for a connection, connecting, or
  for the answer) / cancellation from the caller: the connection is closed, never reused.
"""

from __future__ import annotations

import asyncio
import collections
import ssl
import zlib
from typing import Final, cast

#: An answer's header block may be at most this large.
MAX_HEAD: Final = 64 * 1024

_HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _TO_CLOSE = range(7)


class Unanswered(ConnectionError):
    """The connection failed before any byte of the answer arrived."""


class Garbled(ConnectionError):
    """The answer was cut short or is not HTTP/1.1."""


class _Connection(asyncio.Protocol):
    """One connection: one request at a time, its answer parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self.lost = False
        self.idle_since = 0.0
        self._buf = bytearray()
        self._started = False
        self._state = _HEAD
        self._status = 0
        self._remaining = 0
        self._parts: list[bytes | bytearray] = []
        self._reusable = True
        self._gzip = False
        self._bodiless = False
        self._timer: asyncio.TimerHandle | None = None

    # The protocol.

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but behave as one.
        self.transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.waiter is None or self.waiter.done():
            return
        if self._state == _TO_CLOSE:
            self._finish()
        elif self._started:
            self._fail(Garbled(f"connection closed mid-answer: {exc or 'by the server'}"))
        else:
            self._fail(Unanswered(f"connection closed before an answer: {exc or 'by the server'}"))

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            # Bytes nobody asked for: the connection is out of step; never reuse it.
            self.close()
            return
        self._started = True
        self._buf += data
        try:
            self._parse()
        except Garbled as exc:
            self._fail(exc)
            self.close()

    # Requests.

    def send(
        self, data: bytes, *, bodiless: bool, deadline: float | None = None
    ) -> asyncio.Future[tuple[int, bytes]]:
        """Write a request; the future is its answer, or TimeoutError at `deadline` (the
        loop's clock), which also closes the connection."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self.waiter = waiter
        self._started = False
        self._bodiless = bodiless
        self._begin()
        if deadline is not None:
            # A timer on the future, not asyncio.timeout around the await: the same
            # deadline at a fraction of the cost, on every request.
            self._timer = loop.call_at(deadline, self._expire)
        self.transport.write(data)
        return waiter

    def _expire(self) -> None:
        self._timer = None
        self._fail(TimeoutError("no answer before the deadline"))
        self.close()

    def reusable(self) -> bool:
        return self._reusable and not self.lost and not self._buf

    def close(self) -> None:
        self._reusable = False
        if self.transport is not None:
            self.transport.close()

    # The answer.

    def _begin(self) -> None:
        self._state = _HEAD
        self._status = 0
        self._remaining = 0
        self._parts = []
        self._gzip = False

    def _settle(self) -> asyncio.Future[tuple[int, bytes]] | None:
        """The request's future, if it still waits (and its timer stopped)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        waiter, self.waiter = self.waiter, None
        return waiter if waiter is not None and not waiter.done() else None

    def _fail(self, exc: Exception) -> None:
        self._reusable = False
        waiter = self._settle()
        if waiter is not None:
            waiter.set_exception(exc)

    def _finish(self) -> None:
        body = b"".join(self._parts)
        self._parts = []
        if self._gzip:
            try:
                body = zlib.decompress(body, wbits=31)
            except zlib.error as exc:
                self._fail(Garbled(f"gzip: {exc}"))
                return
        waiter = self._settle()
        if waiter is not None:
            waiter.set_result((self._status, body))

    def _take(self) -> bool:
        """Move up to `_remaining` body bytes out of the buffer; True once all are in."""
        buf = self._buf
        n = min(self._remaining, len(buf))
        if n:
            self._parts.append(buf[:n])
            del buf[:n]
            self._remaining -= n
        return self._remaining == 0

    def _cut(self, end: bytes, what: str) -> bytes | None:
        """The buffer up to the first `end`, taken out of it (`end` too); None while `end`
        has not arrived."""
        buf = self._buf
        at = buf.find(end)
        if at < 0:
            if len(buf) > MAX_HEAD:
                raise Garbled(f"{what} too long")
            return None
        piece = bytes(buf[:at])
        del buf[: at + len(end)]
        return piece

    def _parse(self) -> None:
        buf = self._buf
        while True:
            state = self._state
            if state == _HEAD:
                head = self._cut(b"\r\n\r\n", "answer headers")
                if head is None:
                    return
                self._head(head)
            elif state == _LENGTH:
                if not self._take():
                    return
                self._done()
            elif state == _CHUNK_SIZE:
                size_line = self._cut(b"\r\n", "chunk size line")
                if size_line is None:
                    return
                line = size_line.split(b";", 1)[0].strip()
                try:
                    size = int(line, 16)
                except ValueError:
                    raise Garbled(f"bad chunk size {line[:20]!r}") from None
                if size < 0:
                    raise Garbled(f"bad chunk size {line[:20]!r}")
                if size == 0:
                    self._state = _TRAILERS
                else:
                    self._remaining = size
                    self._state = _CHUNK_DATA
            elif state == _CHUNK_DATA:
                if not self._take():
                    return
                self._state = _CHUNK_END
            elif state == _CHUNK_END:
                if len(buf) < 2:
                    return
                if buf[:2] != b"\r\n":
                    raise Garbled("chunk not followed by CRLF")
                del buf[:2]
                self._state = _CHUNK_SIZE
            elif state == _TRAILERS:
                trailer = self._cut(b"\r\n", "trailer")
                if trailer is None:
                    return
                if not trailer:
                    self._done()
            else:  # _TO_CLOSE: everything until the server closes the connection
                if buf:
                    self._parts.append(bytes(buf))
                    buf.clear()
                return
            if self.waiter is None:
                return

    def _head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        status_line = lines[0]
        if not status_line.startswith(b"HTTP/1.") or len(status_line) < 12:
            raise Garbled(f"not an HTTP/1.1 answer: {status_line[:40]!r}")
        try:
            status = int(status_line[9:12])
        except ValueError:
            raise Garbled(f"bad status line: {status_line[:40]!r}") from None
        length: int | None = None
        chunked = False
        close = status_line.startswith(b"HTTP/1.0")
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise Garbled(f"bad header line: {line[:40]!r}")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    raise Garbled(f"bad Content-Length: {value[:20]!r}") from None
                if length < 0:
                    raise Garbled(f"bad Content-Length: {value[:20]!r}")
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                close = b"close" in value.lower()
            elif name == b"content-encoding":
                self._gzip = value.strip().lower() == b"gzip"
        if 100 <= status < 200:  # an interim answer: the real one follows
            self._gzip = False
            return
        self._status = status
        if close:
            self._reusable = False
        if self._bodiless or status in (204, 304):
            self._done()
        elif chunked:
            self._state = _CHUNK_SIZE
        elif length is not None:
            self._remaining = length
            self._state = _LENGTH
        else:
            self._reusable = False
            self._state = _TO_CLOSE

    def _done(self) -> None:
        self._state = _HEAD
        self._finish()


class Pool:
    """Up to `size` keep-alive connections to one server; a request takes one (the most
    recently used idle one, or a new one), so concurrent requests use as many connections as
    they need and no more. Idle connections are closed after `keepalive` seconds."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        size: int,
        keepalive: float,
        connect_timeout: float = 10.0,
    ) -> None:
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.size = max(1, size)
        self.keepalive = keepalive
        self.connect_timeout = connect_timeout
        self._idle: collections.deque[_Connection] = collections.deque()
        self._busy = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False
        #: Connections opened so far (each one a TCP, and maybe TLS, handshake).
        self.opened = 0

    async def send(
        self, data: bytes, *, bodiless: bool = False, timeout: float | None = None
    ) -> tuple[int, bytes]:
        """Send one request (`data`: its head and body, ready to write) and return its
        answer's status and body. `bodiless`: the answer has no body (HEAD). `timeout`:
        seconds for all of it (waiting for a slot, connecting, the answer); TimeoutError
        past them."""
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        await self._slot(deadline)
        conn: _Connection | None = None
        try:
            conn = await self._connection(deadline)
            status, body = await conn.send(data, bodiless=bodiless, deadline=deadline)
        except BaseException:
            if conn is not None:
                conn.close()
            self._free(None)
            raise
        self._free(conn)
        return status, body

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    @property
    def idle(self) -> int:
        return len(self._idle)

    # Slots: at most `size` requests in flight, served first come, first served.

    async def _slot(self, deadline: float | None = None) -> None:
        if self._closed:
            raise Unanswered("the client is closed")
        if self._busy < self.size and not self._waiting:
            self._busy += 1
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiting.append(waiter)
        timer = None if deadline is None else loop.call_at(deadline, _time_out, waiter)
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._hand_on()  # it was handed a slot it will not use
            elif waiter in self._waiting:
                self._waiting.remove(waiter)
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _free(self, conn: _Connection | None) -> None:
        if conn is not None:
            if conn.reusable() and not self._closed:
                conn.idle_since = asyncio.get_running_loop().time()
                self._idle.append(conn)
                self._expire(conn.idle_since)
            else:
                conn.close()
        self._hand_on()

    def _hand_on(self) -> None:
        """A slot is free: give it to the first waiter still waiting."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._busy -= 1

    def _expire(self, now: float) -> None:
        idle = self._idle
        while idle and (idle[0].lost or now - idle[0].idle_since > self.keepalive):
            idle.popleft().close()

    async def _connection(self, deadline: float | None = None) -> _Connection:
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable() and now - conn.idle_since <= self.keepalive:
                return conn
            conn.close()
        loop = asyncio.get_running_loop()
        try:
            limit = self.connect_timeout if deadline is None else deadline - now
            async with asyncio.timeout(min(self.connect_timeout, limit)):
                _, conn = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self.ssl_context,
                    server_hostname=self.host if self.ssl_context is not None else None,
                )
        except TimeoutError as exc:
            if deadline is not None and loop.time() >= deadline:
                raise  # the request's own deadline, not the connection's: not resent
            raise Unanswered(f"connecting to {self.host}:{self.port}: timed out") from exc
        except OSError as exc:
            raise Unanswered(f"connecting to {self.host}:{self.port}: {exc}") from exc
        self.opened += 1
        return conn


def _time_out(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError("no connection free before the deadline"))
