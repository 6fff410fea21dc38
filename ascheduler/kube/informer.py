"""List then watch one kind of object into a store of compact records, and tell a handler.

* The list is paginated and consistent; the watch resumes from its resourceVersion, asks for
  bookmarks, and picks up from the last version seen after a clean server-side timeout.
* `410 Gone` (the version was compacted away) means events were missed: relist and reconcile,
  emitting deletes for objects that vanished while we were away.
* A silent watch may be a broken one: no byte for `inactivity` seconds (bookmarks arrive about
  once a minute, though not on every watch of an idle resource) drops the connection and
  watches again at once, still healthy; errors back off exponentially up to 30 s.
* Raw JSON is parsed once, here, with orjson, into the caller's record type; raw dicts never
  outlive the event.
* Nothing an object or the stream holds can stop the informer: an object its parser cannot
  take is logged and skipped (in a list as in a watch), an event line longer than
  `max_event_bytes` is dropped and the informer relists (a list has no line limit), and any
  other failure is logged and retried from a relist. `healthy` says whether the last attempt
  to list or watch got through, which `/readyz` reports.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import orjson
import structlog

from ascheduler.kube.client import ApiError, KubeClient, KubeError, gc_paused

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

log = structlog.get_logger(__name__)


class Handler(Protocol[T_contra]):
    def on_add(self, obj: T_contra) -> None: ...
    def on_update(self, old: T_contra, new: T_contra) -> None: ...
    def on_delete(self, obj: T_contra) -> None: ...


class _Gone(Exception):
    """The watch's resourceVersion is too old."""


class _Silent(Exception):
    """An established watch went `inactivity` seconds without a byte."""


class _EventTooLarge(Exception):
    """A watch event longer than the informer accepts: relist instead."""


#: Kubernetes objects are at most ~1.5 MiB in etcd; a watch line has room for far more.
MAX_EVENT_BYTES = 64 * 2**20


class LineSplitter:
    """Newline-delimited JSON from arbitrary chunks, one line at most `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The complete lines `chunk` finishes; `_EventTooLarge` once one passes `limit`."""
        lines = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._partial += chunk[start:end]
            self._check()
            if self._partial.strip():
                lines.append(bytes(self._partial))
            self._partial.clear()
            start = end + 1
        self._partial += chunk[start:]
        self._check()
        return lines

    def _check(self) -> None:
        if len(self._partial) > self.limit:
            size = len(self._partial)
            self._partial.clear()
            raise _EventTooLarge(f"a watch event of more than {size} bytes (limit {self.limit})")


