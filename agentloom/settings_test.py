"""Test settings: throw-away secrets, then the one real settings module.

Tests run the production code path (DEBUG off); they only need secrets that are not
real. DATABASE_URL and REDIS_URL are honoured, so CI runs on PostgreSQL and Redis.
"""
from __future__ import annotations

import os

os.environ.setdefault("SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("AGENTLOOM_ENCRYPTION_KEY", "test-encryption-key-not-for-production")
os.environ.setdefault("AGENTLOOM_RETRY_BASE_DELAY", "0.01")  # retries without waiting
os.environ.setdefault("AGENTLOOM_DEMO_WORD_SECONDS", "0")  # the demo model answers at once
os.environ.setdefault("AGENTLOOM_VAR_DIR", os.path.join(os.path.dirname(__file__), "..", "var", "test"))

from agentloom.settings import *  # noqa: E402,F401,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests

if DATABASES["default"]["ENGINE"] == "core.db.postgresql":  # noqa: F405
    # The same backend with a flush that deletes rows instead of truncating every table:
    # half a second less per transactional test (tests/db/postgresql/base.py says why).
    DATABASES["default"]["ENGINE"] = "tests.db.postgresql"  # noqa: F405

if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    # A file, not shared-cache memory: live-server and worker-thread tests then lock like
    # production SQLite (busy timeout) instead of failing with "table is locked". One file
    # per test process, so parallel runs never share a database.
    os.makedirs(VAR_DIR, exist_ok=True)  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}  # noqa: F405
