"""What every NodeLocks test here shares."""

from __future__ import annotations

import pytest

from ascheduler.locks import acquire


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retry pauses of a millisecond: these tests count attempts, not time."""
    monkeypatch.setattr(acquire, "RETRY_DELAY", 0.001)
