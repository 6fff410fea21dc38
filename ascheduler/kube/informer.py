"""List then watch one kind of object into a store of compact records, and tell a handler.

* The list is paginated and consistent; the watch resumes from its resourceVersion, asks for
  bookmarks, and picks up from the last version seen after a clean server-side timeout.
* `410 Gone` (the version was compacted away) means events were missed: relist and reconcile,
  emitting deletes for objects that vanished while we were away.
* A silent watch is a broken watch: no byte for `inactivity` seconds (bookmarks arrive about
  once a minute) drops the connection and re-watches; errors back off exponentially up to 30 s.
* Raw JSON is parsed once, here, with orjson, into the caller's record type; raw dicts never
  outlive the event.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

import aiohttp
import orjson
import structlog

from ascheduler.kube.client import ApiError, KubeClient

T = TypeVar("T")
T_contra = TypeVar("T_contra", contravariant=True)

log = structlog.get_logger(__name__)


class Handler(Protocol[T_contra]):
    def on_add(self, obj: T_contra) -> None: ...
    def on_update(self, old: T_contra, new: T_contra) -> None: ...
    def on_delete(self, obj: T_contra) -> None: ...


class _Gone(Exception):
    """The watch's resourceVersion is too old."""


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
        name: str = "",
    ) -> None:
        self.kube = kube
        self.path = path
        self.parse = parse
        self.key = key
        self.version = version
        self.handler = handler
        self.field_selector = field_selector
        self.label_selector = label_selector
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.inactivity = inactivity
        self.name = name or path
        self.store: dict[str, T] = {}
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.watches = 0

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
            except _Gone:
                log.info(
                    "watch_expired_relisting",
                    informer=self.name,
                    resource_version=self.resource_version,
                )
                need_list = True
            except (aiohttp.ClientError, TimeoutError, ApiError, ValueError) as exc:
                if isinstance(exc, ApiError) and exc.gone:
                    need_list = True
                    continue
                log.warning(
                    "watch_failed", informer=self.name, error=str(exc), retry_in=round(delay, 2)
                )
                await asyncio.sleep(delay * (1 + random.random() * 0.2))
                delay = min(delay * 2, 30.0)

    async def _list(self) -> None:
        items: dict[str, T] = {}
        params = self._selectors()
        params["limit"] = self.page_size
        while True:
            body = await self.kube.get(self.path, params=params)
            for raw in body.get("items") or []:
                obj = self.parse(raw)
                items[self.key(obj)] = obj
            meta = body.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                self.resource_version = str(meta.get("resourceVersion", ""))
                break
            params["continue"] = cont
        self.relists += 1
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
            async for line in resp.content:
                if line.strip():
                    self._event(orjson.loads(line))

    def _event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        raw = event.get("object") or {}
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
        rv = str((raw.get("metadata") or {}).get("resourceVersion", ""))
        if kind == "BOOKMARK":
            self.resource_version = rv or self.resource_version
            return
        try:
            obj = self.parse(raw)
        except Exception:
            # A record type's parser is built not to raise; if one does, skip the object
            # rather than the whole stream.
            log.exception("object_unparseable", informer=self.name, resource_version=rv)
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
