"""GET /healthz: 200 when the database answers, 503 when it does not; broker status alongside."""
from __future__ import annotations

import os

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone()[0] == 1
    except Exception:  # any driver error means "not reachable" to a probe
        return False


def _broker_status() -> str:
    if settings.REDIS_URL:
        import redis

        try:
            client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
            client.ping()
            return "ok"
        except redis.RedisError:
            return "unreachable"
    folder = settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]
    return "ok" if os.path.isdir(folder) else "not_initialised"


@never_cache
@require_GET
def healthz(request):
    database = "ok" if _database_ok() else "unreachable"
    body = {
        "status": "ok" if database == "ok" else "unavailable",
        "database": database,
        "broker": _broker_status(),
        "broker_kind": "redis" if settings.REDIS_URL else "filesystem",
    }
    return JsonResponse(body, status=200 if database == "ok" else 503)
