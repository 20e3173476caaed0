"""What arrives on a raw socket — broken bytes, cut bodies, bad chunking, huge headers — gets a clear
answer or a clean close, never a 5xx, and a keep-alive connection stays usable after a 4xx."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator

import httpx
import pytest

from decoding import Bundle
from server import Settings
from tests._live import LiveServer
from tests.test_live_server import wait_until

GOOD = json.dumps({"text": "我很好。"}).encode()


@pytest.fixture(scope="module")
def server(default_bundle: Bundle) -> Iterator[LiveServer]:
    with LiveServer(Settings(), bundles=[default_bundle]) as live:
        yield live


def post(body: bytes, *, path: str = "/v1/translate", length: int | None = None) -> bytes:
    size = len(body) if length is None else length
    head = (
        f"POST {path} HTTP/1.1\r\nHost: liuyi\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    )
    return head.encode() + body


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """One HTTP/1.1 response with a Content-Length body: (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed after {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = dict(line.lower().split(b": ", 1) for line in lines[1:])
    size = int(headers.get(b"content-length", b"0"))
    while len(rest) < size:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed mid-body")
        rest += chunk
    return status, rest[:size]


def connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock


def metric(server: LiveServer, line_start: str) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(line_start)]
    return sum(values)


@pytest.mark.parametrize(
    "bad",
    [
        b'{"text": "\\ud800"}',  # the bug that used to answer 500 and drop the connection
        b'{"text": "\xed\xa0\x80"}',
        b'{"text": "\xff"}',
        b"[" * 5000,
    ],
    ids=["escaped surrogate", "surrogate bytes", "invalid byte", "deep brackets"],
)
def test_a_bad_body_gets_a_400_and_the_same_connection_then_translates(
    server: LiveServer, bad: bytes
) -> None:
    with connect(server) as sock:
        sock.sendall(post(bad))
        status, body = read_response(sock)
        assert status == 400
        assert json.loads(body)["error"]["code"] in ("invalid_unicode", "invalid_json")
        sock.sendall(post(GOOD))
        status, body = read_response(sock)
        assert (status, json.loads(body)["translation"]) == (200, "I'm very well.")


def test_a_bad_query_string_gets_a_400_and_the_connection_stays_usable(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /v1/translate/stream?text=%ED%A0%80 HTTP/1.1\r\nHost: liuyi\r\n\r\n")
        status, body = read_response(sock)
        assert (status, json.loads(body)["error"]["code"]) == (400, "invalid_unicode")
        sock.sendall(post(GOOD))
        assert read_response(sock)[0] == 200


def test_client_gone_while_sending_its_body_is_a_499_logged_once_not_a_server_error(
    server: LiveServer, caplog: pytest.LogCaptureFixture
) -> None:
    closed_before = metric(server, 'liuyi_requests_total{route="/v1/translate",status="499"}')
    with caplog.at_level(logging.INFO):
        with connect(server) as sock:
            sock.sendall(post('{"text": "我很'.encode(), length=1000))  # promises 1000 bytes, sends 16
            sock.shutdown(socket.SHUT_RDWR)
        deadline_ok = wait_until(
            lambda: metric(server, 'liuyi_requests_total{route="/v1/translate",status="499"}') > closed_before
        )
    assert deadline_ok, "the cut request was never accounted"
    assert metric(server, 'liuyi_errors_total{code="client_closed_request"}') >= 1
    assert metric(server, 'liuyi_errors_total{code="internal_error"}') == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "no warning, no traceback"
    access = [r for r in caplog.records if r.name == "liuyi.access" and r.fields["status"] == 499]  # type: ignore[attr-defined]
    assert len(access) == 1 and access[0].fields["error"] == "client_closed_request"  # type: ignore[attr-defined]


def test_broken_chunked_encoding_is_refused_without_a_server_error(server: LiveServer) -> None:
    errors_before = metric(server, 'liuyi_errors_total{code="internal_error"}')
    with connect(server) as sock:
        sock.sendall(
            b"POST /v1/translate HTTP/1.1\r\nHost: liuyi\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n"
        )
        reply = sock.recv(65536)
    assert reply == b"" or reply.startswith(b"HTTP/1.1 4")
    assert metric(server, 'liuyi_errors_total{code="internal_error"}') == errors_before
    assert httpx.post(f"{server.url}/v1/translate", json={"text": "我很好。"}).status_code == 200


def test_huge_headers_are_refused_and_the_server_keeps_serving(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: liuyi\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n")
        try:
            reply = sock.recv(65536)
        except ConnectionResetError:
            reply = b""
    assert not reply.startswith(b"HTTP/1.1 5")
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_a_valid_chunked_body_is_read(server: LiveServer) -> None:
    with connect(server) as sock:
        head = b"POST /v1/translate HTTP/1.1\r\nHost: liuyi\r\nContent-Type: application/json\r\n"
        chunks = b"".join(
            b"%x\r\n%s\r\n" % (len(GOOD[i : i + 5]), GOOD[i : i + 5]) for i in range(0, len(GOOD), 5)
        )
        sock.sendall(head + b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")
        status, body = read_response(sock)
    assert (status, json.loads(body)["translation"]) == (200, "I'm very well.")


def test_a_bug_in_a_route_is_a_json_500_without_traceback_and_the_connection_survives(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internal detail")

    with connect(server) as sock:
        monkeypatch.setattr(server.state.service.registry, "resolve", broken)
        with caplog.at_level(logging.ERROR):
            sock.sendall(post(GOOD))
            status, body = read_response(sock)
        monkeypatch.undo()
        assert status == 500
        assert json.loads(body) == {"error": {"code": "internal_error", "message": "internal server error"}}
        assert b"secret" not in body and b"Traceback" not in body
        logged = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert len(logged) == 1 and logged[0].exc_info is not None  # once, with its traceback, server-side
        sock.sendall(post(GOOD))
        assert read_response(sock)[0] == 200
