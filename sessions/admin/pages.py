"""The console's own pages (SPEC §10): a session's records and compactions, a run's event
timeline and context inspector.

Each page: check the staff user may view the row and its content, validate the query,
write the access audit *before* reading anything encrypted, read, render. The pages are
reached through the ModelAdmins' ``get_urls`` and ``admin_site.admin_view`` (staff only).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe

from core.api.fields import id_from_text
from sessions.admin.chart import ChartPoint, compaction_chart
from sessions.admin.copies import RequestCopy, request_copy
from sessions.admin.display import (
    CallFigures,
    CompactionFigures,
    MessageView,
    SentTool,
    call_figures,
    compaction_figures,
    message_view,
    sent_tools,
)
from sessions.admin.inspector import (
    BodyField,
    CallChange,
    CallOutput,
    RepairView,
    SentLine,
    body_fields,
    call_output,
    repair_views,
    sent_lines,
)
from sessions.admin.reads import (
    CALLS_PAGE,
    EVENTS_PAGE_DEFAULT,
    EVENTS_PAGE_MAX,
    compaction_summary_seqs,
    records_count,
    records_more_after,
    records_previous_cursor,
    run_attempt_started_at,
    run_calls_overview,
    run_events,
    run_events_more_after,
    session_snapshots,
    session_sub_instances,
)
from sessions.admin.timeline import EventRow, attempt_offsets, timeline
from sessions.admin.undo import undo_panel
from sessions.admin.wait_chart import WaitPoint, wait_chart
from sessions.admin.waits import WaitFigures, wait_figures
from sessions.models import CompactionSnapshot, Instance, ModelCall, Run, RunEvent, Session, SessionMessage
from sessions.selectors.inspector import CallPairing, model_call_pairings
from sessions.selectors.instances import instance_in_session
from sessions.selectors.model_calls import model_call_repairs
from sessions.selectors.records import RECORDS_PAGE_DEFAULT, RECORDS_PAGE_MAX, records_page
from sessions.services.access_audit import access_audit_write, read_audited
from sessions.staff import staff_may_read

TEMPLATES = "admin/agent_sessions"
CURSOR_MAX = 2**62
PAGE_SIZES = (25, 50, 100, 200)


def admin_url(name: str, object_id: int, **params: Any) -> str:
    """An admin URL with its query, leaving out empty parameters."""
    query = {key: value for key, value in params.items() if value not in (None, "")}
    base = reverse(f"admin:agent_sessions_{name}", args=[object_id])
    return f"{base}?{urlencode(query)}" if query else base


def records_url(session_id: int, *, after: int | None = None, limit: int | None = None,
                instance: str | None = None) -> str:
    return admin_url("session_records", session_id, after=after, limit=limit, instance=instance)


def object_or_404(model_admin: ModelAdmin, request: HttpRequest, object_id: str, content_model: type) -> Any:
    """The row, when the staff user may view it and the encrypted content kind behind it."""
    obj = model_admin.get_object(request, object_id)
    if obj is None:
        raise Http404(f"No {model_admin.opts.verbose_name} with id {object_id!r}.")
    if not staff_may_read(user=request.user, row_model=model_admin.model, content_model=content_model):
        raise PermissionDenied  # the API answers the same staff 404 (RUN-11)
    return obj


def render_page(model_admin: ModelAdmin, request: HttpRequest, template: str, obj: Any, title: str,
            context: dict[str, Any], *, status: int = 200) -> HttpResponse:
    opts = model_admin.opts
    base = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "original": obj,
        "title": title,
        "subtitle": str(obj),
        "changelist_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"),
        "change_url": reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]),
    }
    return TemplateResponse(request, f"{TEMPLATES}/{template}", {**base, **context}, status=status)


def first_error(form: forms.Form) -> str:
    for field, errors in form.errors.items():
        return f"{field}: {errors[0]}"
    return ""


# --- Records (RUN-11) ---------------------------------------------------------------------------


class RecordsQuery(forms.Form):
    """The RUN-11 parameters: ``after`` a session seq, ``limit`` 1–200, ``instance`` all, main or a sub-instance id."""

    after = forms.IntegerField(min_value=0, max_value=CURSOR_MAX, required=False)
    limit = forms.IntegerField(min_value=1, max_value=RECORDS_PAGE_MAX, required=False)
    instance = forms.CharField(max_length=32, required=False, strip=True)

    def __init__(self, data: Any, *, session: Session) -> None:
        super().__init__(data)
        self.session = session

    def clean_after(self) -> int:
        return self.cleaned_data["after"] or 0

    def clean_limit(self) -> int:
        return self.cleaned_data["limit"] or RECORDS_PAGE_DEFAULT

    def clean_instance(self) -> str | None:
        value = self.cleaned_data["instance"]
        if value in ("", "all"):
            return None
        # An id is ASCII digits that fit a column ("²".isdigit() is True and int() refuses it).
        if (value != Instance.MAIN and id_from_text(value) is None) \
                or not instance_in_session(session=self.session, instance=value):
            raise forms.ValidationError("Use main or a sub-instance id of this session.")
        return value


@dataclass(frozen=True)
class RecordItem:
    record: SessionMessage
    instance: str
    view: MessageView


def records_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """A session's records page by page (RUN-11 semantics), decrypted here, audited."""
    session: Session = object_or_404(model_admin, request, object_id, SessionMessage)
    subs = session_sub_instances(session=session)
    form = RecordsQuery(request.GET, session=session)
    context: dict[str, Any] = {"form": form, "sub_instances": subs, "limits": PAGE_SIZES}
    if not form.is_valid():
        # Nothing decrypted, so nothing to audit: the filter form says what to fix.
        context.update(error=first_error(form), instance_value=request.GET.get("instance", ""),
                       limit_value=RECORDS_PAGE_DEFAULT)
        return render_page(model_admin, request, "session/records.html", session, "Records", context, status=400)
    after, limit = form.cleaned_data["after"], form.cleaned_data["limit"]
    instance = form.cleaned_data["instance"]
    with read_audited(user=request.user, audited=True, what="records", session=session,
                      detail={"after": after, "limit": limit, "instance": instance or "all"}):
        page = records_page(session=session, after=after, limit=limit, instance=instance)
        labels = {sub.pk: f"sub-instance {sub.pk} ({sub.key})" for sub in subs}
        items = [RecordItem(record=record,
                            instance=Instance.MAIN if record.in_main else labels.get(record.instance_id, "?"),
                            view=message_view(record.message, kind=record.kind))
                 for record in page.items]
    previous = records_previous_cursor(session=session, after=after, limit=limit, instance=instance)
    more = len(page.items) == limit and records_more_after(session=session, after=page.next_after, instance=instance)
    context.update(
        limits=sorted({*PAGE_SIZES, limit}), items=items, after=after, limit=limit, limit_value=limit,
        instance_value=instance or "",
        total=records_count(session=session, instance=instance), next_after=page.next_after,
        next_url=records_url(session.pk, after=page.next_after, limit=limit, instance=instance) if more else None,
        previous_url=(records_url(session.pk, after=previous or None, limit=limit, instance=instance)
                      if previous is not None else None),
        first_url=records_url(session.pk, limit=limit, instance=instance) if after else None,
    )
    return render_page(model_admin, request, "session/records.html", session, "Records", context)


