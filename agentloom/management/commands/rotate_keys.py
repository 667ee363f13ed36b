"""Re-encrypt every encrypted column from the old keys to the configured ones.

Procedure (docs/operations.md): stop web and workers; start this command with the NEW
`SECRET_KEY` / `AGENTLOOM_ENCRYPTION_KEY` in the environment and the old ones in
`OLD_SECRET_KEY` / `OLD_AGENTLOOM_ENCRYPTION_KEY`; then start everything on the new keys.
Re-running is safe: rows that already read with the new keys are left alone.
"""
from __future__ import annotations

import os

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django_cryptography.fields import EncryptedMixin

from core.crypto import ColumnCipher, DecryptionFailed

BATCH = 500


def encrypted_columns() -> list[tuple[str, str, str]]:
    """(model label, table, column) of every encrypted field in the project."""
    found = []
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, EncryptedMixin):
                found.append((model._meta.label, model._meta.db_table, field.column))
    return found


def rotation_batch(label: str) -> int:
    """Rows per transaction: a model with heavy columns (attached files) names fewer."""
    return getattr(apps.get_model(label), "ROTATION_BATCH", BATCH)


class Command(BaseCommand):
    help = "Re-encrypt all encrypted columns from OLD_SECRET_KEY/OLD_AGENTLOOM_ENCRYPTION_KEY to the current keys."

    def handle(self, *args, **options) -> None:
        old_secret = os.environ.get("OLD_SECRET_KEY")
        old_encryption = os.environ.get("OLD_AGENTLOOM_ENCRYPTION_KEY")
        if not old_secret or not old_encryption:
            raise CommandError(
                "Set OLD_SECRET_KEY and OLD_AGENTLOOM_ENCRYPTION_KEY to the keys the data was written with.")
        old = ColumnCipher(secret_key=old_secret, encryption_key=old_encryption)
        new = ColumnCipher(secret_key=settings.SECRET_KEY, encryption_key=settings.ENCRYPTION_KEY)
        quote = connection.ops.quote_name
        for label, table, column in encrypted_columns():
            rotated = kept = 0
            last_id = 0
            batch = rotation_batch(label)
            while True:
                with transaction.atomic():
                    with connection.cursor() as cursor:
                        cursor.execute(
                            f"SELECT id, {quote(column)} FROM {quote(table)} "
                            f"WHERE id > %s AND {quote(column)} IS NOT NULL ORDER BY id LIMIT {batch}",
                            [last_id],
                        )
                        rows = cursor.fetchall()
                        for pk, raw in rows:
                            last_id = pk
                            try:
                                new.load(raw)
                                kept += 1
                                continue
                            except DecryptionFailed:
                                pass
                            try:
                                value = old.load(raw)
                            except DecryptionFailed:
                                raise CommandError(
                                    f"{label} row {pk}: readable with neither the old nor the new keys") from None
                            cursor.execute(
                                f"UPDATE {quote(table)} SET {quote(column)} = %s WHERE id = %s",
                                [new.dump(value), pk],
                            )
                            rotated += 1
                if len(rows) < batch:
                    break
            self.stdout.write(f"{label}.{column}: {rotated} re-encrypted, {kept} already on the new keys")
