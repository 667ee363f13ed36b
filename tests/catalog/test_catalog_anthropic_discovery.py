"""Anthropic discovery against the strict fake: pagination, figures and their sources (CAT-1, CAT-2, CAT-7)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from models_catalog.discovery import PLATFORM_DEFAULT_CONTEXT_WINDOW, discover_models
from models_catalog.errors import AuthenticationError, ProviderUnavailableError
from models_catalog.manifest import load_manifest
from models_catalog.providers import get_provider
from models_catalog.selectors import effective_base_url
from sessions.run_errors import RunError
from tests.catalog.support import FAST, SECRET_BODY, public_resolver
from tests.fakes.anthropic import AnthropicFake, api_error
from tests.fakes.responses import JSONResponse

KEY = "sk-ant-test"
VERSION = load_manifest().version


def discover(fake, base_url=None, **kwargs):
    return discover_models(provider="anthropic", base_url=base_url or fake.base_url, api_key=KEY,
                           allow_private=True, limits=FAST, **kwargs)


def discover_official(fake):
    """Discovery at https://api.anthropic.com/v1 whose traffic lands on the fake."""
    return discover_models(provider="anthropic", base_url="https://api.anthropic.com/v1", api_key=KEY,
                           transport=fake.forwarding_transport(), resolver=public_resolver, limits=FAST)


def by_id(result):
    return {m.id: m for m in result.models}


def test_cat1_it_follows_every_page_with_after_id_and_sends_the_anthropic_headers(fake):
    models = [{"id": f"claude-test-{n}", "max_input_tokens": 100_000 + n, "max_tokens": 8_000} for n in range(5)]
    fake.handler = AnthropicFake(api_key=KEY, models=models, page_size=2)
    result = discover(fake)
    assert sorted(by_id(result)) == [f"claude-test-{n}" for n in range(5)] and result.api_shape == "anthropic"
    assert [r.query.get("after_id") for r in fake.requests] == [None, ["claude-test-1"], ["claude-test-3"]]
    first = fake.requests[0]
    assert (first.path, first.query["limit"]) == ("/v1/models", ["1000"])
    assert first.headers["x-api-key"] == KEY and first.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in first.headers


def test_cat2_the_lists_max_input_tokens_and_max_tokens_are_provider_figures(fake):
    fake.handler = AnthropicFake(api_key=KEY, models=[
        {"id": "claude-opus-5", "max_input_tokens": 1_000_000, "max_tokens": 128_000,
         "capabilities": {"image_input": {"supported": True}}},
        {"id": "claude-tiny", "max_input_tokens": 8_000, "max_tokens": 2_048,
         "capabilities": {"image_input": {"supported": False}}}])
    models = by_id(discover(fake))
    opus, tiny = models["claude-opus-5"], models["claude-tiny"]
    assert (opus.context_window, opus.provider_max_output_tokens, opus.source) == (1_000_000, 128_000, "provider")
    assert (opus.max_output_tokens, opus.supports_images, opus.chat_capable) == (4_096, True, True)
    assert (tiny.context_window, tiny.max_output_tokens, tiny.supports_images) == (8_000, 2_048, False)
    assert opus.note is None  # a model listed by Anthropic is a chat model: no "unverified" note


def test_cat2_known_claude_models_get_manifest_figures_at_the_official_endpoint_only_by_exact_id(fake):
    fake.handler = AnthropicFake(api_key=KEY, models=[
        {"id": "claude-haiku-4-5-20251001"}, {"id": "claude-opus-5"}, {"id": "claude-opus-5-20990101"}])
    result = discover_official(fake)
    models = by_id(result)
    haiku = models["claude-haiku-4-5-20251001"]
    assert (haiku.context_window, haiku.provider_max_output_tokens) == (200_000, 64_000)
    assert haiku.source == "official_manifest" and haiku.manifest_version == VERSION == result.manifest_version
    assert models["claude-opus-5"].context_window == 1_000_000
    assert models["claude-opus-5-20990101"].context_window == PLATFORM_DEFAULT_CONTEXT_WINDOW  # never by prefix
    assert fake.requests[0].headers["host"] == "api.anthropic.com"
    custom = by_id(discover(fake, base_url=fake.base_url))  # a gateway: any window may sit behind the name
    assert custom["claude-haiku-4-5-20251001"].source == "platform_default"


