"""The defaults of every setting, as kube-scheduler's `apis/config/v1/defaults.go` keeps
its: one place each value is written, read by the types (`SchedulerConfig`'s field defaults),
by the file's decoding (a field left out) and by the flags' help.

ascheduler's own section (`ascheduler:`) has defaults of its own; the node locks' come with
their settings (`LockSettings`, `BindSettings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

API_VERSION: Final = "kubescheduler.config.k8s.io/v1"
KIND: Final = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME: Final = "ascheduler"
JSON_CONTENT: Final = "application/json"

#: kube-scheduler's defaults for the fields it and ascheduler share.
PERCENTAGE_OF_NODES_TO_SCORE: Final = 0
PARALLELISM: Final = 16
POD_INITIAL_BACKOFF_SECONDS: Final = 1
POD_MAX_BACKOFF_SECONDS: Final = 10
BURST: Final = 100
LEASE_DURATION: Final = 15.0
RENEW_DEADLINE: Final = 10.0
RETRY_PERIOD: Final = 2.0
LEASE_NAME: Final = "ascheduler"
LEASE_NAMESPACE: Final = "kube-system"

#: ascheduler's own section.
BINDING_CONCURRENCY: Final = 256
#: The write client's connections by default (`ascheduler.writeConnections`).
WRITE_CONNECTIONS: Final = 128
ANNOTATION_PREFIX: Final = "ascheduler.io"
DEBUG_ENDPOINTS: Final = "off"
#: How long a graceful stop waits for binding cycles in flight.
SHUTDOWN_GRACE: Final = 30.0

#: What `ascheduler run` without a file starts from: kube-scheduler's defaults, but leader
#: election off unless `--leader-elect` (a second scheduler usually runs one replica).
NO_FILE: Final[Mapping[str, Any]] = {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "leaderElection": {"leaderElect": False},
}
