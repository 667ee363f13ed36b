"""Session titles and run counters become encrypted columns (SPEC §11).

An encrypted column is binary, so the text cannot be converted in place: a sealed column
is added, every row is copied into it through the encrypting field, the clear column is
dropped and the sealed one takes its name. Reversible (decrypts back into clear columns).
"""
from __future__ import annotations

import django_cryptography.fields
from django.db import migrations, models

BATCH = 500


def _copy(apps, source: str, target: str) -> None:
    Session = apps.get_model("agent_sessions", "Session")
    Run = apps.get_model("agent_sessions", "Run")
    for model, field in ((Session, "title"), (Run, "counters")):
        rows = model.objects.order_by("pk").values_list("pk", f"{field}{source}")
        for pk, value in rows.iterator(chunk_size=BATCH):
            model.objects.filter(pk=pk).update(**{f"{field}{target}": value})


def seal(apps, schema_editor) -> None:
    _copy(apps, "", "_sealed")


def unseal(apps, schema_editor) -> None:
    _copy(apps, "_sealed", "")


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0005_model_call_pruned_at")]

    operations = [
        migrations.AddField("session", "title_sealed", django_cryptography.fields.encrypt(
            models.CharField(max_length=200, blank=True, default=""))),
        migrations.AddField("run", "counters_sealed", django_cryptography.fields.encrypt(
            models.JSONField(default=dict))),
        migrations.RunPython(seal, unseal),
        migrations.RemoveField("session", "title"),
        migrations.RemoveField("run", "counters"),
        migrations.RenameField("session", "title_sealed", "title"),
        migrations.RenameField("run", "counters_sealed", "counters"),
        migrations.AlterField("session", "title", django_cryptography.fields.encrypt(
            models.CharField(max_length=200, blank=True))),
    ]
