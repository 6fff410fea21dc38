"""A real Kubernetes control plane on loopback, for tests, the demo and benchmarks.

Built from Go modules with the local toolchain (`build`), run from a state directory (`plane`),
populated with kwok-managed fake nodes (`nodes`). The scheduler's runtime never imports this.
"""

from ascheduler.devcluster.build import Binaries, BuildError, ensure_built
from ascheduler.devcluster.plane import ControlPlane, PlaneError, PlaneState

__all__ = ["Binaries", "BuildError", "ControlPlane", "PlaneError", "PlaneState", "ensure_built"]
