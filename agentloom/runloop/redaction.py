"""LOOP-8: credentials the runtime knows become ``[REDACTED]`` before anything is written."""
from __future__ import annotations

from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET = 8  # shorter strings would redact ordinary words


class Redactor:
    def __init__(self, secrets: list[str]) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len, reverse=True)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def content(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.content(item) for item in value]
        if isinstance(value, dict):
            return {key: self.content(item) for key, item in value.items()}
        return value

    def message(self, message: dict[str, Any]) -> dict[str, Any]:
        return self.content(message) if self.secrets else message
