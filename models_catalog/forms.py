"""Admin console forms for model connections and prices (SPEC §10, CAT-1, CAT-6).

The key is a write-only password input: it is never rendered back, an empty field keeps
the stored key, and "remove the stored key" clears it. Every rule is the service's
(``connection_validate``), so the console and the API accept and refuse the same things.
Every provider select offers the registry's providers (``provider_choices``), read each
time a form is built, so a registered provider appears with no change here.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django import forms

from context import default_safety_margin
from core.errors import ValidationFailed
from models_catalog.maxima import maxima_stored_in_space
from models_catalog.models import ModelConnection, ModelPrice
from models_catalog.providers import find_provider, provider_choices
from models_catalog.url_syntax import MalformedURL, url_parse
from models_catalog.validation import MAX_KEY_LENGTH, connection_validate

CURRENCY = re.compile(r"[A-Z]{3}")  # ISO 4217's shape
FORM_FIELDS = ["name", "provider", "base_url", "model", "context_window", "max_output_tokens",
               "safety_margin_tokens", "supports_images", "concurrency"]


def _provider_input() -> forms.ChoiceField:
    # A callable: Django calls it whenever the choices are drawn or checked.
    return forms.ChoiceField(label="Provider", choices=provider_choices)


def _default_endpoint_help() -> str:
    """Which providers a blank base URL suits, as the registry says when the form is built."""
    labels = [spec.label for name, _ in provider_choices()
              if (spec := find_provider(name)) is not None and spec.default_base_url and not spec.offline]
    return f"Blank uses the provider's official endpoint ({', '.join(labels)})." if labels else ""


def _key_input() -> forms.CharField:
    return forms.CharField(
        label="API key",
        required=False,
        max_length=MAX_KEY_LENGTH,
        strip=True,
        # render_value=False: a re-displayed form (after an error) never carries the key.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Write-only. Leave empty to keep the stored key.",
    )


class ModelConnectionAdminForm(forms.ModelForm):
    provider = _provider_input()
    api_key = _key_input()
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    discovery_token = forms.CharField(required=False, widget=forms.HiddenInput)

    class Meta:
        model = ModelConnection
        fields = ["space", *FORM_FIELDS]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Filled in by the figures' source rule, never typed.
        for name in ("context_window", "max_output_tokens", "safety_margin_tokens"):
            if name in self.fields:
                self.fields[name].required = False
        if "safety_margin_tokens" in self.fields:
            # Blank follows the window (CAT-3); a number typed here is kept as the admin's choice.
            self.fields["safety_margin_tokens"].help_text = (
                "Blank: 1/32 of the context window, at least 64 and at most 4,096 tokens.")
            instance = self.instance
            if instance.pk is None or instance.safety_margin_tokens == default_safety_margin(instance.context_window):
                self.initial["safety_margin_tokens"] = None
        if "supports_images" in self.fields:  # RUN-13: what an attached image becomes
            self.fields["supports_images"].label = "Reads images"
            self.fields["supports_images"].help_text = (
                "Tick when this model takes image input: images people attach are sent to it. Unticked, the model "
                "gets a note naming each image instead. Discovery fills this in when the provider says.")
        if "concurrency" in self.fields:  # CAT-11
            self.fields["concurrency"].label = "Requests at once"
            self.fields["concurrency"].help_text = (
                "How many requests the model server answers at once (1 to 64); calls beyond it wait their turn. "
                "Discovery fills it in from llama.cpp's /props (total_slots); llama-cpp-python's server answers "
                "one. Blank: unknown, no bound (hosted providers queue requests themselves).")
        if "base_url" in self.fields:
            self.fields["base_url"].label = "Base URL"
            self.fields["base_url"].help_text = _default_endpoint_help()
        if "api_key" in self.fields and self.instance.pk is None:
            self.fields["api_key"].help_text = "Write-only: stored encrypted, never shown again."
        if "space" in self.fields and self.instance.pk is None:
            # The one space there is, chosen already: nothing else could be picked.
            choices = getattr(self.fields["space"], "queryset", None)
            spaces = list(choices.values_list("pk", flat=True)[:2]) if choices is not None else []
            if len(spaces) == 1:
                self.initial.setdefault("space", spaces[0])

    def service_data(self) -> dict[str, Any]:
        """The service's input: only what the admin actually supplied."""
        cleaned = self.cleaned_data
        data: dict[str, Any] = {name: cleaned.get(name) for name in FORM_FIELDS if name in self.fields}
        for name in ("context_window", "max_output_tokens", "safety_margin_tokens"):
            if data.get(name) is None:
                data.pop(name, None)  # left empty: platform default, or the discovered figure
        if "concurrency" in data:
            # Unchanged keeps the figure and where it came from (a discovered one stays the
            # server's); blank on a new connection lets discovery's figure apply.
            stored = self.instance.concurrency if self.instance.pk else None
            if data["concurrency"] == stored:
                data.pop("concurrency")
        if cleaned.get("clear_api_key"):
            data["api_key"] = ""
        elif cleaned.get("api_key"):
            data["api_key"] = cleaned["api_key"]
        if cleaned.get("discovery_token"):
            data["discovery_token"] = cleaned["discovery_token"]
        return data

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        # clean() runs before the form copies its values onto the instance, so
        # self.instance still holds the stored row here.
        original = self.instance if self.instance.pk else None
        space_id = original.space_id if original is not None else getattr(cleaned.get("space"), "pk", None)
        # The same maxima as the save will check (CAT-3), so a refusal lands on its field.
        stored = maxima_stored_in_space(space_id=space_id) if space_id is not None else None
        try:
            connection_validate(connection=original, data=self.service_data(), stored_maxima=stored)
        except ValidationFailed as exc:
            for field, message in exc.fields.items():
                # A hidden input (the discovery token) shows no errors of its own: report
                # its problems at the top of the form instead of losing them.
                visible = field in self.fields and not self.fields[field].widget.is_hidden
                self.add_error(field if visible else None, message if visible else f"{field}: {message}")
        return cleaned


