"""`KubeSchedulerConfiguration` (kubescheduler.config.k8s.io/v1) for ascheduler, organised as
kube-scheduler's `apis/config` is: the types (`types`), the v1 defaults (`defaults`), the
strict decoding of a file (`decode`, with the profiles' plugin sets in `profiles`), the
validation (`validation`), the way back to a document (`encode`) and the command-line flags
(`flags`, one table from which the options, their values and their application come).

Read as kube-scheduler of the release ascheduler behaves as reads it (the one the flags name,
else the default release; checked again at the API server's by `release_problems`): a file it
accepts is accepted, with the same effective profiles, and one it refuses is refused, every
problem reported with its path
(`profiles[0].plugins.score.enabled[2].name: unknown plugin "Foo"`), all of them at once
(docs/configuration.md; `tests/integration/config` compares the two on a corpus).
ascheduler's own settings live in one top-level section, `ascheduler:`.

Plugins merge onto the default profile as kube-scheduler's do (`profiles`): a
`multiPoint.enabled` entry naming a default plugin replaces it (weight included: left out,
0, read as 1), `<point>.disabled` keeps plugins away from one point (`*`: all), and
`<point>.enabled` adds plugins to one point.

Fields kube-scheduler accepts that change nothing here are accepted: `parallelism` (no worker
pool), `enableProfiling` / `enableContentionProfiling` (no pprof), content types (JSON
always), and `delayCacheUntilActive`: ascheduler always fills its informers' caches only once
it leads (its `true`), whatever the file says; `false`, kube-scheduler's warm standby, is not
honoured (a standby keeps no watches, and lists the cluster when it takes over): an
instance that takes node locks joins its peers' member Leases before its informers list the
cluster (`locks.members`), and a standby, binding nothing, must not join.
"""

from ascheduler.config.decode import load, parse, read, release_problems
from ascheduler.config.defaults import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    JSON_CONTENT,
    KIND,
    NO_FILE,
    WRITE_CONNECTIONS,
)
from ascheduler.config.encode import to_document
from ascheduler.config.flags import FLAGS, Flag, Overrides, add_flags, apply, resolve
from ascheduler.config.types import LeaderElection, SchedulerConfig
from ascheduler.config.validation import (
    debug_problem,
    plain_problem,
    secure_problems,
    sharding_problems,
)

__all__ = [
    "API_VERSION",
    "DEFAULT_SCHEDULER_NAME",
    "FLAGS",
    "JSON_CONTENT",
    "KIND",
    "NO_FILE",
    "WRITE_CONNECTIONS",
    "Flag",
    "LeaderElection",
    "Overrides",
    "SchedulerConfig",
    "add_flags",
    "apply",
    "debug_problem",
    "load",
    "parse",
    "plain_problem",
    "read",
    "release_problems",
    "resolve",
    "secure_problems",
    "sharding_problems",
    "to_document",
]
