"""The built-in providers and their list adapters.

* ``openai`` / ``deepseek`` — ``GET {base_url}/models``; these lists carry no figures
  today, so the official manifest supplies them (only at the official endpoint).
* ``openai_compatible`` — ``GET {base_url}/models`` parsed for every known vendor field
  (``model_lists``); when the server looks like Ollama, or ``/models`` has no figures, or
  fails, Ollama's native API at the root is tried as well (``ollama``). If only the
  native API answers, the listing suggests the ``/v1`` base URL chat needs. Otherwise
  llama.cpp's ``/props`` and LM Studio's ``/api/v0/models`` add the windows those
  servers publish (``local_servers``).
* ``anthropic`` — Anthropic's native API (``anthropic``): ``GET {base_url}/models``
  page by page, chat over ``POST {base_url}/messages``.
* ``demo`` — the offline demo model; no network at all.
"""
from __future__ import annotations

from models_catalog.demo import DEMO_BASE_URL, DEMO_MODEL_ID, DemoChatClient
from models_catalog.errors import AuthenticationError, ProviderError, UnsafeURLError
from models_catalog.providers.anthropic import ANTHROPIC
from models_catalog.providers.base import Listing, ListingContext, ProviderSpec, RawModel, merge_details
from models_catalog.providers.local_servers import add_server_windows
from models_catalog.providers.model_lists import has_figures, parse_model_list
from models_catalog.providers.ollama import list_ollama, looks_like_ollama, ollama_root


def list_openai_style(ctx: ListingContext) -> Listing:
    """``GET /models`` on an OpenAI-style server (OpenAI, DeepSeek)."""
    models, shape = parse_model_list(ctx.get_json("/models"))
    return Listing(models=models, api_shape=shape)


def list_openai_compatible(ctx: ListingContext) -> Listing:
    """``GET /models`` with vendor fields, then Ollama's native API or the windows
    llama.cpp and LM Studio publish beside it."""
    listed: list[RawModel] | None = None
    shape = "openai"
    failure: ProviderError | None = None
    try:
        listed, shape = parse_model_list(ctx.get_json("/models"))
    except (AuthenticationError, UnsafeURLError):
        raise  # a wrong key or a refused address will not get better at another path
    except ProviderError as exc:
        failure = exc
    wants_native = looks_like_ollama(ctx.base_url) or failure is not None or not has_figures(listed or [])
    native = list_ollama(ctx) if wants_native else None
    if native is None:
        if failure is not None:
            raise failure
        return add_server_windows(ctx, Listing(models=listed or [], api_shape=shape))
    if listed is None:
        root = ollama_root(ctx.base_url)
        native.suggested_base_url = root + "/v1"
        native.warnings.append(
            f"This server speaks Ollama's API; chat uses its OpenAI-compatible endpoint at {root}/v1."
        )
        return native
    return Listing(models=merge_details(listed, native.models), api_shape="ollama", warnings=native.warnings)


def list_demo(ctx: ListingContext) -> Listing:  # noqa: ARG001 - same signature as the others
    return Listing(models=[RawModel(id=DEMO_MODEL_ID, chat_capable=True, supports_images=False)], api_shape="demo")


# The demo answers OpenAI-shaped requests like any compatible server.
DEMO = ProviderSpec(
    name="demo", label="The offline demo model", list_models=list_demo, default_base_url=DEMO_BASE_URL,
    requires_api_key=False, offline=True, stream_usage_option=False, chat_factory=DemoChatClient,
)

BUILTIN_PROVIDERS: tuple[ProviderSpec, ...] = (
    ProviderSpec(
        name="openai", label="OpenAI", list_models=list_openai_style,
        default_base_url="https://api.openai.com/v1", output_limit_field="max_completion_tokens",
        exact_tokenizer=True, prompt_cache=True,
    ),
    ProviderSpec(
        name="deepseek", label="DeepSeek", list_models=list_openai_style,
        default_base_url="https://api.deepseek.com", dialect="deepseek", prompt_cache=True,
    ),
    ProviderSpec(
        name="openai_compatible", label="The OpenAI-compatible server", list_models=list_openai_compatible,
        window_probe=True,
        requires_api_key=False,
    ),
    ANTHROPIC,
    DEMO,
)
