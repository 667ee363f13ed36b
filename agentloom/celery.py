"""The Celery app. Broker: Redis when REDIS_URL is set, else kombu's filesystem transport."""
from __future__ import annotations

import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentloom.settings")

app = Celery("agentloom")


@signals.after_setup_logger.connect(weak=False)
@signals.after_setup_task_logger.connect(weak=False)
def _secrets_out_of_worker_logs(logger: Any, **kwargs: Any) -> None:
    """A worker replaces the handlers ``settings.LOGGING`` made: its own get the filter
    that keeps run secrets out of every log line (LOOP-8). The root's come with the
    pool's ("multiprocessing"), which Celery sets up beside them with no signal of its own."""
    from celery.utils.log import get_multiprocessing_logger

    from core.log_redaction import filter_install

    filter_install(logger)
    pool = get_multiprocessing_logger()
    if pool is not None:
        filter_install(pool)


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["agentloom", "sessions", "models_catalog"])

