"""Error pages outside DRF views: JSON under /api/ and /chat/ (the chat's own JSON: fragments,
state, decisions, answers), plain text elsewhere; never a trace."""
from __future__ import annotations

import logging
import sys

from django.http import HttpResponse, JsonResponse

from core.api.errors import error_body
from core.db_pool import BUSY_MESSAGE, RETRY_AFTER_SECONDS, database_busy

logger = logging.getLogger("core.api")
JSON_PREFIXES = ("/api/", "/chat/")


def _answer(request, status: int, code: str, message: str):
    if request.path.startswith(JSON_PREFIXES):
        return JsonResponse(error_body(code, message), status=status)
    return HttpResponse(f"{status} {message}\n", status=status, content_type="text/plain; charset=utf-8")


def bad_request(request, exception=None):
    return _answer(request, 400, "invalid", "Bad request.")


def bad_request_saying(request, message: str):
    """A 400 that says what was wrong, for middleware that refuses a request before any view."""
    return _answer(request, 400, "invalid", message)


def forbidden(request, exception=None):
    return _answer(request, 403, "forbidden", "Forbidden.")


def not_found(request, exception=None):
    return _answer(request, 404, "not_found", "Not found.")


def server_error(request):
    # Django calls this inside its handler of the exception: a database that had no
    # connection for the request (pool timed out, server full) is a 503 to retry, not a 500.
    if database_busy(sys.exc_info()[1]):
        logger.warning("database busy: %s refused with 503", request.path)
        response = _answer(request, 503, "busy", BUSY_MESSAGE)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return _answer(request, 500, "server_error", "Something went wrong on our side.")
