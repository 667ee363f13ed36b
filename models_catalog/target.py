"""Where a run's model calls go: one frozen target, built once per run.

Everything a call needs to reach the model and to shape its request comes from here —
the provider's dialect and output-limit field (from its ``ProviderSpec``), the model, the
endpoint and its key, image support and the HTTP limits — so no caller asks "which
provider is this?" again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from context import RequestShape
from models_catalog.http import CHAT_LIMITS, HttpLimits
from models_catalog.providers import get_provider


@dataclass(frozen=True)
class ModelTarget:
    """A model at an endpoint, with what its requests must look like. The key is kept
    out of ``repr`` so a target can be logged."""

    provider: str
    dialect: str
    output_limit_field: str
    exact_tokenizer: bool
    model: str
    base_url: str | None
    api_key: str | None = field(default=None, repr=False)
    supports_images: bool = False
    limits: HttpLimits = CHAT_LIMITS
    connection_id: int | None = None  # what is learned about the model is kept per connection
    stream_usage: bool = True  # the provider reads ``stream_options.include_usage`` (CTX-25)
    prompt_cache: bool = False  # summaries ride the provider's prompt cache (CTX-46)
    string_content: bool = False  # string contents and classic roles only (local servers)

    @property
    def shape(self) -> RequestShape:
        """What the context engine needs to build this target's requests."""
        return RequestShape(model=self.model, dialect=self.dialect, output_limit_field=self.output_limit_field,
                            supports_images=self.supports_images, stream_usage=self.stream_usage,
                            string_content=self.string_content)


def model_target(*, provider: str, model: str, base_url: str | None, api_key: str | None,
                 supports_images: bool = False, limits: HttpLimits = CHAT_LIMITS,
                 connection_id: int | None = None) -> ModelTarget:
    """The target for ``model`` of ``provider`` (an unknown provider raises its 400 error)."""
    spec = get_provider(provider)
    return ModelTarget(provider=spec.name, dialect=spec.dialect, output_limit_field=spec.output_limit_field,
                       exact_tokenizer=spec.exact_tokenizer, model=model, base_url=base_url or None,
                       api_key=api_key or None, supports_images=supports_images, limits=limits,
                       connection_id=connection_id, stream_usage=spec.stream_usage_option,
                       prompt_cache=spec.prompt_cache, string_content=spec.string_content)
