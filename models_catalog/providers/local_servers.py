"""The windows local servers publish beside their OpenAI-style list (CAT-2, CAT-7).

An ``openai_compatible`` listing may be completed by one more call at the server root
(the base URL without ``/v1``):

* **llama.cpp** (its ``/v1/models`` says ``owned_by: "llamacpp"`` or carries
  ``meta.n_ctx_train``): ``GET /props`` gives ``default_generation_settings.n_ctx`` — the
  context each request slot really has, which ``--ctx-size``, ``--parallel`` or memory
  fitting may make far smaller than the training length ``n_ctx_train``. Some versions
  also put ``n_ctx`` at the top; the smaller figure wins. In router mode (several models)
  each model is asked with ``?model=<id>&autoload=false`` so discovery never loads one.
* **LM Studio** (``/v1/models`` carries no figures): ``GET /api/v0/models`` gives
  ``max_context_length`` and, for a loaded model, ``loaded_context_length``.

A failure of these extra calls never fails discovery: the listing keeps what it has, and
a warning says which figure is missing.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from models_catalog.errors import ProviderError, UnsafeURLError
from models_catalog.providers.base import Listing, ListingContext, merge_details, server_root
from models_catalog.providers.events import as_dict
from models_catalog.providers.model_lists import parse_model_list, positive_int
from models_catalog.url_syntax import MalformedURL, url_parse

LLAMACPP_PROPS = "llamacpp_props"
LMSTUDIO_PORT = 1234
MAX_PROPS_CALLS = 16  # router mode: one /props per model, bounded


def props_context(payload: Any) -> int | None:
    """``GET /props`` → the context a request gets (the smaller of the slot's and the
    top-level ``n_ctx``), or None when the answer has neither."""
    props = as_dict(payload)
    figures = [positive_int(as_dict(props.get("default_generation_settings")).get("n_ctx")),
               positive_int(props.get("n_ctx"))]
    return min((f for f in figures if f), default=None)


def props_slots(payload: Any) -> int | None:
    """``GET /props`` → ``total_slots``: the requests the server answers at once (CAT-11)."""
    return positive_int(as_dict(payload).get("total_slots"))


def add_llamacpp_contexts(ctx: ListingContext, listing: Listing) -> None:
    """Ask llama.cpp's ``/props`` what context each listed model is served with."""
    root = server_root(ctx.base_url)
    router = len(listing.models) > 1
    for index, model in enumerate(listing.models):
        if index >= MAX_PROPS_CALLS:
            listing.warnings.append(f"Only the first {MAX_PROPS_CALLS} llama.cpp models were asked for their context.")
            return
        path = "/props?" + urlencode({"model": model.id, "autoload": "false"}) if router else "/props"
        try:
            props = ctx.get_json(path, root=root)
        except UnsafeURLError:
            raise
        except ProviderError:
            props = None
        served = props_context(props)
        slots = props_slots(props)
        if slots:
            model.concurrency, model.concurrency_source = slots, "server"
        if served:
            model.server_context_window, model.server_context_source = served, LLAMACPP_PROPS
            continue
        listing.warnings.append(
            f"llama.cpp's /props did not say the context {model.id} is served with"
            + (f"; {model.context_window:,} is its training length (n_ctx_train), which the server may not "
               "run with: check --ctx-size." if model.context_window else ".")
        )


def looks_like_lmstudio(base_url: str) -> bool:
    try:
        return url_parse(base_url).port == LMSTUDIO_PORT
    except MalformedURL:
        return False


def add_lmstudio_figures(ctx: ListingContext, listing: Listing) -> Listing:
    """``listing`` completed by LM Studio's ``/api/v0/models``, or unchanged when the
    server does not answer it the LM Studio way."""
    try:
        native, shape = parse_model_list(ctx.get_json("/api/v0/models", root=server_root(ctx.base_url)))
    except UnsafeURLError:
        raise
    except ProviderError:
        return listing  # not LM Studio (or an old one): nothing more to learn
    if shape != "lmstudio":
        return listing
    return Listing(models=merge_details(listing.models, native), api_shape="lmstudio",
                   warnings=listing.warnings, suggested_base_url=listing.suggested_base_url)


def add_server_windows(ctx: ListingContext, listing: Listing) -> Listing:
    """The listing with what llama.cpp or LM Studio publish beside ``/models``."""
    if listing.api_shape == "llamacpp":
        add_llamacpp_contexts(ctx, listing)
        return listing
    if listing.api_shape == "lmstudio":  # the base URL already is LM Studio's /api/v0
        if ctx.base_url.rstrip("/").endswith("/api/v0"):
            listing.suggested_base_url = server_root(ctx.base_url) + "/v1"
        return listing
    if looks_like_lmstudio(ctx.base_url) or not any(m.context_window for m in listing.models):
        return add_lmstudio_figures(ctx, listing)
    return listing

