"""Settings from the environment and the health endpoint (SPEC §1, issue: foundation)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _django(code: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    base.update({"DJANGO_SETTINGS_MODULE": "agentloom.settings", "SECRET_KEY": "s" * 40,
                 "AGENTLOOM_ENCRYPTION_KEY": "e" * 40, "AGENTLOOM_VAR_DIR": str(REPO / "var" / "test-sub")})
    base.update(env)
    base = {k: v for k, v in base.items() if v is not None}
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=base, capture_output=True,
                          text=True, timeout=60)


SETUP = "import django; django.setup()"


@pytest.mark.parametrize(
    "env, variable",
    [
        ({"DATABASE_URL": "mysql://root@localhost/x"}, "DATABASE_URL"),
        ({"PORT": "eighty"}, "PORT"),
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"REDIS_URL": "http://127.0.0.1:6379"}, "REDIS_URL"),
        ({"SECRET_KEY": ""}, "SECRET_KEY"),
        ({"AGENTLOOM_ENCRYPTION_KEY": ""}, "AGENTLOOM_ENCRYPTION_KEY"),
        ({"AGENTLOOM_LOGIN_RATE": "ten/min"}, "AGENTLOOM_LOGIN_RATE"),
        ({"AGENTLOOM_LOGIN_RATE": "10/fortnight"}, "AGENTLOOM_LOGIN_RATE"),
        ({"AGENTLOOM_PRIVATE_ENDPOINT_HOSTS": "ollama.lan,not a host!"}, "AGENTLOOM_PRIVATE_ENDPOINT_HOSTS"),
        ({"AGENTLOOM_ALLOW_PRIVATE_ENDPOINTS": "false", "AGENTLOOM_PRIVATE_ENDPOINT_HOSTS": "ollama.lan"},
         "AGENTLOOM_PRIVATE_ENDPOINT_HOSTS"),
    ],
)
def test_a_bad_or_missing_variable_stops_start_up_with_one_line_naming_it(env, variable):
    result = _django(SETUP, **env)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert variable in lines[0] and "Traceback" not in result.stderr


def test_debug_mode_starts_without_secrets():
    result = _django(SETUP + "; print('ready')", DEBUG="true", SECRET_KEY="", AGENTLOOM_ENCRYPTION_KEY="")
    assert result.returncode == 0 and "ready" in result.stdout, result.stderr


def test_healthz_answers_503_when_the_database_is_unreachable():
    code = SETUP + (
        "; from django.test import Client; r = Client().get('/healthz', HTTP_HOST='127.0.0.1');"
        " print(r.status_code, r.json()['database'])"
    )
    result = _django(code, DATABASE_URL="postgres://postgres@127.0.0.1:9/agentloom")
    assert result.stdout.split() == ["503", "unreachable"], result.stderr


@pytest.mark.django_db
def test_healthz_answers_200_with_database_broker_and_worker_status(admin_client):
    from runloop.housekeeping import Housekeeper

    Housekeeper(name="worker-host:1").tick(first=True)  # what a worker writes when it is ready
    response = admin_client.get("/healthz")  # broker_kind is for operators (tests/security/test_health_details.py)
    assert response.status_code == 200
    body = response.json()
    assert body["database"] == "ok" and body["worker"] == "ok"
    assert body["broker_kind"] in {"redis", "filesystem"}


@pytest.mark.django_db
def test_an_unknown_api_path_answers_in_the_one_error_shape(client):
    response = client.get("/api/v1/nowhere")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}


@pytest.mark.django_db
def test_a_token_is_issued_for_good_credentials_only(client, alice):
    good = client.post("/api/v1/auth/token", {"username": "alice", "password": "alice-password-1"},
                       content_type="application/json")
    bad = client.post("/api/v1/auth/token", {"username": "alice", "password": "nope"},
                      content_type="application/json")
    empty = client.post("/api/v1/auth/token", {}, content_type="application/json")
    assert good.status_code == 200 and len(good.json()["token"]) >= 20
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "bad_credentials"
    assert empty.status_code == 400 and set(empty.json()["error"]["fields"]) == {"username", "password"}


def test_production_mode_behind_tls_passes_the_deploy_checks(tmp_path):
    import secrets

    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=REPO,
        env={**{k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}},
             "DJANGO_SETTINGS_MODULE": "agentloom.settings", "SECRET_KEY": secrets.token_urlsafe(50),
             "AGENTLOOM_ENCRYPTION_KEY": secrets.token_urlsafe(50), "AGENTLOOM_HTTPS": "true",
             "ALLOWED_HOSTS": "agentloom.example.com", "AGENTLOOM_VAR_DIR": str(tmp_path)},
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
