"""Ollama's native API: what a model supports, and what the server actually keeps of it.

Ollama's OpenAI-compatible ``/v1/models`` carries no figures, so for an
``openai_compatible`` connection that looks like Ollama (port 11434, "ollama" in the
host) or whose ``/models`` has no figures or fails, discovery asks the native API at the
server root (the base URL without ``/v1``):

* ``GET /api/tags`` lists the models;
* ``POST /api/show`` per model: ``model_info["<general.architecture>.context_length"]``
  is the model's maximum; ``num_ctx`` in ``parameters`` (when set) is the context a
  request through the OpenAI endpoint is served with; ``capabilities`` (no
  ``completion``, or ``embedding``, means not a chat model; ``vision`` means images);
* ``GET /api/ps`` once: a loaded model's ``context_length`` is the context the server
  keeps right now (it also reflects ``OLLAMA_CONTEXT_LENGTH``, which no other endpoint
  shows);
* ``GET /api/version`` once, only to know Ollama's default context for a model that is
  neither configured nor loaded.

Why this matters: Ollama's OpenAI endpoint cannot set ``num_ctx`` and *silently drops the
start* of a prompt longer than the context it keeps — a conversation that forgets, with
no error. So the window a request may rely on is the smallest of the model's maximum,
``num_ctx``, the loaded context and, when nothing says otherwise, Ollama's default. The
default is 4,096 tokens since Ollama 0.6.7 (2,048 before; since 0.15.5 it grows with the
GPU's memory, but never below 4,096), and 2,048 when the version cannot be read.
"""
from __future__ import annotations

import re
from typing import Any

from models_catalog.errors import AuthenticationError, ProviderError, UnsafeURLError
from models_catalog.providers.base import Listing, ListingContext, RawModel, server_root
from models_catalog.providers.events import as_dict
from models_catalog.providers.model_lists import positive_int
from models_catalog.url_syntax import MalformedURL, url_parse

OLLAMA_PORT = 11434
MAX_SHOW_CALLS = 64  # one /api/show per model; a bound so a huge library cannot stall discovery
DEFAULT_CONTEXT = 4_096  # Ollama >= 0.6.7 (and the smallest of the memory-based defaults since 0.15.5)
OLD_DEFAULT_CONTEXT = 2_048  # Ollama < 0.6.7, and what we assume when the version is unknown
_DEFAULT_SINCE = (0, 6, 7)
_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")

SOURCE_NUM_CTX = "ollama_num_ctx"
SOURCE_LOADED = "ollama_loaded"
SOURCE_DEFAULT = "ollama_default"
TRUNCATION_NOTE = (
    "Ollama's OpenAI endpoint silently drops the start of a longer prompt, so requests never rely on "
    "more: to use more of this model, set num_ctx on it (or OLLAMA_CONTEXT_LENGTH on the server) and "
    "discover again."
)


def looks_like_ollama(base_url: str) -> bool:
    try:
        url = url_parse(base_url)
    except MalformedURL:
        return False
    return url.port == OLLAMA_PORT or "ollama" in (url.host or "").lower()


ollama_root = server_root  # ``http://host:11434/v1`` → ``http://host:11434``


def parse_show(name: str, payload: Any) -> RawModel:
    """One ``/api/show`` answer → :class:`RawModel`: the model's maximum, ``num_ctx`` as
    the served context when set, and chat capability."""
    model = RawModel(id=name)
    if not isinstance(payload, dict):
        return model
    info = as_dict(payload.get("model_info"))
    arch = info.get("general.architecture")
    trained = positive_int(info.get(f"{arch}.context_length")) if isinstance(arch, str) else None
    if trained is None:  # no architecture key: take any "<x>.context_length"
        trained = next((positive_int(v) for k, v in info.items() if k.endswith(".context_length")), None)
    model.context_window = trained
    params = payload.get("parameters")
    match = _NUM_CTX.search(params) if isinstance(params, str) else None
    num_ctx = positive_int(match.group(1)) if match else None
    if num_ctx:
        model.server_context_window, model.server_context_source = num_ctx, SOURCE_NUM_CTX
    caps = payload.get("capabilities")
    if isinstance(caps, list) and caps:
        is_chat = "completion" in caps and "embedding" not in caps
        model.chat_capable = is_chat
        if not is_chat:
            model.chat_reason = "Ollama lists its capabilities as " + ", ".join(map(str, caps))
        model.supports_images = "vision" in caps
    return model


