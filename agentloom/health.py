"""GET /healthz: the database, the broker and the workers, as an orchestrator's probe sees them.

200 when the database answers and a worker has written its heartbeat within
``AGENTLOOM_HEARTBEAT_STALE_SECONDS`` (or tasks run inline); 503 otherwise. The web keeps
serving pages either way: a 503 says questions would wait for a worker, not that the
site is down. Each live worker is listed with the age of its heartbeat.
"""
from __future__ import annotations

import os
from dataclasses import asdict

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agentloom.runloop.workers import workers_live


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


def _workers() -> dict:
    """``worker``: ok, none_seen (no heartbeat within the stale interval), inline (eager
    tasks: no worker needed) or unknown (the database could not say)."""
    try:
        live = workers_live()
    except DatabaseError:
        return {"worker": "unknown", "workers": []}
    if settings.CELERY_TASK_ALWAYS_EAGER:
        status = "inline"
    else:
        status = "ok" if live else "none_seen"
    return {
        "worker": status,
        "workers": [asdict(worker) for worker in live],
        "worker_heartbeat_age_seconds": live[0].heartbeat_age_seconds if live else None,
        "worker_stale_after_seconds": settings.AGENTLOOM_HEARTBEAT_STALE_SECONDS,
    }


@never_cache
@require_GET
def healthz(request):
    database = "ok" if _database_ok() else "unreachable"
    body = {
        "status": "ok",
        "database": database,
        "broker": _broker_status(),
        "broker_kind": "redis" if settings.REDIS_URL else "filesystem",
        **(_workers() if database == "ok" else {"worker": "unknown", "workers": []}),
    }
    healthy = database == "ok" and body["worker"] in {"ok", "inline"}
    body["status"] = "ok" if healthy else "unavailable"
    return JsonResponse(body, status=200 if healthy else 503)
