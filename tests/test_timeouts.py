"""Connection timeouts end slow or idle clients (header read, idle keep-alive) and never a response
that is streaming: once a request's headers are in, only ``request_timeout`` bounds it."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from decoding import Bundle
from server import Settings
from tests._live import LiveServer, gated
from tests._logged import LoggedServer

QUESTION = "你喜欢吃苹果吗？"


def slow_headers_until_closed(port: int, limit: float = 20.0) -> bytes:
    """Send a request's headers one line every 0.1 s, never finishing them; return what the server
    sent before closing the connection (fails the test if it is still open after ``limit`` s)."""
    received = b""
    deadline = time.monotonic() + limit
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(0.1)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: liuyi\r\n")
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(4096)
            except TimeoutError:
                try:
                    sock.sendall(b"X-Slow: a\r\n")
                except OSError:  # closed by the server between two reads
                    return received
                continue
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk
    raise AssertionError(f"connection still open after {limit} s")


def read_until_closed(sock: socket.socket, limit: float = 20.0) -> bytes:
    sock.settimeout(limit)
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


@pytest.fixture
def timed(default_bundle: Bundle) -> Iterator[LiveServer]:
    settings = Settings(cache_size=0, header_timeout=0.5, keep_alive_timeout=0.5)
    with LiveServer(settings, [default_bundle]) as server:
        yield server


def test_ten_connections_sending_headers_slowly_are_answered_408_and_closed() -> None:
    with LoggedServer(LIUYI_HEADER_TIMEOUT="1") as server, ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: slow_headers_until_closed(server.port), range(10)))
        assert httpx.get(f"{server.url}/healthz").status_code == 200
    assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers)
    body = json.loads(answers[0].split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "header_timeout"


def test_a_connection_that_never_sends_a_byte_is_closed(timed: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", timed.port)) as sock:
        assert read_until_closed(sock).startswith(b"HTTP/1.1 408 ")


def test_an_idle_keep_alive_connection_is_closed_after_its_response(timed: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", timed.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: liuyi\r\n\r\n")
        received = read_until_closed(sock)
    assert received.startswith(b"HTTP/1.1 200 ") and b'"ok"' in received
    assert b"408" not in received  # idle after a response: closed silently, not a timeout error


def test_a_stream_outliving_both_timeouts_completes(timed: LiveServer, default_bundle: Bundle) -> None:
    with gated(default_bundle) as gate, httpx.Client(base_url=timed.url, timeout=30) as client:
        with client.stream("POST", "/v1/translate/stream", json={"text": QUESTION}) as response:
            lines = response.iter_lines()
            assert json.loads(next(lines))["type"] == "start"
            assert gate.wait_for_steps(1)
            # while the decoder is held: a slow client and an idle one are both cut off, so both
            # timeouts have elapsed during this response
            assert slow_headers_until_closed(timed.port).startswith(b"HTTP/1.1 408 ")
            with socket.create_connection(("127.0.0.1", timed.port)) as idle:
                idle.sendall(b"GET /healthz HTTP/1.1\r\nHost: liuyi\r\n\r\n")
                assert read_until_closed(idle).startswith(b"HTTP/1.1 200 ")
            gate.open()
            events = [json.loads(line) for line in lines if line]
        assert events[-1]["type"] == "done" and events[-1]["translation"]
        # the same connection is still good for the next request
        assert client.get("/healthz").status_code == 200


def test_a_request_whose_headers_arrive_in_pieces_in_time_is_served(timed: LiveServer) -> None:
    with socket.create_connection(("127.0.0.1", timed.port)) as sock:
        for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: liuyi\r\n", b"Connection: close\r\n\r\n"):
            sock.sendall(piece)
        assert read_until_closed(sock).startswith(b"HTTP/1.1 200 ")
