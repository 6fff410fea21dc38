"""The cyclic garbage collector, set for a long-lived process with a large, stable heap.

A scheduler's heap is mostly its cache (every pod and node, their parsed records, the
plugins' indexes), built once by the informers' lists and then living as long as the
process. CPython's defaults suit the opposite: its first generation is collected every 700
allocations, and each full collection walks every object ever kept. So once a process is up
it collects young objects less often (`tune`) and moves what it had when its informers
synced out of the collector's sight (`freeze`). Reference counting still frees any of it.
"""

from __future__ import annotations

import gc
from typing import Final

#: The first generation's threshold (CPython's is 700); the older generations keep
#: CPython's ratios to it.
YOUNG_THRESHOLD: Final = 50_000


def tune() -> None:
    """Collect young objects every `YOUNG_THRESHOLD` allocations at the least."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)


def freeze() -> None:
    """Collect once, then leave everything alive now out of later collections."""
    gc.collect()
    gc.freeze()
