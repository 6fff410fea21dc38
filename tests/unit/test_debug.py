"""The debug endpoints' pure parts: the rules for serving them."""

from __future__ import annotations

import dataclasses

import pytest

from ascheduler.config import Overrides, SchedulerConfig, apply, debug_problem
from ascheduler.framework import ConfigError
from ascheduler.http import SecureServing, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.1", False),
    ],
)
def test_loopback_hosts(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_debug_endpoints_need_the_loopback_listener_or_the_secure_port() -> None:
    config = SchedulerConfig()
    assert debug_problem(config) == ""
    assert "needs one" in debug_problem(dataclasses.replace(config, debug_endpoints="loopback"))
    local = dataclasses.replace(config, http_address="127.0.0.1:10251", debug_endpoints="loopback")
    assert debug_problem(local) == ""
    anywhere = dataclasses.replace(
        local, http_address="0.0.0.0:10251", allow_non_loopback_http=True
    )
    assert "without a token" in debug_problem(anywhere)
    assert debug_problem(dataclasses.replace(config, debug_endpoints="authorized")) == ""
    no_port = dataclasses.replace(
        config, secure_serving=SecureServing(port=0), debug_endpoints="authorized"
    )
    assert "secure port" in debug_problem(no_port)
    with pytest.raises(ConfigError, match="needs one"):
        apply(config, Overrides(debug_endpoints="loopback"))
    with pytest.raises(ConfigError, match="--debug-endpoints: must be one of"):
        apply(config, Overrides(debug_endpoints="everyone"))
    assert apply(config, Overrides(debug_endpoints="authorized")).debug_endpoints == "authorized"
