"""Lock settings: the timeout from the flag or the environment, and what is refused."""

from __future__ import annotations

import pytest

from ascheduler.locks import LockSettings
from ascheduler.locks.settings import DEFAULT_TIMEOUT, EXPIRE_ENV


def test_timeout_from_env_and_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXPIRE_ENV, raising=False)
    assert LockSettings.from_env().timeout == DEFAULT_TIMEOUT
    monkeypatch.setenv(EXPIRE_ENV, "2m")
    assert LockSettings.from_env().timeout == 120.0
    assert LockSettings.from_env(timeout=7.0).timeout == 7.0  # the flag wins
    monkeypatch.setenv(EXPIRE_ENV, "soon")
    with pytest.raises(ValueError, match="not a duration"):
        LockSettings.from_env()


@pytest.mark.parametrize("bad", ["0", "0s", "0.0"])
def test_a_timeout_of_zero_is_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(EXPIRE_ENV, bad)
    with pytest.raises(ValueError, match="must be positive"):
        LockSettings.from_env()
    with pytest.raises(ValueError, match="must be positive"):
        LockSettings(timeout=-1.0)


@pytest.mark.parametrize("bad", ["-5", "-5s"])
def test_a_negative_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    monkeypatch.setenv(EXPIRE_ENV, bad)
    with pytest.raises(ValueError, match=r"must be positive|not a duration"):
        LockSettings.from_env()
