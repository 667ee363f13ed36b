"""The real local model servers as pytest fixtures (issue #45; docs/local-servers.md).

Registered for the whole suite by ``tests/conftest.py`` (``pytest_plugins``), so a test
anywhere asks for one by name:

* ``real_llama_cpp_python``: llama-cpp-python's server (``python -m llama_cpp.server``)
  serving SmolLM2-135M-Instruct with ``n_ctx`` 2,048 — one request at a time, as it runs;
* ``real_llama_server``: llama.cpp's own ``llama-server`` serving the same model with two
  slots of 2,048 (``--parallel 2``): ``/props``, ``/slots``, parallel requests;
* ``real_gemma_llama_cpp_python``: llama-cpp-python's server serving Gemma 3 270M (another
  tokenizer and chat template), where the build loaded it.

Each is started once per test session on a free port of 127.0.0.1 and is ready when it
answers (``GET /v1/models`` or ``/health``), never after a sleep. They come from
``scripts/local_models.py build`` (``make local-models``). Without that build a test that
uses one is skipped with how to build it — unless ``AGENTLOOM_REQUIRE_LOCAL_SERVERS=1``
(``.ci/run`` sets it): then it fails, so CI cannot go green on skipped real-server tests.
Every test that uses one is marked ``local_server`` (``-m "not local_server"`` leaves them out).
"""
from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
REAL_FIXTURES = ("real_llama_cpp_python", "real_llama_server", "real_gemma_llama_cpp_python")
START_TIMEOUT = 180.0  # seconds to load a 100 MB model on two busy cores, not a hang
SMOLLM2_ALIAS = "smollm2-135m-instruct"
GEMMA_ALIAS = "gemma-3-270m"
N_CTX = 2048


def _local_models():
    spec = importlib.util.spec_from_file_location("agentloom_local_models", REPO / "scripts" / "local_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def required() -> bool:
    return os.environ.get("AGENTLOOM_REQUIRE_LOCAL_SERVERS", "").strip() in ("1", "true", "yes")


def unavailable(reason: str) -> None:
    """Skip the test saying why and how to build, or fail it where the servers are required."""
    message = (f"{reason}. Build the real local servers with `make local-models` (about ten minutes "
               "the first time; cached in ~/.cache/agentloom/local-models), then `make test`.")
    if required():
        pytest.fail(f"AGENTLOOM_REQUIRE_LOCAL_SERVERS=1 and {message}", pytrace=False)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class RealServer:
    """One running real server: ``base_url`` ends in ``/v1`` (what a connection is given),
    ``root`` is the server root (``/props``, ``/health``)."""

    kind: str  # "llama_cpp_python" or "llama_server"
    model: str  # the alias requests name
    model_path: str
    n_ctx: int
    port: int
    process: subprocess.Popen
    log_path: Path
    slots: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.process.poll() is None


def _wait_ready(server: RealServer, path: str) -> None:
    """Until ``path`` answers 200 (the model is loaded), the process dies, or the bound."""
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(timeout=5.0) as client:
        while time.monotonic() < deadline:
            if not server.alive():
                raise RuntimeError(f"{server.kind} exited ({server.process.returncode}) while starting:\n"
                                   f"{server.log_tail()}")
            try:
                if client.get(server.root + path).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            # Polling, not a margin: each try is a connection refused or a 503 while loading.
            time.sleep(0.1)
    raise RuntimeError(f"{server.kind} not ready after {START_TIMEOUT:.0f}s:\n{server.log_tail()}")


def _start(kind: str, command: list[str], *, model: str, model_path: str, port: int, ready_path: str,
           slots: int = 1) -> RealServer:
    log = Path(tempfile.mkstemp(prefix=f"agentloom-{kind}-", suffix=".log")[1])
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   cwd=tempfile.gettempdir())
    server = RealServer(kind=kind, model=model, model_path=model_path, n_ctx=N_CTX, port=port, process=process,
                        log_path=log, slots=slots)
    try:
        _wait_ready(server, ready_path)
    except BaseException:
        _stop(server)
        raise
    return server


def _stop(server: RealServer) -> None:
    if server.alive():
        server.process.terminate()
        try:
            server.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(timeout=15)


def start_llama_cpp_python(manifest: dict[str, Any], model_path: str, alias: str) -> RealServer:
    port = free_port()
    command = [manifest["python"], "-m", "llama_cpp.server", "--model", model_path, "--model_alias", alias,
               "--n_ctx", str(N_CTX), "--n_threads", "2", "--host", "127.0.0.1", "--port", str(port)]
    return _start("llama_cpp_python", command, model=alias, model_path=model_path, port=port,
                  ready_path="/v1/models")


def start_llama_server(manifest: dict[str, Any], model_path: str, alias: str, *, parallel: int = 2) -> RealServer:
    port = free_port()
    # --ctx-size is the whole KV cache, split between the slots: each slot gets N_CTX.
    command = [manifest["llama_server"], "-m", model_path, "--alias", alias, "--ctx-size", str(N_CTX * parallel),
               "--parallel", str(parallel), "--threads", "2", "--host", "127.0.0.1", "--port", str(port),
               "--no-webui"]
    return _start("llama_server", command, model=alias, model_path=model_path, port=port, ready_path="/health",
                  slots=parallel)


@pytest.fixture(scope="session")
def local_models_manifest() -> dict[str, Any]:
    """What ``scripts/local_models.py build`` built on this machine (skips or fails when nothing)."""
    manifest = _local_models().read_manifest()
    if manifest is None:
        unavailable("The real local model servers are not built on this machine")
    return manifest


@pytest.fixture(scope="session")
def real_llama_cpp_python(local_models_manifest) -> Iterator[RealServer]:
    server = start_llama_cpp_python(local_models_manifest, local_models_manifest["models"]["smollm2"], SMOLLM2_ALIAS)
    yield server
    _stop(server)


@pytest.fixture(scope="session")
def real_gemma_llama_cpp_python(local_models_manifest) -> Iterator[RealServer]:
    path = local_models_manifest["models"].get("gemma3")
    if not path:
        # Not a missing build: the build tried and recorded why Gemma does not load here.
        pytest.skip("Gemma 3 270M is not served here: "
                    + local_models_manifest["skipped"].get("gemma3", "the build did not keep it"))
    server = start_llama_cpp_python(local_models_manifest, path, GEMMA_ALIAS)
    yield server
    _stop(server)


@pytest.fixture(scope="session")
def real_llama_server(local_models_manifest) -> Iterator[RealServer]:
    binary = local_models_manifest.get("llama_server")
    if not binary:
        unavailable("llama.cpp's llama-server was not built here ("
                    + local_models_manifest["skipped"].get("llama_server", "no reason recorded") + ")")
    server = start_llama_server(local_models_manifest, local_models_manifest["models"]["smollm2"], SMOLLM2_ALIAS)
    yield server
    _stop(server)


def pytest_configure(config):
    config.addinivalue_line("markers", "local_server: runs against a real local model server "
                                       "(make local-models builds them; docs/local-servers.md)")


def pytest_collection_modifyitems(config, items):
    """Mark every test that uses a real server ``local_server``, wherever it lives."""
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in REAL_FIXTURES):
            item.add_marker(pytest.mark.local_server)
