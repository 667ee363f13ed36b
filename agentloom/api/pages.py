"""Error pages outside DRF views: JSON under /api/, plain text elsewhere; never a trace."""
from __future__ import annotations

from django.http import HttpResponse, JsonResponse

from agentloom.api.errors import error_body


def _answer(request, status: int, code: str, message: str):
    if request.path.startswith("/api/"):
        return JsonResponse(error_body(code, message), status=status)
    return HttpResponse(f"{status} {message}\n", status=status, content_type="text/plain; charset=utf-8")


def bad_request(request, exception=None):
    return _answer(request, 400, "invalid", "Bad request.")


def forbidden(request, exception=None):
    return _answer(request, 403, "forbidden", "Forbidden.")


def not_found(request, exception=None):
    return _answer(request, 404, "not_found", "Not found.")


def server_error(request):
    return _answer(request, 500, "server_error", "Something went wrong on our side.")
