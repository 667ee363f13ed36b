"""Fixtures and Hypothesis profiles for the context engine tests (no Django needed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

REPO = Path(__file__).resolve().parents[2]
# CI clones the repository into another folder with shared/ beside it, so the shared
# data is found relative to the repository, never by an absolute path.
SHARED = REPO.parent / "shared"
CORPUS_DIR = SHARED / "corpus"

# "ci" runs the main property 500 times; "dev" (the default) keeps the loop fast. CI ran
# 2,000 (and 1,000 for the compaction properties) until the suite passed 15 minutes: the
# examples past the first few hundred found nothing new and cost about 100 s a run.
settings.register_profile(
    "ci", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """The shared corpus of real transcripts; tests using it skip when it is absent."""
    if not CORPUS_DIR.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS_DIR}")
    return CORPUS_DIR


@pytest.fixture(scope="session")
def o200k():
    """A tiktoken o200k_base estimator, from the vocabulary shipped in ``context/vocab``."""
    from context.estimators import tiktoken_estimator

    return tiktoken_estimator("o200k_base")


# The project's tests/conftest.py has autouse fixtures that need Django (a database, the
# run dispatcher). The engine needs neither, and this suite must run with
# ``-p no:django``; fixtures resolve nearest-first, so these no-ops stand in for them here.
@pytest.fixture(autouse=True)
def dispatched_runs() -> list:
    """The engine dispatches no runs; nothing to record."""
    return []


@pytest.fixture(scope="session", autouse=True)
def _close_stray_connections() -> None:
    """The engine opens no database connections; nothing to close."""
    return None


@pytest.fixture(autouse=True)
def dispatched_compactions() -> list:
    """The engine dispatches no compactions; nothing to record."""
    return []


@pytest.fixture(autouse=True)
def _fresh_throttles() -> None:
    """The engine has no rate limits; nothing to clear."""
    return None
