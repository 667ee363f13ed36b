"""Reads for sessions, runs and records. Nothing here writes."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from agents.models import Agent, AgentVersion
from context import CallStates, tool_call_states
from core.api.fields import MAX_ID, id_from_text
from core.crypto import RecentPlaintexts
from core.db_rows import models_from_row, select_list
from core.errors import NotFound
from core.spaces.models import Membership
from sessions.models import (
    CompactionSnapshot,
    Instance,
    ModelCall,
    PreparedCompaction,
    Run,
    SentBlob,
    Session,
    SessionFile,
    SessionMessage,
    SessionView,
)

RECORDS_PAGE_MAX = 200
RECORDS_PAGE_DEFAULT = 100


def session_list_for_user(*, user) -> QuerySet[Session]:
    """Only the caller's own sessions, in spaces they still belong to (RUN-11): sharing an
    agent in a space never shares sessions, and leaving a space closes its sessions."""
    return Session.objects.filter(user=user, space__memberships__user=user).select_related("agent", "version")


_SESSION_LAYOUT = ((Session, "s"), (Agent, "a"), (AgentVersion, "v"))


def session_get_for_user(*, session_id: Any, user) -> Session:
    """The session when ``user`` created it and is still a member of its space; NotFound
    (404) for anyone else, admins and staff included. With its agent and version, as
    ``session_list_for_user`` reads them, in a statement written out: every question and
    every page of a session starts here, and composing the ORM's join was a sixth of the
    web process's CPU at 50 users (issue #29)."""
    try:
        pk = int(session_id)
    except (TypeError, ValueError):
        raise NotFound("Session not found.") from None
    if not 0 < pk <= MAX_ID:
        raise NotFound("Session not found.")
    select = select_list(_SESSION_LAYOUT)
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select} FROM "{Session._meta.db_table}" s '
                       f'JOIN "{Agent._meta.db_table}" a ON a."id" = s."agent_id" '
                       f'JOIN "{AgentVersion._meta.db_table}" v ON v."id" = s."version_id" '
                       f'WHERE s."id" = %s AND s."user_id" = %s AND {creator_is_member_sql("s")}',
                       [pk, user.pk])
        row = cursor.fetchone()
    if row is None:
        raise NotFound("Session not found.")
    session, session.agent, session.version = models_from_row(row, _SESSION_LAYOUT)
    return session


def file_get_for_user(*, file_id: Any, user) -> SessionFile:
    """An attached file when ``user`` may read its session (the rule of
    ``session_get_for_user``); NotFound (404) for anyone else (RUN-13)."""
    try:
        return SessionFile.objects.select_related("session").get(
            pk=int(file_id), session__user=user, session__space__memberships__user=user)
    except (SessionFile.DoesNotExist, TypeError, ValueError, OverflowError):
        raise NotFound("File not found.") from None


def session_files(*, session: Session) -> QuerySet[SessionFile]:
    """The session's attached files, oldest first, without their bytes or text."""
    return SessionFile.objects.filter(session=session).defer("data", "text").order_by("id")


def run_get_for_user(*, run_id: Any, user) -> Run:
    """The run when ``user`` created its session and is still a member of its space."""
    try:
        return Run.objects.select_related("session", "version").get(
            pk=int(run_id), session__user=user, session__space__memberships__user=user)
    except (Run.DoesNotExist, TypeError, ValueError):
        raise NotFound("Run not found.") from None


def run_visible_to(*, run_id: int, user_id: int) -> str | None:
    """The run's status while ``user_id`` may still see it (creator and member), else None.

    One indexed query, for streams that re-check their reader while they stay open.
    """
    return (Run.objects.filter(pk=run_id, session__user_id=user_id, session__space__memberships__user_id=user_id)
            .values_list("status", flat=True).first())


def creator_is_member_sql(session_alias: str) -> str:
    """``session_creator_is_member`` as an SQL condition on the session row aliased
    ``session_alias``, for the statements that check it inside their own read or write."""
    return (f'EXISTS (SELECT 1 FROM "{Membership._meta.db_table}" m WHERE m."space_id" = {session_alias}."space_id" '
            f'AND m."user_id" = {session_alias}."user_id")')


def session_creator_is_member(*, session: Session) -> bool:
    """Whether the session's creator still belongs to its space: nobody asks, resumes or
    spends the space's key in a session of a space they have left."""
    return Membership.objects.filter(space_id=session.space_id, user_id=session.user_id).exists()


