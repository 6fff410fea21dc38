"""Costly CEL selectors, evaluated in a child process: never on the event loop, and stopped
when they run past their deadline.

A selector's expression comes from whoever may create a ResourceClaim (or a DeviceClass).
Most selectors compare a few attributes and cost microseconds per device; those are
evaluated where the scheduler asks for them. An expression that can cost more than its
length suggests (a comprehension, a string built by concatenation or `replace`, a regular
expression) is **costly** (`is_costly`, a conservative reading of its tokens). Its results
are computed here, in a process of its own, on the evaluator that meters Kubernetes'
runtime cost (`celeval`: a selector past `CELSelectorExpressionMaxCost` fails as in
kube-scheduler, one under it is evaluated however many iterations it takes). So the event
loop (Lease renewals, `/healthz`, every other pod) never waits on it, and a run that passes
its deadline (DynamicResources' `filterTimeout`) is ended by killing that process, which
Python cannot do to a thread. The next costly job starts a new one.

The parent talks to the child over its stdin/stdout, in frames of a length and a pickle
(both ends are this package; nothing else writes to the pipe). A job is one expression over
a list of devices (`device_value`s); the child answers as it goes, in chunks, so the devices
evaluated before a deadline keep their results. The child exits when its stdin closes, and
the kernel kills it when its parent dies (`PR_SET_PDEATHSIG`). Its address space is capped
(`celchild.MEMORY_LIMIT`), so an expression that builds huge strings fails in the child
alone. This module is the parent's side and the wire; the child's loop is `celchild`, which
alone imports the evaluators.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

import structlog

log = structlog.get_logger(__name__)

_LENGTH: Final = struct.Struct("!I")
#: How long the child gathers results before sending what it has.
CHUNK_SECONDS: Final = 0.05

#: Outcome codes per device, as SelectorCache keeps them.
MATCH: Final = 1
NO_MATCH: Final = 0
FAILED: Final = -2

# -- which expressions are costly -----------------------------------------------------------

#: Calls whose cost grows with more than the expression's own length: comprehensions (macros),
#: and functions that build strings or lists, or run a regular expression.
COSTLY_CALLS: Final = frozenset(
    {
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "transformList",
        "transformMap",
        "transformMapEntry",
        "sortBy",
        "matches",
        "replace",
        "join",
        "split",
        "format",
        "find",
        "findAll",
    }
)


def is_costly(expression: str) -> bool:
    """Whether `expression` may cost more at run time than a walk over its own text: it calls
    one of COSTLY_CALLS or uses `+` (concatenation repeated, `cel.bind` doubling). String
    literals and comments are skipped, so their contents never count; anything the reading
    is unsure of counts as costly."""
    text = expression
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "+":
            return True
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if c in "\"'":
            end = _string_end(text, i)
            if end < 0:
                return True
            i = end
            continue
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if j < n and text[j] in "\"'" and word.lower() in ("r", "b", "rb", "br"):
                end = _string_end(text, j, raw="r" in word.lower())
                if end < 0:
                    return True
                i = end
                continue
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if k < n and text[k] == "(" and word in COSTLY_CALLS:
                return True
            i = j
            continue
        i += 1
    return False


def _string_end(text: str, start: int, *, raw: bool = False) -> int:
    """The index just past the string literal opening at `start`; -1 if it never closes."""
    quote = text[start]
    triple = text.startswith(quote * 3, start)
    delimiter = quote * 3 if triple else quote
    i = start + len(delimiter)
    while i < len(text):
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if text.startswith(delimiter, i):
            return i + len(delimiter)
        if text[i] == "\n" and not triple:
            return -1
        i += 1
    return -1


# -- the wire (both ends) -------------------------------------------------------------------


def write_frame(stream: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO) -> Any:
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    return pickle.loads(stream.read(size))


# -- the parent -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """One device's result: MATCH, NO_MATCH or FAILED (with the error's text)."""

    code: int
    error: str = ""


class SelectorWorker:
    """The child process, started on the first job, one job at a time (a job queued behind
    another waits its turn: the child has one core's worth of work to give). `close()` ends
    it by pid."""

    def __init__(self, command: Sequence[str] | None = None) -> None:
        self._command = list(command or (sys.executable, "-m", "ascheduler.dra.celchild"))
        self._process: asyncio.subprocess.Process | None = None
        self._turn = asyncio.Lock()
        self._jobs = 0
        #: How many children were killed at a deadline (for tests and logs).
        self.killed = 0

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def _start(self) -> asyncio.subprocess.Process:
        process = self._process
        if process is not None and process.returncode is None:
            return process
        self._process = process = await asyncio.create_subprocess_exec(
            *self._command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**26,
            env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        )
        log.info("cel_worker_started", pid=process.pid)
        return process

    async def evaluate(
        self,
        expression: str,
        items: Iterable[tuple[Any, Any]],
        *,
        timeout: float | None,
        on_results: Callable[[list[tuple[Any, Outcome]]], None],
    ) -> bool:
        """Evaluate `expression` for each (key, device value), handing results to
        `on_results` as they come; False if `timeout` seconds (counted from its turn: a job
        waiting behind another is not charged for it) passed first
        (the child is killed, the devices not reached have no result)."""
        async with self._turn:
            process = await self._start()
            assert process.stdin is not None
            assert process.stdout is not None
            self._jobs += 1
            job_id = self._jobs
            # Thousands of devices take tens of milliseconds to pickle: off the loop's thread
            # (which gets the interpreter back at every switch interval meanwhile).
            data = await asyncio.to_thread(
                pickle.dumps, (job_id, expression, list(items)), pickle.HIGHEST_PROTOCOL
            )
            process.stdin.write(_LENGTH.pack(len(data)) + data)
            try:
                async with asyncio.timeout(timeout):
                    await process.stdin.drain()
                    while True:
                        head = await process.stdout.readexactly(_LENGTH.size)
                        (size,) = _LENGTH.unpack(head)
                        got_id, results = pickle.loads(await process.stdout.readexactly(size))
                        if got_id != job_id:
                            continue
                        if results is None:
                            return True
                        on_results([(k, Outcome(code, error)) for k, code, error in results])
            except TimeoutError:
                self.killed += 1
                log.warning("cel_worker_deadline", pid=process.pid, expression=expression[:200])
                await self._kill()
                return False
            except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError) as exc:
                log.error("cel_worker_died", pid=process.pid, error=repr(exc))
                await self._kill()
                raise WorkerDied(f"the CEL worker process exited: {exc!r}") from None
            except BaseException:
                await self._kill()  # cancelled mid-job: its answer would be read by the next
                raise

    async def _kill(self) -> None:
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()

    async def close(self) -> None:
        await self._kill()


class WorkerDied(Exception):
    """The child exited in the middle of a job (killed from outside, out of memory)."""
