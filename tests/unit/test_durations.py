"""Durations read as Go's time.ParseDuration reads them and printed as Go prints them, so a
configuration written back by `config defaults` reads the same."""

from __future__ import annotations

import pytest

from ascheduler.durations import go_duration, parse_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300.0),
        ("90s", 90.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("250ms", 0.25),
        ("2us", 2e-6),
        ("3µs", 3e-6),
        ("3μs", 3e-6),
        ("10ns", 1e-8),
        ("-1s", -1.0),
        ("1h0m0s", 3600.0),
    ],
)
def test_go_durations_are_read(text: str, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "-", "s", "1x", "1.2.3s", "1m3", "nan", "inf", "-inf", "1sm"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(text)


@pytest.mark.parametrize("seconds", [0.0, 0.25, 1.5, 30.0, 90.0, 3600.0, 5400.5, 2e-6, 1e-8])
def test_printed_durations_read_back_the_same(seconds: float) -> None:
    assert parse_seconds(go_duration(seconds)) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("300", 300.0),
        ("2.5", 2.5),
        ("90s", 90.0),
        ("5m", 300.0),
        ("1h", 3600.0),
        ("1m30s", 90.0),
    ],
)
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("bad", ["", "five", "5x", "m5", "1m30"])
def test_parse_seconds_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_seconds(bad)
