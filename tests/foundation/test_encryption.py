"""Encryption at rest (SPEC §2, §11): raw columns hold no plaintext; a wrong key fails closed."""
from __future__ import annotations

import pytest
from django.conf import settings
from django.db import connection

from core.crypto import ColumnCipher, DecryptionFailed
from models_catalog.models import ModelConnection
from sessions.services.records import record_append
from sessions.services.runs import run_create

pytestmark = pytest.mark.django_db

SECRET_PHRASE = "the launch code is tangerine-42"


def _raw(table: str, column: str, pk: int) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        return bytes(cursor.fetchone()[0])


def test_a_record_column_holds_no_plaintext(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    row = record_append(session=session, run=run, instance=run.instances.get(), kind="user",
                        message={"role": "user", "content": SECRET_PHRASE}, entry_key="q")
    raw = _raw("agent_sessions_sessionmessage", "message", row.pk)
    assert SECRET_PHRASE.encode() not in raw and b"tangerine" not in raw
    row.refresh_from_db()
    assert row.message["content"] == SECRET_PHRASE


def test_an_api_key_column_holds_no_plaintext(space):
    connection_row = ModelConnection.objects.create(space=space, name="OpenAI", provider="openai",
                                                    model="gpt-4o", api_key="sk-live-0123456789abcdef")
    raw = _raw("models_catalog_modelconnection", "api_key", connection_row.pk)
    assert b"sk-live" not in raw and b"0123456789abcdef" not in raw


def test_the_configured_keys_read_what_the_fields_wrote(make_session, alice):
    session = make_session(alice)
    run = run_create(session=session)
    row = record_append(session=session, run=run, instance=run.instances.get(), kind="user",
                        message={"role": "user", "content": SECRET_PHRASE}, entry_key="q")
    cipher = ColumnCipher(secret_key=settings.SECRET_KEY, encryption_key=settings.ENCRYPTION_KEY)
    assert cipher.load(_raw("agent_sessions_sessionmessage", "message", row.pk))["content"] == SECRET_PHRASE


@pytest.mark.parametrize("wrong", ["encryption", "secret"])
def test_reading_with_a_wrong_key_fails_closed(make_session, alice, wrong):
    session = make_session(alice)
    run = run_create(session=session)
    row = record_append(session=session, run=run, instance=run.instances.get(), kind="user",
                        message={"role": "user", "content": SECRET_PHRASE}, entry_key="q")
    keys = {"secret_key": settings.SECRET_KEY, "encryption_key": settings.ENCRYPTION_KEY}
    keys[f"{wrong}_key"] = "not-the-right-key-at-all"
    with pytest.raises(DecryptionFailed):
        ColumnCipher(**keys).load(_raw("agent_sessions_sessionmessage", "message", row.pk))
