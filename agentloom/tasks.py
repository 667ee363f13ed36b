"""Celery tasks of the project package. Each is three lines: id in, row loaded, service called."""
from __future__ import annotations

from celery import shared_task


@shared_task(name="agentloom.ping")
def ping() -> str:
    """A no-op the health check and the worker smoke test use to prove delivery works."""
    return "pong"
