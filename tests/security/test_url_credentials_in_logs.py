"""A key pasted into a base URL is in no log line (issue #44 item 12, LOOP-8, CAT-6).

httpx logged every request's URL at INFO in the web process, so a discovery against
``http://host/v1?key=sk-…`` wrote the key to the log — a key the platform does not know as
one (the API key field may be empty), so the secrets filter could not find it. Discovery runs
here against the loopback fake provider, through the API, with every level of every logger
captured (pytest's capture, and the console handler ``settings.LOGGING`` installs).
"""
from __future__ import annotations

import logging

import pytest
from rest_framework.test import APIClient

from core.log_redaction import SecretsFilter, url_credentials_scrub
from tests.fakes.fake_provider import fake_provider, models_list, route  # noqa: F401
from tests.security.leaks import leaks, process_log

pytestmark = pytest.mark.django_db

PASTED = "sk-pasted-into-the-url-0042"


@pytest.fixture
def every_log(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


@pytest.mark.parametrize("shape", ["query", "user and password"])
def test_a_discovery_with_a_key_in_its_base_url_logs_no_key(alice, space, fake_provider, every_log, shape):
    fake_provider.handler = route({"GET /v1/models": models_list(["qwen3"])})
    host = fake_provider.base_url.split("://", 1)[1]
    base_url = (f"{fake_provider.base_url}?key={PASTED}" if shape == "query"
                else f"http://alice:{PASTED}@{host}")
    client = APIClient()
    client.force_authenticate(alice)
    with process_log() as written:
        response = client.post("/api/models/discover", {"provider": "openai_compatible", "base_url": base_url},
                               format="json")
    assert response.status_code in {200, 400, 502}, response.content
    if shape == "query":  # it was sent: the fake saw the request the log would have named
        assert fake_provider.requests and PASTED in str(fake_provider.requests[0].query)
    logged = [record.getMessage() + str(record.exc_text or "") for record in every_log.records]
    assert leaks({"captured log": logged, "process log": written.getvalue(), "answer": response.json()},
                 PASTED) == {}


def test_the_log_filter_takes_credentials_out_of_any_url_a_record_carries():
    record = logging.LogRecord("lib", logging.ERROR, __file__, 1, "GET %s failed, then %s", (
        f"https://bob:{PASTED}@api.example.com/v1?key={PASTED}&model=x#token={PASTED}",
        f"redis://:{PASTED}@cache:6379/0"), None)
    try:
        raise ValueError(f"could not reach https://api.example.com/v1?api_key={PASTED}")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    SecretsFilter().filter(record)
    text = logging.Formatter().format(record)
    assert PASTED not in text and record.exc_info is None
    assert ("GET https://[REDACTED]@api.example.com/v1?key=[REDACTED]&model=[REDACTED]#token=[REDACTED] failed, "
            "then redis://[REDACTED]@cache:6379/0") in text
    assert "could not reach https://api.example.com/v1?api_key=[REDACTED]" in text


def test_a_line_without_a_credential_in_a_url_is_left_as_it_was():
    for line in ("GET /api/v1/runs/5/events?after=3 HTTP/1.1", "see https://docs.example.com/page#section",
                 "Connected to redis://127.0.0.1:6379/0", "no url at all"):
        assert url_credentials_scrub(line) == line
    record = logging.LogRecord("lib", logging.INFO, __file__, 1, "%s answered %d", ("https://h/v1", 200), None)
    SecretsFilter().filter(record)
    assert (record.msg, record.args) == ("%s answered %d", ("https://h/v1", 200))
