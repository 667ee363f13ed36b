"""What staff and operators may open (SPEC §9, §10, RUN-11): one definition for the console
and the API.

Staff status alone opens nothing. Reading decrypted content takes the view permission of
the row it hangs on (or its change permission, as the admin grants view with change) and
the view permission of the content itself — the context inspector of a run needs
``view_run`` and ``view_modelcall``, a session's records ``view_session`` and
``view_sessionmessage``. Superusers hold every permission.

The context inspector is for the people who run an agent, never for the person chatting
with it, who may not see its instructions (SPEC §9): the admins of the session's space, and
staff with the console's permissions. A read of someone else's session is audited.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Model

from core.api.fields import id_from_text
from core.errors import NotFound
from core.spaces.selectors import space_is_admin
from sessions.models import ModelCall, Run


def _perm(action: str, model: type[Model]) -> str:
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def staff_may_read(*, user, row_model: type[Model], content_model: type[Model]) -> bool:
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    may_view_row = user.has_perm(_perm("view", row_model)) or user.has_perm(_perm("change", row_model))
    return may_view_row and user.has_perm(_perm("view", content_model))


def run_get_for_inspector(*, run_id: Any, user) -> tuple[Run, bool]:
    """The run whose context inspector ``user`` may read, and whether the read must be
    audited first (it is someone else's session); NotFound (404) for everyone else — the
    session's creator included, unless they administer its space."""
    pk = id_from_text(str(run_id))
    run = Run.objects.select_related("session").filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound("Run not found.")
    if space_is_admin(space_id=run.session.space_id, user=user):
        return run, run.session.user_id != user.pk
    if staff_may_read(user=user, row_model=Run, content_model=ModelCall):
        return run, True
    raise NotFound("Run not found.")
