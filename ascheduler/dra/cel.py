"""CEL device selectors, as Kubernetes evaluates them for DRA (`k8s.io/dynamic-resource-
allocation/cel`), on cel-expr-python (Google's Python binding of cel-cpp).

Why that library: it compiles an expression once into a type-checked program, evaluates it
faster than the Rust-backed `common-expression-language` and far faster than the pure-Python
`cel-python`, activation included (the figures: docs/performance.md, "CEL selectors"), lets
functions be declared as member overloads (`q.compareTo(other)`), and ships the extensions
Kubernetes enables (`cel.bind`, the strings library, optional types). It is the CEL team's own
runtime.

The environment is Kubernetes' for DRA: one variable `device` with `driver`, `attributes`
(domain -> name -> value) and `capacity` (domain -> name -> quantity), the strings, bindings and
optional extensions, and Kubernetes' `quantity` and `semver` libraries. Quantities and semantic
versions travel through the CEL runtime as tagged bytes (`Q` + the value in nano-units, `V` +
the version text): device attributes and capacities are never bytes, so the tags cannot be
confused with data, and comparisons stay exact.

Kubernetes looks up an unknown domain in `device.attributes` / `device.capacity` as an empty
map (so `device.attributes["other.example.com"].model` fails with `no such key: model`, and
`"model" in device.attributes["other.example.com"]` is false); cel-cpp fails the lookup, so
an evaluation that fails on a missing domain is repeated with that domain present and empty.

A selector's result is cached per device (by slice name and resourceVersion), so each device
is evaluated once per expression however many pods and nodes ask.

**Costly selectors** (`celworker.is_costly`: comprehensions, concatenation, regular
expressions) are never evaluated on the event loop: DynamicResources asks for their results
before a pod's cycle (`ensure`), a child process computes them (`celworker`), and the pod
waits outside the queue meanwhile, as other pods go on. A job that runs past the pod's
`filterTimeout` is stopped; the devices it did not reach are *timed out* until their slice
changes, and a search that meets one fails on that node as kube-scheduler's does when its
deadline passes (`timed out trying to allocate devices`). A costly result the cycle needs
but does not have (a slice changed since) counts the same way, never as a verdict.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import numpy as np
import structlog
from cel_expr_python import cel  # type: ignore[import-untyped]
from cel_expr_python.ext import (  # type: ignore[import-untyped]
    ext_bindings,
    ext_optional,
    ext_strings,
)

from ascheduler.dra.allocator import Candidate, CompileError, EvalError, Timeout
from ascheduler.dra.celworker import FAILED, Outcome, SelectorWorker, is_costly
from ascheduler.model.dra import Semver, parse_semver
from ascheduler.model.quantity import QuantityError, parse_fraction

log = structlog.get_logger(__name__)
_T = cel.Type
NANO: Final = 10**9
#: Compiled programs kept (kube-scheduler keeps 10; selectors repeat across pods).
PROGRAMS_KEPT: Final = 256
_MISSING_KEY = re.compile(r'Key not found in map\s*:\s*"((?:[^"\\]|\\.)*)"')


# -- the quantity and semver libraries ------------------------------------------------------


def quantity_bytes(value: Fraction) -> bytes:
    return b"Q%d" % math.ceil(value * NANO)


def semver_bytes(version: Semver) -> bytes:
    return b"V" + version.text.encode()


def _quantity(text: str) -> bytes:
    try:
        return quantity_bytes(parse_fraction(text))
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _is_quantity(text: str) -> bool:
    try:
        parse_fraction(text)
    except QuantityError:
        return False
    return True


def _semver(text: str) -> bytes:
    return semver_bytes(parse_semver(text))


def _is_semver(text: str) -> bool:
    try:
        parse_semver(text)
    except ValueError:
        return False
    return True


def _decode(raw: Any) -> Fraction | Semver:
    b = bytes(raw)
    if b[:1] == b"Q":
        return Fraction(int(b[1:]), NANO)
    if b[:1] == b"V":
        return parse_semver(b[1:].decode())
    raise ValueError("no such overload")


def _q(raw: Any) -> Fraction:
    value = _decode(raw)
    if not isinstance(value, Fraction):
        raise ValueError("no such overload")
    return value


def _v(raw: Any) -> Semver:
    value = _decode(raw)
    if not isinstance(value, Semver):
        raise ValueError("no such overload")
    return value


def _compare(a: Any, b: Any) -> int:
    x, y = _decode(a), _decode(b)
    if isinstance(x, Semver) and isinstance(y, Semver):
        return x.compare(y)
    if isinstance(x, Fraction) and isinstance(y, Fraction):
        return (x > y) - (x < y)
    raise ValueError("no such overload")


def _as_integer(raw: Any) -> int:
    value = _q(raw)
    if value.denominator != 1 or abs(value) >= 2**63:
        raise ValueError("cannot convert value to integer")
    return int(value)


def _add(a: Any, b: Any) -> bytes:
    other = Fraction(b) if isinstance(b, int) else _q(b)
    return quantity_bytes(_q(a) + other)


def _sub(a: Any, b: Any) -> bytes:
    other = Fraction(b) if isinstance(b, int) else _q(b)
    return quantity_bytes(_q(a) - other)


def _overload(
    name: str, returns: Any, params: list[Any], impl: Callable[..., Any], *, member: bool
) -> Any:
    return cel.Overload(
        f"k8s_{name}_{'_'.join(p.name().lower() for p in params)}",
        return_type=returns,
        parameters=params,
        is_member=member,
        impl=impl,
    )


def _function(name: str, *overloads: Any) -> Any:
    return cel.FunctionDecl(name, list(overloads))


_B, _S, _I, _BOOL, _D = _T.BYTES, _T.STRING, _T.INT, _T.BOOL, _T.DOUBLE
KUBERNETES: Final = cel.CelExtension(
    "kubernetes_dra",
    [
        _function("quantity", _overload("quantity", _B, [_S], _quantity, member=False)),
        _function("isQuantity", _overload("isQuantity", _BOOL, [_S], _is_quantity, member=False)),
        _function("semver", _overload("semver", _B, [_S], _semver, member=False)),
        _function("isSemver", _overload("isSemver", _BOOL, [_S], _is_semver, member=False)),
        _function("compareTo", _overload("compareTo", _I, [_B, _B], _compare, member=True)),
        _function(
            "isGreaterThan",
            _overload(
                "isGreaterThan", _BOOL, [_B, _B], lambda a, b: _compare(a, b) > 0, member=True
            ),
        ),
        _function(
            "isLessThan",
            _overload("isLessThan", _BOOL, [_B, _B], lambda a, b: _compare(a, b) < 0, member=True),
        ),
        _function("major", _overload("major", _I, [_B], lambda v: _v(v).major, member=True)),
        _function("minor", _overload("minor", _I, [_B], lambda v: _v(v).minor, member=True)),
        _function("patch", _overload("patch", _I, [_B], lambda v: _v(v).patch, member=True)),
        _function(
            "sign",
            _overload("sign", _I, [_B], lambda q: (_q(q) > 0) - (_q(q) < 0), member=True),
        ),
        _function(
            "isInteger",
            _overload("isInteger", _BOOL, [_B], lambda q: _q(q).denominator == 1, member=True),
        ),
        _function("asInteger", _overload("asInteger", _I, [_B], _as_integer, member=True)),
        _function(
            "asApproximateFloat",
            _overload("asApproximateFloat", _D, [_B], lambda q: float(_q(q)), member=True),
        ),
        _function(
            "add",
            _overload("add", _B, [_B, _B], _add, member=True),
            _overload("add", _B, [_B, _I], _add, member=True),
        ),
        _function(
            "sub",
            _overload("sub", _B, [_B, _B], _sub, member=True),
            _overload("sub", _B, [_B, _I], _sub, member=True),
        ),
    ],
)

_ENV = cel.NewEnv(
    variables={"device": _T.Map(_T.STRING, _T.DYN)},
    extensions=[
        KUBERNETES,
        ext_bindings.ExtBindings(),
        ext_strings.ExtStrings(),
        ext_optional.ExtOptional(),
    ],
)


# -- programs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Program:
    expression: str
    compiled: Any = None
    #: Why it does not compile (Kubernetes' wording), or "".
    error: str = ""


def compile_selector(expression: str) -> Program:
    try:
        compiled = _ENV.compile(expression)
    except RuntimeError as exc:
        text = str(exc)
        text = text.removeprefix("INVALID_ARGUMENT: ").split(" [INVALID_ARGUMENT]")[0]
        return Program(expression, error=f"compilation failed: {text}")
    returns = compiled.return_type()
    if not (returns == _T.BOOL or returns == _T.DYN):
        return Program(
            expression,
            error=f"must evaluate to bool or the unknown type, not {returns.name().lower()}",
        )
    return Program(expression, compiled)


def device_value(device: Candidate) -> dict[str, Any]:
    """The `device` variable for one device."""
    driver = device.driver
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.spec.attributes.items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        attributes.setdefault(domain, {})[ident] = (
            semver_bytes(value) if isinstance(value, Semver) else value
        )
    capacity: dict[str, dict[str, Any]] = {}
    for name, q in device.spec.capacity.items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        capacity.setdefault(domain, {})[ident] = quantity_bytes(q.value)
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": device.spec.allow_multiple_allocations,
    }


def evaluate(program: Program, value: Mapping[str, Any]) -> bool:
    """The selector's verdict for one device; CompileError or EvalError."""
    if program.error:
        raise CompileError(program.error)
    device = dict(value)
    for _ in range(4):
        result = program.compiled.eval(_ENV.Activation({"device": device}))
        kind = result.type()
        if kind == _T.BOOL:
            return bool(result.value())
        if kind != _T.ERROR:
            raise EvalError(_not_bool(kind.name().lower(), result.value()))
        message = str(result.value())
        missing = _MISSING_KEY.search(message)
        if missing is None:
            raise EvalError(_kubernetes_words(message))
        key = missing.group(1)
        grown = False
        for section in ("attributes", "capacity"):
            maps = device[section]
            if key not in maps:
                device[section] = {**maps, key: {}}
                grown = True
        if not grown:
            raise EvalError(f"no such key: {key}")
    raise EvalError("no such key")


