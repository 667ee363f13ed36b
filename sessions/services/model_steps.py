"""Model steps (CTX-23): an action model's answers as records, and the counts of them an
instance keeps — in memory while the loop runs, saved at its end, counted again from the
records when a run resumes after its worker died."""
from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q

from sessions.models import Instance, Run, SessionMessage
from sessions.services.records import NewRecord, record_append

PARTIAL_PREFIX = "partial-"


def main_counts(*, session_id: int, up_to_seq: int) -> tuple[int, int]:
    """(user_turns, model_steps) from the session's main-instance records up to a seq (CTX-23)."""
    counts = SessionMessage.objects.filter(session_id=session_id, in_main=True, seq__lte=up_to_seq).aggregate(
        turns=Count("pk", filter=Q(kind="user")),
        # cut answers are no steps
        steps=Count("pk", filter=Q(kind="assistant") & ~Q(entry_key__startswith=PARTIAL_PREFIX)))
    return counts["turns"], counts["steps"]


def instance_steps_save(*, instance: Instance) -> None:
    """Write the model steps the loop counted in memory (at the end of an attempt)."""
    Instance.objects.filter(pk=instance.pk).update(model_steps=instance.model_steps)


def instance_steps_recount(*, run: Run, instance: Instance) -> None:
    """A resumed run's model steps, counted again from the records (CTX-23): what the main
    instance inherited when its question was asked, plus its own received answers. An
    attempt that ended normally saved the same figure; one whose worker died did not."""
    inherited = main_counts(session_id=run.session_id, up_to_seq=run.inherited_watermark)[1] if instance.is_main else 0
    own = (SessionMessage.objects.filter(instance=instance, kind="assistant")
           .exclude(entry_key__startswith=PARTIAL_PREFIX).count())
    instance.model_steps = inherited + own
    instance_steps_save(instance=instance)


def assistant_record(*, message: dict[str, Any], entry_key: str) -> tuple[NewRecord, int]:
    """An action model response as a record, and the model steps it counts (CTX-23): a
    stream cut by a Stop is kept but counts none, under a ``partial-`` key."""
    if message.get("partial"):
        return NewRecord("assistant", message, f"{PARTIAL_PREFIX}{entry_key}"), 0
    return NewRecord("assistant", message, entry_key), 1


def step_save_assistant(*, run: Run, instance: Instance, message: dict[str, Any],
                        entry_key: str) -> SessionMessage | None:
    """Save an action model response; a received one counts as a model step (CTX-23).

    A stream cut by a Stop (``message["partial"]``) is kept — the model sees what it had
    said — but was not received, so it is no step: its entry key gets the ``partial-``
    prefix, which ``main_counts`` leaves out, as the engine's own counting does (records
    are encrypted; the key is what a query can read). Atomic; saving the same step twice
    (a retried save after a crash) inserts and counts nothing.
    """
    record, counts = assistant_record(message=message, entry_key=entry_key)
    with transaction.atomic():
        row = record_append(session=run.session, run=run, instance=instance, kind="assistant",
                            message=record.message, entry_key=record.entry_key)
        if row is not None and counts:
            Instance.objects.filter(pk=instance.pk).update(model_steps=F("model_steps") + 1)
            instance.model_steps += 1
    return row