@dataclass(frozen=True)
class SessionTraits:
    """What a run asks of its session once, as it starts (one query for all three)."""

    other_models: bool  # an earlier action call went to another provider or model (CTX-11)
    imported: bool  # a view short of the original text: the session was imported (RUN-12)
    files_sent: bool  # a question of it sent a file (the question service marks the file, RUN-13)
    # The model asked about is the one every earlier action call went to (and there was
    # one): a run of it need not note it again (``Session.action_model``).
    model_noted: bool = False

    @property
    def may_carry_files(self) -> bool:
        """Whether a question record may carry attachments (an imported one carries what
        it carried): else no question need be read to know there are none."""
        return self.files_sent or self.imported


def session_traits(*, session_id: int, provider: str = "", model: str = "") -> SessionTraits:
    """``other_models`` is against ``provider``/``model`` (False when not given).

    One SELECT of the session's row and its EXISTS, written out: asked at every run, and
    the ORM's form cost more to compose than to run. Where the session's action calls went
    is a column of its row (``Session.action_model``), not a search of its calls: that grew
    with every question of the session (issue #29). Only a session that has noted none
    has its calls looked at — a new session's first run (no calls), or calls a worker of
    the version before that column made while the platform was upgraded."""
    views, files = SessionView._meta.db_table, SessionFile._meta.db_table
    key = Session.action_model_key(provider, model) if provider or model else None
    unnoted, params = "FALSE", []  # no model named: nothing to compare with, nothing to ask
    if key is not None:
        # The session's calls, through its runs. PostgreSQL is handed the runs' ids as an
        # array it computes first: given the join, a planner whose statistics lag (a table
        # growing fast, a prepared plan made early) scanned every call of every session
        # (issue #29). SQLite reads the join in the order written.
        runs, calls = Run._meta.db_table, ModelCall._meta.db_table
        session_runs = (f'= ANY(ARRAY(SELECT r."id" FROM "{runs}" r WHERE r."session_id" = s."id"))'
                        if connection.vendor == "postgresql" else
                        f'IN (SELECT r."id" FROM "{runs}" r WHERE r."session_id" = s."id")')
        unnoted = (f'CASE WHEN s."action_model" = %s THEN EXISTS (SELECT 1 FROM "{calls}" c WHERE c."run_id" '
                   f'{session_runs} AND c."purpose" = %s AND NOT (c."provider" = %s AND c."model" = %s)) '
                   'ELSE FALSE END')
        params = ["", ModelCall.Purpose.ACTION, provider, model]
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT s."action_model", {unnoted}, EXISTS (SELECT 1 FROM "{views}" WHERE "session_id" = s."id" '
            f'AND NOT "raw_complete"), EXISTS (SELECT 1 FROM "{files}" WHERE "session_id" = s."id" '
            f'AND "question_seq" IS NOT NULL) FROM "{Session._meta.db_table}" s WHERE s."id" = %s',
            [*params, session_id])
        row = cursor.fetchone()
    if row is None:  # no such session: nothing of it to carry on
        return SessionTraits(other_models=False, imported=False, files_sent=False)
    noted, unnoted_other, imported, files_sent = row
    other = key is not None and (bool(unnoted_other) if noted == "" else noted != key)
    # A session already mixed stays so whatever is noted: no write for it either.
    return SessionTraits(other_models=other, imported=bool(imported), files_sent=bool(files_sent),
                         model_noted=key is not None and noted in (key, Session.MIXED_MODELS))


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
    instance_id = id_from_text(instance)  # ASCII digits only: "²".isdigit() is True and int() refuses it
    return instance_id is not None and Instance.objects.filter(pk=instance_id, run__session=session).exists()


def prepared_summary_state(*, session: Session) -> dict[str, Any] | None:
    """CTX-45 for the chat: whether the session has a summary ready to commit at the next
    compaction (``{"status": "ready", "ready_at": ...}``), one being prepared
    (``"preparing"``, ``ready_at`` None), or neither (None). Never the summary itself.

    A preparation whose lease lapsed has lost its worker: it is nothing any more (the
    services end it when they next look; this read does not write)."""
    now = timezone.now()
    row = (PreparedCompaction.objects.filter(session=session)
           .filter(Q(status=PreparedCompaction.Status.READY)
                   | Q(status=PreparedCompaction.Status.PREPARING, lease_until__gte=now))
           .only("status", "ready_at").order_by("-id").first())
    if row is None:
        return None
    return {"status": row.status, "ready_at": row.ready_at}