#: cel-go's words for a result that does not convert to a Go bool, by CEL type name.
_NO_BOOL: Final = {
    "string": "unsupported native conversion from string to 'bool'",
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "double": "type conversion error from Double to 'bool'",
    "bytes": "type conversion error from Bytes to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "unsupported type conversion: bool to map",
    "kubernetes.Quantity": "type conversion error from 'Quantity' to 'bool'",
    "kubernetes.Semver": "type conversion error from 'Semver' to 'bool'",
}


def _not_bool(kind: str, value: Any) -> str:
    """kube-scheduler's message for a selector whose result is no bool (quantities and
    versions are tagged bytes here)."""
    if kind == "bytes" and isinstance(value, bytes | bytearray) and value[:1] in (b"Q", b"V"):
        kind = "kubernetes.Quantity" if value[:1] == b"Q" else "kubernetes.Semver"
    elif kind.startswith(("list", "map")):
        kind = kind.split("(")[0].split("<")[0]
    detail = _NO_BOOL.get(kind)
    message = f"CEL result of type {kind} could not be converted to bool"
    return f"{message}: {detail}" if detail else message


#: cel-cpp's words where cel-go's (which kube-scheduler reports) differ.
_CEL_GO_WORDS: Final = {"divide by zero": "division by zero"}


