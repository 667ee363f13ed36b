"""What staff may open (SPEC §10, RUN-11): one definition for the console and the API.

Staff status alone opens nothing. Reading decrypted content takes the view permission of
the row it hangs on (or its change permission, as the admin grants view with change) and
the view permission of the content itself — the context inspector of a run needs
``view_run`` and ``view_modelcall``, a session's records ``view_session`` and
``view_sessionmessage``. Superusers hold every permission.
"""
from __future__ import annotations

from django.db.models import Model


def _perm(action: str, model: type[Model]) -> str:
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def staff_may_read(*, user, row_model: type[Model], content_model: type[Model]) -> bool:
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    may_view_row = user.has_perm(_perm("view", row_model)) or user.has_perm(_perm("change", row_model))
    return may_view_row and user.has_perm(_perm("view", content_model))
