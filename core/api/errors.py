"""One exception handler for the whole API: every error leaves in the same JSON shape.

No stack trace, no provider body, no secret ever reaches a client; unexpected errors
are logged with their traceback on the server and answered with a bare 500.
"""
from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from core.db_pool import BUSY_MESSAGE, RETRY_AFTER_SECONDS, database_busy
from core.errors import DomainError, TryLater

logger = logging.getLogger("core.api")

TOO_LARGE_MESSAGE = "The request body is larger than this server accepts."


def error_body(code: str, message: str, fields: dict | None = None) -> dict:
    body: dict = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return {"error": body}


def _flatten(detail) -> dict[str, str]:
    """DRF's nested validation detail → {field: first message}; nested fields dotted."""
    out: dict[str, str] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list):
            if value and all(not isinstance(v, (dict, list)) for v in value):
                out[prefix or "non_field_errors"] = str(value[0])
            else:
                for index, inner in enumerate(value):
                    walk(f"{prefix}.{index}" if prefix else str(index), inner)
        else:
            out[prefix or "non_field_errors"] = str(value)

    walk("", detail)
    return out


_DRF_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    406: "not_acceptable",
    409: "conflict",
    413: "too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def exception_handler(exc, context) -> Response:
    if isinstance(exc, DomainError):
        headers = {"WWW-Authenticate": "Token"} if exc.status == 401 else None
        if isinstance(exc, TryLater):
            headers = {"Retry-After": str(exc.retry_after)}
        return Response(error_body(exc.code, exc.message, exc.fields), status=exc.status, headers=headers)
    if isinstance(exc, Http404):
        return Response(error_body("not_found", "Not found."), status=404)
    if isinstance(exc, DjangoPermissionDenied):
        return Response(error_body("forbidden", "You do not have permission to do this."), status=403)
    if isinstance(exc, RequestDataTooBig):  # raised while DRF reads a body past AGENTLOOM_MAX_REQUEST_BYTES
        return Response(error_body("too_large", TOO_LARGE_MESSAGE), status=413)
    if isinstance(exc, SuspiciousOperation):  # e.g. too many form fields: Django itself answers these with 400
        return Response(error_body("invalid", "Bad request."), status=400)
    if isinstance(exc, drf.ValidationError):
        fields = _flatten(exc.detail)
        return Response(error_body("invalid", "The request is not valid.", fields), status=400)
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed)):
        # DRF turns these into 403 when its first authenticator (the browser session) names
        # no scheme; SPEC §9 says 401, with the scheme an API client can use.
        message = exc.detail if isinstance(exc.detail, str) else "Authentication required."
        return Response(error_body("not_authenticated", str(message)), status=401,
                        headers={"WWW-Authenticate": "Token"})
    if isinstance(exc, drf.APIException):
        status = exc.status_code
        message = exc.detail if isinstance(exc.detail, str) else "Request refused."
        headers = {}
        if isinstance(exc, drf.Throttled) and exc.wait is not None:
            headers["Retry-After"] = str(int(exc.wait) + 1)
        return Response(error_body(_DRF_CODES.get(status, "error"), str(message)), status=status, headers=headers)
    if database_busy(exc):
        return busy_response()
    logger.error("unhandled API error in %s", context.get("view").__class__.__name__ if context else "?", exc_info=exc)
    return Response(error_body("server_error", "Something went wrong on our side."), status=500)


def busy_response() -> Response:
    """No database connection in time (SPEC §11): refused before anything was done."""
    logger.warning("database busy: request refused with 503")
    return Response(error_body("busy", BUSY_MESSAGE), status=503,
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
