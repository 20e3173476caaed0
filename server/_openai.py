"""OpenAI-compatible ``POST /v1/chat/completions``: existing chat clients get translations.

The last ``user`` message is the text to translate; system prompts, earlier turns, temperature and
the like are ignored (decoding is greedy). ``model`` picks the direction:

    a bundle name, e.g. "cn2en-gru-zh-en"    that bundle's direction
    its alias, e.g. "liuyi-zh-en"            that bundle's direction
    "liuyi" or "liuyi-auto"                  source detected, target the other language

Streaming (``stream: true``) sends ``data: <chat.completion.chunk>`` lines: the assistant role
first, one chunk per engine delta, a chunk with ``finish_reason``, a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``.

An error after the first byte is one ``data: {"error": {...}}`` line in OpenAI's error shape, and
the stream ends there, *without* ``[DONE]``: that is what OpenAI's API does, and the official
client raises ``openai.APIError`` on that line (it stops silently at ``[DONE]``, so a ``[DONE]``
after a failure would let other clients take a cut-off answer for a complete one).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from sse_starlette import ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from decoding import ModelRegistry

from ._error_codes import ErrorCode
from ._errors import BadRequest, NotFound, error_payload
from ._events import WireEvent, dumps
from ._http import check_api_key, optional_int, read_json_object
from ._native import log_context, services
from ._service import PreparedStream, TranslateRequest
from ._streaming import EventStream
from ._wire_compat import ChatCompletion, ChatUsage, ChunkChoice, ChunkDelta, FinishReason

AUTO_MODELS = ("liuyi", "liuyi-auto")


@dataclass(frozen=True, kw_only=True)
class ChatRequest:
    text: str  # the last user message
    source: str  # a language code or "auto"
    target: str | None  # None: the other language
    max_new_tokens: int | None
    names: dict[str, str]  # what the engine's fields are called in this request (max_tokens, ...)
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with the usage


def resolve_model(name: str, registry: ModelRegistry) -> tuple[str, str | None]:
    """(source, target) for a model name: a served bundle's name or alias, or an auto model.

    Raises:
        NotFound: no such model (OpenAI answers 404 ``model_not_found`` too).
    """
    if name in AUTO_MODELS:
        return "auto", None
    for bundle in registry.routes:  # one per direction served, as listed by /v1/models
        m = bundle.manifest
        if name in (bundle.model_id, bundle.name, f"liuyi-{m.source_lang}-{m.target_lang}"):
            return m.source_lang, m.target_lang
    available = [*(b.model_id for b in registry.routes), *AUTO_MODELS]
    raise NotFound(
        f"the model {name!r} does not exist; available: {', '.join(available)}",
        code=ErrorCode.MODEL_NOT_FOUND,
        param="model",
    )


def chat_request(body: Mapping[str, Any], registry: ModelRegistry) -> ChatRequest:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is required: a name from GET /v1/models or 'liuyi-auto'", param="model")
    source, target = resolve_model(model, registry)
    n = body.get("n", 1)
    if n is not None and n != 1:
        raise BadRequest(
            "only n=1 is supported (a translation has one answer)", code=ErrorCode.INVALID_OPTION, param="n"
        )
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false", param="stream")
    options = body.get("stream_options")
    options = {} if options is None else options
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise BadRequest(
            "'stream_options' must be an object like {\"include_usage\": true}", param="stream_options"
        )
    tokens_field = "max_completion_tokens"
    max_new_tokens = optional_int(body, tokens_field)
    if max_new_tokens is None:
        tokens_field = "max_tokens"  # the older name
        max_new_tokens = optional_int(body, tokens_field)
    return ChatRequest(
        text=last_user_text(body.get("messages")),
        source=source,
        target=target,
        max_new_tokens=max_new_tokens,
        names={"max_new_tokens": tokens_field, "text": "messages"},
        stream=bool(stream),
        include_usage=bool(options.get("include_usage", False)),
    )


def last_user_text(messages: object) -> str:
    """The content of the last ``user`` message: a string, or the text parts of a list joined by
    newlines.

    Raises:
        BadRequest: no user message, a malformed message or a non-text part.
    """
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list of messages", param="messages")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        raise BadRequest("every message must be an object with a 'role'", param="messages")
    users = [m for m in messages if m["role"] == "user"]
    if not users:
        raise BadRequest(
            "there is no 'user' message to translate", code=ErrorCode.MISSING_TEXT, param="messages"
        )
    content = users[-1].get("content")
    if isinstance(content, list):
        texts = []
        for part in content:
            is_text = isinstance(part, dict) and part.get("type") == "text"
            if not is_text or not isinstance(part.get("text"), str):
                raise BadRequest("only content parts of type 'text' can be translated", param="messages")
            texts.append(part["text"])
        content = "\n".join(texts)
    if not isinstance(content, str):
        raise BadRequest("the user message's 'content' must be a string or a list of parts", param="messages")
    return content  # blank or too long: the engine says so, of `messages` (``names``)


def finish_reason(done: WireEvent) -> FinishReason:
    return "length" if done["finish_reason"] == "length" else "stop"


def usage(done: WireEvent) -> ChatUsage:
    prompt, completion = done["usage"]["input_tokens"], done["usage"]["output_tokens"]
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def chat_completions(request: Request) -> Response:
    """Translate, as an OpenAI chat completion

    For OpenAI clients (`base_url=http://host:8000/v1`). With `stream: true` the answer is
    server-sent events: `data: <ChatCompletionChunk>` lines (the role, one per text delta, one with
    `finish_reason`, a usage chunk with `stream_options.include_usage`), then `data: [DONE]`. An error
    after the first byte is one `data: <OpenAIErrorResponse>` line, and the stream ends *without*
    `[DONE]`, as OpenAI's API does.
    """
    service, settings = services(request)
    check_api_key(request, settings)
    chat = chat_request(await read_json_object(request, settings), service.registry)
    prepared = await service.prepare(
        TranslateRequest(
            text=chat.text,
            source=chat.source,
            target=chat.target,
            max_new_tokens=chat.max_new_tokens,
            names=chat.names,
        ),
        **log_context(request),
    )
    if chat.stream:
        return EventStream(chunks(prepared, include_usage=chat.include_usage), settings)
    done, _ = await prepared.collect()
    return JSONResponse(
        completion_reply(
            done, request_id=prepared.request_id, model=prepared.bundle.name, created=int(time.time())
        )
    )


def completion_reply(done: WireEvent, *, request_id: str, model: str, created: int) -> ChatCompletion:
    """A finished translation (its ``done`` event) as a chat completion."""
    return {
        "id": f"chatcmpl-{request_id}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": done["translation"], "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason(done),
            }
        ],
        "usage": usage(done),
    }


class ChunkWriter:
    """liuyi's stream events as the ``data:`` payloads of a streamed chat completion."""

    def __init__(self, *, request_id: str, model: str, created: int, include_usage: bool) -> None:
        self.common: dict[str, Any] = {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
        }
        if include_usage:
            self.common["usage"] = None  # as OpenAI: every chunk but the last says usage: null
        self.include_usage = include_usage

    def chunk(self, delta: ChunkDelta, reason: FinishReason = None) -> str:
        choice: ChunkChoice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return dumps({**self.common, "choices": [choice]})

    def payloads(self, event: WireEvent) -> list[str]:
        """What one event becomes (nothing for ``segment`` and ``ping``; ``error`` is the caller's)."""
        kind = event["type"]
        if kind == "start":
            return [self.chunk({"role": "assistant", "content": ""})]
        if kind == "delta":
            return [self.chunk({"content": event["text"]})]
        if kind != "done":
            return []
        final = [self.chunk({}, finish_reason(event))]
        if self.include_usage:
            final.append(dumps({**self.common, "choices": [], "usage": usage(event)}))
        return [*final, "[DONE]"]


async def chunks(prepared: PreparedStream, *, include_usage: bool) -> AsyncIterator[ServerSentEvent]:
    """The SSE ``data:`` lines of a streamed completion (heartbeats are SSE comments, sent by
    EventStream)."""
    writer = ChunkWriter(
        request_id=prepared.request_id,
        model=prepared.bundle.name,
        created=int(time.time()),
        include_usage=include_usage,
    )
    async with aclosing(prepared.events()) as events:  # closed at once when the client goes away
        async for event in events:
            if event["type"] == "error":
                assert prepared.error is not None
                _, body = error_payload(prepared.error, "openai")
                yield ServerSentEvent(data=dumps(body))
            for payload in writer.payloads(event):
                yield ServerSentEvent(data=payload)


ROUTES = [Route("/v1/chat/completions", chat_completions, methods=["POST"])]
