"""Attached files are stored like the records (RUN-13, SPEC §11): encrypted, rotated with
the keys, kept by the call-log retention and deleted with their session."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import signing
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from core.crypto import ColumnCipher
from sessions.models import Session, SessionFile
from sessions.services.files import file_store
from sessions.services.retention import call_logs_prune
from tests.files.makers import make_png

pytestmark = pytest.mark.django_db

OLD = {"secret_key": "old-secret-key-0000000000", "encryption_key": "old-encryption-key-11111111"}
ENCRYPTED = ("name", "sha256", "data", "text")


def _raw(pk: int, column: str) -> bytes:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {column} FROM agent_sessions_sessionfile WHERE id = %s", [pk])
        return bytes(cursor.fetchone()[0])


def test_the_bytes_name_and_text_are_stored_encrypted(alice, make_session):
    stored = file_store(session=make_session(alice), user=alice, name="plans.txt", data=b"the secret plans")
    for column in ENCRYPTED:
        assert b"secret" not in _raw(stored.pk, column) and b"plans" not in _raw(stored.pk, column)
    assert SessionFile.objects.get(pk=stored.pk).text == "the secret plans"


def test_key_rotation_re_encrypts_every_file_column(alice, make_session, monkeypatch):
    session = make_session(alice)
    png = make_png(4, 4)
    files = [file_store(session=session, user=alice, name=f"f{i}.png", data=png) for i in range(6)]
    old = ColumnCipher(**OLD)
    values = {"name": "f0.png", "sha256": files[0].sha256, "data": png, "text": ""}
    with connection.cursor() as cursor:
        for file in files:  # more rows than one rotation batch of this model
            for column in ENCRYPTED:
                value = {**values, "name": file.name}[column]
                cursor.execute(f"UPDATE agent_sessions_sessionfile SET {column} = %s WHERE id = %s",
                               [old.dump(value), file.pk])
    with pytest.raises(signing.BadSignature):
        SessionFile.objects.get(pk=files[0].pk)

    monkeypatch.setenv("OLD_SECRET_KEY", OLD["secret_key"])
    monkeypatch.setenv("OLD_AGENTLOOM_ENCRYPTION_KEY", OLD["encryption_key"])
    assert SessionFile.ROTATION_BATCH < len(files)
    call_command("rotate_keys")

    for file in files:
        again = SessionFile.objects.get(pk=file.pk)
        assert (again.name, bytes(again.data), again.sha256, again.text) == (file.name, png, files[0].sha256, "")


def test_call_log_retention_keeps_files_and_deleting_the_session_deletes_them(alice, make_session, agent):
    session = make_session(alice)
    file_store(session=session, user=alice, name="a.txt", data=b"notes")
    agent.call_log_retention_days = 1
    agent.save(update_fields=["call_log_retention_days"])
    call_logs_prune(now=timezone.now() + timedelta(days=30))
    assert SessionFile.objects.count() == 1
    Session.objects.filter(pk=session.pk).delete()
    assert not SessionFile.objects.exists()
