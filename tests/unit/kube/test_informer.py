"""The informer's pure parts: splitting a watch stream into events, and events of any shape."""

from __future__ import annotations

from typing import Any

import pytest

from ascheduler.kube.informer import Informer, LineSplitter, _EventTooLarge


def test_lines_split_across_chunks() -> None:
    lines = LineSplitter(limit=100)
    assert lines.feed(b'{"a"') == []
    assert lines.feed(b': 1}\n{"b": 2}\n{"c"') == [b'{"a": 1}', b'{"b": 2}']
    assert lines.feed(b": 3}\n\n") == [b'{"c": 3}']


def test_a_line_past_the_limit_raises_and_the_splitter_starts_over() -> None:
    lines = LineSplitter(limit=10)
    with pytest.raises(_EventTooLarge):
        lines.feed(b"x" * 11)
    assert lines.feed(b"\nok\n") == [b"ok"]
    with pytest.raises(_EventTooLarge):
        lines.feed(b"12345\n" + b"y" * 20 + b"\n")


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_add(self, obj: Any) -> None:
        self.seen.append(("add", obj))

    def on_update(self, old: Any, new: Any) -> None:
        self.seen.append(("update", new))

    def on_delete(self, obj: Any) -> None:
        self.seen.append(("delete", obj))


def explosive_parse(raw: Any) -> str:
    if raw.get("boom"):
        raise RuntimeError("a parser bug")
    return str(raw["metadata"]["name"])


def informer(recorder: Recorder) -> Informer[str]:
    return Informer(
        None,  # type: ignore[arg-type]  # no network: events are fed by hand
        "/api/v1/things",
        parse=explosive_parse,
        key=lambda name: name,
        version=lambda name: name,
        handler=recorder,
    )


@pytest.mark.parametrize(
    "event",
    [
        [],
        "text",
        None,
        {"type": "ADDED"},
        {"type": "ADDED", "object": "not an object"},
        {"type": "ADDED", "object": {"boom": True, "metadata": {"resourceVersion": "9"}}},
        {"type": "ADDED", "object": {"metadata": "not an object", "boom": True}},
    ],
)
def test_events_of_any_shape_are_skipped(event: Any) -> None:
    recorder = Recorder()
    inf = informer(recorder)
    inf._event(event)
    inf._event({"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "10"}}})
    assert recorder.seen == [("add", "a")]
    assert inf.resource_version == "10"


def test_updates_go_through_reparse_with_the_stored_record() -> None:
    """A MODIFIED event of a known object is parsed from its stored record (`reparse`); an
    unknown one, or a reparse that raises, falls back to the full parse."""
    from ascheduler.model import PodInfo, parse_pod, reparse_pod

    recorder = Recorder()
    calls: list[str] = []

    def counting_reparse(raw: Any, old: PodInfo) -> PodInfo:
        calls.append(old.resource_version)
        if raw["metadata"].get("resourceVersion") == "3":
            raise RuntimeError("boom")
        return reparse_pod(raw, old)

    inf: Informer[PodInfo] = Informer(
        None,  # type: ignore[arg-type]
        "/api/v1/pods",
        parse=parse_pod,
        key=lambda p: p.uid,
        version=lambda p: p.resource_version,
        handler=recorder,  # type: ignore[arg-type]
        reparse=counting_reparse,
        raw_key=lambda raw: raw["metadata"]["uid"],
    )

    def pod(rv: str, phase: str) -> dict[str, Any]:
        return {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": rv},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": phase},
        }

    inf._event({"type": "MODIFIED", "object": pod("1", "Pending")})  # unknown: full parse
    inf._event({"type": "MODIFIED", "object": pod("2", "Running")})
    inf._event({"type": "MODIFIED", "object": pod("3", "Succeeded")})  # reparse raises
    assert calls == ["1", "2"]
    assert inf.store["u"] == parse_pod(pod("3", "Succeeded"))
    assert [e[0] for e in recorder.seen] == ["add", "update", "update"]
