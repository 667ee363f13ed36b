"""Reads for the chat pages. Reach is always the caller's own sessions (SPEC §11): the
session and run look-ups go through ``sessions.selectors``, which answer 404 otherwise."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.models import Max, OuterRef, Subquery
from django.urls import reverse

from agents.models import Agent, AgentVersion
from agents.selectors import agent_list_for_user, version_budget
from agents.server_tools import frozen_server_tools
from models_catalog.providers import provider_is_offline
from sessions.models import Instance, ModelCall, Run, RunEvent, Session, SessionMessage
from sessions.selectors.files import session_files
from sessions.selectors.search import search_terms, sessions_listed, sessions_search
from sessions.services.files import file_name_of
from web.tool_labels import tool_labels

SIDEBAR_SESSIONS = 50
RUNS_PER_PAGE = 20


def sessions_for_sidebar(*, user, query: object = "", current: Session | None = None) -> list[Session]:
    """The caller's most recent sessions with something asked in them, newest first; those
    matching ``query`` (title or question text, ``sessions_search``) when there is one.

    ``current``, the session on screen, heads the list while nothing was asked in it: the
    page names it after its first question, in this tab and in the session's other tabs."""
    if search_terms(query):
        return sessions_search(user=user, query=query, limit=SIDEBAR_SESSIONS)
    listed = list(sessions_listed(user=user)[:SIDEBAR_SESSIONS])
    if current is not None and not current.last_seq and all(item.pk != current.pk for item in listed):
        listed.insert(0, current)
    return listed


def pending_files(*, session: Session) -> list[dict[str, Any]]:
    """The session's files attached and not sent with a question yet (they count in its
    room until removed), as the composer's chips show them."""
    files = session_files(session=session).filter(question_seq__isnull=True)
    return [{"id": file.pk, "name": file_name_of(file), "content_type": file.content_type, "size": file.size,
             "kind": file.kind, "url": reverse("file-download", args=[file.pk])} for file in files]


def agents_startable(*, user) -> list[Agent]:
    """Agents of the caller's spaces that have a published version (a session needs one),
    with the provider and model of that version (``latest_provider``, ``latest_model``)
    and whether it is the offline demo (``latest_offline``): a new session binds the
    latest version, whatever the draft says today."""
    latest = AgentVersion.objects.filter(agent=OuterRef("pk")).order_by("-version")
    agents = list(agent_list_for_user(user=user).filter(latest_version__isnull=False)
                  .annotate(latest_provider=Subquery(latest.values("provider")[:1]),
                            latest_model=Subquery(latest.values("model")[:1])))
    for agent in agents:
        agent.latest_offline = provider_is_offline(agent.latest_provider)
    return agents


@dataclass(frozen=True)
class RunsPage:
    runs: list[Run]
    earlier_before: int | None  # a run id to page back from, when there are earlier runs
    is_latest_page: bool


def runs_page(*, session: Session, before: int | None = None, limit: int = RUNS_PER_PAGE) -> RunsPage:
    """Up to ``limit`` runs of the session, oldest first, ending before run ``before`` (or at the last)."""
    query = Run.objects.filter(session=session)
    if before is not None:
        query = query.filter(pk__lt=before)
    newest_first = list(query.order_by("-id")[: limit + 1])
    has_earlier = len(newest_first) > limit
    runs = list(reversed(newest_first[:limit]))
    return RunsPage(runs=runs, earlier_before=runs[0].pk if has_earlier and runs else None,
                    is_latest_page=before is None)


def session_last_run(*, session: Session) -> Run | None:
    return Run.objects.filter(session=session).order_by("-id").first()


def main_records_of_runs(*, run_ids: list[int]) -> dict[int, list[SessionMessage]]:
    """Main-instance records per run, in seq order (sub-instances' internals are not the chat)."""
    grouped: dict[int, list[SessionMessage]] = defaultdict(list)
    for record in SessionMessage.objects.filter(run_id__in=run_ids, in_main=True).order_by("seq"):
        grouped[record.run_id].append(record)
    return grouped


def tool_durations(*, run_ids: list[int]) -> dict[tuple[int, str], int]:
    """``(run, call_id) → duration_ms`` from the runs' ``tool_finished`` events."""
    durations: dict[tuple[int, str], int] = {}
    for event in RunEvent.objects.filter(run_id__in=run_ids, type="tool_finished").order_by("run_id", "seq"):
        payload = event.payload or {}
        if isinstance(payload.get("duration_ms"), int) and payload.get("call_id"):
            durations[(event.run_id, str(payload["call_id"]))] = payload["duration_ms"]
    return durations


def compacted_run_ids(*, run_ids: list[int]) -> set[int]:
    """Runs whose context was compacted while they worked (a ``compacted`` event)."""
    return set(RunEvent.objects.filter(run_id__in=run_ids, type="compacted").values_list("run_id", flat=True))


