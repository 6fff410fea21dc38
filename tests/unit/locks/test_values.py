"""Lock values: each format read back, ours unique, garbage refused."""

from __future__ import annotations

import datetime as dt

import pytest

from ascheduler.locks.values import Holder, format_time, parse_time


def test_values_parse_in_each_format() -> None:
    when = dt.datetime(2026, 11, 22, 5, 0, 1, tzinfo=dt.UTC)
    assert Holder.parse("2026-11-22T05:00:01Z,ns,pod-a") == Holder(when, "ns", "pod-a")
    assert Holder.parse("2026-11-22T05:00:01Z,inst-1") == Holder(when, instance="inst-1")
    assert Holder.parse("2026-11-22T05:00:01Z") == Holder(when)  # HAMi's legacy value
    offset = Holder.parse("2026-11-22T07:00:01+02:00,ns,p")
    assert offset is not None
    assert offset.time == when
    # Go's RFC 3339 reading: up to nine fraction digits, which HAMi parses as well.
    nanos = Holder.parse("2026-11-22T05:00:01.123456789Z,inst")
    assert nanos is not None
    assert nanos.time == when.replace(microsecond=123456)


def test_written_values_are_unique_and_parse_back() -> None:
    when = dt.datetime(2026, 11, 22, 5, 0, 1, 250000, tzinfo=dt.UTC)
    stamp = format_time(when, 7)
    assert stamp == "2026-11-22T05:00:01.250000007Z"
    assert parse_time(stamp) == when
    assert len({format_time(when, n) for n in range(1000)}) == 1000


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "garbage",
        "yesterday,ns,pod",
        "2026-11-22T05:00:01,ns,pod",
        "2026-11-22T05:00:01Z,,pod",
        "2026-11-22T05:00:01Z,",
        "2026-11-22T05:00:01Z,ns,pod,extra",
        "2026-13-40T05:00:01Z,ns,pod",
    ],
)
def test_garbage_values_do_not_parse(garbage: str) -> None:
    assert Holder.parse(garbage) is None
