"""Where the DeviceTaintRule informer lists, per release and gate (`app.taint_rules_path`)."""

from __future__ import annotations

from ascheduler.app import taint_rules_path
from ascheduler.features import DRA_DEVICE_TAINT_RULES, Features, Release, parse_gates


def test_the_informer_follows_the_gate_and_the_release_s_api_version() -> None:
    assert taint_rules_path(Features.defaults(Release(1, 35))) is None
    assert taint_rules_path(Features.defaults(Release(1, 36))) is None
    assert (
        taint_rules_path(Features.defaults(Release(1, 37)))
        == "/apis/resource.k8s.io/v1/devicetaintrules"
    )
    on_136 = parse_gates(f"{DRA_DEVICE_TAINT_RULES}=true", Release(1, 36))
    assert taint_rules_path(on_136) == "/apis/resource.k8s.io/v1beta2/devicetaintrules"
