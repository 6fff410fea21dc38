"""One fake clock for every unit test that needs time to move without sleeping."""

from __future__ import annotations


class FakeClock:
    """Time that moves only when a test says so; both a queue clock (`now()`) and a plain
    callable (`clock()`), as node locks take one."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
