"""The database-heavy cases of the suite through PgBouncer in transaction mode
(docs/operations.md, *Database connections*).

In that mode each transaction may land on a different server connection, so the platform
must keep no state on a connection between transactions: no server-side cursors
(``AGENTLOOM_DB_TRANSACTION_POOLER=true`` turns Django's off), no prepared statements
(the same setting turns psycopg's preparing off), no session-level locks or ``SET``. The race and
row-lock cases and a real worker process run here through a PgBouncer on loopback: a
named cursor that outlived its transaction, or a lock taken for a session, fails them.

Needs the ``pgbouncer`` program (Debian's package; CI installs it) and PostgreSQL.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import REPO

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
CASES = [
    "tests/faults/test_concurrency.py",
    "tests/foundation/test_concurrency.py",
    "tests/sessions/test_one_thing_at_a_time.py",
    "tests/runloop/test_worker.py::test_loop1_a_question_asked_through_the_api_is_answered_by_a_worker_process",
    "tests/runloop/test_attachments.py::test_run13_a_long_file_reaches_the_model_as_head_and_tail_and_read_file_reads_the_middle",
]

pytestmark = [
    pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"), reason="needs PostgreSQL"),
    pytest.mark.skipif(PGBOUNCER is None, reason="needs the pgbouncer program (Debian's package pgbouncer)"),
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def pgbouncer():
    """A PgBouncer on loopback in transaction mode in front of the suite's PostgreSQL."""
    from urllib.parse import urlsplit

    server = urlsplit(os.environ["DATABASE_URL"])
    user = server.username or "postgres"
    port = _free_port()
    # PgBouncer refuses to run as root: it runs as postgres, which must reach this folder
    # (pytest's own temporary folders are root's alone).
    folder = Path(tempfile.mkdtemp(prefix="agentloom-pgbouncer-"))
    folder.chmod(0o777)
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"* = host={server.hostname or '127.0.0.1'} port={server.port or 5432}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        "pool_mode = transaction\nmax_client_conn = 500\ndefault_pool_size = 10\n"
        "server_idle_timeout = 5\n"
        # Each transaction on the next idle server in turn, never the one the last used:
        # whatever a connection kept between transactions is then gone, every time.
        "server_round_robin = 1\nmin_pool_size = 4\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n")
    for path in folder.iterdir():
        path.chmod(0o666)
    command = [PGBOUNCER, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        command[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"postgres://{user}@127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # until it answers a query (it starts in a few milliseconds; a busy machine waits)
        try:
            with psycopg.connect(f"{url}/postgres", autocommit=True, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            break
        except psycopg.OperationalError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"pgbouncer did not start: {process.stdout.read() if process.stdout else ''}"
                            f"{(folder / 'pgbouncer.log').read_text() if (folder / 'pgbouncer.log').exists() else ''}")
            time.sleep(0.1)
    try:
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def database_name():
    """The inner run's database name; its test database is dropped afterwards on the server
    itself (PgBouncer keeps server connections to it open, so the inner run cannot)."""
    from urllib.parse import urlsplit

    name = f"agentloom_pgbouncer_{os.getpid()}"
    yield name
    server = urlsplit(os.environ["DATABASE_URL"])
    with psycopg.connect(host=server.hostname or "127.0.0.1", port=server.port or 5432,
                         user=server.username or "postgres", password=server.password or None,
                         dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "test_{name}" WITH (FORCE)')


def test_the_database_heavy_cases_pass_through_pgbouncer_in_transaction_mode(database_name, pgbouncer):
    env = {**os.environ, "DATABASE_URL": f"{pgbouncer}/{database_name}", "AGENTLOOM_DB_TRANSACTION_POOLER": "true"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", *CASES],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    tail = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert " passed" in result.stdout and "skipped" not in result.stdout.splitlines()[-1], tail