def _kubernetes_words(message: str) -> str:
    for prefix in ("OUT_OF_RANGE: ", "INVALID_ARGUMENT: ", "NOT_FOUND: ", "UNKNOWN: "):
        message = message.removeprefix(prefix)
    return _CEL_GO_WORDS.get(message, message)


# -- results per device ---------------------------------------------------------------------


Int8Array = np.ndarray[Any, np.dtype[np.int8]]

#: Device values built per turn of the event loop for a costly job: few enough that a turn
#: stays short (what one costs: docs/performance.md, "CEL selectors").
VALUES_PER_TURN: Final = 200
#: Per device, besides 1 (match), 0 (no match) and -2 (failed, celworker.FAILED):
NOT_YET: Final = -1
TIMED_OUT: Final = -3


class SelectorTimeout(Timeout):
    """A costly selector's result for a device is not known: its evaluation ran past its
    deadline, or has not run since the device's slice changed. A search meeting one gives up
    on the node as at its own deadline."""


class SelectorCache:
    """Compiled programs by expression, their results by device, and the jobs that compute
    costly ones off the event loop."""

    def __init__(self, worker: SelectorWorker | None = None) -> None:
        self._programs: OrderedDict[str, Program] = OrderedDict()
        self._costly: dict[str, bool] = {}
        #: (expression, slice name, slice resourceVersion) -> per device: 1 match, 0 not,
        #: -1 not evaluated yet, -2 failed (text in _errors), -3 timed out.
        self._results: dict[tuple[str, str, str], Int8Array] = {}
        self._errors: dict[tuple[str, str, str, int], str] = {}
        self._values: dict[tuple[str, str], list[dict[str, Any] | None]] = {}
        #: expression -> (the table, matches, failed, evaluated) over that table's rows.
        self._columns: dict[str, tuple[Any, Any, Any, Any]] = {}
        self.worker = worker or SelectorWorker()
        #: Costly expressions being evaluated, and the callbacks waiting for each.
        self._jobs: dict[str, asyncio.Task[None]] = {}
        self._waiting: dict[str, list[Callable[[], None]]] = {}
        #: expression -> the device table for which it has nothing left to evaluate.
        self._settled: dict[str, Any] = {}

    def program(self, expression: str) -> Program:
        program = self._programs.get(expression)
        if program is None:
            program = compile_selector(expression)
            self._programs[expression] = program
            if len(self._programs) > PROGRAMS_KEPT:
                self._programs.popitem(last=False)
        else:
            self._programs.move_to_end(expression)
        return program

    def costly(self, expression: str) -> bool:
        known = self._costly.get(expression)
        if known is None:
            if len(self._costly) > 16 * PROGRAMS_KEPT:
                self._costly.clear()
            known = self._costly[expression] = is_costly(expression)
        return known

    def evaluate_here(self, expression: str, value: Mapping[str, Any]) -> bool:
        """Evaluate on this thread, whatever it costs (the worker process's side)."""
        return evaluate(self.program(expression), value)

    def _value(self, device: Candidate, position: int) -> dict[str, Any]:
        key = (device.slice.name, device.slice.resource_version)
        values = self._values.get(key)
        if values is None:
            values = self._values[key] = [None] * len(device.slice.devices)
        value = values[position]
        if value is None:
            value = values[position] = device_value(device)
        return value

    def _slot(self, expression: str, device: Candidate) -> tuple[Int8Array, int]:
        s = device.slice
        key = (expression, s.name, s.resource_version)
        results = self._results.get(key)
        if results is None:
            results = self._results[key] = np.full(len(s.devices), NOT_YET, dtype=np.int8)
        return results, device.position

    def matches(self, expression: str, device: Candidate) -> bool:
        """The allocator's question (`allocator.Selectors`); SelectorTimeout for a costly
        selector whose result is not known."""
        results, i = self._slot(expression, device)
        hit = int(results[i])
        if hit >= 0:
            return hit == 1
        s = device.slice
        if hit == FAILED:
            raise EvalError(self._errors[(expression, s.name, s.resource_version, i)])
        program = self.program(expression)
        if hit == TIMED_OUT or (not program.error and self.costly(expression)):
            raise SelectorTimeout
        try:
            ok = evaluate(program, self._value(device, i))
        except EvalError as exc:
            results[i] = FAILED
            self._errors[(expression, s.name, s.resource_version, i)] = str(exc)
            raise
        results[i] = 1 if ok else 0
        return ok

    def column(self, expression: str, table: Any, rows: Any) -> tuple[Any, Any]:
        """Over a device table: (matches, failed) for the devices in `rows` (others False).
        Each device is evaluated once per table; a compile error fails every one, and so
        does a costly result not known (the search then decides, see SelectorTimeout)."""
        entry = self._columns.get(expression)
        if entry is None or entry[0] is not table:
            entry = (
                table,
                np.zeros(table.n, dtype=np.bool_),
                np.zeros(table.n, dtype=np.bool_),
                np.zeros(table.n, dtype=np.bool_),
            )
            self._columns[expression] = entry
            if len(self._columns) > PROGRAMS_KEPT:
                self._columns.pop(next(iter(self._columns)))
        _, match, failed, done = entry
        todo = rows & ~done
        if todo.any():
            program = self.program(expression)
            for i in np.flatnonzero(todo).tolist():
                if program.error:
                    failed[i] = done[i] = True
                    continue
                try:
                    match[i] = self.matches(expression, table.candidates[i])
                except EvalError:
                    failed[i] = True
                except SelectorTimeout:
                    continue  # not done: asked again once its job has run
                done[i] = True
        return match & rows, (failed | (rows & ~done)) & rows

    # -- costly selectors, off the event loop --------------------------------------------

    def pending(self, expression: str, table: Any) -> list[int]:
        """The rows of `table` whose result for the costly `expression` is not evaluated yet
        (timed-out ones are not retried until their slice changes)."""
        if not self.costly(expression) or self.program(expression).error:
            return []
        if self._settled.get(expression) is table:
            return []
        out = []
        for row, device in enumerate(table.candidates):
            results, i = self._slot(expression, device)
            if results[i] == NOT_YET:
                out.append(row)
        if not out:
            # Every pod asking again costs a lookup, not a walk over the devices.
            self._settled[expression] = table
            if len(self._settled) > PROGRAMS_KEPT:
                self._settled.pop(next(iter(self._settled)))
        return out

    def ensure(
        self,
        expressions: Collection[str],
        table: Any,
        *,
        timeout: float | None,
        done: Callable[[], None],
    ) -> bool:
        """True if every costly expression of `expressions` has a result (or a time-out) for
        every device of `table`; otherwise starts the jobs that compute them (one per
        expression at a time; `timeout` seconds each, None for none) and calls `done` once
        they have all ended."""
        missing = [e for e in dict.fromkeys(expressions) if self.pending(e, table)]
        if not missing:
            return True
        remaining = set(missing)

        def ended(expression: str) -> None:
            remaining.discard(expression)
            if not remaining:
                done()

        for expression in missing:
            self._waiting.setdefault(expression, []).append(
                lambda e=expression: ended(e)  # type: ignore[misc]
            )
            if expression not in self._jobs:
                task = asyncio.get_running_loop().create_task(self._run(expression, table, timeout))
                self._jobs[expression] = task
        return False

    async def _run(self, expression: str, table: Any, timeout: float | None) -> None:
        try:
            candidates = [table.candidates[r] for r in self.pending(expression, table)]
            items = []
            for start in range(0, len(candidates), VALUES_PER_TURN):
                if start:
                    await asyncio.sleep(0)  # device values for thousands: a turn at a time
                items += [
                    (d.index, self._value(d, d.position))
                    for d in candidates[start : start + VALUES_PER_TURN]
                ]

            def store(results: list[tuple[Any, Outcome]]) -> None:
                for row, outcome in results:
                    self._store(expression, table.candidates[row], outcome)

            finished = await self.worker.evaluate(
                expression, items, timeout=timeout or None, on_results=store
            )
            if not finished:
                for device in candidates:
                    results, i = self._slot(expression, device)
                    if results[i] == NOT_YET:
                        results[i] = TIMED_OUT
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the worker died: these devices fail, the pod is told
            log.error("cel_selector_job_failed", expression=expression[:200], error=str(exc))
            for r in self.pending(expression, table):
                self._store(expression, table.candidates[r], Outcome(FAILED, str(exc)))
        finally:
            self._jobs.pop(expression, None)
            for callback in self._waiting.pop(expression, ()):
                callback()

    def _store(self, expression: str, device: Candidate, outcome: Outcome) -> None:
        results, i = self._slot(expression, device)
        results[i] = outcome.code
        if outcome.code == FAILED:
            s = device.slice
            self._errors[(expression, s.name, s.resource_version, i)] = outcome.error

    async def close(self) -> None:
        for task in list(self._jobs.values()):
            task.cancel()
        await asyncio.gather(*self._jobs.values(), return_exceptions=True)
        await self.worker.close()

    def forget(self, live: set[tuple[str, str]]) -> None:
        """Drop results of slices (name, resourceVersion) no longer in the table."""
        for key in [k for k in self._results if (k[1], k[2]) not in live]:
            del self._results[key]
        for ekey in [k for k in self._errors if (k[1], k[2]) not in live]:
            del self._errors[ekey]
        for vkey in [k for k in self._values if k not in live]:
            del self._values[vkey]