class DiscoverForm(forms.Form):
    """The console's discovery request: what the connection form holds right now."""

    provider = _provider_input()
    base_url = forms.CharField(label="Base URL", required=False, max_length=500)
    api_key = _key_input()
    connection = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["api_key"].help_text = "Leave empty to use the stored key of the connection being edited."

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        spec = find_provider(cleaned.get("provider"))
        base_url = (cleaned.get("base_url") or "").strip()
        # The same reading as every other URL field: a malformed host or port is an error on
        # this field, before the stored key is looked up or anything is contacted. An
        # offline provider takes no URL (its own pseudo-endpoint is the services' to judge).
        if base_url and spec is not None and not spec.offline:
            try:
                url_parse(base_url)
            except MalformedURL as exc:
                self.add_error("base_url", exc.message)
        return cleaned


class ConnectionTestForm(DiscoverForm):
    """Test connection: the discovery request plus the model id the form holds."""

    model = forms.CharField(label="Model", required=False, max_length=200)


def amount_text(value: Decimal) -> str:
    """An amount as a person writes it: at least two decimals, no trailing zeros beyond
    (``2.000000`` → ``2.00``, ``0.075000`` → ``0.075``)."""
    whole, _, fraction = f"{value.normalize():f}".partition(".")
    return f"{whole}.{fraction.ljust(2, '0')}"


PRICE_FIELDS = ("input_per_million", "cached_input_per_million", "cache_write_per_million", "output_per_million")


class ModelPriceAdminForm(forms.ModelForm):
    """A model's price: its provider chosen from the registry, as the model calls record it."""

    provider = _provider_input()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The column keeps six decimals; the inputs show the amount as it was typed.
        for name in PRICE_FIELDS:
            value = getattr(self.instance, name, None)
            if isinstance(value, Decimal) and name in self.fields:
                self.initial[name] = amount_text(value)

    class Meta:
        model = ModelPrice
        fields = ["provider", "model", "currency", "input_per_million", "cached_input_per_million",
                  "cache_write_per_million", "output_per_million"]

    def clean_currency(self) -> str:
        # A code like USD or EUR: it is written into every row of the usage CSV, so it
        # must never be text a spreadsheet runs (``=1+2``).
        value = (self.cleaned_data.get("currency") or "").strip().upper()
        if not CURRENCY.fullmatch(value):
            raise forms.ValidationError("Enter a three-letter currency code, such as USD or EUR.")
        return value
