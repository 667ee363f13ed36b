"""A TCP forwarder in front of the live server whose ``drop()`` cuts every open connection
at once — what a phone changing networks does to a stream. The server keeps running;
new connections go through again."""
from __future__ import annotations

import socket
import struct
import threading


class DroppingProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.pairs: set[tuple[socket.socket, socket.socket]] = set()
        self.lock = threading.Lock()
        self.closed = False
        self.unplugged = False  # unplug(): the server is unreachable until plugged in again

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> DroppingProxy:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.closed = True
        self.listener.close()
        self.drop()

    def unplug(self) -> None:
        """Cut every connection, and close new ones as soon as they come, until ``plug()``."""
        self.unplugged = True
        self.drop()

    def plug(self) -> None:
        self.unplugged = False

    def drop(self) -> int:
        """Cut every open connection mid-flight; returns how many there were."""
        with self.lock:
            pairs, self.pairs = self.pairs, set()
        for pair in pairs:
            for sock in pair:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    # shutdown() wakes the pump blocked in recv(); close() alone would wait for it.
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    sock.close()
                except OSError:
                    pass
        return len(pairs)

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.unplugged:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            pair = (client, upstream)
            with self.lock:
                self.pairs.add(pair)
            threading.Thread(target=self._pump, args=(client, upstream, pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, pair), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, pair) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with self.lock:
                self.pairs.discard(pair)
            for sock in pair:
                try:
                    sock.close()
                except OSError:
                    pass
