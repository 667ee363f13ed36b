"""Slow and greedy clients against the web process as shipped (issue #44 item 1): uvicorn
started by `make run`'s command, raw sockets on 127.0.0.1, short bounds set through the
environment. 64 connections sending a login form two bytes at a time used to fill the door
for as long as they stayed open, while ``/healthz`` answered 200.

Two servers, each started once for this module: ``roomy`` keeps slow bodies for two minutes
(so they are certainly still coming while the test looks), ``strict`` cuts them, and
unfinished headers, within half a second. The door's logic over ASGI:
tests/security/test_door_bodies.py and tests/security/test_admission.py.
"""
from __future__ import annotations

import json
import socket
import time

import pytest

from agentloom.launch import HTTP_PROTOCOL, web_command
from tests.conftest import REPO
from tests.security.webproc import DEADLINE, WebProcess, connect, exchange, get, parse, post_head, read_to_end

SLOW_CLIENTS = 70  # past AGENTLOOM_WEB_MAX_PENDING's 64


@pytest.fixture(scope="module")
def roomy(django_db_setup, tmp_path_factory):
    env = {"AGENTLOOM_WEB_BODY_IDLE_TIMEOUT": "120", "AGENTLOOM_WEB_MAX_CONNECTIONS_PER_CLIENT": "4"}
    with WebProcess(tmp_path_factory.mktemp("roomy") / "web.log", env=env) as web:
        yield web


@pytest.fixture(scope="module")
def strict(django_db_setup, tmp_path_factory):
    env = {"AGENTLOOM_WEB_BODY_IDLE_TIMEOUT": "0.5", "AGENTLOOM_WEB_HEADER_TIMEOUT": "0.5",
           "AGENTLOOM_WEB_MAX_PENDING": "2"}
    with WebProcess(tmp_path_factory.mktemp("strict") / "web.log", env=env, keep_alive="1") as web:
        yield web


