"""Durations as `KubeSchedulerConfiguration` writes them and kube-scheduler prints them.

`parse_seconds` reads Go's `time.ParseDuration` text (`90s`, `5m`, `1m30s`, `1h`, `250ms`,
`1.5s`), and a bare number as seconds; `go_duration` prints seconds the way Go's `%v` of a
`time.Duration` does (`10ms`, `1.5s`, `2m30s`, `1h0m0s`), as kube-scheduler's messages do.
"""

from __future__ import annotations

import math

_UNITS: dict[str, float] = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 MICRO SIGN
    "μs": 1e-6,  # U+03BC GREEK SMALL LETTER MU
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_seconds(text: str) -> float:
    """`300`, `300s`, `5m`, `1h`, `1m30s`, `1.5s`, `250ms`, `-1s` -> seconds (a bare number
    is seconds); ValueError otherwise, and for NaN or infinity."""
    text = text.strip()
    problem = ValueError(f"not a duration: {text!r}")
    try:
        bare = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(bare):
            raise problem
        return bare
    rest, sign = text, 1.0
    if rest[:1] in "+-" and rest:
        sign, rest = (-1.0 if rest[0] == "-" else 1.0), rest[1:]
    if not rest:
        raise problem
    total = 0.0
    while rest:
        digits = len(rest) - len(rest.lstrip("0123456789."))
        number, rest = rest[:digits], rest[digits:]
        letters = len(rest) - len(rest.lstrip("nuµμmsh"))
        unit, rest = rest[:letters], rest[letters:]
        if not number or number == "." or number.count(".") > 1 or unit not in _UNITS:
            raise problem
        total += float(number) * _UNITS[unit]
    return sign * total


def go_duration(seconds: float) -> str:
    """Go's `time.Duration` text (`10ms`, `1.5s`, `2m30s`, `1h0m0s`)."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_trim(nanos / size)}{unit}"
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    secs = _trim(rest / 1e9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}"
    if minutes:
        return f"{sign}{minutes}m{secs}"
    return f"{sign}{secs}"


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")
