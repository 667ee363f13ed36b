"""Records read again and again are decrypted once per process (core/crypto.py,
``RecentPlaintexts``; issue #29): by their stored bytes, so a changed value is never a
stale hit; every read its own object; a forged token refused as the field refuses it;
what is kept bounded. And a run's context read through it is the ORM's read."""
from __future__ import annotations

import pytest
from django.core.signing import BadSignature
from django.db import connection

from core.crypto import RecentPlaintexts
from sessions.models import SessionMessage
from sessions.selectors.instances import main_instance
from sessions.selectors.records import record_as_engine_dict, visible_records_for_engine, visible_records_query
from sessions.services.questions import question_ask
from sessions.services.records import NewRecord, records_append_new

FIELD = SessionMessage._meta.get_field("message")


def _token(value) -> bytes:
    """What the field stores for ``value`` (psycopg wraps it in a Binary)."""
    prepared = FIELD.get_db_prep_value(value, connection)
    return bytes(getattr(prepared, "obj", prepared))


def test_the_same_bytes_read_again_give_an_equal_value_of_their_own():
    recent = RecentPlaintexts(max_bytes=1 << 20)
    token = _token({"role": "user", "content": "Where is my parcel?"})
    first = recent.load(FIELD, token)
    first["content"] = "changed by a reader"
    again = recent.load(FIELD, memoryview(token))  # as PostgreSQL hands it over
    assert again == {"role": "user", "content": "Where is my parcel?"} and again is not first
    assert len(recent._items) == 1
    other = _token({"role": "user", "content": "Where is my parcel?"})  # same value, its own IV
    assert other != token and recent.load(FIELD, other) == again and len(recent._items) == 2


def test_a_forged_token_is_refused_and_not_kept():
    recent = RecentPlaintexts(max_bytes=1 << 20)
    token = bytearray(_token({"content": "pay Bob 10"}))
    token[-5] ^= 1
    with pytest.raises(BadSignature):
        recent.load(FIELD, bytes(token))
    assert recent.size == 0 and not recent._items


def test_what_is_kept_stays_within_its_bound_oldest_out_first():
    tokens = [_token({"content": f"note {n:02d}" * 20}) for n in range(50)]
    one = len(tokens[0]) + len(FIELD._fernet.decrypt(tokens[0], None))
    recent = RecentPlaintexts(max_bytes=one * 10)
    for token in tokens:
        recent.load(FIELD, token)
    assert recent.size <= recent.max_bytes and len(recent._items) == 10
    assert list(recent._items) == tokens[-10:]
    huge = _token({"content": "x" * one * 2})  # past an eighth of the bound: read, not kept
    assert recent.load(FIELD, huge) == {"content": "x" * one * 2} and huge not in recent._items


@pytest.mark.django_db
def test_a_runs_context_read_is_the_orms_read_of_the_same_records(alice, make_session):
    session = make_session(alice)
    earlier = question_ask(session=session, content="First question")
    earlier.status = "completed"
    earlier.save(update_fields=["status"])
    run = question_ask(session=session, content="Second question")
    main = main_instance(run=run)
    records_append_new(session=session, run=run, instance=main,
                       records=[NewRecord("assistant", {"role": "assistant", "content": "An answer"}, "assistant-1")])
    for after in (0, 1):
        orm = [record_as_engine_dict(r) for r in visible_records_query(run=run, instance=main, after_seq=after)]
        assert list(visible_records_for_engine(run=run, instance=main, after_seq=after)) == orm
        assert list(visible_records_for_engine(run=run, instance=main, after_seq=after)) == orm  # read again
    assert [r["message"]["content"] for r in visible_records_for_engine(run=run, instance=main)] == [
        "First question", "Second question", "An answer"]


@pytest.mark.django_db
def test_the_best_view_read_is_the_orms_read_messages_and_all(alice, make_session):
    from sessions.models import SessionView
    from sessions.selectors.records import view_best_for_run

    session = make_session(alice)
    run = question_ask(session=session, content="Third question")
    assert view_best_for_run(run=run) is None
    for watermark in (1, run.inherited_watermark, run.inherited_watermark + 5):  # the last is past the run's prefix
        SessionView.objects.create(session=session, watermark=watermark, estimator_id="tiktoken:o200k_base",
                                   messages=[{"role": "user", "content": f"Summary up to {watermark}"}])
    orm = (SessionView.objects.filter(session_id=session.pk, watermark__lte=run.inherited_watermark)
           .order_by("-watermark", "-id").first())
    for _ in range(2):  # decrypted, then from the cache: the same view each time, a list of its own
        view = view_best_for_run(run=run)
        assert {f.attname: getattr(view, f.attname) for f in SessionView._meta.concrete_fields} == {
            f.attname: getattr(orm, f.attname) for f in SessionView._meta.concrete_fields}
        view.messages.append({"role": "user", "content": "changed by a reader"})
