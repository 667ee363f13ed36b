"""The platform served by uvicorn on a real loopback port, inside the test process."""
from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import uvicorn


class LiveServer:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        from agentloom.asgi import application

        config = uvicorn.Config(application, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def read_sse(lines: Iterator[str], *, stop_after: int | None = None) -> list[dict]:
    """Parse SSE frames into {"id", "event", "data"} until the stream ends or ``stop_after`` frames."""
    frames, current = [], {}
    for line in lines:
        if line == "":
            if "id" in current:
                frames.append(current)
                if stop_after is not None and len(frames) >= stop_after:
                    return frames
            current = {}
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(": ")
            current[field] = value
    return frames
