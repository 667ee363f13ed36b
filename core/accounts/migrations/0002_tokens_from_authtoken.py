"""Carry API tokens over from Django REST framework's ``authtoken`` table, which kept each
key in clear: every key becomes a hashed token of the client "default" (its holder keeps
working), and the clear copies are deleted. Nothing to do on a database that never had
that table."""
from __future__ import annotations

import hashlib
from datetime import timedelta

from django.conf import settings
from django.db import migrations
from django.utils import timezone

TOKEN_DAYS = 30  # a carried-over token gets the default lifetime, counted from now


def tokens_from_authtoken(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if "authtoken_token" not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("accounts", "ApiToken")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    with connection.cursor() as cursor:
        cursor.execute("SELECT key, user_id FROM authtoken_token")
        rows = cursor.fetchall()
    passwords = dict(User.objects.filter(pk__in=[user_id for _, user_id in rows]).values_list("pk", "password"))
    expires_at = timezone.now() + timedelta(days=TOKEN_DAYS)
    for key, user_id in rows:
        if user_id not in passwords:
            continue
        ApiToken.objects.update_or_create(user_id=user_id, client="default", defaults={
            "key_hash": hashlib.sha256(key.encode()).hexdigest(),
            "password_stamp": hashlib.sha256((passwords[user_id] or "").encode()).hexdigest(),
            "expires_at": expires_at,
        })
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM authtoken_token")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(tokens_from_authtoken, migrations.RunPython.noop)]
