"""The domain error hierarchy: services raise these, the API turns them into one JSON shape.

``{"error": {"code", "message", "fields"?}}`` with the status each class names.
"""
from __future__ import annotations


class DomainError(Exception):
    status: int = 400
    code: str = "invalid"

    def __init__(self, message: str, *, code: str | None = None, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.fields = fields or {}


class ValidationFailed(DomainError):
    status = 400
    code = "invalid"


class NotFound(DomainError):
    """Anything outside the caller's reach is reported as not found (never 'forbidden')."""

    status = 404
    code = "not_found"


class Forbidden(DomainError):
    status = 403
    code = "forbidden"


class Conflict(DomainError):
    status = 409
    code = "conflict"


class ActiveRunConflict(Conflict):
    code = "run_active"


class TooLarge(DomainError):
    """More than a bound allows (a file, a session's files): 413."""

    status = 413
    code = "too_large"


class TryLater(DomainError):
    """Refused for now, nothing done: a person's share of something is taken (429: their
    slow work at once, their sessions of the day), or the process's (503). ``retry_after``
    seconds go out as ``Retry-After``."""

    status = 503
    code = "busy"

    def __init__(self, message: str, *, retry_after: int, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message, code=code)
        self.retry_after = retry_after
        if status is not None:
            self.status = status


class UnsupportedType(DomainError):
    """Content of a kind this server does not take (judged by the bytes, never the name): 415."""

    status = 415
    code = "unsupported_file_type"
