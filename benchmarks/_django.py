"""Django set-up for benchmarks: a throw-away database of their own, migrated once."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def setup(*, need_postgres: bool = False) -> str:
    """Point Django at a benchmark database and migrate it. Returns the vendor name.

    PostgreSQL: ``BENCH_DATABASE_URL``, else ``DATABASE_URL`` with the database name
    replaced by ``agentloom_bench`` (created when missing). Otherwise a temporary SQLite file.
    """
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("SECRET_KEY", "benchmark-secret-key")
    os.environ.setdefault("AGENTLOOM_ENCRYPTION_KEY", "benchmark-encryption-key")
    os.environ.setdefault("AGENTLOOM_VAR_DIR", str(REPO / "var" / "bench"))
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,127.0.0.1")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    url = os.environ.get("BENCH_DATABASE_URL")
    if url is None and os.environ.get("DATABASE_URL", "").startswith("postgres"):
        base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
        url = f"{base}/agentloom_bench"
        _create_database(base, "agentloom_bench")
    if url is None:
        if need_postgres:
            raise SystemExit("this benchmark needs PostgreSQL: set DATABASE_URL=postgres://…")
        url = f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite3"
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = "agentloom.settings"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    return connection.vendor


def _create_database(base_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def table(title: str, rows: list[tuple[str, ...]], headers: tuple[str, ...]) -> None:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