# --- Compactions (CTX-41) ----------------------------------------------------------------------


@dataclass(frozen=True)
class SegmentLink:
    index: int
    first_seq: int | None
    last_seq: int | None
    messages: int | None
    url: str | None


@dataclass(frozen=True)
class CompactionRow:
    number: int
    snapshot: CompactionSnapshot
    instance: str  # for people: main, or sub-instance <id> (<key>)
    figures: CompactionFigures
    segments: tuple[SegmentLink, ...]
    summary_url: str | None
    run_url: str
    waits: WaitFigures  # CTX-45: prepared or made while the person waited, and the wait


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%d %b %H:%M")


def compactions_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """Every compaction of the session's instances with its metrics, and the chart over time.

    Reads only plain columns (metrics, seqs): nothing decrypted, so nothing audited here;
    the record links lead to the audited records page.
    """
    session: Session = object_or_404(model_admin, request, object_id, CompactionSnapshot)
    snapshots, undo = undo_panel(model_admin, request, session, admin_url("session_compaction_undo", session.pk),
                                 session_snapshots(session=session))  # CTX-51: undos listed apart
    summaries = compaction_summary_seqs(session=session)
    rows, points, waits = [], [], []
    for number, snapshot in enumerate(snapshots, start=1):
        label = Instance.MAIN if snapshot.instance.parent_id is None else str(snapshot.instance_id)
        figures = compaction_figures(snapshot.metrics, estimator_id=snapshot.estimator_id)
        segments = tuple(
            SegmentLink(index=s.index, first_seq=s.first_seq, last_seq=s.last_seq, messages=s.messages,
                        url=records_url(session.pk, after=max(0, s.first_seq - 1), instance=label,
                                        limit=min(RECORDS_PAGE_MAX, s.last_seq - s.first_seq + 1))
                        if s.first_seq is not None and s.last_seq is not None and s.last_seq >= s.first_seq else None)
            for s in figures.segments)
        # CTX-47: a compaction that only folded tool results has no summary to read.
        summary_seq = (summaries.get((snapshot.instance_id, snapshot.covered_seq))
                       if "summary" in figures.tiers else None)
        rows.append(CompactionRow(
            number=number, snapshot=snapshot, instance=_instance_label(snapshot.instance), figures=figures,
            segments=segments,
            summary_url=records_url(session.pk, after=summary_seq - 1, limit=1) if summary_seq else None,
            run_url=admin_url("run_change", snapshot.instance.run_id), waits=wait_figures(snapshot.metrics)))
        points.append(ChartPoint(label=f"#{number}", when=_when(snapshot.created_at), trigger=figures.trigger,
                                 before=figures.tokens_before_calibrated, after=figures.tokens_after_calibrated,
                                 threshold=figures.threshold, target=figures.target))
        waits.append(WaitPoint(label=f"#{number}", when=_when(snapshot.created_at), figures=rows[-1].waits))
    # Every text is escaped by chart.py and wait_chart.py.
    context = {"rows": rows, "chart": mark_safe(compaction_chart(points)), "wait_chart": mark_safe(wait_chart(waits)),
               "undo": undo}
    return render_page(model_admin, request, "session/compactions.html", session, "Compactions", context)


