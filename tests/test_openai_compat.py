"""POST /v1/chat/completions, driven by the official ``openai`` client against a real server, and
by raw HTTP where the wire format itself is the point (SSE lines, error bodies)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from decoding import Bundle, DecodeOptions
from server import Settings
from tests._live import LiveServer, asgi_client, gated

TEXT = "我很好。"


@pytest.fixture
def client(live: LiveServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0) as client:
        yield client


async def post(http: httpx.AsyncClient, body: object, **kwargs: Any) -> httpx.Response:
    if isinstance(body, bytes | str):
        return await http.post("/v1/chat/completions", content=body, **kwargs)
    return await http.post("/v1/chat/completions", json=body, **kwargs)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def sse_data(body: str) -> list[str]:
    return [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]


def test_completion_is_the_translation_of_the_last_user_message(
    client: openai.OpenAI, default_bundle: Bundle
) -> None:
    expected = default_bundle.translate(TEXT)
    completion = client.chat.completions.create(
        model="liuyi-zh-en",
        messages=[
            {"role": "system", "content": "You are a translator."},
            {"role": "user", "content": "你好"},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": TEXT},
        ],
    )
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == default_bundle.name
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == expected.translation
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == expected.input_tokens
    assert completion.usage.completion_tokens == expected.output_tokens
    assert completion.usage.total_tokens == expected.input_tokens + expected.output_tokens


def test_streamed_deltas_join_to_the_translation_then_finish_then_usage(
    client: openai.OpenAI, default_bundle: Bundle
) -> None:
    expected = default_bundle.translate(TEXT)
    with client.chat.completions.create(
        model=default_bundle.name,
        messages=user(TEXT),
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        chunks = list(stream)
    first, *middle, last_choice, usage_chunk = chunks
    assert first.choices[0].delta.role == "assistant"
    assert first.choices[0].delta.content == ""
    assert len(middle) >= 2  # one chunk per engine delta, not the whole text at once
    assert "".join(c.choices[0].delta.content or "" for c in middle) == expected.translation
    assert all(c.choices[0].finish_reason is None for c in [first, *middle])
    assert last_choice.choices[0].finish_reason == "stop"
    assert last_choice.choices[0].delta.content is None
    assert usage_chunk.choices == []
    assert usage_chunk.usage is not None
    assert usage_chunk.usage.completion_tokens == expected.output_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.id for c in chunks} == {first.id} and first.id.startswith("chatcmpl-")
    assert {c.object for c in chunks} == {"chat.completion.chunk"}


def test_stream_is_sse_ending_with_done_and_without_usage_unless_asked(live: LiveServer) -> None:
    body = {"model": "liuyi-zh-en", "messages": user(TEXT), "stream": True}
    response = httpx.post(f"{live.url}/v1/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    data = sse_data(response.text)
    assert data[-1] == "[DONE]"
    chunks = [json.loads(line) for line in data[:-1]]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in chunk and chunk["choices"] for chunk in chunks)


@pytest.mark.parametrize("model", ["cn2en-gru-zh-en", "liuyi-zh-en", "liuyi-auto", "liuyi"])
def test_model_names_aliases_and_auto_all_translate_zh_to_en(
    client: openai.OpenAI, default_bundle: Bundle, model: str
) -> None:
    completion = client.chat.completions.create(model=model, messages=user(TEXT))
    assert completion.choices[0].message.content == default_bundle.translate(TEXT).translation


def test_text_content_parts_are_joined_by_newlines(client: openai.OpenAI, default_bundle: Bundle) -> None:
    parts = [{"type": "text", "text": "我很好。"}, {"type": "text", "text": "我爱你。"}]
    completion = client.chat.completions.create(
        model="liuyi-zh-en", messages=[{"role": "user", "content": parts}]
    )
    expected = default_bundle.translate("我很好。\n我爱你。").translation
    assert completion.choices[0].message.content == expected


def test_max_tokens_cuts_the_translation_with_finish_reason_length(
    client: openai.OpenAI, default_bundle: Bundle
) -> None:
    expected = default_bundle.translate(TEXT, options=DecodeOptions(max_new_tokens=2))
    for limit in ({"max_tokens": 2}, {"max_completion_tokens": 2}):
        completion = client.chat.completions.create(model="liuyi-zh-en", messages=user(TEXT), **limit)
        assert completion.choices[0].message.content == expected.translation
        assert completion.choices[0].finish_reason == "length"


@pytest.mark.parametrize("model", ["no-such-model", "liuyi-en-zh"])
def test_unknown_model_is_not_found_error_with_code_model_not_found(
    client: openai.OpenAI, model: str
) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model=model, messages=user(TEXT))
    assert info.value.code == "model_not_found"
    assert info.value.param == "model"
    assert "liuyi-auto" in info.value.message  # says what is available


def test_non_text_content_part_is_bad_request_error(client: openai.OpenAI) -> None:
    parts = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model="liuyi-zh-en", messages=[{"role": "user", "content": parts}])
    assert info.value.param == "messages"


@pytest.mark.parametrize(
    ("body", "param", "code"),
    [
        ({"messages": user(TEXT)}, "model", "invalid_field"),
        ({"model": "liuyi"}, "messages", "invalid_field"),
        ({"model": "liuyi", "messages": []}, "messages", "invalid_field"),
        ({"model": "liuyi", "messages": ["hi"]}, "messages", "invalid_field"),
        ({"model": "liuyi", "messages": [{"role": "system", "content": "x"}]}, "messages", "missing_text"),
        ({"model": "liuyi", "messages": user("  ")}, "messages", "empty_text"),
        ({"model": "liuyi", "messages": [{"role": "user", "content": 3}]}, "messages", "invalid_field"),
        ({"model": "liuyi", "messages": user(TEXT), "n": 2}, "n", "invalid_option"),
        ({"model": "liuyi", "messages": user(TEXT), "stream": "yes"}, "stream", "invalid_field"),
        ({"model": "liuyi", "messages": user(TEXT), "stream_options": []}, "stream_options", "invalid_field"),
        ({"model": "liuyi", "messages": user(TEXT), "max_tokens": 0}, "max_tokens", "invalid_option"),
        (
            {"model": "liuyi", "messages": user(TEXT), "max_completion_tokens": "9"},
            "max_completion_tokens",
            "invalid_option",
        ),
    ],
)
async def test_bad_request_is_400_in_openai_error_shape(
    http: httpx.AsyncClient, body: dict[str, Any], param: str, code: str
) -> None:
    response = await post(http, body)
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": response.json()["error"]["message"],
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    assert response.json()["error"]["message"]


async def test_invalid_json_and_wrong_media_type_get_openai_error_shape(http: httpx.AsyncClient) -> None:
    broken = await post(http, b"{not json", headers={"content-type": "application/json"})
    assert broken.status_code == 400
    assert broken.json()["error"]["code"] == "invalid_json"
    assert broken.json()["error"]["type"] == "invalid_request_error"
    form = await post(http, "model=liuyi", headers={"content-type": "application/x-www-form-urlencoded"})
    assert form.status_code == 415
    assert form.json()["error"]["code"] == "unsupported_media_type"


async def test_text_too_long_is_413_in_openai_error_shape(default_bundle: Bundle) -> None:
    too_long = "好" * (default_bundle.max_input_chars + 1)
    async with asgi_client(Settings(), [default_bundle]) as http:
        response = await post(http, {"model": "liuyi", "messages": user(too_long)})
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "text_too_long"
    assert response.json()["error"]["param"] == "messages"  # the API's own field, never liuyi's `text`
    assert "'messages'" in response.json()["error"]["message"]


def test_bad_api_key_is_authentication_error(default_bundle: Bundle) -> None:
    with LiveServer(Settings(api_keys=("secret",)), bundles=[default_bundle]) as server:
        with (
            openai.OpenAI(base_url=f"{server.url}/v1", api_key="wrong", max_retries=0) as client,
            pytest.raises(openai.AuthenticationError) as info,
        ):
            client.chat.completions.create(model="liuyi", messages=user(TEXT))
        assert info.value.code == "invalid_api_key"
        assert info.value.type == "authentication_error"
        missing = httpx.post(
            f"{server.url}/v1/chat/completions", json={"model": "liuyi", "messages": user(TEXT)}
        )
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "missing_api_key"
        with openai.OpenAI(base_url=f"{server.url}/v1", api_key="secret", max_retries=0) as client:
            completion = client.chat.completions.create(model="liuyi", messages=user(TEXT))
    assert completion.choices[0].message.content == default_bundle.translate(TEXT).translation


def test_overload_is_rate_limit_error_with_retry_after_then_recovers(default_bundle: Bundle) -> None:
    settings = Settings(max_concurrent_streams=1, max_queued=0, cache_size=0, retry_after=3)
    with (
        LiveServer(settings, bundles=[default_bundle]) as server,
        gated(default_bundle) as gate,
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client,
    ):
        with client.chat.completions.create(model="liuyi", messages=user(TEXT), stream=True) as first:
            assert next(first).choices[0].delta.role == "assistant"  # admitted: holds the only slot
            with pytest.raises(openai.RateLimitError) as info:
                client.chat.completions.create(model="liuyi", messages=user("我爱你。"))
            assert info.value.response.headers["retry-after"] == "3"
            assert info.value.code == "overloaded"
            assert info.value.type == "rate_limit_error"
            gate.open()
            text = "".join(chunk.choices[0].delta.content or "" for chunk in first if chunk.choices)
        assert text == default_bundle.translate(TEXT).translation
        again = client.chat.completions.create(model="liuyi", messages=user("我爱你。"))
    assert again.choices[0].message.content == default_bundle.translate("我爱你。").translation


def test_error_mid_stream_raises_api_error_in_the_official_client(default_bundle: Bundle) -> None:
    with (
        LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as server,
        gated(default_bundle),
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as client,
        client.chat.completions.create(model="liuyi", messages=user(TEXT), stream=True) as stream,
    ):
        assert next(stream).choices[0].delta.role == "assistant"  # the decoder is held at the gate
        server.call_in_loop(server.state.lifecycle.begin_drain, 0.0)  # shutdown: cut streams off now
        with pytest.raises(openai.APIError) as info:
            next(stream)
    assert info.value.code == "shutting_down"
    assert info.value.body == {
        "message": "the server is shutting down",
        "type": "rate_limit_error",
        "param": None,
        "code": "shutting_down",
    }


def test_error_mid_stream_is_one_error_line_and_no_done(default_bundle: Bundle) -> None:
    body = {"model": "liuyi", "messages": user(TEXT), "stream": True}
    with (
        LiveServer(Settings(cache_size=0), bundles=[default_bundle]) as server,
        gated(default_bundle),
        httpx.Client() as http,
        http.stream("POST", f"{server.url}/v1/chat/completions", json=body) as response,
    ):
        lines = response.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        assert json.loads(first.removeprefix("data: "))["choices"][0]["delta"]["role"] == "assistant"
        server.call_in_loop(server.state.lifecycle.begin_drain, 0.0)
        rest = sse_data("\n".join(lines))
    assert len(rest) == 1
    assert json.loads(rest[0])["error"]["code"] == "shutting_down"


@pytest.mark.parametrize("name", ["max_tokens", "max_completion_tokens"])
async def test_an_engine_error_names_the_field_the_client_sent(default_bundle: Bundle, name: str) -> None:
    """The engine refuses max_new_tokens=0 (the one range check); the client reads its own field name."""
    async with asgi_client(Settings(), [default_bundle]) as http:
        response = await post(http, {"model": "liuyi", "messages": user("你好"), name: 0})
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_option", name)
    assert error["message"] == f"'{name}' must be an integer >= 1"