class Informer(Generic[T]):
    def __init__(
        self,
        kube: KubeClient,
        path: str,
        *,
        parse: Callable[[Mapping[str, Any]], T],
        key: Callable[[T], str],
        version: Callable[[T], str],
        handler: Handler[T],
        field_selector: str | None = None,
        label_selector: str | None = None,
        page_size: int = 500,
        watch_timeout: int = 300,
        inactivity: float = 90.0,
        max_event_bytes: int = MAX_EVENT_BYTES,
        name: str = "",
        reparse: Callable[[Mapping[str, Any], T], T] | None = None,
        raw_key: Callable[[Mapping[str, Any]], str] | None = None,
        optional: bool = False,
        absent_poll: float = 30.0,
    ) -> None:
        self.kube = kube
        self.path = path
        self.parse = parse
        #: A cheaper parse of an update, given the object's current record (with `raw_key`,
        #: the key read off the raw object).
        self.reparse = reparse
        self.raw_key = raw_key
        #: A kind the API server may not serve (a CRD not installed, an alpha API off): a 404
        #: counts as an empty, synced list, and the list is tried again every `absent_poll`
        #: seconds until the kind appears.
        self.optional = optional
        self.absent_poll = absent_poll
        #: Whether the server said the kind does not exist (only with `optional`).
        self.absent = False
        self.key = key
        self.version = version
        self.handler = handler
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.inactivity = inactivity
        self.max_event_bytes = max_event_bytes
        self.name = name or path
        self.store: dict[str, T] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.watches = 0
        #: Whether the last list or watch got through (False while the server is unreachable).
        self.healthy = False

    def _selectors(self) -> dict[str, str | int]:
        params: dict[str, str | int] = {}
        if self.field_selector:
            params["fieldSelector"] = self.field_selector
        if self.label_selector:
            params["labelSelector"] = self.label_selector
        return params

    async def run(self) -> None:
        """List and watch until cancelled. Run again after a stop, it resumes watching from the
        last version seen (and relists only if that version is gone)."""
        delay = 0.5
        need_list = not self.synced.is_set()
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    self.synced.set()
                await self._watch()
                delay = 0.5
                continue
            except _Silent:
                # Nothing came for `inactivity` seconds, not even a bookmark (a watch of an
                # idle resource can go without): watch again from the same version. Routine,
                # not a failure: the informer stays healthy (readiness does not flap), and a
                # server that is really gone fails the next watch.
                log.info("watch_silent_rewatching", informer=self.name, after=self.inactivity)
                continue
            except _Gone:
                log.info(
                    "watch_expired_relisting",
                    informer=self.name,
                    resource_version=self.resource_version,
                )
                need_list = True
                continue
            except _EventTooLarge as exc:
                log.error("watch_event_too_large_relisting", informer=self.name, error=str(exc))
                need_list = True
            except ApiError as exc:
                if exc.gone:
                    need_list = True
                    continue
                if exc.not_found and self.optional:
                    if not self.absent:
                        log.info("resource_not_served", informer=self.name, path=self.path)
                    self.absent = True
                    self.healthy = True
                    self._reconcile({})
                    self.synced.set()
                    need_list = True
                    await asyncio.sleep(self.absent_poll)
                    continue
                self._failed(exc, delay)
            except (KubeError, aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
                self._failed(exc, delay)
            except Exception:
                # A bug, not the network: start over from a fresh list rather than die.
                log.exception("informer_crashed", informer=self.name)
                self.healthy = False
                need_list = True
            await asyncio.sleep(delay * (1 + random.random() * 0.2))
            delay = min(delay * 2, 30.0)

    def _failed(self, exc: Exception, delay: float) -> None:
        self.healthy = False
        log.warning("watch_failed", informer=self.name, error=str(exc), retry_in=round(delay, 2))

    async def _list(self) -> None:
        items: dict[str, T] = {}
        params = self._selectors()
        params["limit"] = self.page_size
        while True:
            body = await self.kube.get(self.path, params=params)
            raw_items = body.get("items")
            with gc_paused():
                for raw in raw_items if isinstance(raw_items, list) else ():
                    obj = self._parse(raw, "")
                    if obj is not None:
                        items[self.key(obj)] = obj
            meta = body.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                self.resource_version = str(meta.get("resourceVersion", ""))
                break
            params["continue"] = cont
        self.relists += 1
        self.healthy = True
        if self.absent:
            log.info("resource_served", informer=self.name, path=self.path)
            self.absent = False
        with gc_paused():
            self._reconcile(items)

    def _reconcile(self, fresh: dict[str, T]) -> None:
        old = self.store
        self.store = fresh
        for key, obj in old.items():
            if key not in fresh:
                self._dispatch(self.handler.on_delete, obj)
        for key, obj in fresh.items():
            before = old.get(key)
            if before is None:
                self._dispatch(self.handler.on_add, obj)
            elif self.version(before) != self.version(obj):
                self._dispatch(self.handler.on_update, before, obj)

    async def _watch(self) -> None:
        params = self._selectors()
        params.update(
            watch="true",
            allowWatchBookmarks="true",
            resourceVersion=self.resource_version,
            timeoutSeconds=int(self.watch_timeout * (1 + random.random() * 0.1)),
        )
        headers = await self.kube.headers()
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=self.inactivity)
        self.watches += 1
        async with self.kube.session.get(
            self.kube.server + self.path, params=params, headers=headers, timeout=timeout
        ) as resp:
            self.kube.count("GET", resp.status)
            if resp.status >= 400:
                payload = await resp.read()
                if resp.status == 410:
                    raise _Gone
                raise ApiError(
                    resp.status,
                    "",
                    payload[:300].decode(errors="replace"),
                    method="WATCH",
                    path=self.path,
                )
            self.healthy = True
            lines = LineSplitter(self.max_event_bytes)
            try:
                async for chunk in resp.content.iter_any():
                    for line in lines.feed(chunk):
                        self._event(orjson.loads(line))
            except aiohttp.ServerTimeoutError as exc:
                raise _Silent from exc

    def _parse(self, raw: Any, rv: str) -> T | None:
        try:
            return self.parse(raw)
        except Exception:
            # A record type's parser is built not to raise; if one does, skip the object
            # rather than the whole list or stream.
            log.exception("object_unparseable", informer=self.name, resource_version=rv)
            return None

    def _reparse(self, raw: Mapping[str, Any], rv: str) -> T | None:
        if self.reparse is None or self.raw_key is None:
            return None
        try:
            before = self.store.get(self.raw_key(raw))
            return None if before is None else self.reparse(raw, before)
        except Exception:
            log.exception("object_unparseable", informer=self.name, resource_version=rv)
            return None

    def _event(self, event: Any) -> None:
        if not isinstance(event, Mapping) or not isinstance(event.get("object"), Mapping):
            log.warning("watch_event_malformed", informer=self.name, raw=repr(event)[:200])
            return
        kind = event.get("type")
        raw = event["object"]
        if kind == "ERROR":
            if raw.get("code") == 410:
                raise _Gone
            raise ApiError(
                int(raw.get("code") or 500),
                str(raw.get("reason", "")),
                str(raw.get("message", "")),
                method="WATCH",
                path=self.path,
            )
        meta = raw.get("metadata")
        rv = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        obj = self._reparse(raw, rv) if kind == "MODIFIED" else None
        if obj is None:
            obj = self._parse(raw, rv)
        if obj is None:
            if rv:
                self.resource_version = rv
            return
        key = self.key(obj)
        if rv:
            self.resource_version = rv
        if kind == "DELETED":
            old = self.store.pop(key, None)
            self._dispatch(self.handler.on_delete, old if old is not None else obj)
        elif kind in ("ADDED", "MODIFIED"):
            before = self.store.get(key)
            self.store[key] = obj
            if before is None:
                self._dispatch(self.handler.on_add, obj)
            else:
                self._dispatch(self.handler.on_update, before, obj)

    def _dispatch(self, method: Callable[..., None], *objs: T) -> None:
        try:
            method(*objs)
        except Exception:
            log.exception("handler_failed", informer=self.name, key=self.key(objs[-1]))
