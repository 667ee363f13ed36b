"""How ``/healthz``'s 503s are logged: a process that is starting and has no worker
heartbeat yet is expected to answer 503 (INFO, saying so); once started, no worker is a
failure (ERROR). Each 503 is logged once, by ``agentloom.health``, not again by Django's
generic "Service Unavailable" line."""
from __future__ import annotations

import logging

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _records(caplog, name: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == name]


def test_a_503_while_the_process_starts_is_logged_at_info_with_why(caplog, settings):
    settings.AGENTLOOM_WARMUP_SECONDS = 3600.0  # this process started less than an hour ago
    with caplog.at_level(logging.INFO):
        response = Client().get("/healthz")
    assert response.status_code == 503 and response.json()["worker"] == "none_seen"
    [record] = _records(caplog, "agentloom.health")
    assert record.levelno == logging.INFO
    assert "while this process is starting" in record.getMessage()
    assert "worker none_seen" in record.getMessage() and "not a failure" in record.getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert not _records(caplog, "django.request")


def test_a_503_once_started_is_still_an_error(caplog, settings):
    settings.AGENTLOOM_WARMUP_SECONDS = 0.0  # started long enough ago: a worker should beat by now
    with caplog.at_level(logging.INFO):
        response = Client().get("/healthz")
    assert response.status_code == 503
    [record] = _records(caplog, "agentloom.health")
    assert record.levelno == logging.ERROR
    assert record.getMessage() == "/healthz answered 503: worker none_seen."
    assert not _records(caplog, "django.request")  # logged once


def test_a_healthy_answer_logs_nothing(caplog, settings):
    from runloop.housekeeping import Housekeeper

    Housekeeper(name="worker-host:1").tick(first=True)
    with caplog.at_level(logging.INFO):
        assert Client().get("/healthz").status_code == 200
    assert not _records(caplog, "agentloom.health")
