"""An async HTTP request searches for no module (issue #29).

httpcore asks ``sniffio`` which event loop runs every async request it makes (the MCP
SDK's client of a tool server over HTTP, the load run's users), several times a request;
without the package installed, each ask was a failed import: a walk of ``sys.path`` of
about 34 µs. The package is a dependency so the import is found once.
"""
from __future__ import annotations

import asyncio
import sys

import httpx

from tests.fakes.fake_provider import FakeProvider, JSONResponse


class _Searches:
    """A finder first on ``sys.meta_path`` that only notes what the import system looks for."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name, path=None, target=None):
        self.names.append(name)
        return None  # the next finder decides


def test_async_requests_search_for_no_module():
    async def three_requests(url: str) -> list[int]:
        async with httpx.AsyncClient(trust_env=False) as client:
            return [(await client.get(url)).status_code for _ in range(3)]

    with FakeProvider(lambda request: JSONResponse({"ok": True})) as fake:
        asyncio.run(three_requests(fake.base_url + "/health"))  # whatever a first request imports, once
        searches = _Searches()
        sys.meta_path.insert(0, searches)
        try:
            codes = asyncio.run(three_requests(fake.base_url + "/health"))
        finally:
            sys.meta_path.remove(searches)
    assert codes == [200, 200, 200]
    assert searches.names == [], f"module searches during async requests: {sorted(set(searches.names))}"
