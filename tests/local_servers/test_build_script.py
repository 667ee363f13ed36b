"""The build of the real local servers heals a cached build whose llama-server failed
(``scripts/local_models.py``): on a new machine the first try of its sdist download failed
for want of a build backend, and the cached manifest kept that failure for good."""
from __future__ import annotations

import importlib.util
import json
import stat
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("local_models_under_test", REPO / "scripts" / "local_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cached_build_whose_server_failed(local_models, root: Path) -> Path:
    folder = root / local_models.build_key()
    folder.mkdir(parents=True)
    manifest = {"key": local_models.build_key(), "folder": str(folder), "python": str(folder / "venv/bin/python"),
                "llama_server": None, "models": {"smollm2": "/models/smollm2.gguf", "gemma3": None},
                "skipped": {"llama_server": "it did not build: pip download failed (exit status 2)",
                            "gemma3": "its chunks could not be joined"},
                "timings_seconds": {"total": 400.0}}
    (folder / local_models.MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_a_cached_build_whose_llama_server_failed_builds_that_part_again_and_keeps_the_rest(tmp_path, monkeypatch):
    local_models = _script()
    monkeypatch.setenv("AGENTLOOM_LOCAL_MODELS_CACHE", str(tmp_path))
    folder = _cached_build_whose_server_failed(local_models, tmp_path)
    # What the earlier run compiled before it stopped: a binary that answers --version.
    binary = folder / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\necho 'version: 1 (test)'\n")
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)

    manifest = local_models.build()

    assert manifest["llama_server"] == str(binary)
    assert "llama_server" not in manifest["skipped"]
    assert manifest["skipped"]["gemma3"] == "its chunks could not be joined"  # the rest is kept as it was
    assert manifest["models"]["smollm2"] == "/models/smollm2.gguf"
    assert local_models.read_manifest(folder) == manifest  # written for the next run


def test_a_cached_build_that_skipped_llama_server_on_purpose_is_left_as_it_is(tmp_path, monkeypatch):
    local_models = _script()
    monkeypatch.setenv("AGENTLOOM_LOCAL_MODELS_CACHE", str(tmp_path))
    folder = _cached_build_whose_server_failed(local_models, tmp_path)
    manifest = json.loads((folder / local_models.MANIFEST).read_text())
    manifest["skipped"]["llama_server"] = "not asked for (--no-llama-server)"
    (folder / local_models.MANIFEST).write_text(json.dumps(manifest))

    assert local_models.build() == manifest
