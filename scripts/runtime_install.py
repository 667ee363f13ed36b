"""The compose image's install, outside the clone: what a deployment runs on, without the dev extras.

    python scripts/runtime_install.py app DIR   # copy into DIR what the Dockerfile copies into /app
    python scripts/runtime_install.py venv      # build (or reuse) the runtime virtualenv; print its python

The Dockerfile copies a few folders into ``/app`` and runs ``pip install -c constraints.txt .``
there; the web and the worker then start from ``/app``. A dependency that only the dev extras
bring (kombu's Redis transport needed ``packaging``, issue #44) passes every test run from the
dev virtualenv and still stops the deployment's worker at start. The suite's runtime-install
test (``tests/faults/test_runtime_install.py``) and ``.ci/run`` use this script to get the same
install: ``app`` reads the Dockerfile's ``COPY`` lines, so a folder the image forgets is
missing here too; ``venv`` installs that copy with the Dockerfile's pip command into a fresh
virtualenv.

The virtualenv is cached outside the clone (``$AGENTLOOM_RUNTIME_CACHE``, default
``${XDG_CACHE_HOME:-~/.cache}/agentloom``), keyed on the interpreter's version and the hash of
pyproject.toml, constraints.txt and the Dockerfile, so it is rebuilt exactly when what it
installs changes, and the one-minute build is paid once. It is built under a file lock and
marked complete last: two builds at once wait for each other, and a build cut short is
thrown away by the next one. The product itself is uninstalled once its dependencies are in,
so the cache never holds a stale copy of the code: whoever runs it puts the current copy (from
``app``) first on ``PYTHONPATH``. Old keys are left in place (a worktree on another branch may
still use one); deleting the folder is always safe.

Exit status: 0 done (``venv`` prints the interpreter's path on stdout, its progress on stderr);
1 the install failed (pip's output is on stderr); 2 bad usage or no Dockerfile to read.
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEYED_FILES = ("pyproject.toml", "constraints.txt", "Dockerfile")
COMPLETE = ".agentloom-runtime-complete"
PRODUCT = "agentloom"  # the distribution name in pyproject.toml
INSTALL_TIMEOUT = 900  # seconds; a cold pip cache on a slow index, not a hang


def dockerfile_copies(root: Path = ROOT) -> list[tuple[list[str], str]]:
    """The Dockerfile's ``COPY <source>... <dest>`` lines, as (sources, dest), in order."""
    copies = []
    # A line ending in a backslash goes on in the next (the CMD's long argument list does).
    for line in (root / "Dockerfile").read_text().replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0].upper() == "COPY":
            if any(word.startswith("--") for word in words[1:]) or len(words) < 3:
                raise SystemExit(f"runtime_install: cannot read this COPY line of the Dockerfile: {line!r}")
            copies.append((words[1:-1], words[-1]))
    if not copies:
        raise SystemExit("runtime_install: the Dockerfile has no COPY line")
    return copies


def copy_app(target: Path, root: Path = ROOT) -> Path:
    """Copy what the Dockerfile copies into its WORKDIR, into ``target`` (created)."""
    target.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for sources, dest in dockerfile_copies(root):
        into_folder = dest.endswith("/") or len(sources) > 1
        for source in sources:
            origin = root / source
            placed = target / dest / Path(source).name if into_folder else target / dest
            placed.parent.mkdir(parents=True, exist_ok=True)
            if origin.is_dir():
                shutil.copytree(origin, placed, ignore=ignore, dirs_exist_ok=True)
            else:
                shutil.copy2(origin, placed)
    return target


def cache_key(root: Path = ROOT) -> str:
    digest = hashlib.sha256(f"python {sys.version_info.major}.{sys.version_info.minor}\n".encode())
    for name in KEYED_FILES:
        digest.update(name.encode() + b"\0" + (root / name).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def cache_folder() -> Path:
    configured = os.environ.get("AGENTLOOM_RUNTIME_CACHE")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentloom"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(command: list[str], **kwargs) -> None:
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=INSTALL_TIMEOUT, **kwargs)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-6000:])
        raise SystemExit(f"runtime_install: {shlex.join(command)} failed (exit status {done.returncode})")


def build_venv(venv: Path, root: Path = ROOT) -> None:
    """A fresh virtualenv with ``pip install -c constraints.txt .`` of the image's copy, minus the product."""
    shutil.rmtree(venv, ignore_errors=True)
    # The interpreter this script runs on (through a virtualenv, its base): the image's Python line.
    _run([sys.executable, "-m", "venv", str(venv)])
    with tempfile.TemporaryDirectory(prefix="agentloom-image-") as app:
        copy_app(Path(app), root)
        # The Dockerfile's own command, from the copy, like `RUN pip install -c constraints.txt .` in /app.
        _run([str(venv_python(venv)), "-m", "pip", "install", "--quiet", "-c", "constraints.txt", "."], cwd=app)
    _run([str(venv_python(venv)), "-m", "pip", "uninstall", "--quiet", "--yes", PRODUCT])
    (venv / COMPLETE).write_text("built from " + ", ".join(KEYED_FILES) + "\n")


def runtime_venv(root: Path = ROOT) -> Path:
    """The cached runtime virtualenv for this checkout, built first if it is missing or was cut short."""
    folder = cache_folder()
    folder.mkdir(parents=True, exist_ok=True)
    venv = folder / f"runtime-{cache_key(root)}"
    with open(folder / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build of the same key finishes first; then it is reused
        if not (venv / COMPLETE).is_file():
            print(f"runtime_install: building {venv} (pip install -c constraints.txt . as the Dockerfile does)",
                  file=sys.stderr, flush=True)
            build_venv(venv, root)
    return venv


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("venv", help="build or reuse the runtime virtualenv; print its python")
    app = commands.add_parser("app", help="copy what the Dockerfile copies into DIR")
    app.add_argument("dir", type=Path)
    arguments = parser.parse_args(argv)
    if not (ROOT / "Dockerfile").is_file():
        print(f"runtime_install: no Dockerfile in {ROOT}", file=sys.stderr)
        return 2
    if arguments.command == "app":
        copy_app(arguments.dir)
        return 0
    try:
        print(venv_python(runtime_venv()))
    except (subprocess.TimeoutExpired, OSError) as exc:
        print(f"runtime_install: {exc}", file=sys.stderr)
        return 1
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
