"""The questions service: a person asks, or continues a cut answer; each opens a queued run
whose main instance carries on the session's main line (RUN-1, RUN-2)."""
from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from context.surrogates import replace_lone_surrogates
from core.errors import Conflict, ValidationFailed
from sessions.frames import frame_initial
from sessions.models import Instance, Run, Session, SessionMessage, SessionView
from sessions.services.files import attachment_of, attachments_mark, attachments_take, file_ids_clean
from sessions.services.manual_compaction import session_lock_to_ask
from sessions.services.model_steps import PARTIAL_PREFIX
from sessions.services.pasted import pasted_redactor
from sessions.services.records import NewRecord, records_append_new
from sessions.services.runs import run_create_with_main, run_dispatch_on_commit

MAX_QUESTION_CHARS = 100_000


def content_clean(content: Any, field: str = "content") -> str:
    """``content`` as a question or a supplement may hold it: a non-empty string of at most
    ``MAX_QUESTION_CHARS``, lone surrogates replaced; else ValidationFailed (400) on ``field``."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationFailed("Write something first.", fields={field: "must be a non-empty string"})
    if len(content) > MAX_QUESTION_CHARS:
        raise ValidationFailed("That is too long.", fields={field: f"at most {MAX_QUESTION_CHARS} characters"})
    # A question (and the title made of it) or a supplement, from any caller (the API's
    # parser replaces them already; a service called directly must not store one either).
    return replace_lone_surrogates(content)


def question_ask(*, session: Session, content: Any, files: Any = None) -> Run:
    """A new question: a run with its main instance, the user record, counters (RUN-1, RUN-2).

    ``files``: ids of the session's uploaded files not yet sent with a question; the
    record carries them as ``attachments`` (RUN-13), else ValidationFailed (400) and
    nothing changes. One transaction; the run is queued for a worker only once it commits.
    Raises ActiveRunConflict (409) while another run of the session is queued or running,
    CompactionRunning (409) while a manual compaction holds the session, and
    NotFound once the session's creator has left its space (RUN-11).
    """
    content = pasted_redactor(version=session.version).text(content_clean(content))  # LOOP-8; the title too
    file_ids = file_ids_clean(files)
    with transaction.atomic():
        # One thing at a time per session: not while a manual compaction holds it.
        session_lock_to_ask(session_id=session.pk)
        attached = attachments_take(session=session, ids=file_ids)
        run, instance = _run_open(session=session, new_turn=True)
        message: dict[str, Any] = {"role": "user", "content": content}
        if attached:
            message["attachments"] = [attachment_of(file) for file in attached]
        # A new run's first record is always new: no de-duplicating read (two round trips).
        record = records_append_new(session=session, run=run, instance=instance,
                                    records=[NewRecord("user", message, "question")])[0]
        if attached:
            attachments_mark(files=attached, question_seq=record.seq)
        named = {} if session.title else {"title": content.strip()[:80]}
        Session.objects.filter(pk=session.pk).update(updated_at=timezone.now(), **named)
        session.title = session.title or named["title"]
        run_dispatch_on_commit(run.pk)
    return run


def _run_open(*, session: Session, new_turn: bool) -> tuple[Run, Instance]:
    """A queued run of ``session`` and its main instance, counters and frame carried on
    from the session's main line. Inside the caller's transaction, session row locked."""
    watermark, carried = main_line_carried(session_id=session.pk)
    fields = {**carried, "user_turns": carried["user_turns"] + (1 if new_turn else 0)}
    return run_create_with_main(session=session, main=fields, inherited_watermark=watermark)


def main_line_carried(*, session_id: int) -> tuple[int, dict[str, Any]]:
    """What a new run of the session starts from, read in one statement: the watermark it
    inherits (the session's last seq), and its main instance's fields — the counts up to
    that watermark (``main_counts``), the baselines of the best view under it
    (``view_best_for_run``), and the plan (LOOP-4) and summary back-off (CTX-44) of the
    session's latest main frame, which the new question carries on.
    ``tests/sessions/test_main_line_carried.py`` holds it to those readers.

    Read with the session row locked: nothing moves the watermark meanwhile.
    """
    message, view, instance = SessionMessage._meta.db_table, SessionView._meta.db_table, Instance._meta.db_table
    run, session = Run._meta.db_table, Session._meta.db_table
    main_up_to = f'FROM "{message}" m WHERE m."session_id" = s."id" AND m."in_main" AND m."seq" <= s."last_seq"'
    best_view = (f'FROM "{view}" v WHERE v."session_id" = s."id" AND v."watermark" <= s."last_seq" '
                 'ORDER BY v."watermark" DESC, v."id" DESC LIMIT 1')
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT s."last_seq", (SELECT COUNT(*) {main_up_to} AND m."kind" = %s), '
            f'(SELECT COUNT(*) {main_up_to} AND m."kind" = %s AND substr(m."entry_key", 1, %s) <> %s), '
            f'(SELECT v."baseline_user_turns" {best_view}), (SELECT v."baseline_model_steps" {best_view}), '
            # The latest run's main instance: found from the run's index, not by ordering
            # every main instance of the table (that grows with all runs ever made).
            f'(SELECT i."frame" FROM "{instance}" i WHERE i."parent_id" IS NULL AND i."run_id" = '
            f'(SELECT r."id" FROM "{run}" r WHERE r."session_id" = s."id" ORDER BY r."id" DESC LIMIT 1)) '
            f'FROM "{session}" s WHERE s."id" = %s',
            ["user", "assistant", len(PARTIAL_PREFIX), PARTIAL_PREFIX, session_id])
        watermark, turns, steps, baseline_turns, baseline_steps, frame = cursor.fetchone()
    frame_field = Instance._meta.get_field("frame")
    previous = frame_field.from_db_value(frame, frame_field.cached_col, connection) or {} if frame else {}
    return watermark, {
        "user_turns": turns, "model_steps": steps,
        "baseline_user_turns": baseline_turns or 0, "baseline_model_steps": baseline_steps or 0,
        "frame": frame_initial(compaction_failure=previous.get("compaction_failure"), plan=previous.get("plan"))}


def answer_was_cut(*, run: Run) -> bool:
    """Whether ``run`` completed with a main answer its output limit cut (finish reason
    ``length``) and no tool call to go on with: an answer Continue can carry on."""
    if run.status != Run.Status.COMPLETED:
        return False
    last = (SessionMessage.objects.filter(run=run, in_main=True, kind="assistant").order_by("-seq").first())
    message = last.message if last is not None and isinstance(last.message, dict) else {}
    return message.get("finish_reason") == "length" and not message.get("tool_calls")


def answer_continue(*, run: Run) -> Run:
    """Continue an answer its output limit cut: a new run of the session with no question
    of its own. Its history ends on the cut answer, so the model reads that as the last
    assistant message, then the engine's note asking it to go on
    (``context.adapters.CONTINUE_NOTE``), and writes the rest.

    Only the session's latest run, completed with a cut answer: else Conflict
    ``not_continuable`` (409); ActiveRunConflict and CompactionRunning as ``question_ask``.
    """
    session = run.session
    with transaction.atomic():
        session_lock_to_ask(session_id=session.pk)
        latest = Run.objects.filter(session=session).order_by("-pk").values_list("pk", flat=True).first()
        if latest != run.pk or not answer_was_cut(run=run):
            raise Conflict("Only the latest answer of a session, cut at its output limit, can be continued.",
                           code="not_continuable")
        continued, _ = _run_open(session=session, new_turn=False)
        Session.objects.filter(pk=session.pk).update(updated_at=timezone.now())
        run_dispatch_on_commit(continued.pk)
    return continued
