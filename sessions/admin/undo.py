"""Undoing a compaction from the console (CTX-51): the panel of the session's compactions
page and the POST that undoes, audited.

An operator who may change sessions (``change_session``, as Compact now asks) and read their
compactions may undo the newest compaction of the main line while no run works; staff who
may only view are shown the same page without the button, and refused (403) if they post
anyway. The undo goes through the same service as the chat's (``compaction_undo``), which
writes the access audit (``compaction_undo``: who, when, which session and compaction) in
the undo's own transaction; the admin's history of the session notes it too.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect

from core.api.fields import id_from_text
from core.errors import DomainError
from sessions.models import CompactionSnapshot, Session
from sessions.selectors.compactions import UndoTarget, snapshot_is_undo, undo_facts, undo_target
from sessions.services.compaction_undo import compaction_undo


@dataclass(frozen=True)
class UndoNote:
    """An undo, as the page lists it."""

    at: str
    by: str
    revision: int
    run_id: int


@dataclass(frozen=True)
class UndoPanel:
    """What the compactions page shows of undoing: the compaction an undo would undo now
    (None while a run works, or when the newest checkpoint is an undo), whether this staff
    user may do it, and every undo made, by the compaction it undid."""

    target: UndoTarget | None
    may_undo: bool
    action_url: str
    undone: dict[int, UndoNote] = field(default_factory=dict)

    @property
    def undone_ids(self) -> set[int]:
        return set(self.undone)


def may_undo(model_admin: ModelAdmin, request: HttpRequest, session: Session) -> bool:
    """The console's write permission on sessions (the action Compact now asks for too)."""
    return model_admin.has_change_permission(request, session)


def undo_panel(model_admin: ModelAdmin, request: HttpRequest, session: Session, action_url: str,
               snapshots: list[CompactionSnapshot]) -> tuple[list[CompactionSnapshot], UndoPanel]:
    """The session's compactions (the undos' checkpoints left out: they are listed as
    undos of the compaction they undid) and the panel. Reads plain columns only."""
    undos = [snapshot for snapshot in snapshots if snapshot_is_undo(snapshot)]
    people = dict(get_user_model().objects.filter(
        pk__in={undo_facts(s).get("user") for s in undos if undo_facts(s).get("by") == "operator"})
        .values_list("pk", "username"))
    undone = {}
    for snapshot in undos:
        facts = undo_facts(snapshot)
        operator = facts.get("by") == "operator"
        who = people.get(int(facts.get("user") or 0), "an operator") if operator else "the session's creator"
        undone[int(facts.get("undone_snapshot") or 0)] = UndoNote(
            at=str(facts.get("at") or snapshot.created_at.isoformat()), by=who,
            revision=int(facts.get("undone_revision") or 0), run_id=snapshot.instance.run_id)
    return ([snapshot for snapshot in snapshots if not snapshot_is_undo(snapshot)],
            UndoPanel(target=undo_target(session_id=session.pk), may_undo=may_undo(model_admin, request, session),
                      action_url=action_url, undone=undone))


def compaction_undo_view(model_admin: ModelAdmin, request: HttpRequest, session: Session,
                         back: str) -> HttpResponse:
    """POST (CSRF-checked by the admin site): undo the compaction named by ``compaction``
    — the page's newest — then back to the compactions page with the outcome in words.
    ``session`` was reached through ``object_or_404`` (the staff user may read its
    compactions); changing sessions is checked here."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not may_undo(model_admin, request, session):
        raise PermissionDenied
    expected = id_from_text(str(request.POST.get("compaction", "")))
    if expected is None:
        messages.warning(request, "Which compaction to undo was not said: reload the page and try again.")
        return HttpResponseRedirect(back)
    try:
        result = compaction_undo(session=session, by=request.user, operator=True, expected=expected)
    except DomainError as exc:
        messages.warning(request, exc.message)
        return HttpResponseRedirect(back)
    model_admin.log_change(request, session, f"Undid compaction revision {result.undone.revision} of run "
                                            f"{result.undone.instance.run_id} (CTX-51).")
    messages.success(request, f"Compaction #{result.undone.revision} of run {result.undone.instance.run_id} undone: "
                              "the session's next question reads the earlier messages in full again.")
    return HttpResponseRedirect(back)
