"""GET /healthz: the database, the broker, the workers and this web process's door, as an
orchestrator's probe sees them.

200 when the database answers, a worker has written its heartbeat within
``AGENTLOOM_HEARTBEAT_STALE_SECONDS`` (or tasks run inline) and this process's door is
taking work; 503 otherwise. The web keeps serving pages either way: a 503 says questions
would wait for a worker, or that this process is shedding load (``"web": "refusing"``:
its door is full or refused a request within the last seconds, agentloom/admission.py) —
a balancer should send new work elsewhere, not restart it.

Anyone may ask (a probe carries no credentials), so everyone gets the status and the
state of each part in fixed words. What names the deployment — each live worker's host,
pid, heartbeat age and run count, the broker kind, the stale interval — is only for
operators: a staff user's console session, or an API token of a staff user
(``Authorization: Token …``). An address cannot be learnt from the probe.
"""
from __future__ import annotations

import logging
import os
from dataclasses import asdict

from django.conf import settings
from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from agentloom.admission import DOOR_SCOPE_KEY
from agentloom.warmup import seconds_since_start, warming_up
from core.accounts.services import token_check
from runloop.workers import workers_live

# What every caller sees; the rest of the body is for operators.
PUBLIC_FIELDS = ("status", "database", "broker", "worker", "web")

logger = logging.getLogger("agentloom.health")


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


def _door(request) -> dict:
    """``web``: ok, or refusing while the door this request came through sheds load. A
    request that came through no door (a test client) was refused by nobody."""
    door = getattr(request, "scope", {}).get(DOOR_SCOPE_KEY)
    return door.health() if door is not None else {"web": "ok"}


def _operator(request) -> bool:
    """A staff user, by the console's session or by an API token (no token: no question asked)."""
    try:
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            return bool(user.is_staff and user.is_active)
        keyword, _, key = request.headers.get("Authorization", "").partition(" ")
        if keyword != "Token" or not key.strip():
            return False
        token = token_check(key=key.strip())
        return token is not None and token.user.is_active and token.user.is_staff
    except DatabaseError:  # the database is down: the status says so, details wait
        return False


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
        **_door(request),
    }
    healthy = database == "ok" and body["worker"] in {"ok", "inline"} and body["web"] == "ok"
    body["status"] = "ok" if healthy else "unavailable"
    parts = {name: body[name] for name in ("database", "worker", "web")}
    if not _operator(request):
        body = {name: body[name] for name in PUBLIC_FIELDS}
    response = JsonResponse(body, status=200 if healthy else 503)
    if not healthy:
        _log_unavailable(parts)
        # Logged above at the level it deserves: Django would log every 5xx as an ERROR
        # ("Service Unavailable: /healthz"), the expected ones of a starting process too.
        response._has_been_logged = True  # type: ignore[attr-defined]
    return response


def _log_unavailable(parts: dict[str, str]) -> None:
    """A 503, logged once: at INFO while the process is starting and only the workers are
    missing (no heartbeat yet: expected), at WARNING while this process sheds load (it
    chose to), at ERROR otherwise — the database unreachable, or no worker once started."""
    failing = ", ".join(f"{name} {state}" for name, state in parts.items() if state not in {"ok", "inline"})
    if parts["database"] == "ok" and parts["worker"] != "ok" and warming_up():
        logger.info("/healthz answered 503 while this process is starting (%.0f s ago): %s. Expected until a "
                    "worker writes its first heartbeat; not a failure.", seconds_since_start(), failing)
    elif parts["database"] == "ok" and parts["worker"] in {"ok", "inline"}:
        logger.warning("/healthz answered 503: %s. This process is shedding load; send new work elsewhere.",
                       failing)
    else:
        logger.error("/healthz answered 503: %s.", failing)
