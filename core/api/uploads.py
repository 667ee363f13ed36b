"""How many file bytes a multipart body may carry (SPEC §11, RUN-13).

Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``AGENTLOOM_MAX_REQUEST_BYTES``) bounds every
body except its file parts. This handler, first in ``FILE_UPLOAD_HANDLERS``, counts those
too: against the same bound everywhere, and against the setting a view names with
:func:`upload_bound` (the attachment upload: ``AGENTLOOM_FILE_MAX_BYTES``, refused as
``file_too_large``) on that view only. It runs whenever the body is parsed — also during authentication, when the CSRF
check reads the form — so the bound is the view's own from the first byte; a declared
``Content-Length`` past it is refused before anything is read.

The door reads each body before the view runs (``agentloom/request_body.py``, issue #44);
:func:`body_bound` tells it the most any view could take, so that it stops reading only
what the view would refuse anyway, with the view's own error.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.files.uploadhandler import FileUploadHandler
from django.urls import Resolver404, resolve

UPLOAD_BOUND_ATTRIBUTE = "upload_bound"


def upload_bound(setting: str, refuse: Callable[[int], Exception]) -> Callable[[Any], Any]:
    """Mark a view (the outermost decorator) as taking files up to ``settings.<setting>``
    bytes; past it, the handler raises ``refuse(bound)`` (a domain error of the view's)."""
    def mark(view: Any) -> Any:
        setattr(view, UPLOAD_BOUND_ATTRIBUTE, (setting, refuse))
        return view
    return mark


def request_bytes_bound() -> int:
    """The largest body a view without an upload bound can take: its file parts and its
    form fields are each bounded by ``AGENTLOOM_MAX_REQUEST_BYTES``."""
    return 2 * settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def body_bound(path: str) -> tuple[int, Exception]:
    """The largest body the view at ``path`` can take, and the error it answers past it.

    Resolving the path costs a little, so the door asks only for a body already past
    :func:`request_bytes_bound`."""
    try:
        bound = getattr(resolve(path).func, UPLOAD_BOUND_ATTRIBUTE, None)
    except Resolver404:
        bound = None
    if bound is None:
        return request_bytes_bound(), RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")
    setting, refuse = bound
    limit = getattr(settings, setting)
    return limit + settings.DATA_UPLOAD_MAX_MEMORY_SIZE, refuse(limit)


class BoundedUploadHandler(FileUploadHandler):
    """Passes every chunk on to the next handler, counting; refuses past the bound."""

    def _bound(self) -> tuple[int, Callable[[int], Exception] | None]:
        match = getattr(self.request, "resolver_match", None)
        bound = getattr(getattr(match, "func", None), UPLOAD_BOUND_ATTRIBUTE, None)
        if bound is None:
            return settings.DATA_UPLOAD_MAX_MEMORY_SIZE, None
        setting, refuse = bound
        return getattr(settings, setting), refuse

    def _refuse(self) -> Exception:
        if self.refuse is not None:
            return self.refuse(self.limit)
        return RequestDataTooBig("Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE.")

    def handle_raw_input(self, input_data, META, content_length, boundary, encoding=None):
        self.limit, self.refuse = self._bound()
        self.total = 0
        # The file parts, plus the form fields and part headers Django bounds on its own.
        if content_length and content_length > self.limit + (settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0):
            raise self._refuse()
        return None

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.total += len(raw_data)
        if self.total > self.limit:
            raise self._refuse()
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
