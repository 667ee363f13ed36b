"""The load run in its short form (issue: reliability): no error, no invalid request, no lost record."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.skipif(not os.environ.get("DATABASE_URL", "").startswith("postgres"),
                    reason="the load run needs PostgreSQL (web and workers are separate processes)")
def test_a_short_load_run_of_concurrent_chat_users_loses_nothing_and_sends_nothing_invalid():
    result = subprocess.run([sys.executable, "-W", "ignore", "load.py", "--users", "8", "--seconds", "10"],
                            cwd=REPO / "benchmarks", capture_output=True, text=True, timeout=240)
    # load.py exits non-zero on any error, invalid provider request, lost record or stuck run.
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    figures = dict(line.rsplit(None, 1) for line in result.stdout.splitlines()
                   if line.startswith(("errors", "invalid provider requests", "lost records")))
    assert figures == {"errors": "0", "invalid provider requests": "0", "lost records": "0"}, result.stdout
