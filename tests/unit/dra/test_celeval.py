"""The metered evaluator against Kubernetes: every vector in celcost/vectors/vectors.json was
computed by k8s.io/dynamic-resource-allocation/cel v0.35.4 (see its README), and the result,
error message and actual cost must agree exactly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ascheduler.dra import cel
from ascheduler.dra.allocator import EvalError
from ascheduler.dra.celeval import COST_LIMIT, Unsupported, meter
from ascheduler.model.dra import parse_semver
from ascheduler.model.quantity import parse_fraction

VECTORS = json.loads((Path(__file__).parent / "celcost/vectors/vectors.json").read_text())
#: Functions Kubernetes offers that the evaluator leaves to cel-cpp.
UNSUPPORTED = {"strings_quote", "format"}
COST_MESSAGE = "operation cancelled: actual cost limit exceeded"


def device_value(spec: dict[str, Any]) -> dict[str, Any]:
    """`cel.device_value()`'s shape for a vector's device."""
    driver = spec["driver"]
    attributes: dict[str, dict[str, Any]] = {}
    for name, typed in spec["attributes"].items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        ((kind, value),) = typed.items()
        if kind == "version":
            value = cel.semver_bytes(parse_semver(value))
        attributes.setdefault(domain, {})[ident] = value
    capacity: dict[str, dict[str, Any]] = {}
    for name, text in spec["capacity"].items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        capacity.setdefault(domain, {})[ident] = cel.quantity_bytes(parse_fraction(text))
    return {
        "driver": driver,
        "attributes": attributes,
        "capacity": capacity,
        "allowMultipleAllocations": spec["allowMultipleAllocations"],
    }


def _compiled(vector: dict[str, Any]) -> cel.Program:
    program = cel.compile_selector(vector["expression"])
    assert not program.error, program.error
    return program


EVALUATED = [v for v in VECTORS if not v["compile"] and v["name"] not in UNSUPPORTED]


@pytest.mark.parametrize("vector", EVALUATED, ids=[v["name"] for v in EVALUATED])
def test_vector(vector: dict[str, Any]) -> None:
    program = meter(_compiled(vector))
    try:
        result, error = program.evaluate(device_value(vector["device"])), ""
    except EvalError as exc:
        result, error = None, str(exc)
    assert (result, error) == (vector["result"], vector["error"])
    if error != COST_MESSAGE:
        assert program.cost == vector["cost"]


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_functions_are_refused_when_metered(name: str) -> None:
    (vector,) = [v for v in VECTORS if v["name"] == name]
    with pytest.raises(Unsupported):
        meter(_compiled(vector))


def _vector(name: str) -> dict[str, Any]:
    (vector,) = [v for v in VECTORS if v["name"] == name]
    return vector


def test_beyond_cel_cpp_iteration_budget() -> None:
    """64,000 iterations: cel-cpp refuses them, Kubernetes (and the metered evaluator) not."""
    vector = _vector("nested_40_cubed")
    device = device_value(vector["device"])
    with pytest.raises((EvalError, RuntimeError), match="budget"):
        cel.evaluate(_compiled(vector), device)
    assert meter(_compiled(vector)).evaluate(device) is True


def test_limit_is_the_callers() -> None:
    vector = _vector("two_clause")
    program = meter(_compiled(vector))
    device = device_value(vector["device"])
    assert program.evaluate(device, limit=vector["cost"]) is True
    with pytest.raises(EvalError, match=COST_MESSAGE):
        program.evaluate(device, limit=vector["cost"] - 1)
    assert COST_LIMIT == 1_000_000


class Deadline(Exception):
    pass


def test_check_is_called_every_hundred_iterations_and_may_abort() -> None:
    vector = _vector("cost_just_under")
    program = meter(_compiled(vector))
    device = device_value(vector["device"])
    calls = 0

    def count() -> None:
        nonlocal calls
        calls += 1

    assert program.evaluate(device, check=count) is True
    # 40 outer and 40 x 40 inner iterations.
    assert calls == (40 + 40 * 40) // 100

    def abort() -> None:
        raise Deadline

    with pytest.raises(Deadline):
        program.evaluate(device, check=abort)
