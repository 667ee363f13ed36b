"""`make bench`: run every benchmark script in turn (each prints its own table)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    failed = 0
    for script in ("context_engine.py", "compaction_tokens.py", "compaction.py", "continuity.py", "history.py",
                   "loop.py", "loop_instructions.py", "anthropic_cache.py", "load.py", "estimation.py", "dense_text.py",
                   "server_tools.py", "approvals.py", "chat_pages.py", "local_server.py"):
        print(f"\n=== {script} ===", flush=True)
        failed |= subprocess.call([sys.executable, "-W", "ignore", str(HERE / script)], cwd=HERE)
    sys.exit(failed)
