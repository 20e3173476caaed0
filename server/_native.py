"""liuyi's own API: translate (JSON), translate/stream (NDJSON or SSE), models, health."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from decoding import CLIENT_SPELLINGS

from ._error_codes import ErrorCode
from ._errors import BadRequest
from ._events import WireEvent, translate_response
from ._http import (
    check_api_key,
    optional_int,
    optional_str,
    query_fields,
    read_json_object,
    text_field,
)
from ._service import TranslateRequest, TranslationService
from ._settings import Settings
from ._streaming import ndjson_response, sse_response
from ._wire import Health, Model, ModelList, Readiness


def translate_request(fields: Mapping[str, Any], *, from_query: bool = False) -> TranslateRequest:
    """The one parser of liuyi's request, from a JSON body or (``from_query``) a query string."""
    if from_query and "max_new_tokens" in fields:  # query values are strings: a decimal integer
        fields = {**fields, "max_new_tokens": _query_int(fields["max_new_tokens"])}  # becomes an int
    return TranslateRequest(
        text=text_field(fields),
        source=optional_str(fields, "source", "auto") or "auto",
        target=optional_str(fields, "target"),
        max_new_tokens=optional_int(fields, "max_new_tokens"),
    )


def accepted_languages(language: str, field: str) -> list[Any]:
    """The values of ``source`` or ``target`` that select ``language`` (the document lists them)."""
    return [*(["auto"] if field == "source" else []), *CLIENT_SPELLINGS[language], "", None]


def services(request: Request) -> tuple[TranslationService, Settings]:
    return request.app.state.service, request.app.state.settings


def log_context(request: Request) -> dict[str, Any]:
    """The request id and the dict the access-log line reads (see server/_middleware.py)."""
    state = request.scope.setdefault("state", {})
    return {"request_id": state.get("request_id"), "log": state.setdefault("liuyi", {})}


def server_timing(done: WireEvent) -> str:
    timings = done["timings"]
    return ", ".join(
        f"{name.removesuffix('_ms')};dur={timings[name]}" for name in ("queue_ms", "ttft_ms", "total_ms")
    )


async def translate(request: Request) -> Response:
    """Translate a text

    Translate and answer when done: the same work as the stream, collected.
    """
    service, settings = services(request)
    check_api_key(request, settings)
    body = await read_json_object(request, settings)
    prepared = await service.prepare(translate_request(body), **log_context(request))
    done, segments = await prepared.collect()
    reply = translate_response(
        done,
        segments,
        source=prepared.source,
        target=prepared.target,
        model=prepared.bundle.name,
        request_id=prepared.request_id,
    )
    return JSONResponse(reply, headers={"Server-Timing": server_timing(done)})


async def translate_stream(request: Request) -> Response:
    """Stream a translation (NDJSON or SSE)

    Events: `start`, then `delta` (new text), `segment` (a sentence finished) and `ping` (heartbeat)
    events, then exactly one `done` or `error`. Checks (auth, body, languages, capacity) happen before
    the first byte and fail with a status and a JSON error body; later failures are the final `error`
    event.

    Formats:
    - **NDJSON** (`application/x-ndjson`, POST without `Accept: text/event-stream`): one JSON object
      per line.
    - **SSE** (`text/event-stream`, POST with `Accept: text/event-stream`, and always for GET):
      `event: <type>`, `id: <n>`, `data: <json>`; heartbeats are comment lines.

    **Resuming** (SSE): send `Last-Event-ID: <n>` (browsers' `EventSource` does it when it
    reconnects): the same stream is produced again — replayed from the cache, or decoded again
    deterministically — and events with ids up to `n` are skipped.

    Behind nginx, the `X-Accel-Buffering: no` header keeps events from being buffered.
    """
    service, settings = services(request)
    check_api_key(request, settings)
    if request.method == "GET":
        fields, sse = query_fields(request), True
    else:
        fields = await read_json_object(request, settings)
        sse = "text/event-stream" in request.headers.get("accept", "")
    resume_after = last_event_id(request)
    prepared = await service.prepare(
        translate_request(fields, from_query=request.method == "GET"), **log_context(request)
    )
    return sse_response(prepared, settings, resume_after) if sse else ndjson_response(prepared)


def _query_int(value: object) -> object:
    if isinstance(value, str) and value.isascii() and value.lstrip("-").isdigit():
        return int(value)
    return value


def last_event_id(request: Request) -> int:
    """SSE resume point: events with an id up to this one were received already (-1: none)."""
    raw = request.headers.get("last-event-id", "").strip()
    if not raw:
        return -1
    if not (raw.isascii() and raw.isdigit()):
        raise BadRequest(
            "Last-Event-ID must be the integer id of a received event",
            code=ErrorCode.INVALID_FIELD,
            param="Last-Event-ID",
        )
    return int(raw)


async def models(request: Request) -> Response:
    """The loaded models

    One model bundle per translation direction.
    """
    service, settings = services(request)
    check_api_key(request, settings)
    data: list[Model] = []
    for bundle in service.registry.routes:  # a multilingual bundle once per direction
        m = bundle.manifest
        data.append(
            {
                "id": bundle.model_id,
                "object": "model",
                "owned_by": "liuyi",
                "aliases": [f"liuyi-{m.source_lang}-{m.target_lang}"],
                "source": m.source_lang,
                "target": m.target_lang,
                "direction": m.direction,
                "family": m.family,
                "quantization": m.quantization,
                "license": m.license,
                "attribution": m.attribution,
                "max_input_chars": min(bundle.max_input_chars, settings.max_input_chars),
                "max_new_tokens": m.limits.max_target_tokens,
            }
        )
    reply: ModelList = {"object": "list", "data": data}
    return JSONResponse(reply)


async def healthz(request: Request) -> Response:
    """Liveness

    200 while the process runs (a liveness probe).
    """
    alive: Health = {"status": "ok"}
    return JSONResponse(alive)


async def readyz(request: Request) -> Response:
    """Readiness

    200 once the models are loaded and warmed up; 503 while starting, or draining before shutdown
    (a readiness probe, or a load balancer's health check).
    """
    lifecycle = request.app.state.lifecycle
    readiness: Readiness
    if not lifecycle.ready:
        readiness = {"status": "draining" if lifecycle.draining else "starting"}
        return JSONResponse(readiness, status_code=503)
    readiness = {"status": "ready", "models": [b.name for b in request.app.state.service.registry.bundles]}
    return JSONResponse(readiness)


async def metrics(request: Request) -> Response:
    """Prometheus metrics

    Text exposition format.
    """
    registry = request.app.state.metrics
    return Response(registry.render(), media_type=registry.CONTENT_TYPE)


ROUTES = [
    Route("/v1/translate", translate, methods=["POST"]),
    Route("/v1/translate/stream", translate_stream, methods=["GET", "POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/healthz", healthz, methods=["GET"]),
    Route("/readyz", readyz, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
]
