"""kube-scheduler's secure serving flags on `ascheduler run` and `binder`, and the rules
of the plain listener: what each flag sets, what is refused and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ascheduler.auth import DEFAULT_ALWAYS_ALLOW_PATHS
from ascheduler.binding.service import BINDER_SECURE_PORT
from ascheduler.cli import _config_of, build_parser
from ascheduler.config import SchedulerConfig
from ascheduler.http import DEFAULT_SECURE_PORT


def config_of(*argv: str, command: str = "run") -> SchedulerConfig | None:
    args = build_parser().parse_args([command, *argv])
    port = BINDER_SECURE_PORT if command == "binder" else DEFAULT_SECURE_PORT
    resolved = _config_of(args, port)
    return None if resolved is None else resolved[0]


def test_by_default_the_secure_port_is_on_everywhere_and_the_plain_listener_off() -> None:
    config = config_of()
    assert config is not None
    secure = config.secure_serving
    assert (secure.bind_address, secure.port) == ("0.0.0.0", 10259)
    assert secure.auth.always_allow_paths == DEFAULT_ALWAYS_ALLOW_PATHS
    assert (secure.auth.token_ttl, secure.auth.allowed_ttl, secure.auth.denied_ttl) == (10, 10, 10)
    assert secure.authentication_kubeconfig is None  # the scheduler's own client
    assert config.http_address is None
    binder = config_of(command="binder")
    assert binder is not None
    assert binder.secure_serving.port == 10260
    assert binder.http_address is None


def test_the_flags_set_what_kube_scheduler_s_set(tmp_path: Path) -> None:
    authn, authz = tmp_path / "authn.kubeconfig", tmp_path / "authz.kubeconfig"
    config = config_of(
        "--bind-address=127.0.0.1",
        "--secure-port=8443",
        f"--cert-dir={tmp_path}",
        f"--authentication-kubeconfig={authn}",
        f"--authorization-kubeconfig={authz}",
        "--authorization-always-allow-paths=/healthz,/metrics, /debug/*",
        "--authentication-token-webhook-cache-ttl=2m",
        "--authorization-webhook-cache-authorized-ttl=30s",
        "--authorization-webhook-cache-unauthorized-ttl=0",
        "--http-address=127.0.0.1:10251",
    )
    assert config is not None
    secure = config.secure_serving
    assert (secure.bind_address, secure.port) == ("127.0.0.1", 8443)
    assert secure.certificate.cert_dir == str(tmp_path)
    assert (secure.authentication_kubeconfig, secure.authorization_kubeconfig) == (
        str(authn),
        str(authz),
    )
    assert secure.auth.always_allow_paths == ("/healthz", "/metrics", "/debug/*")
    assert (secure.auth.token_ttl, secure.auth.allowed_ttl, secure.auth.denied_ttl) == (
        120,
        30,
        0,
    )
    assert config.http_address == "127.0.0.1:10251"
    off = config_of("--secure-port=0", command="binder")
    assert off is not None
    assert off.secure_serving.port == 0


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--http-address", "0.0.0.0:10251"], "only on a loopback address"),
        (["--http-address", "10.0.0.1:10251"], "--allow-non-loopback-http"),
        (["--secure-port", "70000"], "--secure-port: must be in 0..65535"),
        (["--bind-address", "example.com"], "--bind-address: not an IP address"),
        (["--tls-cert-file", "/nonexistent.crt"], "give both or neither"),
        (
            ["--tls-cert-file", "/nonexistent.crt", "--tls-private-key-file", "/nonexistent.key"],
            "--tls-cert-file: no such file",
        ),
        (["--authorization-always-allow-paths", "/a*b"], "only a trailing * is allowed"),
        (["--authentication-token-webhook-cache-ttl", "soon"], "not a duration"),
        (["--secure-port", "0", "--debug-endpoints", "authorized"], "needs one"),
        (["--debug-endpoints", "loopback"], "needs one (--http-address 127.0.0.1:PORT)"),
    ],
)
def test_bad_serving_flags_are_refused_by_name(argv: list[str], problem: str) -> None:
    command = [sys.executable, "-m", "ascheduler", "run", *argv]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert result.returncode == 2
    assert problem in result.stderr


def test_the_plain_listener_goes_elsewhere_only_when_allowed(tmp_path: Path) -> None:
    config = config_of("--http-address", "0.0.0.0:10251", "--allow-non-loopback-http")
    assert config is not None
    assert config.http_address == "0.0.0.0:10251"
    file = tmp_path / "config.yaml"
    file.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "ascheduler:\n  httpAddress: 0.0.0.0:10251\n  allowNonLoopbackHTTP: true\n"
    )
    from_file = config_of("--config", str(file))
    assert from_file is not None
    assert from_file.allow_non_loopback_http
    assert config_of("--config", str(file), "--no-allow-non-loopback-http") is None
