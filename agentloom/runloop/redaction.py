"""LOOP-8: credentials the runtime knows become ``[REDACTED]`` before anything is written.

A model can write a key in forms a plain substring search misses; the one a review found
is tool-call arguments with the key spelled as JSON escapes (``\u0073\u006b…``), which
decode to the key. Arguments are therefore redacted as decoded JSON, then written back.
"""
from __future__ import annotations

import json
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

    def arguments(self, raw: str) -> str:
        """Tool-call arguments with every secret removed, whether written plainly or as
        JSON escapes. Arguments that hold a secret only once decoded are written back as
        JSON of the redacted values (what they mean is kept; their spelling is not)."""
        plain = self.text(raw)
        if not self.secrets or "\\" not in plain:
            return plain
        try:
            decoded = json.loads(plain)
        except ValueError:
            return plain
        redacted = self.content(decoded)
        return plain if redacted == decoded else json.dumps(redacted, ensure_ascii=False)

    def message(self, message: dict[str, Any]) -> dict[str, Any]:
        if not self.secrets:
            return message
        redacted = self.content(message)
        for call in redacted.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                function["arguments"] = self.arguments(function["arguments"])
        return redacted
