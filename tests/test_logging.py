"""Logs are JSON lines: one object per record, from every logger, with the request id of the
request being served, and tracebacks inside one field instead of across lines."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from server._logging import JsonFormatter
from server._middleware import AccessLogMiddleware
from tests._logged import LoggedServer


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """What the logger ``liuyi.test`` writes through the JSON formatter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("liuyi.test")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)


def test_an_exception_is_logged_as_one_line_with_the_traceback_in_a_field(captured: io.StringIO) -> None:
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        logging.getLogger("liuyi.test").exception("it failed", extra={"fields": {"route": "/x"}})
    lines = captured.getvalue().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert (record["level"], record["logger"], record["message"], record["route"]) == (
        "error",
        "liuyi.test",
        "it failed",
        "/x",
    )
    assert record["exception_type"] == "ValueError"
    assert record["exception"].startswith("Traceback") and "ValueError: bad\nthing" in record["exception"]
    assert record["time"].endswith("+00:00") and isinstance(record["pid"], int)


async def test_records_emitted_while_serving_a_request_carry_its_id(captured: io.StringIO) -> None:
    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        logging.getLogger("liuyi.test").warning("inside the request")
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = AccessLogMiddleware(endpoint, routes=[])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://liuyi") as client:
        response = await client.get("/anything", headers={"X-Request-ID": "client-id-1"})
    record = json.loads(captured.getvalue())
    assert response.headers["x-request-id"] == record["request_id"] == "client-id-1"
    assert record["message"] == "inside the request"


def test_a_live_server_writes_only_json_lines_to_stderr() -> None:
    with LoggedServer() as server:
        ok = httpx.post(
            f"{server.url}/v1/translate", json={"text": "你好。"}, headers={"X-Request-ID": "req-42"}
        )
        missing = httpx.get(f"{server.url}/no/such/page")
        assert ok.status_code == 200 and missing.status_code == 404
        assert server.wait_for(lambda r: r.get("route") == "unmatched")
        server.stop()
        records = server.records  # every stderr line parsed as JSON (else this fails)
    assert records and all({"time", "level", "logger", "message", "pid"} <= set(r) for r in records)
    assert {"uvicorn.error", "liuyi", "liuyi.access"} <= {r["logger"] for r in records}
    served, refused = (r for r in records if r["logger"] == "liuyi.access" and r["route"] != "/readyz")
    assert (served["request_id"], served["status"], served["route"]) == ("req-42", 200, "/v1/translate")
    assert served["message"] == "POST /v1/translate 200" and served["model"] and served["timings"]
    assert (refused["status"], refused["route"], refused["request_id"]) == (
        404,
        "unmatched",
        missing.headers["x-request-id"],
    )
    assert any(r["message"] == "Application shutdown complete." for r in records)
