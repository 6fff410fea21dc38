"""The child process `celworker.SelectorWorker` starts (`python -m ascheduler.dra.celchild`):
it evaluates costly selectors on the metered evaluator, job by job, until its stdin closes.

It confines itself first: the kernel kills it when its parent dies, and its address space is
capped, so a selector that builds a string of gigabytes fails here, never in the scheduler.
The frames it reads and writes are `celworker`'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, BinaryIO, Final

import structlog

from ascheduler.dra.allocator import CompileError, EvalError
from ascheduler.dra.cel import SelectorCache
from ascheduler.dra.celeval import MeteredProgram, Unsupported, meter
from ascheduler.dra.celworker import (
    CHUNK_SECONDS,
    FAILED,
    MATCH,
    NO_MATCH,
    read_frame,
    write_frame,
)

log = structlog.get_logger(__name__)

#: The child's address space: a selector that builds a string of gigabytes fails there (the
#: device's evaluation, or the child, which the next job replaces), never in the scheduler.
MEMORY_LIMIT: Final = 4 << 30


def _confine() -> None:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:
        os._exit(0)
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


Evaluate = Callable[[str, Any], bool]


def serve(source: BinaryIO, sink: BinaryIO, evaluate: Evaluate) -> None:
    """The child's loop: a job is (job id, expression, [(key, device value), ...]); its answer
    is chunks of (job id, [(key, code, error text), ...]) and a closing (job id, None)."""
    while (job := read_frame(source)) is not None:
        job_id, expression, items = job
        out: list[tuple[Any, int, str]] = []
        sent = time.monotonic()
        for key, value in items:
            try:
                out.append((key, MATCH if evaluate(expression, value) else NO_MATCH, ""))
            except (CompileError, EvalError) as exc:
                out.append((key, FAILED, str(exc)))
            except Exception as exc:  # a library fault is this device's failure, not the job's
                out.append((key, FAILED, f"{type(exc).__name__}: {exc}"))
            if time.monotonic() - sent >= CHUNK_SECONDS:
                write_frame(sink, (job_id, out))
                out, sent = [], time.monotonic()
        if out:
            write_frame(sink, (job_id, out))
        write_frame(sink, (job_id, None))


#: Metered programs the child keeps (selectors repeat across jobs).
METERED_KEPT: Final = 256


def main() -> None:
    """The child: costly selectors run on the metered evaluator (`celeval`: Kubernetes'
    runtime cost limit, no iteration budget); one it does not model runs on cel-cpp."""
    _confine()
    # The results travel on a copy of stdout; whatever prints (logs, a library) goes to stderr.
    results = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    cache = SelectorCache()
    metered: dict[str, MeteredProgram | None] = {}

    def evaluate(expression: str, value: Any) -> bool:
        if expression not in metered:
            program = cache.program(expression)
            if program.error:
                raise CompileError(program.error)
            if len(metered) >= METERED_KEPT:
                metered.pop(next(iter(metered)))
            try:
                metered[expression] = meter(program)
            except Unsupported as exc:
                log.info("cel_selector_not_metered", reason=str(exc), expression=expression[:200])
                metered[expression] = None
        program_ = metered[expression]
        if program_ is None:
            return cache.evaluate_here(expression, value)
        return program_.evaluate(value)

    serve(sys.stdin.buffer, results, evaluate)


if __name__ == "__main__":
    main()