def main_instance(*, run: Run) -> Instance:
    return Instance.objects.get(run=run, key=Instance.MAIN)


def calls_pending(*, instance: Instance) -> list[dict[str, Any]]:
    """The tool group in flight: calls of the instance's last step without a saved result,
    as ``{"id", "name", "arguments"}`` (RUN-7 refuses a view while there are any; CTX-36
    shows them). Read from the records: results are keyed ``result-<step>-<index>`` after
    their step's ``assistant-<step>``."""
    last = (SessionMessage.objects.filter(instance=instance, kind="assistant", entry_key__startswith="assistant-")
            .order_by("-seq").first())
    if last is None or not last.message.get("tool_calls"):
        return []
    step = last.entry_key.removeprefix("assistant-")
    done = set(SessionMessage.objects.filter(instance=instance, entry_key__startswith=f"result-{step}-")
               .values_list("entry_key", flat=True))
    pending = []
    for index, call in enumerate(last.message["tool_calls"]):
        if f"result-{step}-{index}" not in done:
            function = call.get("function") or {}
            pending.append({"id": str(call.get("id", "")), "name": str(function.get("name", "")),
                            "arguments": str(function.get("arguments", ""))})
    return pending


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


# Records and views a worker (or the web process) read lately, decrypted: each run reads
# its whole context again (see ``RecentPlaintexts``); 64 MiB bounds what a process keeps.
_RECORDS_READ = RecentPlaintexts(max_bytes=64 * 1024 * 1024)


def visible_records_for_engine(*, run: Run, instance: Instance, after_seq: int = 0) -> Iterator[dict[str, Any]]:
    """``visible_records_query`` as the engine reads it (``record_as_engine_dict``), from
    the six columns it needs: no model instance per record, no column it does not read,
    a statement written out, and a record decrypted once per process while it is read
    again and again (issue #29: a run loads its session's records at its first step)."""
    table = SessionMessage._meta.db_table
    if instance.parent_id is not None:
        visible, params = '"instance_id" = %s', [instance.pk]
    else:
        visible = '(("session_id" = %s AND "in_main" AND "seq" <= %s) OR "instance_id" = %s)'
        params = [run.session_id, run.inherited_watermark, instance.pk]
    message = SessionMessage._meta.get_field("message")
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT "seq", "run_id", "in_main", "instance_id", "kind", "message" FROM "{table}" '
                       f'WHERE {visible} AND "seq" > %s ORDER BY "seq"', [*params, after_seq])
        rows = cursor.fetchall()
    for seq, run_id, in_main, instance_id, kind, raw in rows:
        yield {"seq": seq, "run": run_id, "instance": Instance.MAIN if in_main else str(instance_id), "kind": kind,
               "message": _RECORDS_READ.load(message, raw)}


def tool_calls_unsettled(*, run: Run, instance: Instance) -> CallStates:
    """CTX-36: the instance's calls still pending and those whose outcome is unknown, read
    from every record its context is built from (not from its view, which a compaction
    may have summarized them out of), judged as the run's projection judges them (the
    run is the open one). Each call once, under the id its record holds."""
    return tool_call_states(visible_records_for_engine(run=run, instance=instance), open_runs={run.pk})


def snapshot_latest(*, instance: Instance) -> CompactionSnapshot | None:
    return instance.snapshots.order_by("-revision").first()


_VIEW_LAYOUT = ((SessionView, "v"),)


def view_best_for_run(*, run: Run) -> SessionView | None:
    """RUN-8: the compliant view with the highest watermark this run may start from.

    Only views inside the run's inherited prefix qualify: a resumed run never starts from
    a view that includes questions asked after it began (RUN-4, RUN-9).
    """
    # Written out, its messages decrypted through the records' cache: each run of a session
    # starts from the same view until a compaction makes the next (issue #29).
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select_list(_VIEW_LAYOUT)} FROM "{SessionView._meta.db_table}" v '
                       'WHERE v."session_id" = %s AND v."watermark" <= %s ORDER BY v."watermark" DESC, v."id" DESC '
                       'LIMIT 1', [run.session_id, run.inherited_watermark])
        row = cursor.fetchone()
    return None if row is None else models_from_row(row, _VIEW_LAYOUT, recent=_RECORDS_READ)[0]


