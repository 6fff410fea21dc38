"""Validation: the strict reader every part of a document is read with, each problem kept
with its path and all of them reported at once; and the checks across settings (the secure
port's flags, where the plain listener and the debug endpoints may be served), as
kube-scheduler's `apis/config/validation` checks what decoding alone cannot.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ascheduler.auth import PathMatcher
from ascheduler.config.types import SchedulerConfig
from ascheduler.durations import parse_seconds
from ascheduler.http import SecureServing, is_loopback, parse_address


class Problems:
    """Every problem of a document, each with its path (`profiles[0].plugins: ...`)."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.items.append(f"{path}: {message}")

    def obj(self, value: Any, path: str, allowed: set[str] | frozenset[str]) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            self.add(path, f"expected an object, got {type(value).__name__}")
            return {}
        for key in value:
            if key not in allowed:
                self.add(f"{path}.{key}" if path else str(key), "unknown field")
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, f"expected a list, got {type(value).__name__}")
            return []
        return value

    def int_(
        self,
        value: Any,
        path: str,
        default: int,
        *,
        low: int | None = None,
        high: int | None = None,
    ) -> int:
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            self.add(path, f"expected an integer, got {value!r}")
            return default
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
            self.add(path, f"must be in {bounds}, got {value}")
            return default
        return value

    def bool_(self, value: Any, path: str, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.add(path, f"expected true or false, got {value!r}")
            return default
        return value

    def str_(self, value: Any, path: str, default: str) -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            self.add(path, f"expected a string, got {value!r}")
            return default
        return value

    def duration(self, value: Any, path: str, default: float) -> float:
        if value is None:
            return default
        try:
            seconds = parse_seconds(str(value))
        except ValueError:
            self.add(path, f"not a duration: {value!r}")
            return default
        if seconds <= 0:
            self.add(path, "must be positive")
            return default
        return seconds


def secure_problems(s: SecureServing) -> list[str]:
    """What is wrong with the secure serving flags (kube-scheduler's checks)."""
    problems = []
    if not 0 <= s.port < 65536:
        problems.append(f"--secure-port: must be in 0..65535, got {s.port}")
    if s.bind_address != "localhost":
        try:
            ipaddress.ip_address(s.bind_address)
        except ValueError:
            problems.append(f"--bind-address: not an IP address: {s.bind_address!r}")
    cert = s.certificate
    if bool(cert.cert_file) != bool(cert.key_file):
        problems.append("--tls-cert-file and --tls-private-key-file: give both or neither")
    for flag, name in (
        ("--tls-cert-file", cert.cert_file),
        ("--tls-private-key-file", cert.key_file),
        ("--client-ca-file", cert.client_ca_file),
    ):
        if name and not Path(name).is_file():
            problems.append(f"{flag}: no such file: {name}")
    try:
        PathMatcher(s.auth.always_allow_paths)
    except ValueError as exc:
        problems.append(f"--authorization-always-allow-paths: {exc}")
    for flag, ttl in (
        ("--authentication-token-webhook-cache-ttl", s.auth.token_ttl),
        ("--authorization-webhook-cache-authorized-ttl", s.auth.allowed_ttl),
        ("--authorization-webhook-cache-unauthorized-ttl", s.auth.denied_ttl),
    ):
        if ttl < 0:
            problems.append(f"{flag}: must not be negative, got {ttl:g}s")
    return problems


def plain_problem(config: SchedulerConfig) -> str:
    """Why the plain HTTP listener cannot be where it is asked for ("" when it can): it
    authenticates no one, so it stays on loopback unless explicitly allowed elsewhere."""
    if not config.http_address or config.allow_non_loopback_http:
        return ""
    host, _ = parse_address(config.http_address)
    if is_loopback(host):
        return ""
    return (
        f"httpAddress: the plain HTTP listener answers anyone, so only on a loopback address "
        f"(127.0.0.1:PORT), not {config.http_address}; serve on the secure port "
        f"(--secure-port), or allow it there with --allow-non-loopback-http "
        f"(ascheduler.allowNonLoopbackHTTP)"
    )


def debug_problem(config: SchedulerConfig) -> str:
    """Why the debug endpoints cannot be served as configured ("" when they can):
    `loopback` needs the plain listener on a loopback address, `authorized` the secure
    port."""
    mode = config.debug_endpoints
    if mode == "loopback":
        if not config.http_address:
            return (
                "debugEndpoints: loopback serves them on the plain HTTP listener, so it needs "
                "one (--http-address 127.0.0.1:PORT)"
            )
        host, _ = parse_address(config.http_address)
        if not is_loopback(host):
            return (
                f"debugEndpoints: loopback serves them without a token, so only on a loopback "
                f"address (127.0.0.1:PORT), not {config.http_address}; use authorized to serve "
                f"them on the secure port"
            )
    if mode == "authorized" and not config.secure_serving.port:
        return "debugEndpoints: authorized serves them on the secure port, so it needs one"
    return ""


def sharding_problems(config: SchedulerConfig) -> list[str]:
    """Why sharding mode cannot run as configured (none when it can, or is off): every
    member is active, binds its pods itself, and shares every node with the others, so
    every bind must take its node's lock (see `ascheduler.sharding`)."""
    if not config.sharding.enabled:
        return []
    problems = []
    if config.leader_election.leader_elect:
        problems.append(
            "sharding: every member schedules its share, none waits to lead: turn leader "
            "election off (leaderElection.leaderElect: false, or --no-leader-elect)"
        )
    if config.binding.policy != "all":
        problems.append(
            "sharding: members share every node, so every bind must take its node's lock: "
            f"nodeLock.policy all (--node-lock-policy all), not {config.binding.policy!r}"
        )
    if config.binding.mode != "direct":
        problems.append(
            "sharding: members bind their pods themselves (binding: direct), not through "
            "BindRequests"
        )
    return problems
