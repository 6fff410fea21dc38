"""Durations as `KubeSchedulerConfiguration` writes them and kube-scheduler prints them.

`parse_seconds` reads Go's `time.ParseDuration` subset used in configuration (`300`, `90s`,
`5m`, `1m30s`, `1h`); `go_duration` prints seconds the way Go's `%v` of a `time.Duration` does
(`10ms`, `1.5s`, `2m30s`, `1h0m0s`), as kube-scheduler's messages do.
"""

from __future__ import annotations


def parse_seconds(text: str) -> float:
    """`300`, `300s`, `5m`, `1h`, `1m30s` -> seconds; ValueError otherwise."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    total, number = 0.0, ""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0}
    for ch in text:
        if ch.isdigit() or ch == ".":
            number += ch
        elif ch in units and number:
            total += float(number) * units[ch]
            number = ""
        else:
            raise ValueError(f"not a duration: {text!r}")
    if number or not text:
        raise ValueError(f"not a duration: {text!r}")
    return total


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
