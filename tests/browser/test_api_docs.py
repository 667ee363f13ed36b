"""The API docs in a real browser: Swagger UI from our own static files, under the CSP."""
from __future__ import annotations

import pytest

pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume synchronous iterators"),
]


def test_swagger_ui_renders_every_operation_with_no_csp_violation_and_no_outside_request(page, server):
    violations, outside = [], []
    page.on("console", lambda message: violations.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.on("request", lambda request: outside.append(request.url)
            if not request.url.startswith((server.url, "data:")) else None)
    page.goto(f"{server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock", timeout=15_000)
    assert page.locator(".swagger-ui .opblock").count() >= 20
    assert violations == [] and outside == []
    assert page.script_errors == []
