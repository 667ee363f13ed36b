"""The provider registry under concurrent first use (found by the load run)."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import threading
from models_catalog.providers import get_provider
barrier = threading.Barrier(32)
failures = []
def first_call():
    barrier.wait()
    try:
        get_provider("openai_compatible")
    except Exception as exc:
        failures.append(repr(exc))
threads = [threading.Thread(target=first_call) for _ in range(32)]
[t.start() for t in threads]
[t.join() for t in threads]
print(len(failures))
"""


def test_threads_making_their_first_call_together_all_find_the_builtin_providers():
    for _ in range(5):  # a fresh interpreter each time: the race is on the very first use
        result = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "0"
