"""Build the local control plane's binaries from their Go modules, once, into a cache.

`go install k8s.io/kubernetes/cmd/kube-apiserver@vX` cannot work: the kubernetes module
replaces its `k8s.io/*` staging modules with local directories, and `go install` refuses
modules with replace directives. So, as kubernetes-sigs/scheduler-plugins does, we generate a
small wrapper module that requires `k8s.io/kubernetes vX` and replaces every staging module
with its published `v0.<minor>.<patch>` release, the list read from that release's own go.mod.
etcd gets a wrapper `main` package over `go.etcd.io/etcd/server/v3/etcdmain`; kwok installs
as it is. `ensure_go_program` builds a small program of this repository's (the benchmarks' Go
ceiling) the same way, from its `.go` files and a generated go.mod.

Everything generated lives outside the repository, under the cache directory:

    <cache>/src/<component>-<version>/   wrapper modules
    <cache>/bin/<component>-<version>/   binaries, reused while present
    <cache>/logs/build-<component>.log   what the Go toolchain printed

Binaries are written to a temporary name and renamed into place, so an interrupted build never
leaves a binary that looks complete.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ascheduler.devcluster import versions

Progress = Callable[[str], None]

_GO_VERSION_RE = re.compile(r"go(\d+)\.(\d+)(?:\.(\d+))?")
_STAGING_REPLACE_RE = re.compile(
    r"^\s*(?:replace\s+)?(?P<module>k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/(?P=module)\s*$"
)
_GO_DIRECTIVE_RE = re.compile(r"^go\s+(\d+\.\d+(?:\.\d+)?)\s*$", re.MULTILINE)


class BuildError(RuntimeError):
    """A build step failed; `log` names the file holding the toolchain's output."""

    def __init__(self, step: str, message: str, log: Path | None = None) -> None:
        self.step = step
        self.log = log
        text = f"build step {step!r} failed: {message}"
        if log is not None:
            text += f"; read {log}"
        super().__init__(text)


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kwok: Path
    kube_controller_manager: Path
    kubectl: Path
    helm: Path
    #: The Kubernetes release these are (or will be) built from.
    release: versions.Release = versions.RELEASES[versions.DEFAULT_RELEASE]

    @property
    def kwok_stages(self) -> Path:
        """kwok's own Stage definitions (fast node/pod lifecycle), saved beside its binary."""
        return self.kwok.parent / "stages.yaml"

    def all(self) -> tuple[Path, ...]:
        return (
            self.etcd,
            self.kube_apiserver,
            self.kube_scheduler,
            self.kwok,
            self.kube_controller_manager,
            self.kubectl,
            self.helm,
        )

    @property
    def kubernetes(self) -> tuple[Path, ...]:
        """What the kubernetes module builds, all in one directory."""
        return (
            self.kube_apiserver,
            self.kube_scheduler,
            self.kube_controller_manager,
            self.kubectl,
        )

    def missing(self) -> list[Path]:
        missing = [p for p in self.all() if _missing(p)]
        if not self.kwok_stages.is_file():
            missing.append(self.kwok_stages)
        return missing


def _missing(*paths: Path) -> bool:
    return any(not os.access(p, os.X_OK) for p in paths)