# --- Event timeline (LOOP-5) -------------------------------------------------------------------


class EventsQuery(forms.Form):
    after = forms.IntegerField(min_value=0, max_value=CURSOR_MAX, required=False)
    limit = forms.IntegerField(min_value=1, max_value=EVENTS_PAGE_MAX, required=False)

    def clean_after(self) -> int:
        return self.cleaned_data["after"] or 0

    def clean_limit(self) -> int:
        return self.cleaned_data["limit"] or EVENTS_PAGE_DEFAULT


@dataclass(frozen=True)
class TimelineItem:
    row: EventRow
    offset: str


def events_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """A run's events in seq order, deltas folded into their text; decrypted here, audited."""
    run: Run = object_or_404(model_admin, request, object_id, RunEvent)
    form = EventsQuery(request.GET)
    if not form.is_valid():
        return render_page(model_admin, request, "run/events.html", run, "Event timeline",
                       {"error": first_error(form)}, status=400)
    after, limit = form.cleaned_data["after"], form.cleaned_data["limit"]
    with read_audited(user=request.user, audited=True, what="events", session=run.session, run=run,
                      detail={"after": after, "limit": limit}):
        events = run_events(run=run, after=after, limit=limit)
        rows = timeline((event.seq, event.type, event.created_at, event.payload) for event in events)
    # Each attempt from its own start: a resume moves started_at past the first attempt's events.
    start = (run_attempt_started_at(run=run, seq=events[0].seq) if events else None) or run.created_at
    items = [TimelineItem(row=row, offset=offset) for row, offset in zip(rows, attempt_offsets(rows, start=start))]
    last = events[-1].seq if events else after
    more = len(events) == limit and run_events_more_after(run=run, after=last)
    context = {
        "items": items, "after": after, "event_count": len(events),
        "next_url": admin_url("run_events", run.pk, after=last, limit=limit if limit != EVENTS_PAGE_DEFAULT else None)
        if more else None,
        "first_url": admin_url("run_events", run.pk) if after else None,
    }
    return render_page(model_admin, request, "run/events.html", run, "Event timeline", context)


