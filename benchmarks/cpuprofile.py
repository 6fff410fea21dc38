"""Where a scheduler's CPU goes during a run: py-spy's samples, sorted by what they did.

`benchmarks run --profile` attaches py-spy to each ascheduler process it starts and samples
it 100 times a second while it holds the GIL (steady: from the first measured
pod created to the last bound; backlog: from the process's start to the last bind, like
the run's CPU figure). Each sample is a stack; `category` names what it was doing by the
frames on it, in this order of precedence (the first that any frame matches wins):

- logging (structlog, logging) and metrics (prometheus_client), wherever they are called;
- events (ascheduler/events.py: recording, aggregating, writing Events);
- the binding cycle (ascheduler/binding, ascheduler/locks, and the Scheduler's binding
  methods: Permit's wait, PreBind, the Binding write);
- cache and queue updates made by the informers' handlers (ascheduler/eventhandlers.py);
- the scheduling cycle (the Scheduler's other methods, the framework, the plugins, DRA,
  preemption, diagnoses);
- lists and watches: decoding and parsing (ascheduler/kube/informer.py, ascheduler/model);
- cache and queue work outside those two (timers, flushes);
- the HTTP transport (ascheduler/kube: framing requests, reading responses and watch
  streams), reached straight from the event loop;
- start-up (imports);
- the process's other code (ascheduler's, or a Python ceiling's own);
- the event loop and I/O: samples with no ascheduler frame (uvloop's own C code shows as its
  Python caller).

Garbage collection runs inside whatever frame allocated, so it is counted there.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: Samples per second.
RATE = 100

LOGGING = "logging"
METRICS = "metrics"
EVENTS = "events"
BINDING = "binding cycle (Permit, PreBind, Binding write, locks)"
HANDLERS = "cache and queue updates (informer handlers)"
CYCLE = "scheduling cycle (queue pop, snapshot, filter, score, assume)"
WATCH = "lists and watches: decoding and parsing"
CACHE = "cache and queue (other)"
TRANSPORT = "HTTP transport (requests and watch streams)"
STARTUP = "start-up (imports)"
OTHER = "the process's other code (ascheduler's; a ceiling's own)"
LOOP = "event loop and I/O"

#: The Scheduler's methods that belong to a pod's binding cycle.
BINDING_METHODS = frozenset(
    {
        "binding_cycle",
        "_bind",
        "_nominate_for_binding",
        "_pre_bind",
        "handle_binding_cycle_error",
        "_bound",
    }
)

Frame = tuple[str, str]  # (function, module path: "ascheduler/kube/informer.py", "asyncio/...")


def _prefix(*prefixes: str) -> Callable[[str, str], bool]:
    return lambda module, function: module.startswith(prefixes)


def _scheduler_binding(module: str, function: str) -> bool:
    return module == "ascheduler/scheduler.py" and function.rsplit(".", 1)[-1] in BINDING_METHODS


def _binding(module: str, function: str) -> bool:
    return module.startswith(("ascheduler/binding/", "ascheduler/locks/")) or _scheduler_binding(
        module, function
    )


RULES: tuple[tuple[str, Callable[[str, str], bool]], ...] = (
    (LOGGING, _prefix("structlog/", "logging/", "ascheduler/logs.py")),
    (METRICS, _prefix("prometheus_client/", "ascheduler/metrics.py")),
    (EVENTS, _prefix("ascheduler/events.py")),
    (BINDING, _binding),
    (HANDLERS, _prefix("ascheduler/eventhandlers.py")),
    (
        CYCLE,
        _prefix(
            "ascheduler/scheduler.py",
            "ascheduler/framework/",
            "ascheduler/plugins/",
            "ascheduler/dra/",
            "ascheduler/groupcycle.py",
            "ascheduler/preemption.py",
            "ascheduler/diagnoses.py",
            "ascheduler/heap.py",
        ),
    ),
    (WATCH, _prefix("ascheduler/kube/informer.py", "ascheduler/model/")),
    (CACHE, _prefix("ascheduler/cache/", "ascheduler/queue/")),
    (TRANSPORT, _prefix("ascheduler/kube/")),
    (STARTUP, _prefix("importlib")),
    (OTHER, _prefix("ascheduler/", "benchmarks/")),
)

#: Every category, in the order a breakdown lists them.
CATEGORIES = (*(name for name, _ in RULES), LOOP)

_STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/)")


def module_of(path: str) -> str:
    """A frame's file as a package path: `ascheduler/kube/informer.py`, `asyncio/events.py`,
    `structlog/_log_levels.py`; `importlib` for the frozen import machinery."""
    if path.startswith("<frozen importlib"):
        return "importlib"
    if "site-packages/" in path:
        return path.rsplit("site-packages/", 1)[1]
    for package in ("ascheduler", "benchmarks"):
        if f"/{package}/" in path:
            return f"{package}/" + path.rsplit(f"/{package}/", 1)[1]
    found = _STDLIB.search(path)
    return path[found.end() :] if found else path


def parse(raw: str) -> list[tuple[list[Frame], int]]:
    """py-spy's raw output (`--format raw`): one line per stack, root first,
    `function (file:line);...;function (file:line) count`."""
    stacks = []
    for line in raw.splitlines():
        head, _, count = line.rpartition(" ")
        if not head or not count.isdigit():
            continue
        frames = []
        for part in head.split(";"):
            function, _, where = part.rpartition(" (")
            path = where.rstrip(")").rsplit(":", 1)[0]
            frames.append((function or part, module_of(path)))
        stacks.append((frames, int(count)))
    return stacks


#: Where the event loop is entered: the frames up to it (the command line's `main`, the
#: runner) are under every callback, so they say nothing of what one is doing.
LOOP_ENTRY = ("asyncio/runners.py", "uvloop/__init__.py")


def below_the_loop(frames: Sequence[Frame]) -> Sequence[Frame]:
    """The frames of the callback or task step the loop was running (all of them outside
    the loop's thread)."""
    for i in range(len(frames) - 1, -1, -1):
        if frames[i][1] in LOOP_ENTRY:
            return frames[i + 1 :]
    return frames


def category(frames: Sequence[Frame]) -> str:
    running = below_the_loop(frames)
    for name, matches in RULES:
        if any(matches(module, function) for function, module in running):
            return name
    return LOOP


def breakdown(stacks: Iterable[tuple[Sequence[Frame], int]], top: int = 15) -> dict[str, Any]:
    """The samples' share by category (`shares`, every category, in `CATEGORIES` order) and
    the functions most often on top of the stack (`functions`: "module:function", share)."""
    by_category: Counter[str] = Counter()
    on_top: Counter[str] = Counter()
    total = 0
    for frames, count in stacks:
        total += count
        by_category[category(frames)] += count
        if frames:
            function, module = frames[-1]
            on_top[f"{module}:{function}"] += count
    return _profile(total, by_category, on_top, top)


def _profile(
    total: float, by_category: Mapping[str, float], on_top: Counter[str], top: int
) -> dict[str, Any]:
    """A breakdown from sample counts (or sample-weighed shares) by category and function."""
    share = (lambda n: n / total) if total else (lambda n: 0.0)
    return {
        "samples": total,
        "rate": RATE,
        "shares": {name: share(by_category.get(name, 0)) for name in CATEGORIES},
        "functions": [[name, share(n)] for name, n in on_top.most_common(top)],
    }


def py_spy() -> str:
    """The py-spy beside this interpreter (the bench extra installs it)."""
    found = Path(sys.executable).parent / "py-spy"
    if not found.exists():
        raise SystemExit(f"--profile needs py-spy: {found} is missing (pip install py-spy)")
    return str(found)


class Profiler:
    """py-spy recording one process until `stop`; started and stopped by its pid."""

    def __init__(self, pid: int, output: Path) -> None:
        self.pid = pid
        self.output = output
        self.log = output.with_suffix(".log")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, attempts: int = 50) -> None:
        """Attach; a process just started may not have its interpreter up yet, so a
        refused attach is tried again every 0.1 s."""
        argv = [
            py_spy(),
            "record",
            "--pid",
            str(self.pid),
            "--format",
            "raw",
            "--rate",
            str(RATE),
            "--full-filenames",
            # Only while it holds the GIL: on a busy machine a thread woken from its wait
            # is runnable, and counted, until it gets a CPU; holding the GIL, it is running
            # Python or C called from Python (uvloop's polling runs without it).
            "--gil",
            "--output",
            str(self.output),
        ]
        for _ in range(attempts):
            with self.log.open("wb") as log:
                self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            time.sleep(0.1)
            if self.process.poll() is None:
                return
        raise RuntimeError(f"py-spy could not attach to {self.pid}; see {self.log}")

    def stop(self) -> dict[str, Any]:
        """Stop sampling (py-spy writes its samples on SIGINT) and sort them."""
        process, self.process = self.process, None
        if process is None:
            return breakdown([])
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        with contextlib.suppress(OSError):
            return breakdown(parse(self.output.read_text()))
        return breakdown([])