def last_record_seqs(*, run_ids: list[int]) -> dict[int, int]:
    """Each run's last record seq (any instance), read backwards along (run, seq): one row
    a run, nothing decrypted. Records are only ever appended, so it changes with any."""
    latest = SessionMessage.objects.filter(run=OuterRef("pk")).order_by("-seq").values("seq")[:1]
    rows = Run.objects.filter(pk__in=run_ids).annotate(last=Subquery(latest)).values_list("pk", "last")
    return {pk: last or 0 for pk, last in rows}


def last_event_seqs(*, run_ids: list[int]) -> dict[int, int]:
    rows = RunEvent.objects.filter(run_id__in=run_ids).values("run_id").annotate(last=Max("seq"))
    return {row["run_id"]: row["last"] for row in rows}


def queued_supplements(*, run: Run) -> list[dict[str, Any]]:
    """Supplements sent to an active run and not yet taken into its records (RUN-5)."""
    instance = Instance.objects.filter(run=run, key=Instance.MAIN).first()
    if instance is None:
        return []
    return [item for item in (instance.frame or {}).get("supplements") or [] if isinstance(item, dict)]


def delta_events(*, run: Run, after: int, upto: int) -> list[RunEvent]:
    """The events that shape a streamed text block: main-instance text deltas and the
    retry errors that discard an attempt's partial text, with ``after < seq <= upto``."""
    return list(RunEvent.objects.filter(run=run, seq__gt=after, seq__lte=upto,
                                        type__in=("message_delta", "run_error", "error")).order_by("seq"))


METER_RUNS = 5  # runs looked back for a measurement (a failed or refused run may have none)
METER_FIELDS = ("tokens", "measured_by", "effective_input_tokens", "trigger_tokens", "target_tokens",
                "prepare_tokens")
# A main call that got an answer (whole, stopped, cut at the output limit, or empty): not a failed request.
ANSWERED_OUTCOMES = ("ok", "cancelled", "output_limit", "empty")


def context_meter(*, session: Session) -> dict[str, Any]:
    """What the context meter shows: the session's latest measurement (a
    ``context_measured`` event, written after each main step and each compaction), else
    an empty context against the bound version's figures — unless the latest run failed
    on its last request to the model: then the size of that request (our estimate, which
    the call log keeps), marked ``failed_request``, so a question too big to answer does
    not read as an empty context. A new chat's unsaved session: its version's figures."""
    if session.pk is None:
        return _meter_empty(session=session)
    meter = _meter_measured(session=session)
    failed = _request_that_failed(session=session)
    if failed is not None:
        meter = {**meter, "tokens": failed, "measured_by": "estimate", "failed_request": True}
    return meter


def _meter_measured(*, session: Session) -> dict[str, Any]:
    # Run by run from the newest, each read backwards along its (run, seq) index: the
    # measurement is near the end of a run, so a long session costs a few rows, not a scan.
    for run_id in Run.objects.filter(session=session).order_by("-id").values_list("id", flat=True)[:METER_RUNS]:
        latest = RunEvent.objects.filter(run_id=run_id, type="context_measured").order_by("-seq").first()
        if latest is not None and isinstance(latest.payload, dict):
            return {name: latest.payload.get(name) for name in METER_FIELDS}
    return _meter_empty(session=session)


def _meter_empty(*, session: Session) -> dict[str, Any]:
    budget = version_budget(version=session.version)
    return {"tokens": 0, "measured_by": None, "effective_input_tokens": budget["effective_input_tokens"],
            "trigger_tokens": budget["trigger_tokens"], "target_tokens": budget["target_tokens"],
            "prepare_tokens": budget["prepare_tokens"]}


def _request_that_failed(*, session: Session) -> int | None:
    """The estimated size of the request the session's latest run failed on, if it did."""
    run = Run.objects.filter(session=session).order_by("-id").only("status").first()
    if run is None or run.status != Run.Status.FAILED:
        return None
    call = (ModelCall.objects.filter(run=run, instance__parent__isnull=True, purpose=ModelCall.Purpose.ACTION)
            .order_by("-id").only("outcome", "estimated_tokens").first())
    if call is None or call.outcome in ANSWERED_OUTCOMES or not call.estimated_tokens:
        return None
    return call.estimated_tokens


def run_plans(*, run_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
    """Each run's latest plan of its main instance (``plan_updated`` events), by run."""
    plans: dict[int, list[dict[str, Any]]] = {}
    for event in RunEvent.objects.filter(run_id__in=run_ids, type="plan_updated").order_by("run_id", "seq"):
        payload = event.payload or {}
        if payload.get("instance", "main") == "main" and isinstance(payload.get("steps"), list):
            plans[event.run_id] = [step for step in payload["steps"] if isinstance(step, dict)]
    return plans


def tool_labels_of_versions(*, version_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """Each version's step labels (``web.tool_labels``), by version: one query for a page."""
    wanted = set(version_ids)
    if not wanted:
        return {}
    return {version.pk: tool_labels(frozen_server_tools(version))
            for version in AgentVersion.objects.filter(pk__in=wanted).only("id", "server_tools")}
