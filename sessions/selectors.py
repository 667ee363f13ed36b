"""Reads for sessions, runs and records. Nothing here writes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q, QuerySet

from agentloom.errors import NotFound
from sessions.models import CompactionSnapshot, Instance, ModelCall, Run, Session, SessionMessage, SessionView

RECORDS_PAGE_MAX = 200
RECORDS_PAGE_DEFAULT = 100


def session_list_for_user(*, user) -> QuerySet[Session]:
    """Only the caller's own sessions: sharing an agent in a space never shares sessions."""
    return Session.objects.filter(user=user).select_related("agent", "version")


def session_get_for_user(*, session_id: Any, user) -> Session:
    """The session when ``user`` created it; NotFound (404) for anyone else, admins included."""
    try:
        return session_list_for_user(user=user).get(pk=int(session_id))
    except (Session.DoesNotExist, TypeError, ValueError):
        raise NotFound("Session not found.") from None


def run_get_for_user(*, run_id: Any, user) -> Run:
    try:
        return Run.objects.select_related("session", "version").get(pk=int(run_id), session__user=user)
    except (Run.DoesNotExist, TypeError, ValueError):
        raise NotFound("Run not found.") from None


def instance_label(record: SessionMessage) -> str:
    """How the API and the engine name an instance: "main", or the sub-instance's id."""
    return Instance.MAIN if record.in_main else str(record.instance_id)


def record_as_engine_dict(record: SessionMessage) -> dict[str, Any]:
    """The SPEC §3 record format the context engine reads."""
    return {
        "seq": record.seq,
        "run": record.run_id,
        "instance": instance_label(record),
        "kind": record.kind,
        "message": record.message,
    }


@dataclass(frozen=True)
class RecordsPage:
    items: list[SessionMessage]
    next_after: int


def records_page(*, session: Session, after: int = 0, limit: int = RECORDS_PAGE_DEFAULT,
                 instance: str | None = None) -> RecordsPage:
    """One page of records after ``after`` (RUN-11): keyset on (session, seq), never OFFSET.

    ``instance``: None for all, "main", or a sub-instance id of this session (the caller
    validates it). An empty page returns the same cursor.
    """
    query = SessionMessage.objects.filter(session=session, seq__gt=after)
    if instance == Instance.MAIN:
        query = query.filter(in_main=True)
    elif instance is not None:
        query = query.filter(instance_id=int(instance))
    items = list(query.order_by("seq")[:limit])
    return RecordsPage(items=items, next_after=items[-1].seq if items else after)


def instance_in_session(*, session: Session, instance: str) -> bool:
    if instance == Instance.MAIN:
        return True
    return instance.isdigit() and Instance.objects.filter(pk=int(instance), run__session=session).exists()


def main_instance(*, run: Run) -> Instance:
    return Instance.objects.get(run=run, key=Instance.MAIN)


def sub_instances_running(*, instance: Instance) -> list[dict[str, Any]]:
    """Sub-agents ``instance`` delegated to that have no delegation result yet (CTX-36):
    ``{"id", "task", "status"}``. A sub-instance is keyed ``sub-<parent>-<step>-<index>``
    and its result ``result-<step>-<index>`` in the parent (see the run loop's tool calls)."""
    running = []
    for child in Instance.objects.filter(parent=instance).order_by("id").defer("frame"):
        step_and_index = child.key.removeprefix(f"sub-{instance.pk}-")
        if SessionMessage.objects.filter(instance=instance, entry_key=f"result-{step_and_index}").exists():
            continue
        task = SessionMessage.objects.filter(instance=child, kind="user").order_by("seq").first()
        running.append({"id": str(child.pk), "status": "running",
                        "task": (task.message.get("content") if task else "") or ""})
    return running


def visible_records_query(*, run: Run, instance: Instance, after_seq: int = 0) -> QuerySet[SessionMessage]:
    """The records an instance's context is built from, after ``after_seq``.

    A main instance sees the session's main-instance records up to the watermark its
    run inherited (RUN-2), plus its own records — never questions asked later by other
    runs (RUN-4), never sub-instances' internals (RUN-3). A sub-instance sees only its own.
    """
    if instance.parent_id is not None:
        return SessionMessage.objects.filter(instance=instance, seq__gt=after_seq).order_by("seq")
    inherited = Q(session_id=run.session_id, in_main=True, seq__lte=run.inherited_watermark)
    own = Q(instance=instance)
    return SessionMessage.objects.filter(inherited | own, seq__gt=after_seq).order_by("seq")


def snapshot_latest(*, instance: Instance) -> CompactionSnapshot | None:
    return instance.snapshots.order_by("-revision").first()


def view_best_for_run(*, run: Run) -> SessionView | None:
    """RUN-8: the compliant view with the highest watermark this run may start from.

    Only views inside the run's inherited prefix qualify: a resumed run never starts from
    a view that includes questions asked after it began (RUN-4, RUN-9).
    """
    return (
        SessionView.objects.filter(session_id=run.session_id, watermark__lte=run.inherited_watermark)
        .order_by("-watermark", "-id")
        .first()
    )


# --- the model-call log (the context inspector) -------------------------------------------


@dataclass(frozen=True)
class SentEntry:
    """One message of a model call as it was sent, with our estimate (None when not kept,
    e.g. summary and verification calls)."""

    message: dict[str, Any]
    estimated_tokens: int | None


def model_call_entries(*, call: ModelCall) -> list[SentEntry]:
    """The messages a call sent, in order, each with its estimate."""
    request = call.request if isinstance(call.request, dict) else {}
    estimates = request.get("estimates") or []
    return [SentEntry(message=message,
                      estimated_tokens=estimates[i] if i < len(estimates) and isinstance(estimates[i], int) else None)
            for i, message in enumerate(request.get("messages") or []) if isinstance(message, dict)]


def model_call_tools(*, call: ModelCall) -> list[dict[str, Any]]:
    """The tool schemas a call sent."""
    request = call.request if isinstance(call.request, dict) else {}
    return [tool for tool in request.get("tools") or [] if isinstance(tool, dict)]