def parse_ps(payload: Any) -> dict[str, int]:
    """``GET /api/ps`` → ``{model name: loaded context}`` (servers before ``context_length``
    existed give nothing)."""
    loaded: dict[str, int] = {}
    items = payload.get("models") if isinstance(payload, dict) else None
    for item in items if isinstance(items, list) else []:
        item = as_dict(item)
        context = positive_int(item.get("context_length"))
        if not context:
            continue
        for key in ("name", "model"):
            name = item.get(key)
            if isinstance(name, str) and name:
                loaded[name] = min(context, loaded.get(name, context))
    return loaded


def default_context(version: str | None) -> int:
    """Ollama's default context for a server of ``version`` (None: unknown, assume the oldest)."""
    match = _VERSION.match(version.strip()) if isinstance(version, str) else None
    if match is None:
        return OLD_DEFAULT_CONTEXT
    return DEFAULT_CONTEXT if tuple(map(int, match.groups())) >= _DEFAULT_SINCE else OLD_DEFAULT_CONTEXT


def apply_served_context(model: RawModel, *, loaded: dict[str, int], default: int) -> None:
    """Set what the server keeps for ``model``: the smaller of ``num_ctx`` and the loaded
    context when either is known, else Ollama's default; explain it when it is less than
    the model supports."""
    names = {model.id, model.id.removesuffix(":latest"), f"{model.id}:latest"}
    loaded_context = min((loaded[n] for n in names if n in loaded), default=None)
    figures = [(c, s) for c, s in ((model.server_context_window, model.server_context_source),
                                   (loaded_context, SOURCE_LOADED)) if c]
    if figures:
        model.server_context_window, model.server_context_source = min(figures, key=lambda f: f[0])
    else:
        model.server_context_window, model.server_context_source = default, SOURCE_DEFAULT
    smaller = model.context_window is None or model.server_context_window < model.context_window
    if smaller and model.chat_capable is not False:
        model.notes.append(TRUNCATION_NOTE)


def list_ollama(ctx: ListingContext, *, root: str | None = None) -> Listing | None:
    """The native listing, or None when the server does not speak Ollama's API."""
    root = root or ollama_root(ctx.base_url)
    try:
        tags = ctx.get_json("/api/tags", root=root)
    except (AuthenticationError, UnsafeURLError):
        raise
    except ProviderError:
        return None  # 404, HTML, garbage: not Ollama, and that is fine
    if not isinstance(tags, dict) or not isinstance(tags.get("models"), list):
        return None
    models: list[RawModel] = []
    warnings: list[str] = []
    for index, item in enumerate(tags["models"]):
        if not isinstance(item, dict):
            continue
        name = item.get("model") or item.get("name")
        if not isinstance(name, str) or not name:
            continue
        if index >= MAX_SHOW_CALLS:
            models.append(RawModel(id=name))
            continue
        try:
            show = ctx.post_json("/api/show", {"model": name}, root=root)
        except AuthenticationError:
            raise
        except ProviderError:
            warnings.append(f"Ollama could not describe {name}; its model window is unknown.")
            models.append(RawModel(id=name))
            continue
        models.append(parse_show(name, show))
    if len(tags["models"]) > MAX_SHOW_CALLS:
        warnings.append(f"Only the first {MAX_SHOW_CALLS} Ollama models were described.")
    loaded = _loaded_contexts(ctx, root=root, warnings=warnings)
    default = _default_context(ctx, root=root, warnings=warnings)
    for model in models:
        apply_served_context(model, loaded=loaded, default=default)
    return Listing(models=models, api_shape="ollama", warnings=warnings)


def _loaded_contexts(ctx: ListingContext, *, root: str, warnings: list[str]) -> dict[str, int]:
    try:
        return parse_ps(ctx.get_json("/api/ps", root=root))
    except UnsafeURLError:
        raise
    except ProviderError:
        warnings.append("Ollama's /api/ps could not be read: the context of loaded models is unknown, so "
                        "num_ctx or Ollama's default context is used.")
        return {}


def _default_context(ctx: ListingContext, *, root: str, warnings: list[str]) -> int:
    try:
        version = as_dict(ctx.get_json("/api/version", root=root)).get("version")
    except UnsafeURLError:
        raise
    except ProviderError:
        version = None
    if not isinstance(version, str) or _VERSION.match(version.strip()) is None:
        warnings.append(f"Ollama's version could not be read: its default context is taken as "
                        f"{OLD_DEFAULT_CONTEXT:,} tokens, the smallest any release used.")
    return default_context(version if isinstance(version, str) else None)

