"""Console form for remote tool servers (SPEC §10, TOOL-1).

Headers are a write-only text area, one ``Name: value`` per line: never rendered back, an
empty field keeps the stored headers, and "remove the stored headers" clears them. Saving
connects to the server first (the services' rule, the API's too): a server that refuses the
token or does not answer leaves the form with the error on the field to fix, and nothing
is saved.
"""
from __future__ import annotations

from typing import Any

from django import forms

from core.accounts.selectors import user_is_operator
from core.errors import DomainError
from toolservers.models import ToolServer
from toolservers.services import toolserver_register, toolserver_update


def headers_parse(text: str) -> dict[str, str]:
    """``Name: value`` lines as a mapping (the services check names and values)."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        if not colon:
            raise forms.ValidationError(f"Line {number} is not Name: value.")
        headers[name.strip()] = value.strip()
    return headers


class WriteOnlyTextarea(forms.Textarea):
    """A text area that never renders a value: a form shown again after an error does not
    carry the secrets typed into it (as ``PasswordInput(render_value=False)``)."""

    def format_value(self, value: Any) -> None:
        return None


class ToolServerAdminForm(forms.ModelForm):
    header_lines = forms.CharField(
        label="Headers", required=False, strip=True,
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Write-only. One per line, e.g. <code>Authorization: Bearer …</code>. Leave empty to keep the "
                  "stored headers; a new URL needs them again.")
    clear_headers = forms.BooleanField(required=False, label="Remove the stored headers")

    class Meta:
        model = ToolServer
        fields = ["space", "name", "url", "timeout_seconds"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.user = kwargs.pop("user", None)
        super().__init__(*args, **kwargs)
        self.saved: ToolServer | None = None
        if self.instance.pk and self.instance.header_hints:
            hints = ", ".join(f"{name}: {hint}" for name, hint in self.instance.header_hints.items())
            self.fields["header_lines"].help_text += f" Stored: {hints}."

    def validate_unique(self) -> None:
        """The services check names (the space's and the operator's) and have saved the
        row by now: the model form must not find it a duplicate of itself."""

    def service_data(self) -> dict[str, Any]:
        cleaned = self.cleaned_data
        data = {name: cleaned[name] for name in ("name", "url", "timeout_seconds") if cleaned.get(name) is not None}
        if cleaned.get("clear_headers"):
            data["headers"] = {}
        elif cleaned.get("header_lines"):
            data["headers"] = headers_parse(cleaned["header_lines"])
        return data

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data
        if self.errors:
            return cleaned
        if not self.instance.pk and cleaned.get("space") is None:
            # The model allows no space (the operator's servers have none), but those come from
            # AGENTLOOM_MCP_SERVERS: a server added here always belongs to a space.
            self.add_error("space", "Choose the space whose agents may use this server.")
            return cleaned
        try:
            data = self.service_data()
        except forms.ValidationError as exc:
            self.add_error("header_lines", exc)
            return cleaned
        try:
            if self.instance.pk:
                changed = {k: v for k, v in data.items() if k == "headers" or getattr(self.instance, k) != v}
                self.saved = toolserver_update(server=ToolServer.objects.get(pk=self.instance.pk), data=changed,
                                               by=self.user, detailed=user_is_operator(user=self.user))
            else:
                self.saved, _ = toolserver_register(space=cleaned["space"], data=data, created_by=self.user,
                                                    detailed=user_is_operator(user=self.user))
                # The model's own checks run after clean(): against the saved row they would
                # find the new server a duplicate of itself (its unique name per space).
                self.instance = self.saved
        except DomainError as exc:
            if not exc.fields:
                self.add_error(None, exc.message)
            for field, message in exc.fields.items():
                target = {"headers": "header_lines"}.get(field, field)
                self.add_error(target if target in self.fields else None, message)
        return cleaned
