from __future__ import annotations

import pytest

from ascheduler.devcluster import versions
from ascheduler.devcluster.versions import RELEASES, UnsupportedRelease, release


@pytest.mark.parametrize("given", ["1.36", "v1.36", "1.36.3", "v1.36.3", " 1.36 "])
def test_a_release_is_named_by_its_minor_or_its_exact_version(given: str) -> None:
    assert release(given) == RELEASES["1.36"]
    assert release(given).minor == "1.36"


@pytest.mark.parametrize("given", ["1.34", "1.36.2", "v1.38.0", "2.0", "latest", ""])
def test_an_unsupported_release_is_refused_naming_the_supported_ones(given: str) -> None:
    with pytest.raises(UnsupportedRelease) as err:
        release(given)
    for supported in RELEASES.values():
        assert supported.kubernetes in str(err.value)


def test_the_environment_names_the_release_when_none_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(versions.RELEASE_ENV, "1.37")
    assert release() == RELEASES["1.37"]
    monkeypatch.delenv(versions.RELEASE_ENV)
    assert release() == RELEASES[versions.DEFAULT_RELEASE]


def test_each_release_is_listed_under_its_own_minor() -> None:
    assert all(minor == r.minor for minor, r in RELEASES.items())