def _still_waiting(sock: socket.socket) -> bool:
    """Nothing answered and not closed: the server still waits for this body."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # an answer, or the end of the connection
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


def _slow_login(port: int, source: str) -> socket.socket:
    sock = connect(port, source)
    sock.sendall(post_head("/login/", length=100) + b"us")  # two bytes of a hundred, and then nothing
    return sock


def test_seventy_slow_bodies_do_not_stop_a_normal_request_nor_fill_the_door(roomy):
    # Each from its own address, as a botnet would: the per-client bound is not what helps here.
    slow = [_slow_login(roomy.port, f"127.0.1.{n + 1}") for n in range(SLOW_CLIENTS)]
    try:
        status, _, body = exchange(roomy.port, get("/login/"))  # today: 503, for as long as they stay
        assert status == 200 and b"csrfmiddlewaretoken" in body
        status, _, body = exchange(roomy.port, get("/healthz"))
        assert (status, json.loads(body)["web"]) == (200, "ok")  # waiting for a body is not waiting for us
        assert all(_still_waiting(sock) for sock in slow)  # they were all there the whole time
    finally:
        for sock in slow:
            sock.close()


def test_one_address_past_its_connections_is_closed_at_once_while_another_is_served(roomy):
    held = [_slow_login(roomy.port, "127.0.0.2") for _ in range(4)]
    try:
        with connect(roomy.port, "127.0.0.2") as extra:
            extra.sendall(get("/login/"))
            assert read_to_end(extra) == b""  # closed unanswered: nothing of it was read
        assert exchange(roomy.port, get("/login/"), source="127.0.0.3")[0] == 200
        held.pop().close()
        deadline = time.monotonic() + DEADLINE
        while True:  # once the server has seen that connection go, the address has a place again
            try:
                assert exchange(roomy.port, get("/login/"), source="127.0.0.2")[0] == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "the freed place was never given back"
                time.sleep(0.05)
    finally:
        for sock in held:
            sock.close()


@pytest.mark.parametrize("path, content_type", [("/api/v1/auth/token", "application/json"),
                                                ("/login/", "text/plain; charset=utf-8")])
def test_a_body_that_stops_arriving_is_answered_408_and_the_connection_closed(strict, path, content_type):
    with connect(strict.port) as sock:
        sock.sendall(post_head(path, length=100, content_type=content_type) + b"ab")
        status, headers, body = parse(read_to_end(sock))  # today: never answered, never closed
    assert status == 408 and headers["connection"] == "close" and headers["content-type"] == content_type
    if path.startswith("/api/"):
        assert json.loads(body)["error"]["code"] == "request_timeout"


def test_headers_that_stop_arriving_are_cut_and_so_is_a_connection_that_sends_nothing(strict):
    with connect(strict.port) as half, connect(strict.port) as silent:
        half.sendall(b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
        assert read_to_end(half) == b""  # today: held for ever
        assert read_to_end(silent) == b""  # closed after the keep-alive time-out, as an idle one is


@pytest.mark.django_db(transaction=True)
def test_healthz_says_refusing_while_the_door_is_full_on_a_real_socket(strict, require_postgres):
    from django.db import connection, transaction

    login = json.dumps({"username": "nobody", "password": "x"}).encode()
    stuck: list[socket.socket] = []
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:  # every login now waits inside the application
                cursor.execute("LOCK TABLE auth_user IN ACCESS EXCLUSIVE MODE")
            for _ in range(2):  # AGENTLOOM_WEB_MAX_PENDING of the strict server
                sock = connect(strict.port)
                sock.sendall(post_head("/api/v1/auth/token", length=len(login), content_type="application/json")
                             + login)
                stuck.append(sock)
            deadline = time.monotonic() + DEADLINE
            while True:
                status, _, body = exchange(strict.port, get("/healthz"))
                if json.loads(body).get("web") == "refusing":
                    break
                assert time.monotonic() < deadline, body  # today: no such field
                time.sleep(0.05)
            assert status == 503 and json.loads(body)["status"] == "unavailable"
            status, headers, body = exchange(strict.port, post_head(
                "/api/v1/auth/token", length=len(login), content_type="application/json") + login)
            assert status == 503 and json.loads(body)["error"]["code"] == "busy" and int(headers["retry-after"]) >= 1
        assert [parse(read_to_end(sock))[0] for sock in stuck] == [401, 401]  # served once the lock went
        deadline = time.monotonic() + DEADLINE
        while json.loads(exchange(strict.port, get("/healthz"))[2])["web"] != "ok":
            assert time.monotonic() < deadline, "still refusing long after the door emptied"
            time.sleep(0.2)
    finally:
        for sock in stuck:
            sock.close()


def test_every_shipped_web_command_uses_the_bounded_protocol():
    command = web_command(python="python", host="127.0.0.1", port=8000, trusted_proxies=[])
    assert command[command.index("--http") + 1] == HTTP_PROTOCOL == "agentloom.http_protocol:BoundedH11Protocol"
    for shipped in ("Dockerfile", "docker-compose.yml"):
        assert f'"--http", "{HTTP_PROTOCOL}"' in (REPO / shipped).read_text(), shipped


def test_a_server_stopping_does_not_wait_for_bodies_still_coming(tmp_path):
    log = tmp_path / "web.log"
    with WebProcess(log, env={"AGENTLOOM_WEB_BODY_IDLE_TIMEOUT": "120"}) as web:
        slow = [_slow_login(web.port, f"127.0.2.{n + 1}") for n in range(3)]
        try:
            assert exchange(web.port, get("/login/"))[0] == 200  # the slow ones are in by now
            web.process.terminate()
            web.process.wait(timeout=DEADLINE)  # uvicorn ends by raising the signal it caught again
        finally:
            for sock in slow:
                sock.close()
    # Today: the grace period ran out, and each waiting read was cancelled with a traceback.
    assert "Exception in ASGI application" not in log.read_text() and "Cancel" not in log.read_text(), \
        log.read_text()[-3000:]
