"""Every bad input gets its documented status and a JSON error with a stable code — and the server
keeps serving. (Compatibility APIs have their own tables in test_*_compat.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from decoding import Bundle
from server import Settings
from tests._live import asgi_client

JSON = {"content-type": "application/json"}


@dataclass(frozen=True)
class Case:
    name: str
    status: int
    code: str
    method: str = "POST"
    path: str = "/v1/translate"
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=lambda: dict(JSON))
    params: dict[str, str] | None = None


def body(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


CASES = [
    Case("truncated JSON", 400, "invalid_json", body=b'{"text": "ab'),
    Case("truncated inside a character", 400, "invalid_unicode", body=b'{"text": "\xe4\xbd'),
    Case("escaped lone surrogate", 400, "invalid_unicode", body=b'{"text": "\\ud800"}'),
    Case("UTF-8-encoded surrogate bytes", 400, "invalid_unicode", body=b'{"text": "\xed\xa0\x80"}'),
    Case("lone surrogate in a key", 400, "invalid_unicode", body=b'{"text": "hi", "\\udfff": 1}'),
    Case(
        "200 KB of nested brackets",
        400,
        "invalid_json",
        body=b'{"text": "hi", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ),
    Case("JSON array", 400, "invalid_json", body='["我很好"]'.encode()),
    Case("JSON string", 400, "invalid_json", body='"我很好"'.encode()),
    Case("empty body", 400, "invalid_json", body=b""),
    Case("not UTF-8", 400, "invalid_unicode", body=b'{"text": "\xff\xfe"}'),
    Case("text missing", 400, "missing_text", body=body(source="zh")),
    Case("text null", 400, "missing_text", body=body(text=None)),
    Case("text is a number", 400, "invalid_field", body=body(text=42)),
    Case("text is a list", 400, "invalid_field", body=body(text=["我很好。"])),
    Case("text empty", 400, "empty_text", body=body(text="")),
    Case("text only whitespace", 400, "empty_text", body=body(text=" \n\t ")),
    Case("unknown source language", 400, "unsupported_language", body=body(text="你好", source="fr")),
    Case("source is a number", 400, "invalid_field", body=body(text="你好", source=7)),
    Case("unknown target language", 400, "unsupported_language", body=body(text="你好", target="de")),
    Case("target auto", 400, "unsupported_language", body=body(text="你好", target="auto")),
    Case("direction without a model", 400, "unsupported_direction", body=body(text="hello", source="en")),
    Case(
        "same source and target",
        400,
        "unsupported_direction",
        body=body(text="你好", source="zh", target="zh"),
    ),
    Case("max_new_tokens zero", 400, "invalid_option", body=body(text="你好", max_new_tokens=0)),
    Case("max_new_tokens negative", 400, "invalid_option", body=body(text="你好", max_new_tokens=-5)),
    Case("max_new_tokens string", 400, "invalid_option", body=body(text="你好", max_new_tokens="10")),
    Case("max_new_tokens float", 400, "invalid_option", body=body(text="你好", max_new_tokens=1.5)),
    Case("max_new_tokens boolean", 400, "invalid_option", body=body(text="你好", max_new_tokens=True)),
    Case("text over the character limit", 413, "text_too_long", body=body(text="好" * 5001)),
    Case("body over the byte limit", 413, "body_too_large", body=b'{"text": "' + b"a" * 300_000 + b'"}'),
    Case(
        "text/plain body",
        415,
        "unsupported_media_type",
        body=b"text=hi",
        headers={"content-type": "text/plain"},
    ),
    Case("no content type", 415, "unsupported_media_type", body=body(text="你好"), headers={}),
    Case(
        "form-encoded body",
        415,
        "unsupported_media_type",
        body=b"text=hi",
        headers={"content-type": "application/x-www-form-urlencoded"},
    ),
    Case("GET on the JSON endpoint", 405, "method_not_allowed", method="GET"),
    Case(
        "DELETE on the stream endpoint",
        405,
        "method_not_allowed",
        method="DELETE",
        path="/v1/translate/stream",
    ),
    Case("unknown route", 404, "not_found", path="/v1/translations"),
    Case("stream with bad JSON", 400, "invalid_json", path="/v1/translate/stream", body=b"{"),
    Case("stream with empty text", 400, "empty_text", path="/v1/translate/stream", body=body(text="  ")),
    Case(
        "EventSource without text", 400, "missing_text", method="GET", path="/v1/translate/stream", params={}
    ),
    Case(
        "EventSource with a bad max_new_tokens",
        400,
        "invalid_option",
        method="GET",
        path="/v1/translate/stream",
        params={"text": "你好", "max_new_tokens": "many"},
    ),
    Case(
        "EventSource text with a percent-escape that is not UTF-8",
        400,
        "invalid_unicode",
        method="GET",
        path="/v1/translate/stream?text=%FF",
    ),
    Case(
        "EventSource text with a percent-encoded surrogate",
        400,
        "invalid_unicode",
        method="GET",
        path="/v1/translate/stream?text=%ED%A0%80",
    ),
    Case(
        "EventSource text given twice",
        400,
        "invalid_field",
        method="GET",
        path="/v1/translate/stream?text=a&text=b",
    ),
    Case(
        "Last-Event-ID that is not a number",
        400,
        "invalid_field",
        method="GET",
        path="/v1/translate/stream",
        params={"text": "你好"},
        headers={"last-event-id": "yesterday"},
    ),
    Case(  # schemathesis: the document's pattern holds for NDJSON streams too, which never resume
        "Last-Event-ID that is not a number on an NDJSON stream",
        400,
        "invalid_field",
        path="/v1/translate/stream",
        body=body(text="你好"),
        headers={**JSON, "last-event-id": "yesterday"},
    ),
]


@pytest.fixture
async def client(default_bundle: Bundle) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(Settings(), [default_bundle]) as client:
        yield client


def test_the_table_is_long_enough() -> None:
    assert len(CASES) >= 25
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
async def test_bad_input_gets_documented_error_and_server_keeps_serving(
    client: httpx.AsyncClient, case: Case
) -> None:
    response = await client.request(
        case.method, case.path, content=case.body, headers=case.headers, params=case.params
    )
    assert response.status_code == case.status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == case.code
    assert error["message"] and "Traceback" not in response.text
    after = await client.post("/v1/translate", json={"text": "我很好。"})
    assert after.status_code == 200 and after.json()["translation"] == "I'm very well."


async def test_text_too_long_reports_the_limit(client: httpx.AsyncClient) -> None:
    error = (await client.post("/v1/translate", json={"text": "好" * 5001})).json()["error"]
    assert (error["limit"], error["length"], error["param"]) == (5000, 5001, "text")


async def test_method_not_allowed_names_the_allowed_methods(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/translate")
    assert response.headers["allow"] == "POST"


async def test_errors_are_counted_by_code(client: httpx.AsyncClient) -> None:
    await client.post("/v1/translate", json={"text": ""})
    metrics = (await client.get("/metrics")).text
    assert 'liuyi_errors_total{code="empty_text"} 1.0' in metrics
