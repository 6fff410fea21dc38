"""Device taints (a ResourceSlice device's `taints`) and DeviceTaintRules, as DynamicResources
reads them (resource.k8s.io/v1 from 1.37; v1beta2 in 1.36, whose objects have the same shape).

Parsing never raises, as in `model.dra`: a field that cannot be read is recorded with its path.
A taint's effect is kept as written; only `NoSchedule` and `NoExecute` keep a device from being
allocated (`dra.taints`), any other effect, `None` or one a later release adds, is ignored, as
kube-scheduler's allocator does. Tolerations stay in `model.dra.Request` as the API server sent
them (they are copied into the allocation result); `dra.taints` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

NO_SCHEDULE: Final = "NoSchedule"
NO_EXECUTE: Final = "NoExecute"


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = ""
    #: `timeAdded` as written (the eviction controller's, never the scheduler's concern).
    time_added: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """A DeviceTaintRule: its taint on every device its selector matches."""

    name: str
    resource_version: str
    #: Whether `spec.deviceSelector` is there at all (1.37: none matches no device; 1.36:
    #: every device).
    has_selector: bool
    driver: str | None = None
    pool: str | None = None
    device: str | None = None
    taint: DeviceTaint | None = None
    errors: tuple[str, ...] = ()


def _map(raw: Any, path: str, errors: list[str]) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        errors.append(f"{path}: expected an object")
        return {}
    return raw


def _text(raw: Any, path: str, errors: list[str]) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        errors.append(f"{path}: expected a string")
        return ""
    return raw


def _optional_text(raw: Any, path: str, errors: list[str]) -> str | None:
    return None if raw is None else _text(raw, path, errors)


def parse_taint(raw: Any, path: str, errors: list[str]) -> DeviceTaint:
    t = _map(raw, path, errors)
    added = t.get("timeAdded")
    return DeviceTaint(
        key=_text(t.get("key"), f"{path}.key", errors),
        value=_text(t.get("value"), f"{path}.value", errors),
        effect=_text(t.get("effect"), f"{path}.effect", errors),
        time_added=_optional_text(added, f"{path}.timeAdded", errors),
    )


def parse_taints(raw: Any, path: str, errors: list[str]) -> tuple[DeviceTaint, ...]:
    """A device's `taints`."""
    if raw is None:
        return ()
    if not isinstance(raw, Sequence) or isinstance(raw, str):
        errors.append(f"{path}: expected a list")
        return ()
    return tuple(parse_taint(t, f"{path}[{i}]", errors) for i, t in enumerate(raw))


def parse_device_taint_rule(obj: Any) -> DeviceTaintRule:
    errors: list[str] = []
    obj = _map(obj, "devicetaintrule", errors)
    meta = _map(obj.get("metadata"), "metadata", errors)
    spec = _map(obj.get("spec"), "spec", errors)
    raw_selector = spec.get("deviceSelector")
    selector = _map(raw_selector, "spec.deviceSelector", errors)
    path = "spec.deviceSelector"
    return DeviceTaintRule(
        name=_text(meta.get("name"), "metadata.name", errors),
        resource_version=str(meta.get("resourceVersion", "")),
        has_selector=raw_selector is not None,
        driver=_optional_text(selector.get("driver"), f"{path}.driver", errors),
        pool=_optional_text(selector.get("pool"), f"{path}.pool", errors),
        device=_optional_text(selector.get("device"), f"{path}.device", errors),
        taint=parse_taint(spec.get("taint"), "spec.taint", errors),
        errors=tuple(dict.fromkeys(errors)),
    )