def merge(profiles: Sequence[dict[str, Any]], top: int = 15) -> dict[str, Any]:
    """Several runs' breakdowns as one, each weighed by its samples."""
    total = sum(p["samples"] for p in profiles)
    shares: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    for p in profiles:
        for name, share in p["shares"].items():
            shares[name] += share * p["samples"]
        for name, share in p["functions"]:
            functions[name] += share * p["samples"]
    return _profile(total, shares, functions, top)


def per_pod(profile: dict[str, Any], cpu_us_per_pod: float | None) -> dict[str, float]:
    """Each category's share of the run's CPU per pod bound, in µs."""
    if cpu_us_per_pod is None:
        return {}
    return {name: share * cpu_us_per_pod for name, share in profile["shares"].items()}


def inclusive(
    stacks: Iterable[tuple[Sequence[Frame], int]], within: str = "", top: int = 30
) -> list[tuple[str, float]]:
    """The functions on the most samples anywhere on their stacks ("module:function", share
    of the samples counted), of the samples whose category starts with `within` (all of
    them when empty): where a category's time goes, callers included."""
    counts: Counter[str] = Counter()
    total = 0
    for frames, count in stacks:
        if within and not category(frames).startswith(within):
            continue
        total += count
        for name in {f"{module}:{function}" for function, module in below_the_loop(frames)}:
            counts[name] += count
    return [(name, n / total) for name, n in counts.most_common(top)] if total else []


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks profile",
        description="Read py-spy's raw stacks (`benchmarks run --profile` keeps them in "
        "results/profiles/stacks/): the breakdown by category, and the functions most "
        "often on the stack, callers included.",
    )
    parser.add_argument("stacks", nargs="+", type=Path)
    parser.add_argument(
        "--within", default="", help="only the samples of the categories starting so"
    )
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args(argv)
    stacks = [s for path in args.stacks for s in parse(path.read_text())]
    profile = breakdown(stacks)
    print(f"{profile['samples']} samples")
    for name, share in profile["shares"].items():
        print(f"{100 * share:5.1f}%  {name}")
    print(f"\non the stack{f' ({args.within}...)' if args.within else ''}:")
    for name, share in inclusive(stacks, args.within, args.top):
        print(f"{100 * share:5.1f}%  {name}")
    return 0
