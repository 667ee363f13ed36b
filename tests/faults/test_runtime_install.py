"""The deployment's install serves: `make run` with Redis on the runtime dependencies alone (issue #44 item 3).

Every other test runs in the dev virtualenv, where the dev extras (pytest, schemathesis,
mypy…) bring in packages the product may lean on without declaring them: kombu's Redis
transport imported ``packaging``, which only they brought, and every worker of the Redis
deployment died at start. These tests use the compose image's install instead — the files the
Dockerfile copies, installed with its ``pip install -c constraints.txt .`` into a virtualenv
of their own (``scripts/runtime_install.py``, cached outside the clone) — and run the product
from that copy, as the image runs it from ``/app``.

``.ci/run`` builds the virtualenv before the suite and names it in ``AGENTLOOM_RUNTIME_PYTHON``,
so in CI a failed install fails the build; elsewhere the test builds (or reuses) it and skips
with the reason when it cannot (no package index). The Redis is a private ``redis-server`` on a
free loopback port and the database a SQLite file in a temporary folder: the launcher's worker
shares a queue with nothing else. Every wait is bounded.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.faults.launcher import MakeRun

pytestmark = pytest.mark.redis

RUNTIME_PYTHON_ENV = "AGENTLOOM_RUNTIME_PYTHON"
INSTALLER = REPO / "scripts" / "runtime_install.py"
# Brought by the dev extras only: if one of them imports, this is not the image's install and
# the tests below would prove nothing.
DEV_ONLY = ("pytest", "pytest_django", "hypothesis", "schemathesis", "playwright", "mypy", "ruff",
            "mcp_server_time")

IMPORT_EVERYTHING = """
import importlib, importlib.util, json, os, pkgutil, sys
import django
django.setup()
failed, count = {}, 0
for top in ("agentloom", "core", "agents", "toolservers", "tools", "web", "runloop", "sessions", "models_catalog",
            "context"):
    package = importlib.import_module(top)
    assert os.path.dirname(package.__path__[0]) == os.getcwd(), package.__path__  # the image's copy
    for module in pkgutil.walk_packages(package.__path__, top + "."):
        count += 1
        try:
            importlib.import_module(module.name)
        except Exception as exc:
            failed[module.name] = repr(exc)
dev = [name for name in sys.argv[1:] if importlib.util.find_spec(name) is not None]
print(json.dumps({"count": count, "failed": failed, "dev": dev}))
"""


@pytest.fixture(scope="module")
def runtime_python() -> str:
    given = os.environ.get(RUNTIME_PYTHON_ENV)
    if given:  # CI built it, and a failed build already failed CI: never a skip here
        assert Path(given).is_file(), f"{RUNTIME_PYTHON_ENV}={given} does not exist"
        return given
    done = subprocess.run([sys.executable, str(INSTALLER), "venv"], capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        pytest.skip("the runtime-only virtualenv could not be built (scripts/runtime_install.py venv: "
                    f"{done.stderr.strip().splitlines()[-1:]}); CI builds it")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture
def image(tmp_path) -> Path:
    """What the Dockerfile copies into /app, copied into a folder of this test."""
    app = tmp_path / "app"
    subprocess.run([sys.executable, str(INSTALLER), "app", str(app)], check=True, timeout=120)
    return app


def _runtime_env(app: Path, var_dir: Path, **extra: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items()
                   if key not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "VIRTUAL_ENV"}}
    environment.update(PYTHONPATH=str(app), AGENTLOOM_VAR_DIR=str(var_dir), SECRET_KEY="runtime-test-secret",
                       AGENTLOOM_ENCRYPTION_KEY="runtime-test-encryption", DJANGO_SETTINGS_MODULE="agentloom.settings",
                       **extra)
    return environment


def test_every_module_of_the_product_imports_on_the_runtime_install_with_redis_configured(
        runtime_python, image, tmp_path):
    done = subprocess.run(
        [runtime_python, "-c", IMPORT_EVERYTHING, *DEV_ONLY], cwd=image, capture_output=True, text=True, timeout=300,
        env=_runtime_env(image, tmp_path / "var", REDIS_URL="redis://127.0.0.1:9/0"))  # nothing is connected
    assert done.returncode == 0, done.stderr[-4000:]
    found = __import__("json").loads(done.stdout.strip().splitlines()[-1])
    assert found["dev"] == []  # the dev extras are absent: this is the image's install
    assert found["count"] > 200
    assert found["failed"] == {}


def test_make_run_with_redis_on_the_runtime_install_serves_and_the_demo_model_answers(
        runtime_python, image, tmp_path, private_redis):
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    env = {"REDIS_URL": private_redis.url, "AGENTLOOM_WORKER_RESTART_DELAY": "0.5"}
    with MakeRun(var_dir, env=env, python=runtime_python, app=image) as make_run:
        make_run.wait_healthy(timeout=180)  # a worker's heartbeat is seen, through Redis
        make_run.api.log_in()
        status, health = make_run.api.health()
        assert status == 200 and health["broker_kind"] == "redis" and health["broker"] == "ok", health
        assert len(health["workers"]) == 1, health

        (agent,) = [agent for agent in make_run.api.ok("GET", "/api/v1/agents") if agent["name"] == "Demo assistant"]
        session_id = make_run.api.ok("POST", "/api/v1/sessions", {"agent": agent["id"]})["id"]
        run_id = make_run.api.ask(session_id, "What is 17*23?")
        run = make_run.api.wait_status(run_id, {"completed", "failed", "interrupted", "cancelled"}, timeout=60)
        assert run["status"] == "completed", (run, make_run.output()[-4000:])
        answers = [record for record in make_run.api.records(session_id)
                   if record["run_id"] == run_id and record["kind"] == "assistant"]
        assert answers and "391" in str(answers[-1]) and "(Offline demo model)" in str(answers[-1]), answers
        assert "The worker stopped" not in make_run.output()  # it never crashed on the way

        assert make_run.interrupt(timeout=60) == 0
