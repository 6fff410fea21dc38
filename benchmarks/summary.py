"""A run's figures from what it recorded, the medians over repeats, ascheduler's ratios to
the others run by run, and which limit the two ceilings show."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from benchmarks import cpuprofile
from benchmarks.workloads import REPLACE

#: ascheduler with `--binding bindrequest`, beside `ascheduler binder` (both measured); run
#: when named (`--scheduler ascheduler-bindrequest`), not by `all`.
BINDREQUEST = "ascheduler-bindrequest"
#: ascheduler with its node locks off, and with HAMi's (on the Node, the pod's `allocating`
#: write): what locks cost, run when named.
NO_LOCKS = "ascheduler-nolocks"
HAMI = "ascheduler-hami"
#: ascheduler taking its node locks although it is alone (as it does beside another
#: instance), on a Lease per node: what the locks cost when nodes are shared; `ascheduler`
#: alone skips them.
LOCKED = "ascheduler-locked"
#: As `ascheduler-locked`, with one lock Lease per group of nodes (`GROUPS` groups) instead
#: of one per node.
GROUPED = "ascheduler-locked-groups"
CEILINGS = ("ceiling-go", "ceiling-python")


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def throughput(pods: int, seconds: float, samples: Sequence[int]) -> dict[str, float]:
    return {
        "throughput_avg": pods / max(seconds, 1e-3),
        "throughput_p50": percentile(samples, 0.5),
        "throughput_p90": percentile(samples, 0.9),
        "throughput_p99": percentile(samples, 0.99),
    }


def request_counts(requests: dict[str, float], pods: int) -> dict[str, Any]:
    kept = {k: v for k, v in sorted(requests.items()) if v}
    return {"requests_per_pod": sum(kept.values()) / pods, "requests": kept}


def per_second(times: Sequence[float], start: float) -> list[int]:
    """How many of `times` fall in each second from `start` (the last second may be partial)."""
    counts = [0] * (int(max(times) - start) + 1)
    for t in times:
        counts[int(t - start)] += 1
    return counts


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the runs of each figure they have (an unfinished run has no latencies);
    `unfinished`: how many runs stopped at the time limit before every pod was bound."""
    skip = ("scheduler", "mode", "samples", "requests", "finished", "cpus", "profile")
    keys = list(dict.fromkeys(k for r in runs for k in r if k not in skip))
    out: dict[str, Any] = {k: statistics.median(r[k] for r in runs if k in r) for k in keys}
    out["unfinished"] = sum(1 for r in runs if not r.get("finished", True))
    if profiles := [r["profile"] for r in runs if "profile" in r]:
        out["profile"] = cpuprofile.merge(profiles)
    return out


#: What ascheduler is compared with kube-scheduler on, by mode (lower is better for all but
#: throughput).
RATIOS = {
    "steady": (
        "throughput_avg",
        "latency_p99",
        "gang_latency_p99",
        "cpu_seconds",
        "peak_rss_bytes",
        "requests_per_pod",
    ),
    REPLACE: ("throughput_avg", "cpu_seconds", "peak_rss_bytes", "requests_per_pod"),
    "backlog": (
        "throughput_avg",
        "first_bind_s",
        "last_bind_s",
        "cpu_seconds",
        "peak_rss_bytes",
        "requests_per_pod",
    ),
}


def _spread(per_run: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(per_run), "min": min(per_run), "max": max(per_run)}


def faster_ceiling(runs: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """Run by run, whichever ceiling bound faster (either one if only one ran)."""
    present = [runs[c] for c in CEILINGS if runs.get(c)]
    if not present:
        return None
    return [max(group, key=lambda r: r["throughput_avg"]) for group in zip(*present, strict=True)]


def _finished(run: dict[str, Any]) -> bool:
    return bool(run.get("finished", True))


def ratios(runs: dict[str, list[dict[str, Any]]], mode: str = "steady") -> dict[str, Any]:
    """Run by run, as median, min and max: ascheduler / kube-scheduler on each metric of the
    mode; ascheduler's throughput over each ceiling's and over the faster one's ("ceiling");
    bindrequest mode's throughput, requests and CPU over direct mode's and kube-scheduler's;
    and ceiling-python / ceiling-go, which says whether the Python client is a limit."""
    out: dict[str, dict[str, float]] = {}
    others: dict[str, list[dict[str, Any]]] = {
        name: runs[name] for name in ("kube-scheduler", *CEILINGS) if runs.get(name)
    }
    if (faster := faster_ceiling(runs)) is not None:
        others["ceiling"] = faster

    def compare(
        name: str, ours: list[dict[str, Any]], theirs: list[dict[str, Any]], keys: Sequence[str]
    ) -> None:
        for key in keys:
            per_run = [
                a[key] / b[key]
                for a, b in zip(ours, theirs, strict=True)
                if b.get(key) and key in a and _finished(a) and _finished(b)
            ]
            if per_run:
                out[f"{key} {name}"] = _spread(per_run)

    if runs.get("ascheduler"):
        for other, theirs in others.items():
            keys = RATIOS[mode] if other == "kube-scheduler" else ("throughput_avg",)
            compare(f"ascheduler/{other}", runs["ascheduler"], theirs, keys)
    # The cost of durable binds: bindrequest mode against direct mode and kube-scheduler; of
    # node locks: with locks (ours, and HAMi's) against without, and against kube-scheduler.
    pairs = [
        *(
            (BINDREQUEST, o, ("throughput_avg", "requests_per_pod", "cpu_seconds"))
            for o in ("ascheduler", "kube-scheduler")
        ),
        *(
            (locked, o, ("throughput_avg", "latency_p99", "requests_per_pod"))
            for locked, o in (
                ("ascheduler", NO_LOCKS),
                (LOCKED, NO_LOCKS),
                (LOCKED, "kube-scheduler"),
                (GROUPED, NO_LOCKS),
                (GROUPED, "kube-scheduler"),
                (HAMI, NO_LOCKS),
                (HAMI, "kube-scheduler"),
            )
        ),
    ]
    for ours, other, pair_keys in pairs:
        if runs.get(ours) and runs.get(other):
            compare(f"{ours}/{other}", runs[ours], runs[other], pair_keys)
    if runs.get("ceiling-go") and runs.get("ceiling-python"):
        per_run = [
            p["throughput_avg"] / g["throughput_avg"]
            for p, g in zip(runs["ceiling-python"], runs["ceiling-go"], strict=True)
            if g["throughput_avg"]
        ]
        if per_run:
            out["throughput_avg ceiling-python/ceiling-go"] = _spread(per_run)
    return out


#: Ceilings closer than this (as slower / faster) are the same limit: the plane's.
SAME_LIMIT = 0.9


def ceiling_verdict(summary: dict[str, dict[str, Any]]) -> str:
    """Which limit the ceilings show: the plane's, or a client library's."""
    rates = {c: summary[c]["throughput_avg"] for c in CEILINGS if c in summary}
    if len(rates) < 2:
        return ""
    go, python = rates["ceiling-go"], rates["ceiling-python"]
    slower, faster = sorted((go, python))
    if slower >= SAME_LIMIT * faster:
        return (
            f"the plane: client-go and the Python client bind at the same rate "
            f"({go:.0f} and {python:.0f} pods/s)"
        )
    if python < go:
        return (
            f"the Python client: client-go binds {go:.0f} pods/s, ascheduler's client "
            f"{python:.0f} ({python / go:.2f} of it)"
        )
    return f"client-go's transport: the Python client binds {python:.0f} pods/s, client-go {go:.0f}"
