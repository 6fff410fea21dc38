"""`python -m benchmarks <name> ...`"""

from __future__ import annotations

import sys

from benchmarks import (
    algorithm,
    apicost,
    client,
    cpuprofile,
    explain,
    instances,
    locks,
    memory,
    report,
    run,
    sharding,
)

COMMANDS = {
    "algorithm": algorithm.main,
    "apicost": apicost.main,
    "client": client.main,
    "explain": explain.main,
    "instances": instances.main,
    "locks": locks.main,
    "memory": memory.main,
    "profile": cpuprofile.main,
    "report": report.main,
    "run": run.main,
    "sharding": sharding.main,
}


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        print(f"usage: python -m benchmarks {{{','.join(COMMANDS)}}} [--help]", file=sys.stderr)
        return 2
    try:
        return COMMANDS[sys.argv[1]](sys.argv[2:])
    except KeyboardInterrupt:
        # The run's clean-up has run (its namespace, nodes and plane are gone) and what the
        # repeats finished before it is written: no traceback for a Ctrl-C.
        print("\ninterrupted", file=sys.stderr)
        return 130


raise SystemExit(main())