# --- the model-call log (the context inspector) -------------------------------------------


@dataclass(frozen=True)
class SentEntry:
    """One message of a model call as it was sent, with our estimate (None when not kept,
    e.g. summary and verification calls)."""

    message: dict[str, Any]
    estimated_tokens: int | None


def _request_chain(call: ModelCall) -> list[dict[str, Any]]:
    """The requests of ``call``'s delta chain, oldest first (one query, bounded length)."""
    request = call.request if isinstance(call.request, dict) else {}
    if request.get("base") is None:
        return [request]
    rows = dict(ModelCall.objects.filter(instance_id=call.instance_id, pk__gte=request.get("root") or call.pk,
                                         pk__lte=call.pk).values_list("pk", "request"))
    chain = []
    pk: int | None = call.pk
    while pk is not None:
        current = rows.get(pk) or {}
        chain.append(current)
        pk = current.get("base")
    return list(reversed(chain))


def _resolved(call: ModelCall) -> tuple[dict[str, Any], list[int], list[int | None]]:
    """A stored request (format 2): its own fields, and its message refs and estimates."""
    refs: list[int] = []
    estimates: list[int | None] = []
    chain = _request_chain(call)
    for request in chain:
        keep = request.get("keep", 0)
        refs = refs[:keep] + list(request.get("add") or [])
        estimates = estimates[:keep] + list(request.get("estimates") or [])
    return chain[-1], refs, estimates


def model_call_body(*, call: ModelCall) -> dict[str, Any]:
    """Exactly the body the call sent (its fields in their order), rebuilt from its references."""
    stored = call.request if isinstance(call.request, dict) else {}
    if stored.get("v") != 2:  # logged before requests were stored by reference
        return {"messages": stored.get("messages", []), **({"tools": stored["tools"]} if stored.get("tools") else {})}
    request, refs, _ = _resolved(call)
    named = request.get("blobs", {})
    blobs = dict(SentBlob.objects.filter(session_id=call.run.session_id, pk__in={*refs, *named.values()})
                 .values_list("pk", "content"))
    body: dict[str, Any] = {}
    for key in request.get("order", []):
        if key == "messages":
            body[key] = [blobs[ref] for ref in refs]
        elif key in named:
            body[key] = blobs[named[key]]
        else:
            body[key] = request["fields"][key]
    return body


def model_call_entries(*, call: ModelCall) -> list[SentEntry]:
    """The messages a call sent, in order, each with its estimate. A native Anthropic
    body's top-level system text comes first, as a system message."""
    stored = call.request if isinstance(call.request, dict) else {}
    if stored.get("v") != 2:
        estimates = stored.get("estimates") or []
        return [SentEntry(message=m, estimated_tokens=estimates[i] if i < len(estimates)
                          and isinstance(estimates[i], int) else None)
                for i, m in enumerate(stored.get("messages") or []) if isinstance(m, dict)]
    body = model_call_body(call=call)
    _, _, estimates = _resolved(call)
    entries = [SentEntry(message=m, estimated_tokens=e if isinstance(e, int) else None)
               for m, e in zip(body.get("messages", []), estimates)]
    system = body.get("system")
    if system is not None:
        text = system if isinstance(system, str) else "\n\n".join(
            b.get("text", "") for b in system if isinstance(b, dict))
        entries.insert(0, SentEntry(message={"role": "system", "content": text}, estimated_tokens=None))
    return entries


def model_call_repairs(*, call: ModelCall) -> list[dict[str, Any]]:
    """What the projector changed to make this call's request valid, each with its kind,
    reason, record ``seq`` and ``position`` among the sent messages (None when the body's
    shape does not follow the projection, e.g. a native Anthropic body). Calls logged
    before repairs were kept, and summary and verification calls, have none."""
    stored = call.request if isinstance(call.request, dict) else {}
    return [r for r in stored.get("repairs") or [] if isinstance(r, dict)]


def model_call_tools(*, call: ModelCall) -> list[dict[str, Any]]:
    """The tool schemas a call sent."""
    stored = call.request if isinstance(call.request, dict) else {}
    tools = model_call_body(call=call).get("tools") if stored.get("v") == 2 else stored.get("tools")
    return [tool for tool in tools or [] if isinstance(tool, dict)]