def test_cat1_a_wrong_key_is_a_clear_error_that_echoes_nothing(fake):
    fake.handler = lambda r: api_error(401, "authentication_error", f"invalid x-api-key {SECRET_BODY}")
    with pytest.raises(AuthenticationError) as caught:
        discover_models(provider="anthropic", base_url=fake.base_url, api_key="sk-ant-WRONG-9999",
                        allow_private=True, limits=FAST)
    text = f"{caught.value} {caught.value!r} {RunError.from_provider(caught.value).to_dict()}"
    assert "Anthropic rejected the credentials" in str(caught.value)
    assert SECRET_BODY not in text and "sk-ant-WRONG" not in text
    strict = AnthropicFake(api_key=KEY)
    fake.handler = strict
    with pytest.raises(AuthenticationError):
        discover_models(provider="anthropic", base_url=fake.base_url, api_key="sk-ant-WRONG-9999",
                        allow_private=True, limits=FAST)
    assert strict.rejections == [(401, "invalid x-api-key")]


@pytest.mark.parametrize("typed", ["{url}", "{url}/", "{url}/v1", "{url}/v1/"])
def test_cat1_a_base_url_as_anthropics_sdk_takes_it_is_listed_at_v1_and_the_result_says_what_is_kept(fake, typed):
    fake.handler = AnthropicFake(api_key=KEY)
    result = discover(fake, base_url=typed.format(url=fake.url))
    assert result.base_url == fake.url + "/v1" and len(result.models) == 2
    assert [r.path for r in fake.requests] == ["/v1/models"]  # one form, asked once
    assert result.suggested_base_url is None  # nothing for the admin to retype
    kept = [w for w in result.warnings if "keeps that base URL" in w]
    assert kept == ([f"Anthropic's API answers under {fake.url}/v1, the base URL as entered with the API version: "
                     "a connection saved from this discovery keeps that base URL."] if "v1" not in typed else [])


# A gateway's own prefix (a last segment "v1" would make it the /v1 form already).
SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=8).filter(lambda p: p != "v1")


@given(host=st.sampled_from(["https://api.anthropic.com", "https://gateway.example", "http://10.0.0.7:4000"]),
       prefix=st.lists(SEGMENT, max_size=3), slash=st.booleans())
def test_cat1_both_forms_of_an_anthropic_base_url_are_one_endpoint_called_at_v1(host, prefix, slash):
    """Whatever the host and prefix: the SDK's form and the /v1 form (with or without a
    trailing slash) are called, stored and compared as the one /v1 form; other providers'
    paths are left as typed."""
    sdk = host + "".join(f"/{p}" for p in prefix)
    anthropic = get_provider("anthropic")
    forms = {anthropic.base_url_form(typed + ("/" if slash else "")) for typed in (sdk, sdk + "/v1")}
    assert forms == {sdk + "/v1"}
    assert anthropic.base_url_form(anthropic.base_url_form(sdk)) == anthropic.base_url_form(sdk)
    assert effective_base_url(provider="anthropic", base_url=sdk) == effective_base_url(
        provider="anthropic", base_url=sdk + "/v1/")
    assert get_provider("openai_compatible").base_url_form(sdk + ("/" if slash else "")) == sdk


def test_cat2_the_official_host_without_v1_is_the_official_endpoint_with_its_manifest(fake):
    fake.handler = AnthropicFake(api_key=KEY, models=[{"id": "claude-opus-5"}])  # the list gives no figures
    result = discover_models(provider="anthropic", base_url="https://api.anthropic.com", api_key=KEY,
                             transport=fake.forwarding_transport(), resolver=public_resolver, limits=FAST)
    assert result.base_url == "https://api.anthropic.com/v1" and result.manifest_version == VERSION
    opus = by_id(result)["claude-opus-5"]
    assert (opus.context_window, opus.context_window_source) == (1_000_000, "official_manifest")
    assert fake.requests[0].headers["host"] == "api.anthropic.com" and fake.requests[0].path == "/v1/models"


def test_a_server_that_keeps_saying_has_more_is_read_a_bounded_number_of_times(fake):
    fake.handler = lambda r: JSONResponse({"data": [{"type": "model", "id": "claude-loop"}], "has_more": True,
                                           "first_id": "claude-loop", "last_id": "claude-loop"})
    assert [m.id for m in discover(fake).models] == ["claude-loop"] and len(fake.requests) == 2


def test_a_list_in_an_unknown_shape_is_a_provider_fault(fake):
    fake.handler = lambda r: JSONResponse({"models": ["claude-x"]})
    with pytest.raises(ProviderUnavailableError):
        discover(fake)
