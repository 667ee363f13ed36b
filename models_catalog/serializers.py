"""Input validation and output shapes of the catalog API (SPEC §9, CAT-1, CAT-6).

Inputs only check types and shapes; the rules (figures, URLs, keys, provenance) live in
``services.connection_validate`` so the admin form applies exactly the same ones.
The key is an input only: no output serializer here has a field that could carry it.
"""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from core.api.fields import MAX_ID, StrictCharField
from models_catalog.discovery import DiscoveryResult
from models_catalog.learning import connection_input_tokens
from models_catalog.models import ModelConnection
from models_catalog.providers import provider_choices, provider_names
from models_catalog.validation import MAX_KEY_LENGTH, discovery_token_make


class RejectUnknownFields(serializers.Serializer):
    """A typo in a field name is a 400 naming it, never a silently ignored change."""

    # Sent by HTML forms (the browsable API), never a field of ours.
    IGNORED = frozenset({"csrfmiddlewaretoken"})

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields) - self.IGNORED)
            if unknown:
                raise serializers.ValidationError(dict.fromkeys(unknown, "unknown field"))
        return super().to_internal_value(data)


class ProviderField(serializers.ChoiceField):
    """A registered provider's name. The choices are the registry's, read each time they are
    used (a request checked, the schema or the browsable API drawn), so a provider
    registered after start-up is accepted with no change here; an unknown name is a 400
    listing the registered ones."""

    default_error_messages = {"invalid_choice": '"{input}" is not a registered provider; must be one of {names}'}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=(), **kwargs)

    @property
    def choices(self) -> dict[str, str]:
        return dict(provider_choices())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # ChoiceField.__init__ stores its choices here; the registry is the only list

    @property
    def grouped_choices(self) -> dict[str, str]:
        return self.choices

    @property
    def choice_strings_to_values(self) -> dict[str, str]:
        return {name: name for name in self.choices}

    def to_internal_value(self, data: Any) -> str:
        if not (isinstance(data, str) and data in self.choices):
            self.fail("invalid_choice", input=data, names=", ".join(provider_names()))
        return data


def _key_is_header_safe(value: str) -> None:
    # The key travels in an HTTP header, which carries only visible ASCII: anything else
    # would fail while the request is built, after the key had been accepted.
    if any(not "!" <= character <= "~" for character in value):
        raise serializers.ValidationError("must be printable ASCII without spaces")


def _key_field(**kwargs: Any) -> StrictCharField:
    # write_only keeps it out of any representation, even if someone reuses this serializer
    # for output; the style hint keeps it out of the browsable API's echo.
    return StrictCharField(required=False, allow_blank=True, max_length=MAX_KEY_LENGTH, write_only=True,
                           style={"input_type": "password"}, validators=[_key_is_header_safe], **kwargs)


class DiscoverIn(RejectUnknownFields):
    provider = ProviderField()
    base_url = StrictCharField(required=False, allow_blank=True, max_length=500)
    api_key = _key_field()
    resource_id = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                           help_text="A stored connection whose key to reuse "
                                                     "(same provider and base URL only).")
    space = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                     help_text="The space you discover for; default: any space you administer.")


class ConnectionUpdateIn(RejectUnknownFields):
    """A partial update: absent fields stay; ``api_key: ""`` (or null) clears the stored key."""

    name = StrictCharField(required=False, max_length=200)
    provider = ProviderField(required=False)
    base_url = StrictCharField(required=False, allow_blank=True, max_length=500)
    api_key = _key_field(allow_null=True)
    model = StrictCharField(required=False, max_length=200)
    context_window = serializers.IntegerField(required=False)
    max_output_tokens = serializers.IntegerField(required=False)
    safety_margin_tokens = serializers.IntegerField(required=False)
    supports_images = serializers.BooleanField(required=False)
    concurrency = serializers.IntegerField(
        required=False, allow_null=True,
        help_text="CAT-11: how many requests the server answers at once, 1 to 64; null: unknown (no bound). "
                  "Discovery learns it from llama.cpp's /props (total_slots); llama-cpp-python's server: 1.")
    discovery_token = StrictCharField(required=False, allow_blank=True, max_length=4_000,
                                      help_text="From a discovery result: keeps the figures' source "
                                                "unless you change them.")


class ConnectionCreateIn(ConnectionUpdateIn):
    space = serializers.IntegerField(required=False, min_value=1, max_value=MAX_ID,
                                     help_text="Default: the one space you administer.")
    name = StrictCharField(max_length=200)
    provider = ProviderField()
    model = StrictCharField(max_length=200)


