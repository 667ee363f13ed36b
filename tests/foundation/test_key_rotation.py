"""The key-rotation command re-encrypts every encrypted column (SPEC §11)."""
from __future__ import annotations

import pytest
from django.core import signing
from django.core.management import CommandError, call_command
from django.db import connection

from core.crypto import ColumnCipher
from models_catalog.models import ModelConnection
from sessions.models import SessionMessage
from sessions.services.records import record_append
from sessions.services.runs import run_create

pytestmark = pytest.mark.django_db

OLD = {"secret_key": "old-secret-key-0000000000", "encryption_key": "old-encryption-key-11111111"}


def _overwrite(table: str, column: str, pk: int, raw: bytes) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET {column} = %s WHERE id = %s", [raw, pk])


def test_rows_written_with_old_keys_read_after_rotation(make_session, alice, space, monkeypatch):
    session = make_session(alice)
    run = run_create(session=session)
    record = record_append(session=session, run=run, instance=run.instances.get(), kind="user",
                           message={"role": "user", "content": "rotate me"}, entry_key="q")
    key_row = ModelConnection.objects.create(space=space, name="K", provider="openai", model="gpt-4o",
                                             api_key="sk-old-keyed-value")
    old = ColumnCipher(**OLD)
    _overwrite("agent_sessions_sessionmessage", "message", record.pk,
               old.dump({"role": "user", "content": "rotate me"}))
    _overwrite("models_catalog_modelconnection", "api_key", key_row.pk, old.dump("sk-old-keyed-value"))
    with pytest.raises(signing.BadSignature):  # before rotation the current keys cannot read it
        SessionMessage.objects.get(pk=record.pk)

    monkeypatch.setenv("OLD_SECRET_KEY", OLD["secret_key"])
    monkeypatch.setenv("OLD_AGENTLOOM_ENCRYPTION_KEY", OLD["encryption_key"])
    call_command("rotate_keys")
    call_command("rotate_keys")  # a second pass finds everything on the new keys

    assert SessionMessage.objects.get(pk=record.pk).message["content"] == "rotate me"
    assert ModelConnection.objects.get(pk=key_row.pk).api_key == "sk-old-keyed-value"


def test_rotation_refuses_to_start_without_the_old_keys(monkeypatch):
    monkeypatch.delenv("OLD_SECRET_KEY", raising=False)
    with pytest.raises(CommandError):
        call_command("rotate_keys")
