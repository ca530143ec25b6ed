"""Shared pytest fixtures for the collection's unit tests."""

import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
REALDATA = REPO.parent / "shared" / "realdata"


@pytest.fixture(scope="session")
def realdata():
    """Path of ../shared/realdata; tests that use it are skipped cleanly when it is absent."""
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not present on this machine")
    return REALDATA
