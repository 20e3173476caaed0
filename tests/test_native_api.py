"""The native API, in process (httpx + ASGI transport): event order and fields, SSE framing,
cache replay, resume, models/health, auth and CORS.

The ASGI transport buffers whole bodies, so these tests check *content*; early arrival and
disconnects are tested against a real server in test_live_server.py.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from decoding import Bundle
from server import Settings
from tests._live import asgi_client

TEXT = "我很好。你喜欢吃苹果吗？\n\n我不知道。"


@pytest.fixture
async def client(default_bundle: Bundle) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(Settings(), [default_bundle]) as client:
        yield client


async def ndjson_events(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    response = await client.post("/v1/translate/stream", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


async def test_stream_is_start_deltas_segments_then_done(client: httpx.AsyncClient) -> None:
    events = await ndjson_events(client, {"text": TEXT})
    types = [e["type"] for e in events]
    assert types[0] == "start" and types[-1] == "done"
    assert types.count("segment") == 3 and "error" not in types
    start = events[0]
    assert start["model"] == "cn2en-gru-zh-en" and start["direction"] == "zh-en" and not start["cached"]
    assert [TEXT[s["start"] : s["end"]] for s in start["segments"]] == [
        "我很好。",
        "你喜欢吃苹果吗？",
        "我不知道。",
    ]
    segment_of_deltas = [e["segment"] for e in events if e["type"] == "delta"]
    assert segment_of_deltas == sorted(segment_of_deltas)  # segment after segment, never interleaved


async def test_joined_deltas_equal_done_and_the_json_endpoint(client: httpx.AsyncClient) -> None:
    events = await ndjson_events(client, {"text": TEXT})
    joined = "".join(e["text"] for e in events if e["type"] == "delta")
    done = events[-1]
    response = await client.post("/v1/translate", json={"text": TEXT})
    body = response.json()
    assert joined == done["translation"] == body["translation"]
    assert "\n\n" in joined  # the paragraph break survives
    assert body["source"] == "zh" and body["target"] == "en" and body["model"] == "cn2en-gru-zh-en"
    assert body["usage"] == done["usage"] and body["usage"]["output_tokens"] > 0
    assert [s["translation"] for s in body["segments"]] == [
        e["translation"] for e in events if e["type"] == "segment"
    ]
    assert set(body["timings"]) >= {"queue_ms", "ttft_ms", "total_ms"}
    assert response.headers["server-timing"].startswith("queue;dur=")


async def test_streaming_headers_disable_buffering_and_caching(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/translate/stream", json={"text": "我很好。"})
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert "content-encoding" not in response.headers
    sse = await client.post(
        "/v1/translate/stream", json={"text": "我很好。"}, headers={"accept": "text/event-stream"}
    )
    assert sse.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert sse.headers["x-accel-buffering"] == "no" and sse.headers["cache-control"] == "no-cache"


async def test_sse_frames_carry_event_type_and_sequential_ids(client: httpx.AsyncClient) -> None:
    async with aconnect_sse(
        client, "POST", "/v1/translate/stream", json={"text": TEXT}, headers={"accept": "text/event-stream"}
    ) as source:
        messages = [sse async for sse in source.aiter_sse()]
    assert [int(m.id) for m in messages] == list(range(len(messages)))
    assert all(m.event == json.loads(m.data)["type"] for m in messages)
    assert messages[0].event == "start" and messages[-1].event == "done"
    joined = "".join(json.loads(m.data)["text"] for m in messages if m.event == "delta")
    assert joined == json.loads(messages[-1].data)["translation"]


async def test_eventsource_get_with_query_parameters(client: httpx.AsyncClient) -> None:
    async with aconnect_sse(
        client, "GET", "/v1/translate/stream", params={"text": "我很好。", "source": "zh"}
    ) as src:
        events = [json.loads(m.data) for m in [sse async for sse in src.aiter_sse()]]
    assert events[-1]["translation"] == "I'm very well."


async def test_resume_with_last_event_id_continues_after_the_last_event(client: httpx.AsyncClient) -> None:
    params = {"text": TEXT}
    async with aconnect_sse(client, "GET", "/v1/translate/stream", params=params) as source:
        full = [sse async for sse in source.aiter_sse()]
    async with aconnect_sse(
        client, "GET", "/v1/translate/stream", params=params, headers={"Last-Event-ID": "4"}
    ) as source:
        rest = [sse async for sse in source.aiter_sse()]
    assert [m.id for m in rest] == [m.id for m in full[5:]]
    assert [json.loads(m.data).get("text") for m in rest[:-1]] == [
        json.loads(m.data).get("text") for m in full[5:-1]
    ]


async def test_a_repeated_request_replays_the_same_events_from_the_cache(client: httpx.AsyncClient) -> None:
    first = await ndjson_events(client, {"text": "我们走吧！"})
    second = await ndjson_events(client, {"text": "我们走吧！"})
    assert not first[0]["cached"] and second[0]["cached"] and second[-1]["cached"]
    strip = lambda events: [e for e in events if e["type"] in ("delta", "segment")]  # noqa: E731
    assert strip(first) == strip(second)
    assert second[-1]["translation"] == first[-1]["translation"]
    body = (await client.post("/v1/translate", json={"text": "我们走吧！"})).json()
    assert body["cached"] is True


async def test_max_new_tokens_limits_the_output(client: httpx.AsyncClient) -> None:
    body = (await client.post("/v1/translate", json={"text": "你喜欢吃苹果吗？", "max_new_tokens": 2})).json()
    assert body["usage"]["output_tokens"] == 2 and body["finish_reason"] == "length"


async def test_max_new_tokens_may_be_an_integral_number_as_json_schema_counts_them(
    client: httpx.AsyncClient,
) -> None:
    body = (
        await client.post("/v1/translate", json={"text": "你喜欢吃苹果吗？", "max_new_tokens": 2.0})
    ).json()
    assert body["usage"]["output_tokens"] == 2


async def test_auto_source_never_guesses_a_language_no_model_translates_from(
    client: httpx.AsyncClient,
) -> None:
    """With only zh->en loaded, English text with source "auto" goes to that model (as a text
    without letters does) instead of failing with "no model translates en->zh"."""
    response = await client.post("/v1/translate", json={"text": "Hello there"})
    assert response.status_code == 200, response.text
    assert (response.json()["source"], response.json()["target"]) == ("zh", "en")


async def test_models_health_and_readiness(client: httpx.AsyncClient) -> None:
    models = (await client.get("/v1/models")).json()["data"]
    assert [(m["id"], m["direction"], m["aliases"]) for m in models] == [
        ("cn2en-gru-zh-en", "zh-en", ["liuyi-zh-en"])
    ]
    assert models[0]["license"] == "MIT" and models[0]["max_input_chars"] == 5000
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"


async def test_metrics_count_requests_and_tokens(client: httpx.AsyncClient) -> None:
    await client.post("/v1/translate", json={"text": "我很好。"})
    text = (await client.get("/metrics")).text
    assert 'liuyi_requests_total{route="/v1/translate",status="200"} 1.0' in text
    assert "liuyi_time_to_first_token_seconds_count" in text
    assert 'liuyi_active_streams{model="cn2en-gru-zh-en"} 0.0' in text
    assert 'liuyi_cache_lookups_total{result="miss"} 1.0' in text


async def test_api_keys_are_enforced_when_configured(default_bundle: Bundle) -> None:
    async with asgi_client(Settings(api_keys=("s3cret",)), [default_bundle]) as client:
        missing = await client.post("/v1/translate", json={"text": "我很好。"})
        wrong = await client.post(
            "/v1/translate", json={"text": "我很好。"}, headers={"Authorization": "Bearer nope"}
        )
        right = await client.post(
            "/v1/translate", json={"text": "我很好。"}, headers={"Authorization": "Bearer s3cret"}
        )
        header = await client.post(
            "/v1/translate", json={"text": "我很好。"}, headers={"X-API-Key": "s3cret"}
        )
        health = await client.get("/healthz")
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "missing_api_key")
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "invalid_api_key")
    assert right.status_code == header.status_code == health.status_code == 200


async def test_cors_is_off_by_default_and_configurable(
    default_bundle: Bundle, client: httpx.AsyncClient
) -> None:
    plain = await client.options(
        "/v1/translate", headers={"Origin": "https://chat.example", "Access-Control-Request-Method": "POST"}
    )
    assert "access-control-allow-origin" not in plain.headers
    async with asgi_client(Settings(cors_origins=("https://chat.example",)), [default_bundle]) as other:
        preflight = await other.options(
            "/v1/translate/stream",
            headers={
                "Origin": "https://chat.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://chat.example"
    assert "authorization" in preflight.headers["access-control-allow-headers"].lower()


async def test_models_report_the_servers_own_input_limit(default_bundle: Bundle) -> None:
    async with asgi_client(Settings(max_input_chars=20), [default_bundle]) as client:
        model = (await client.get("/v1/models")).json()["data"][0]
        too_long = await client.post("/v1/translate", json={"text": "好" * 21})
    assert model["max_input_chars"] == 20
    assert too_long.status_code == 413 and too_long.json()["error"]["limit"] == 20


async def test_the_page_and_its_modules_are_served_for_revalidation(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    module = await client.get("/static/liuyi.js")
    assert page.status_code == module.status_code == 200
    assert "text/html" in page.headers["content-type"] and "javascript" in module.headers["content-type"]
    assert page.headers["cache-control"] == module.headers["cache-control"] == "no-cache"
    assert page.headers["x-request-id"]


async def test_one_structured_log_line_per_request_with_stage_timings(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="liuyi.access"):
        response = await client.post("/v1/translate/stream", json={"text": "我很好。"})
        await client.post("/v1/translate", json={"text": ""})
    records = [r for r in caplog.records if r.name == "liuyi.access"]
    streamed, refused = (r.fields for r in records)
    assert records[0].getMessage() == "POST /v1/translate/stream 200"
    assert streamed["request_id"] == response.headers["x-request-id"]
    assert (streamed["status"], streamed["route"], streamed["model"]) == (
        200,
        "/v1/translate/stream",
        "cn2en-gru-zh-en",
    )
    assert streamed["finish_reason"] == "stop" and streamed["output_tokens"] == 5
    assert {"queue_ms", "ttft_ms", "encode_ms", "decode_ms", "total_ms"} <= set(streamed["timings"])
    assert (refused["status"], refused["path"]) == (400, "/v1/translate")


async def test_a_bug_mid_stream_still_ends_the_stream_with_exactly_one_error(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import server._service

    def broken(delta: object) -> dict[str, object]:
        raise RuntimeError("secret internal detail")

    monkeypatch.setattr(server._service, "delta_event", broken)
    response = await client.post("/v1/translate/stream", json={"text": "我们走吧！"})
    events = [json.loads(line) for line in response.text.splitlines()]
    assert [e["type"] for e in events] == ["start", "error"]
    assert events[-1]["code"] == "internal_error" and "secret" not in response.text


async def test_long_texts_are_tokenized_off_the_event_loop_and_short_ones_on_it(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import server._service

    planned_on: dict[int, bool] = {}
    original = server._service.Translation

    def recording(bundle: Bundle, text: str, **kwargs: Any) -> Any:
        planned_on[len(text)] = threading.current_thread() is threading.main_thread()
        return original(bundle, text, **kwargs)

    monkeypatch.setattr(server._service, "Translation", recording)
    short, long = "我很好。", "我很好。" * 300  # 4 and 1,200 characters
    for text in (short, long):
        assert (await client.post("/v1/translate", json={"text": text})).status_code == 200
    assert planned_on == {len(short): True, len(long): False}
