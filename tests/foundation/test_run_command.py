"""`make run`'s launcher on the embedded default: SQLite, the filesystem broker, a real worker."""
from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request

from tests.conftest import REPO


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def test_the_launcher_serves_healthz_and_the_admin_login_then_stops_on_ctrl_c(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "AGENTLOOM_ENCRYPTION_KEY",
                        "DJANGO_SETTINGS_MODULE"}}
    env.update({"PORT": str(port), "AGENTLOOM_VAR_DIR": str(tmp_path), "DJANGO_SUPERUSER_USERNAME": "admin",
                "DJANGO_SUPERUSER_PASSWORD": "demo-password-123"})
    process = subprocess.Popen([sys.executable, "-m", "agentloom.launch"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 90
        status = None
        while time.monotonic() < deadline and process.poll() is None and status != 200:
            try:
                status, body = _get(f"http://127.0.0.1:{port}/healthz")  # 503 until the worker beats
            except OSError:
                pass
            time.sleep(0.2)
        assert status == 200, process.stdout.read() if process.poll() is not None else "no answer"
        assert '"database": "ok"' in body and '"broker": "ok"' in body and '"worker": "ok"' in body
        login_status, login_page = _get(f"http://127.0.0.1:{port}/admin/login/")
        assert login_status == 200 and "csrfmiddlewaretoken" in login_page
        assert (tmp_path / "local.env").is_file()  # generated secrets, never in the repo
        # The database, its journal, the broker's messages, the secrets: this account's alone.
        # (Collected static files are copies of the published assets; Django writes them 0644.)
        assert (tmp_path / "agentloom.sqlite3").is_file()
        exposed = {str(path.relative_to(tmp_path)): oct(stat.S_IMODE(path.stat().st_mode))
                   for path in tmp_path.rglob("*")
                   if path.stat().st_mode & 0o077 and "staticfiles" not in path.relative_to(tmp_path).parts[:1]}
        assert exposed == {}
    finally:
        process.send_signal(signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            output, _ = process.communicate()
    assert process.returncode == 0, output
    assert "Traceback" not in output