# --- Context inspector (CTX-25) ----------------------------------------------------------------


class CallsQuery(forms.Form):
    after = forms.IntegerField(min_value=0, max_value=CURSOR_MAX, required=False)

    def clean_after(self) -> int:
        return self.cleaned_data["after"] or 0


@dataclass(frozen=True)
class CallSummary:
    call: ModelCall
    instance: str
    figures: CallFigures
    url: str


@dataclass(frozen=True)
class CallDetail:
    call: ModelCall
    instance: str
    figures: CallFigures
    change: CallChange
    lines: list[SentLine]
    repairs: list[RepairView]
    tools: list[SentTool]
    body: list[BodyField] | None
    output: CallOutput | None
    copy: RequestCopy | None = None


def _instance_label(instance: Instance) -> str:
    return Instance.MAIN if instance.parent_id is None else f"sub-instance {instance.pk} ({instance.key})"


def _call_url(call: ModelCall) -> str:
    return admin_url("run_context", call.run_id, after=call.pk - 1 or None) + f"#call-{call.pk}"


def _call_detail(run: Run, pairing: CallPairing) -> CallDetail:
    call = pairing.call
    repairs = repair_views(model_call_repairs(call=call), record_url=lambda seq: records_url(
        run.session_id, after=seq - 1, limit=1))
    earlier = pairing.previous if pairing.previous_in_earlier_run else None  # on another run's page
    previous_url = _call_url(earlier) if earlier is not None else None
    change, lines = sent_lines(pairing, repairs=repairs, previous_url=previous_url)
    return CallDetail(call=call, instance=_instance_label(call.instance),
                      figures=call_figures(estimated=call.estimated_tokens, usage=call.usage,
                                           estimates=[entry.estimated_tokens for entry in pairing.entries]),
                      change=change, lines=lines, repairs=repairs, tools=sent_tools(pairing.tools),
                      body=body_fields(call.request), output=call_output(call.request), copy=request_copy(run, call))


def context_view(model_admin: ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    """Exactly what each model call of a run received: messages with their estimates and
    their changes since the previous call of the instance (first changed position: where a
    prompt cache stops matching), the projector's repairs, the tools, the provider's usage
    beside the estimate. Decrypted here — the previous calls compared with too — audited."""
    run: Run = object_or_404(model_admin, request, object_id, ModelCall)
    form = CallsQuery(request.GET)
    if not form.is_valid():
        return render_page(model_admin, request, "run/context.html", run, "Context inspector",
                       {"error": first_error(form)}, status=400)
    after = form.cleaned_data["after"]
    overview = run_calls_overview(run=run)
    ids = [call.pk for call in overview]
    summaries = [CallSummary(call=call, instance=_instance_label(call.instance),
                             figures=call_figures(estimated=call.estimated_tokens, usage=call.usage, estimates=()),
                             url=_call_url(call))
                 for call in overview]
    page_ids = [call_id for call_id in ids if call_id > after][:CALLS_PAGE]

    # The one read whose row is written from inside it: which earlier calls it compares with
    # (and so decrypts) is known only once the pairing has read the plain columns; the row
    # still comes before anything is decrypted, in the same transaction (``read_audited``'s rule).
    def audit(compared: list[int]) -> None:
        access_audit_write(user=request.user, what="context_inspector", session=run.session, run=run,
                           detail={"after": after, "calls": page_ids, "compared_with": compared})

    with transaction.atomic():
        pairings = model_call_pairings(run=run, ids=page_ids, before_read=audit)
        details = [_call_detail(run, pairing) for pairing in pairings]
    position = ids.index(page_ids[0]) if page_ids else len(ids)
    previous_start = max(0, position - CALLS_PAGE)
    more = bool(page_ids) and ids[-1] > page_ids[-1]
    context = {
        "summaries": summaries, "details": details, "after": after,
        "next_url": admin_url("run_context", run.pk, after=page_ids[-1]) if more else None,
        "previous_url": (admin_url("run_context", run.pk, after=ids[previous_start - 1] if previous_start else None)
                         if position > 0 else None),
    }
    return render_page(model_admin, request, "run/context.html", run, "Context inspector", context)
