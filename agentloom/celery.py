"""The Celery app. Broker: Redis when REDIS_URL is set, else kombu's filesystem transport."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentloom.settings")

app = Celery("agentloom")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["agentloom", "sessions", "models_catalog"])


def prepare_broker_folders() -> None:
    """The filesystem transport needs its folders to exist before the first message."""
    from django.conf import settings

    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
            os.makedirs(settings.CELERY_BROKER_TRANSPORT_OPTIONS[key], exist_ok=True)
