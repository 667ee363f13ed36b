"""CTX-50: pinning and unpinning a message of a session's main line.

A pin is a record of the session (``sessions.selectors.pins`` reads them back), written by
the person (the chat, the API) or by the agent (``update_plan``'s ``pin``). It is written on
the run and main instance of the record it pins, under the session row's lock, so two
requests at once are ordered and the second sees the first: pinning what is pinned, or
unpinning what is not, writes nothing.

Who may pin is decided before: the API reads the session with ``session_get_for_user`` (its
creator, while still a member of its space; everyone else gets 404), the agent pins in its
own run, inside the run's ownership check.
"""
from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction

from core.api.fields import MAX_ID
from core.errors import ValidationFailed
from sessions.models import Instance, MessageKind, Run, Session, SessionMessage
from sessions.selectors.pins import PINNABLE_KINDS, PinState, pins_of_session
from sessions.services.manual_compaction import session_lock
from sessions.services.records import NewRecord, records_append

AGENT = "agent"


def _seq_of(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        else:
            raise ValidationFailed("Name the message by its record seq, a whole number.",
                                   fields={"seq": "a positive whole number"})
    if not 0 < value <= MAX_ID:
        raise ValidationFailed("No such message in this session.", fields={"seq": "out of range"})
    return value


def pinnable_record(*, session_id: int, seq: Any) -> SessionMessage:
    """The main-line message record ``seq`` of the session, else ValidationFailed (400):
    only a question, an answer or a tool's (or sub-agent's) result of the main line can be
    pinned -- not a sub-agent's own steps, not metadata, not another session's record."""
    number = _seq_of(seq)
    record = (SessionMessage.objects.filter(session_id=session_id, seq=number)
              .only("seq", "kind", "in_main", "run_id", "instance_id").first())
    if record is None:
        raise ValidationFailed("No such message in this session.", fields={"seq": "no record with this seq"})
    if not record.in_main or record.kind not in PINNABLE_KINDS:
        raise ValidationFailed("Only a question, an answer or a tool result of the main conversation can be pinned.",
                               fields={"seq": f"a {record.kind} record{'' if record.in_main else ' of a sub-agent'}"})
    return record


def pin_set(*, session: Session, seq: Any, pinned: bool, by: int | str) -> list[PinState]:
    """Pin (``pinned``) or unpin record ``seq`` of ``session`` for ``by`` (a user id or
    ``"agent"``); returns the session's pins afterwards. Idempotent: no record is written
    when nothing changes. Unpinning a message that is not pinned is not an error (the
    person's intent holds); pinning something that cannot be pinned is (400)."""
    with transaction.atomic():
        session_lock(session_id=session.pk)
        record = pinnable_record(session_id=session.pk, seq=seq)
        current = {pin.seq for pin in pins_of_session(session_id=session.pk)}
        if (record.seq in current) == pinned:
            return pins_of_session(session_id=session.pk)
        run = Run.objects.get(pk=record.run_id)
        instance = Instance.objects.get(pk=record.instance_id)
        records_append(session=session, run=run, instance=instance, records=[NewRecord(
            MessageKind.PIN, {"action": "pin" if pinned else "unpin", "seq": record.seq, "by": by},
            entry_key=f"pin:{uuid.uuid4().hex}")])
        return pins_of_session(session_id=session.pk)


def pins_by_agent(*, session_id: int, seqs: list[Any]) -> list[int]:
    """The agent pins ``seqs`` (``update_plan``'s ``pin``): each checked first, all written
    or none (the caller's transaction); returns the seqs it pinned that were not already."""
    session = Session.objects.get(pk=session_id)
    with transaction.atomic():
        session_lock(session_id=session_id)
        records = [pinnable_record(session_id=session_id, seq=seq) for seq in seqs]
        before = {pin.seq for pin in pins_of_session(session_id=session_id)}
        added = []
        for record in records:
            if record.seq in before or record.seq in added:
                continue
            pin_set(session=session, seq=record.seq, pinned=True, by=AGENT)
            added.append(record.seq)
    return added
