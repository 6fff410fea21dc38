"""Wrapper-module generation, the cache of built programs and the build's error paths (a fake
`go` stands in: no Go build runs here)."""

from __future__ import annotations

import fcntl
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ascheduler.devcluster import build
from ascheduler.devcluster.build import BuildError

KUBERNETES_GO_MOD = """module k8s.io/kubernetes

go 1.25.0

require (
\tgithub.com/foo/bar v1.2.3
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kube-scheduler => ./staging/src/k8s.io/kube-scheduler
\tgithub.com/other/mod => github.com/fork/mod v1.0.0
)

replace k8s.io/kms => ./staging/src/k8s.io/kms
"""


def test_staging_modules_are_read_from_block_and_single_line_replaces() -> None:
    assert build.staging_modules(KUBERNETES_GO_MOD) == [
        "k8s.io/api",
        "k8s.io/client-go",
        "k8s.io/kms",
        "k8s.io/kube-scheduler",
    ]


@pytest.mark.parametrize(
    ("release", "staging"),
    [("v1.35.4", "v0.35.4"), ("v1.34.0", "v0.34.0"), ("v1.36.12", "v0.36.12")],
)
def test_staging_version(release: str, staging: str) -> None:
    assert build.staging_version(release) == staging


@pytest.mark.parametrize("bad", ["1.35.4", "v2.0.0", "v1.35", "v1.35.4-rc.1"])
def test_staging_version_rejects_non_releases(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes release"):
        build.staging_version(bad)


def test_wrapper_go_mod_requires_kubernetes_and_pins_every_staging_module() -> None:
    text = build.kubernetes_wrapper_go_mod(
        kubernetes_version="v1.35.4",
        go_version="1.25.0",
        staging=build.staging_modules(KUBERNETES_GO_MOD),
    )
    assert "require k8s.io/kubernetes v1.35.4" in text
    assert "\ngo 1.25.0\n" in text
    assert "\tk8s.io/client-go => k8s.io/client-go v0.35.4" in text
    assert "\tk8s.io/kms => k8s.io/kms v0.35.4" in text
    assert "github.com/other/mod" not in text


def test_go_versions_compare_numerically() -> None:
    assert build.parse_go_version("go1.26.8") == (1, 26, 8)
    assert build.parse_go_version("1.25.0") == (1, 25, 0)
    assert build.parse_go_version("go1.9") < build.parse_go_version("1.25")
    assert build.go_directive(KUBERNETES_GO_MOD) == "1.25.0"


def test_ldflags_stamp_both_version_packages() -> None:
    flags = build.kubernetes_ldflags("v1.35.4")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.35.4" in flags
        assert f"-X {pkg}.gitMajor=1" in flags
        assert f"-X {pkg}.gitMinor=35" in flags


def test_missing_go_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(BuildError, match="`go` is not on PATH") as err:
        build.ensure_built(cache=tmp_path / "cache")
    assert err.value.step == "go toolchain"


def test_cached_binaries_are_reused_without_a_toolchain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    bins = build.binaries(cache)
    for path in bins.all():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    bins.kwok_stages.write_text("kind: Stage\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # a build would fail: there is no go
    assert build.ensure_built(cache=cache) == bins
    # Another release building holds the lock: a built one is not kept waiting behind it.
    pool = ThreadPoolExecutor(1)
    try:
        with (cache / "build.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            returned = pool.submit(build.ensure_built, cache=cache)
            assert returned.result(timeout=60) == bins
    finally:
        pool.shutdown()  # the lock is let go first: a call waiting on it ends


def test_a_failing_go_command_names_the_step_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    go = fake_bin / "go"
    go.write_text(
        '#!/bin/sh\nif [ "$1 $2" = "env GOVERSION" ]; then echo go1.26.0; exit 0; fi\n'
        'echo "module lookup disabled" >&2\nexit 1\n'
    )
    go.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake_bin))
    with pytest.raises(BuildError) as err:
        build.ensure_built(cache=tmp_path / "cache")
    assert "download" in err.value.step
    assert err.value.log is not None
    assert "module lookup disabled" in err.value.log.read_text()
    assert not build.binaries(tmp_path / "cache").kube_apiserver.exists()


def test_cache_dir_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCHEDULER_CACHE_DIR", str(tmp_path / "explicit"))
    assert build.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("ASCHEDULER_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_dir() == tmp_path / "xdg" / "ascheduler"


FAKE_GO = """#!/bin/sh
echo "$@" >> "$GO_CALLS"
if [ "$1" = "build" ]; then
    while [ "$#" -gt 0 ]; do
        if [ "$1" = "-o" ]; then printf '#!/bin/sh\\n' > "$2"; chmod +x "$2"; fi
        shift
    done
fi
exit 0
"""


def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    go = fake_bin / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    calls = tmp_path / "calls"
    monkeypatch.setenv("PATH", f"{fake_bin}:/usr/bin:/bin")
    monkeypatch.setenv("GO_CALLS", str(calls))
    return calls


def test_a_go_program_is_built_once_per_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_go(tmp_path, monkeypatch)
    source = tmp_path / "prog"
    source.mkdir()
    (source / "main.go").write_text("package main\n\nfunc main() {}\n")
    cache = tmp_path / "cache"
    requires = {"k8s.io/client-go": "v0.35.4"}
    binary = build.ensure_go_program("prog", source, requires, cache=cache)
    assert binary.name == "prog"
    assert binary.is_file()
    go_mod = (cache / "src" / binary.parent.name / "go.mod").read_text()
    assert "module ascheduler.local/prog" in go_mod
    assert "\tk8s.io/client-go v0.35.4\n" in go_mod
    assert [line.split()[0] for line in calls.read_text().splitlines()] == ["mod", "build"]

    calls.unlink()
    assert build.ensure_go_program("prog", source, requires, cache=cache) == binary
    assert not calls.exists()  # reused: no toolchain call

    (source / "main.go").write_text("package main\n\nfunc main() { println() }\n")
    changed = build.ensure_go_program("prog", source, requires, cache=cache)
    assert changed != binary
    assert build.ensure_go_program(
        "prog", source, {"k8s.io/client-go": "v0.36.0"}, cache=cache
    ) not in (
        binary,
        changed,
    )


def test_a_go_program_without_sources_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"no \.go files"):
        build.ensure_go_program("prog", tmp_path, {}, cache=tmp_path / "cache")
