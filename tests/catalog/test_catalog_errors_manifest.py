"""The error hierarchy (LOOP-3, CAT-5) and the official manifest (CAT-2)."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from models_catalog.errors import (
    ContextOverflowError,
    ProviderUnavailableError,
    RateLimitedError,
    UnsafeURLError,
    error_from_status,
    parse_retry_after,
)
from models_catalog.manifest import (
    MANIFEST_PATH,
    ManifestFormatError,
    load_manifest,
    normalise_base_url,
    parse_manifest,
)
from sessions.run_errors import RunError


def test_retry_after_accepts_seconds_and_http_dates():
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC).timestamp()
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(format_datetime(datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC),
                                             usegmt=True), now=lambda: now) == 30.0
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=lambda: now) == 0.0  # past → now
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None and parse_retry_after("-5") == 0.0


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 16385 tokens. However, your messages resulted in 17000 tokens.",
    "Input tokens exceed the configured limit of 272,000 tokens.",
    "prompt is too long: 210000 tokens > 200000 maximum",
    "Too many tokens in the request",
])
def test_loop3_context_overflow_is_recognised_and_permanent(message):
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}}).encode()
    err = error_from_status(400, body=body)
    assert isinstance(err, ContextOverflowError) and err.permanent and err.code == "context_overflow"
    assert message not in str(err)


def test_loop3_rate_limit_carries_retry_after_and_5xx_is_transient():
    err = error_from_status(429, headers={"Retry-After": "3"})
    assert isinstance(err, RateLimitedError) and err.retry_after == 3.0 and err.transient
    assert isinstance(error_from_status(502), ProviderUnavailableError)
    assert error_from_status(418).permanent


def test_a_provider_error_becomes_the_one_run_error_shape():
    assert RunError.from_provider(UnsafeURLError("nope")).to_dict() == {
        "code": "unsafe_url", "message": "nope", "retryable": False}
    assert RunError.from_provider(error_from_status(502)).retryable is True


def test_cat2_manifest_has_a_version_and_valid_entries():
    manifest = load_manifest()
    assert manifest.version == json.loads(MANIFEST_PATH.read_text())["version"]
    for entry in manifest.entries.values():
        assert entry.max_output_tokens <= entry.context_window
        assert entry.source_url and entry.checked
    expected_openai = {"gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "o3", "o3-mini", "o4-mini",
                       "gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-4-turbo", "gpt-3.5-turbo"}
    assert expected_openai <= {mid for (provider, mid) in manifest.entries if provider == "openai"}
    assert {"deepseek-chat", "deepseek-reasoner"} <= {mid for (p, mid) in manifest.entries if p == "deepseek"}
    assert manifest.entries[("openai", "gpt-5")].max_input_tokens == 272_000
    assert manifest.entries[("openai", "gpt-4.1")].context_window == 1_047_576


@pytest.mark.parametrize(("base_url", "model_id", "found"), [
    ("https://api.openai.com/v1", "gpt-4o", True),
    ("https://api.openai.com/v1/", "gpt-4o", True),
    ("https://API.OpenAI.com:443/v1//", "gpt-4o", True),
    ("https://api.openai.com/v1", "gpt-4o-2024-99-99", False),  # never a prefix match
    ("https://api.openai.com/v1", "GPT-4O", False),  # exact id, case included
    ("https://api.openai.com", "gpt-4o", False),  # not the official base URL
    ("https://my-proxy.example/v1", "gpt-4o", False),  # custom base_url: never
    ("http://api.openai.com/v1", "gpt-4o", False),
    ("https://api.deepseek.com", "deepseek-chat", True),
    ("https://api.deepseek.com/v1", "deepseek-reasoner", True),
    ("https://api.deepseek.com", "gpt-4o", False),  # OpenAI ids are not DeepSeek's
])
def test_cat2_manifest_lookup_is_exact_and_official_only(base_url, model_id, found):
    assert (load_manifest().lookup(base_url=base_url, model_id=model_id) is not None) is found


def test_cat2_base_urls_are_normalised():
    assert normalise_base_url("HTTPS://Api.DeepSeek.com:443/v1/") == "https://api.deepseek.com/v1"
    assert normalise_base_url("http://localhost:11434/v1") == "http://localhost:11434/v1"


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(version="latest"),
    lambda d: d["models"][0].update(context_window=-1),
    lambda d: d["models"][0].update(max_output_tokens=10**9),
    lambda d: d["models"].append(dict(d["models"][0])),
    lambda d: d["models"][0].update(provider="acme"),
    lambda d: d["models"][0].pop("source_url"),
])
def test_cat2_a_malformed_manifest_fails_loudly(mutate):
    data = json.loads(MANIFEST_PATH.read_text())
    mutate(data)
    with pytest.raises(ManifestFormatError):
        parse_manifest(data)