#: The Stages kwokctl runs a cluster with, read from the kwok module's own kustomize tree:
#: nodes become Ready at once and heartbeat through their Lease; pods run, complete, delete.
KWOK_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def cache_dir() -> Path:
    """`$ASCHEDULER_CACHE_DIR`, else `$XDG_CACHE_HOME/ascheduler`, else `~/.cache/ascheduler`."""
    explicit = os.environ.get("ASCHEDULER_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ascheduler"


def binaries(cache: Path | None = None, release: versions.Release | None = None) -> Binaries:
    """Where a release's pinned binaries live, whether or not they are built yet (the
    release: `versions.release()`'s, from `$ASCHEDULER_KUBE_VERSION` or the default)."""
    root = (cache or cache_dir()) / "bin"
    rel = release or versions.release()
    k8s = root / f"kubernetes-{rel.kubernetes}"
    return Binaries(
        etcd=root / f"etcd-{rel.etcd}" / "etcd",
        kube_apiserver=k8s / "kube-apiserver",
        kube_scheduler=k8s / "kube-scheduler",
        kwok=root / f"kwok-{rel.kwok}" / "kwok",
        kube_controller_manager=k8s / "kube-controller-manager",
        kubectl=k8s / "kubectl",
        helm=root / f"helm-{versions.HELM_VERSION}" / "helm",
        release=rel,
    )


def staging_version(kubernetes_version: str) -> str:
    """`v1.35.4` -> `v0.35.4`: the tag the staging modules are published under."""
    match = re.fullmatch(r"v1\.(\d+)\.(\d+)", kubernetes_version)
    if match is None:
        raise ValueError(f"not a Kubernetes release version: {kubernetes_version!r}")
    return f"v0.{match[1]}.{match[2]}"


def staging_modules(kubernetes_go_mod: str) -> list[str]:
    """The modules that kubernetes' go.mod replaces with `./staging/src/<module>`."""
    found = [
        m["module"]
        for line in kubernetes_go_mod.splitlines()
        if (m := _STAGING_REPLACE_RE.match(line))
    ]
    return sorted(set(found))


def go_directive(go_mod: str) -> str:
    match = _GO_DIRECTIVE_RE.search(go_mod)
    if match is None:
        raise ValueError("go.mod has no go directive")
    return match[1]


def parse_go_version(text: str) -> tuple[int, int, int]:
    """`go1.26.8` or `1.25.0` -> (1, 26, 8)."""
    match = _GO_VERSION_RE.search(text if text.startswith("go") else f"go{text}")
    if match is None:
        raise ValueError(f"not a Go version: {text!r}")
    return int(match[1]), int(match[2]), int(match[3] or 0)


def kubernetes_wrapper_go_mod(
    *, kubernetes_version: str, go_version: str, staging: Sequence[str]
) -> str:
    pinned = staging_version(kubernetes_version)
    lines = [
        "module ascheduler.local/kubernetes",
        "",
        f"go {go_version}",
        "",
        f"require k8s.io/kubernetes {kubernetes_version}",
        "",
        "replace (",
        *(f"\t{module} => {module} {pinned}" for module in staging),
        ")",
        "",
    ]
    return "\n".join(lines)


_KUBERNETES_TOOLS_GO = """//go:build tools

// Package tools pins the commands this module builds.
package tools

import (
\t_ "k8s.io/kubernetes/cmd/kube-apiserver"
\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"
\t_ "k8s.io/kubernetes/cmd/kube-scheduler"
\t_ "k8s.io/kubernetes/cmd/kubectl"
)
"""

_ETCD_MAIN_GO = """// Command etcd is etcd's own entry point, built from its published module.
package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


def kubernetes_ldflags(kubernetes_version: str) -> str:
    """Version stamps so `--version` reports the release, as Kubernetes' own build does."""
    major, minor, _ = (int(x) for x in kubernetes_version.lstrip("v").split("."))
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={kubernetes_version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


class _Builder:
    def __init__(self, cache: Path, progress: Progress) -> None:
        self.cache = cache
        self.progress = progress
        self.logs = cache / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        go = shutil.which("go")
        if go is None:
            raise BuildError(
                "go toolchain",
                "`go` is not on PATH; install Go (>= 1.25) to build the local control plane",
            )
        self.go = go
        env = dict(os.environ)
        env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-buildvcs=false -mod=mod")
        self.env = env

    def run(
        self,
        step: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        log: Path,
        env: Mapping[str, str] | None = None,
    ) -> str:
        with log.open("a") as out:
            out.write(f"\n$ (cd {cwd} && {' '.join(argv)})\n")
            out.flush()
            proc = subprocess.run(
                list(argv),
                cwd=cwd,
                env=dict(env or self.env),
                stdout=subprocess.PIPE,
                stderr=out,
                text=True,
                check=False,
            )
            out.write(proc.stdout)
        if proc.returncode != 0:
            raise BuildError(step, f"`{' '.join(argv)}` exited with {proc.returncode}", log)
        return proc.stdout

    def go_version(self) -> tuple[int, int, int]:
        out = subprocess.run(
            [self.go, "env", "GOVERSION"], env=self.env, capture_output=True, text=True, check=False
        )
        return parse_go_version(out.stdout.strip())

    def require_go(self, step: str, needed: str) -> None:
        have = self.go_version()
        if have < parse_go_version(needed):
            raise BuildError(
                step,
                f"needs Go >= {needed}, found {'.'.join(map(str, have))} (GOTOOLCHAIN=local)",
            )

    @contextmanager
    def staged(self, dest: Path) -> Iterator[Path]:
        """A scratch directory whose files are moved into `dest` only if the block succeeds."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{dest.name}-", dir=dest.parent) as tmp:
            yield Path(tmp)
            dest.mkdir(exist_ok=True)
            for item in Path(tmp).iterdir():
                os.replace(item, dest / item.name)

    def build_kubernetes(self, bins: Binaries) -> None:
        version = bins.release.kubernetes
        step = f"kubernetes {version}"
        log = self._fresh_log(f"kubernetes-{version}")
        src = self.cache / "src" / f"kubernetes-{version}"
        src.mkdir(parents=True, exist_ok=True)
        self.progress(
            f"building kube-apiserver, kube-scheduler, kube-controller-manager and kubectl "
            f"{version} (minutes, once)"
        )
        info = json.loads(
            self.run(
                f"{step}: download",
                [self.go, "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
                cwd=src,
                log=log,
            )
        )
        upstream = Path(info["GoMod"]).read_text()
        go_version = go_directive(upstream)
        self.require_go(step, go_version)
        staging = staging_modules(upstream)
        if not staging:
            raise BuildError(step, f"found no staging replace directives in {info['GoMod']}", log)
        (src / "go.mod").write_text(
            kubernetes_wrapper_go_mod(
                kubernetes_version=version, go_version=go_version, staging=staging
            )
        )
        (src / "tools.go").write_text(_KUBERNETES_TOOLS_GO)
        self.run(f"{step}: go mod tidy", [self.go, "mod", "tidy"], cwd=src, log=log)
        with self.staged(bins.kube_apiserver.parent) as out:
            self.run(
                f"{step}: go build",
                [
                    self.go,
                    "build",
                    "-trimpath",
                    "-ldflags",
                    kubernetes_ldflags(version),
                    "-o",
                    f"{out}/",
                    "k8s.io/kubernetes/cmd/kube-apiserver",
                    "k8s.io/kubernetes/cmd/kube-scheduler",
                    "k8s.io/kubernetes/cmd/kube-controller-manager",
                    "k8s.io/kubernetes/cmd/kubectl",
                ],
                cwd=src,
                log=log,
            )

    def build_etcd(self, bins: Binaries) -> None:
        version = bins.release.etcd
        step = f"etcd {version}"
        log = self._fresh_log(f"etcd-{version}")
        src = self.cache / "src" / f"etcd-{version}"
        src.mkdir(parents=True, exist_ok=True)
        self.progress(f"building etcd {version}")
        (src / "go.mod").write_text(
            "module ascheduler.local/etcd\n\ngo 1.25.0\n\n"
            f"require go.etcd.io/etcd/server/v3 {version}\n"
        )
        (src / "main.go").write_text(_ETCD_MAIN_GO)
        self.run(f"{step}: go mod tidy", [self.go, "mod", "tidy"], cwd=src, log=log)
        with self.staged(bins.etcd.parent) as out:
            self.run(
                f"{step}: go build",
                [
                    self.go,
                    "build",
                    "-trimpath",
                    "-ldflags",
                    f"-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA={version}",
                    "-o",
                    str(out / "etcd"),
                    ".",
                ],
                cwd=src,
                log=log,
            )

    def build_kwok(self, bins: Binaries) -> None:
        version = bins.release.kwok
        step = f"kwok {version}"
        log = self._fresh_log(f"kwok-{version}")
        self.progress(f"building kwok {version}")
        with self.staged(bins.kwok.parent) as out:
            self._go_install(
                step,
                out,
                log,
                f"sigs.k8s.io/kwok/cmd/kwok@{version}",
                f"sigs.k8s.io/kwok/pkg/consts.Version={version}",
            )
            modcache = self.run(
                f"{step}: go env", [self.go, "env", "GOMODCACHE"], cwd=out, log=log
            ).strip()
            module = Path(modcache) / f"sigs.k8s.io/kwok@{version}"
            documents = []
            for rel in KWOK_STAGE_FILES:
                try:
                    documents.append((module / rel).read_text().strip())
                except OSError as exc:
                    raise BuildError(
                        f"{step}: stages", f"cannot read {module / rel}: {exc}", log
                    ) from exc
            (out / "stages.yaml").write_text("\n---\n".join(documents) + "\n")

    def build_helm(self, bins: Binaries) -> None:
        version = versions.HELM_VERSION
        step = f"helm {version}"
        log = self._fresh_log("helm")
        self.progress(f"building helm {version}")
        with self.staged(bins.helm.parent) as out:
            self._go_install(
                step,
                out,
                log,
                f"helm.sh/helm/v4/cmd/helm@{version}",
                f"helm.sh/helm/v4/internal/version.version={version}",
            )

    def _go_install(self, step: str, out: Path, log: Path, package: str, stamp: str) -> None:
        """`go install PACKAGE@VERSION` into `out`, stripped, with `-X STAMP` (its version)."""
        env = dict(self.env, GOBIN=str(out), GOFLAGS="-buildvcs=false", CGO_ENABLED="0")
        self.run(
            f"{step}: go install",
            [self.go, "install", "-trimpath", "-ldflags", f"-s -w -X {stamp}", package],
            cwd=out,
            log=log,
            env=env,
        )

    def build_program(
        self, name: str, sources: Mapping[str, str], requires: Mapping[str, str], binary: Path
    ) -> None:
        step = f"{name} ({binary.parent.name})"
        log = self._fresh_log(name)
        src = self.cache / "src" / binary.parent.name
        src.mkdir(parents=True, exist_ok=True)
        self.progress(f"building {name}")
        for file_name, text in sources.items():
            (src / file_name).write_text(text)
        lines = "".join(f"\t{module} {version}\n" for module, version in sorted(requires.items()))
        (src / "go.mod").write_text(
            f"module ascheduler.local/{name}\n\ngo 1.25.0\n\nrequire (\n{lines})\n"
        )
        self.run(f"{step}: go mod tidy", [self.go, "mod", "tidy"], cwd=src, log=log)
        with self.staged(binary.parent) as out:
            self.run(
                f"{step}: go build",
                [self.go, "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / name), "."],
                cwd=src,
                log=log,
            )

    def _fresh_log(self, component: str) -> Path:
        log = self.logs / f"build-{component}.log"
        log.write_text("")
        return log


def ensure_built(
    *,
    cache: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
    release: versions.Release | None = None,
) -> Binaries:
    """Build whatever pinned binary of `release` (`versions.release()`'s by default) is
    missing (or all, with `force`); return their paths.

    Concurrent callers (a `make` target and a pytest session, say) serialise on a lock file,
    and the second finds the first one's binaries. A release whose binaries are all there
    takes no lock (each is put in place whole, by a rename): a plane of a built release
    starts while another release builds.
    """
    root = cache or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    bins = binaries(root, release)
    if not force and not bins.missing():
        return bins
    say = progress or (lambda _msg: None)
    with (root / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        builder: _Builder | None = None

        def get_builder() -> _Builder:
            nonlocal builder
            if builder is None:
                builder = _Builder(root, say)
            return builder

        if force or _missing(*bins.kubernetes):
            get_builder().build_kubernetes(bins)
        if force or _missing(bins.etcd):
            get_builder().build_etcd(bins)
        if force or _missing(bins.kwok) or not bins.kwok_stages.is_file():
            get_builder().build_kwok(bins)
        if force or _missing(bins.helm):
            get_builder().build_helm(bins)
    if missing := bins.missing():
        raise BuildError("install", f"binaries still missing after the build: {missing}")
    return bins


def ensure_go_program(
    name: str,
    source_dir: Path,
    requires: Mapping[str, str],
    *,
    cache: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """The binary built from the `.go` files in `source_dir` (package main) with the modules
    `requires` names at those versions; built once per content, under the same lock as the
    plane's binaries, and reused while its sources and versions are unchanged."""
    sources = {p.name: p.read_text() for p in sorted(source_dir.glob("*.go"))}
    if not sources:
        raise BuildError(name, f"no .go files in {source_dir}")
    digest = hashlib.sha256(
        json.dumps([sources, sorted(requires.items())], sort_keys=True).encode()
    ).hexdigest()[:12]
    root = cache or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    binary = root / "bin" / f"{name}-{digest}" / name
    with (root / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _missing(binary):
            _Builder(root, progress or (lambda _msg: None)).build_program(
                name, sources, requires, binary
            )
    if _missing(binary):
        raise BuildError(name, f"{binary} still missing after the build")
    return binary
