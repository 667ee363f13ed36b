"""Fixtures of the catalog tests: a started fake provider on a real loopback socket."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.fake_provider import FakeProvider


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server
