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

Every door that lets someone other than a session's creator read its content asks
``read_is_audited`` (who may read, and whether the read is audited) and reads through
``sessions.services.access_audit.read_audited`` (the audit row first, in the read's
transaction): the API's file download and context inspector, and the console's pages.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Model

from core.api.fields import id_from_text
from core.errors import NotFound
from core.spaces.selectors import space_is_admin
from sessions.models import ModelCall, Run, Session, SessionFile
from sessions.selectors.sessions import session_creator_is_member


def _perm(action: str, model: type[Model]) -> str:
    return f"{model._meta.app_label}.{action}_{model._meta.model_name}"


def staff_may_read(*, user, row_model: type[Model], content_model: type[Model]) -> bool:
    if not (user.is_authenticated and user.is_active and user.is_staff):
        return False
    may_view_row = user.has_perm(_perm("view", row_model)) or user.has_perm(_perm("change", row_model))
    return may_view_row and user.has_perm(_perm("view", content_model))


def read_is_audited(*, user, session: Session, may_read_as_member: bool, row_model: type[Model],
                    content_model: type[Model], not_found: str) -> bool:
    """Whether ``user``'s read of ``session``'s content must be audited first — the one
    rule of "the owner, or staff with an audited read". ``may_read_as_member``: the door's
    own rule for the people of the session's space (its creator for a file, an admin of
    the space for the context inspector); they read unaudited only their own session.
    Anyone else reads only as staff holding the permissions of the row and its content
    (``staff_may_read``), always audited; NotFound (404, ``not_found``) for everyone else,
    as for a row that does not exist."""
    if may_read_as_member:
        return session.user_id != user.pk
    if staff_may_read(user=user, row_model=row_model, content_model=content_model):
        return True
    raise NotFound(not_found)


def run_get_for_inspector(*, run_id: Any, user) -> tuple[Run, bool]:
    """The run whose context inspector ``user`` may read, and whether the read must be
    audited first (it is someone else's session); NotFound (404) for everyone else — the
    session's creator included, unless they administer its space."""
    pk = id_from_text(str(run_id))
    run = Run.objects.select_related("session").filter(pk=pk).first() if pk else None
    if run is None:
        raise NotFound("Run not found.")
    admin = space_is_admin(space_id=run.session.space_id, user=user)
    return run, read_is_audited(user=user, session=run.session, may_read_as_member=admin, row_model=Run,
                                content_model=ModelCall, not_found="Run not found.")


def file_get_for_reader(*, file_id: Any, user) -> tuple[SessionFile, bool]:
    """An attached file ``user`` may download, and whether the read must be audited first:
    its session's creator while still a member of its space (``file_get_for_user``'s rule),
    unaudited; staff holding the console's permissions for sessions and their files,
    audited; NotFound (404) for everyone else (RUN-13)."""
    pk = id_from_text(str(file_id))
    file = SessionFile.objects.select_related("session").filter(pk=pk).first() if pk else None
    if file is None:
        raise NotFound("File not found.")
    member = file.session.user_id == user.pk and session_creator_is_member(session=file.session)
    return file, read_is_audited(user=user, session=file.session, may_read_as_member=member, row_model=Session,
                                 content_model=SessionFile, not_found="File not found.")