class ConnectionOut(serializers.ModelSerializer):
    """A connection as members see it: the key only as a masked hint (CAT-6)."""

    space = serializers.IntegerField(source="space_id")
    has_api_key = serializers.SerializerMethodField()
    effective_context_window = serializers.SerializerMethodField(
        help_text="context_window, never more than what the server keeps (server_context_window) or was "
                  "seen to refuse at (learned_context_window).")
    effective_input_tokens = serializers.SerializerMethodField()
    server_context_source = serializers.CharField(
        read_only=True, help_text="How discovery learned what the server keeps (empty when unknown).")
    context_window_source = serializers.CharField(
        read_only=True, help_text="Where context_window came from: provider, official_manifest, platform_default "
                                  "(check it) or manual.")
    max_output_tokens_source = serializers.CharField(
        read_only=True, help_text="Where max_output_tokens came from, in the same words.")
    context_window_maximum = serializers.IntegerField(
        read_only=True, allow_null=True,
        help_text="The model's known context window, which context_window may not exceed (null: unknown).")
    context_window_maximum_source = serializers.CharField(
        read_only=True, help_text="provider or official_manifest; empty when no maximum is known.")
    max_output_tokens_maximum = serializers.IntegerField(
        read_only=True, allow_null=True,
        help_text="The model's known maximum output, which max_output_tokens may not exceed (null: unknown).")
    max_output_tokens_maximum_source = serializers.CharField(
        read_only=True, help_text="provider or official_manifest; empty when no maximum is known.")

    class Meta:
        model = ModelConnection
        fields = [
            "id", "space", "name", "provider", "base_url", "model", "context_window", "context_window_source",
            "context_window_maximum", "context_window_maximum_source", "max_output_tokens",
            "max_output_tokens_source", "max_output_tokens_maximum", "max_output_tokens_maximum_source",
            "safety_margin_tokens", "server_context_window", "server_context_source", "learned_context_window",
            "learned_window_at", "effective_context_window", "effective_input_tokens",
            "manifest_version", "supports_images", "concurrency", "concurrency_source", "api_key_hint",
            "has_api_key", "created_at", "updated_at",
        ]
        read_only_fields = ["learned_context_window", "learned_window_at"]

    def get_has_api_key(self, connection: ModelConnection) -> bool:
        return bool(connection.api_key_hint)

    def get_effective_input_tokens(self, connection: ModelConnection) -> int:
        """CTX-21: what a request may use once output and margin are reserved, within what
        the server keeps (discovered, or learned from a refusal, CAT-3), with the margin and
        output reserve nobody set following that window, as runs use it (CAT-9)."""
        return connection_input_tokens(connection)

    def get_effective_context_window(self, connection: ModelConnection) -> int:
        return connection.effective_context_window()


class DiscoveredModelOut(serializers.Serializer):
    id = serializers.CharField()
    context_window = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField()
    source = serializers.CharField(help_text="The weaker of the two figures' sources.")
    context_window_source = serializers.CharField()
    max_output_tokens_source = serializers.CharField()
    chat_capable = serializers.BooleanField()
    note = serializers.CharField(allow_null=True)
    notes = serializers.ListField(child=serializers.CharField())
    provider_max_output_tokens = serializers.IntegerField(allow_null=True)
    max_input_tokens = serializers.IntegerField(allow_null=True)
    supports_images = serializers.BooleanField(allow_null=True)
    manifest_version = serializers.CharField(allow_null=True)
    model_context_window = serializers.IntegerField(allow_null=True, help_text="The model's own maximum.")
    server_context_window = serializers.IntegerField(
        allow_null=True, help_text="What the server keeps per request, when it says; context_window never exceeds it.")
    server_context_source = serializers.CharField(allow_null=True)
    concurrency = serializers.IntegerField(
        allow_null=True, help_text="CAT-11: requests the server answers at once, when known (null: no bound).")
    concurrency_source = serializers.CharField(allow_null=True)
    discovery_token = serializers.CharField(
        help_text="Send it with the connection to keep these figures' source (else they count as manual)."
    )


class DiscoveryOut(serializers.Serializer):
    provider = serializers.CharField()
    base_url = serializers.CharField()
    api_shape = serializers.CharField()
    manifest_version = serializers.CharField(allow_null=True)
    warnings = serializers.ListField(child=serializers.CharField())
    suggested_base_url = serializers.CharField(allow_null=True)
    models = DiscoveredModelOut(many=True)


def discovery_data(result: DiscoveryResult) -> dict[str, Any]:
    """The CAT-1 response: the discovery result plus one signed token per model."""
    data = result.to_dict()
    for model, item in zip(result.models, data["models"]):
        item["discovery_token"] = discovery_token_make(provider=result.provider, base_url=result.base_url, model=model)
    return DiscoveryOut(data).data
