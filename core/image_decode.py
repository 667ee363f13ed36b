"""The child that decodes one image for :mod:`core.images`, bounded in memory and CPU.

Run by its path with ``python -P -s`` (never imported, never ``-m``: the ``agentloom``
package would bring Django and Celery into a process that needs Pillow alone), so it
imports nothing but the standard library and Pillow. It reads the image's bytes on stdin
and writes one JSON line: ``{"ok": true}`` once Pillow has verified the image and decoded
all of it as the type, size and single frame the parent read from its header, else
``{"refused": "damaged" | "animated" | "memory"}``.

Arguments: the Pillow formats the type may be read as (comma-separated, the first the one
to open with), the width and height the header claimed, the CPU seconds and the address
space (bytes) this process may use.
"""
from __future__ import annotations

import io
import json
import sys


def _write(record: dict) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def decode(formats: list[str], width: int, height: int, cpu_seconds: int, memory_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))  # if the parent is gone
    data = sys.stdin.buffer.read()
    try:
        from PIL import Image

        # Pillow's own bomb guard, at the size the header claimed (checked by the parent).
        Image.MAX_IMAGE_PIXELS = max(width * height, 1)
        with Image.open(io.BytesIO(data), formats=formats[:1]) as image:
            image.verify()  # checksums and structure, without decoding (PNG's chunk CRCs)
        with Image.open(io.BytesIO(data), formats=formats[:1]) as image:
            if image.format not in formats or image.size != (width, height):
                _write({"refused": "damaged"})
                return
            if image.format != "MPO" and getattr(image, "n_frames", 1) > 1:
                _write({"refused": "animated"})
                return
            image.load()
    except MemoryError:
        _write({"refused": "memory"})
        return
    except Exception:  # untrusted bytes: whatever the decoder trips on (a bomb too), the image is damaged
        _write({"refused": "damaged"})
        return
    _write({"ok": True})


if __name__ == "__main__":
    decode(sys.argv[1].split(","), *(int(argument) for argument in sys.argv[2:6]))
