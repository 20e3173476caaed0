"""liuyi's own API in the OpenAPI document: the facts about one app it is built from, the native
schemas (generated from ``_wire.py`` plus those facts) and the native operations."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import _wire_examples as examples
from ._native import accepted_languages
from ._openapi_schema import (
    SSE,
    Schema,
    header_refs,
    json_body,
    json_response,
    json_text,
    operation,
    query_object,
    served_languages,
    sse_event,
)
from ._settings import Settings
from ._streaming import NDJSON, STREAM_HEADERS
from ._wire_schema import form_fields, ref


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the document says about one app."""

    settings: Settings
    models: tuple[tuple[str, str], ...]  # (bundle name, direction) of every loaded model
    max_input_chars: int  # the smallest limit of the loaded bundles
    directions: tuple[tuple[str, str], ...]  # (source, target) of every direction served
    served: Mapping[tuple[str, str], Callable[..., Any]]  # (path, METHOD) -> handler of every route
    metrics_table: str  # every Prometheus metric, as a Markdown table

    @property
    def model(self) -> str:
        """The model named in examples."""
        return self.models[0][0] if self.models else "liuyi"


# ---------------------------------------------------------------------------------------------
# Native schemas


# GET /v1/translate/stream: TranslateRequest's fields as query parameters (`?text=...&target=en`),
# strings like form fields (`null` would be the string "null")
QUERY = query_object("TranslateQuery", required=True, example={"text": examples.TEXT})
TIMED = ("Server-Timing", "X-Request-ID")  # the headers of a finished translation
EVENTS = ("start", "delta", "segment", "done", "error")  # what SSE names in `event:` (pings are comments)


def native_schemas(schemas: dict[str, Schema], facts: Facts) -> None:
    """Adds to the schemas generated from the wire models what depends on this app: its languages
    and limit."""
    languages = sorted({lang for direction in facts.directions for lang in direction})
    schemas["Language"] = {**schemas["Language"], "enum": languages}
    request = schemas["TranslateRequest"]
    served_languages(request, facts.directions, ("source", "target"), accepted_languages)
    text, limit = request["properties"]["text"], facts.max_input_chars
    text["description"] = f"At most {limit} characters (413 `text_too_long` beyond). {text['description']}"
    text["maxLength"] = limit
    schemas["TranslateQuery"] = form_fields(request)


# ---------------------------------------------------------------------------------------------
# Operations


def stream_response(facts: Facts, *, ndjson: bool) -> Schema:
    sse = {
        "schema": sse_event(
            "Server-sent events: `id: <n>`, `event: <type>` and `data: <StreamEvent JSON>` per event, ids "
            "counting from 0 at `start`; heartbeats are comment lines (`: ping - <time>`).",
            json_text(ref("StreamEvent")),
            id={
                "type": "string",
                "description": "The event's index in the stream, from 0.",
                "pattern": "^[0-9]+$",
            },
            event={"type": "string", "description": "The `type` of `data`.", "enum": list(EVENTS)},
        ),
        "example": examples.sse(facts.model),
    }
    content = {SSE: sse}
    if ndjson:
        content = {
            NDJSON: {
                "schema": ref("StreamEvent", "Each line is one StreamEvent (JSON, UTF-8)."),
                "example": examples.ndjson(facts.model),
            },
            **content,
        }
    return {
        "description": "The translation as it is made. Errors after this point are the final `error` event.",
        "headers": header_refs((*STREAM_HEADERS, "X-Request-ID")),
        "content": content,
    }


def native_operations(facts: Facts) -> dict[str, Schema]:
    """liuyi's own operations, by ``METHOD /path``."""
    checks = (400, 401, 413, 500, 503)  # what can fail before a stream's first byte
    options = {"text": "你好。我很好。", "source": "zh-CN", "target": "en", "max_new_tokens": 64}
    body = json_body(ref("TranslateRequest"), simple={"text": examples.TEXT}, options=options)
    resume = [{"$ref": "#/components/parameters/LastEventId"}]
    ready = json_response(
        "Ready.", ref("Readiness"), ready={"status": "ready", "models": [n for n, _ in facts.models]}
    )
    not_ready = {
        "503": json_response(
            "Not ready (this body, no error body, no Retry-After).",
            ref("Readiness"),
            draining={"status": "draining"},
        )
    }
    metrics_text = {"description": "The metrics.", "content": {"text/plain": {"schema": {"type": "string"}}}}
    reply = examples.translate_reply(facts.model)
    translated = json_response("The translation.", ref("TranslateResponse"), TIMED, example=reply)
    stream, sse = stream_response(facts, ndjson=True), stream_response(facts, ndjson=False)
    return {
        "POST /v1/translate": operation(
            "translation", "translate", translated, (*checks, 415, 504), requestBody=body
        ),
        "GET /v1/translate/stream": operation(
            "translation",
            "translateStreamGet",
            sse,
            checks,
            summary="Stream a translation (SSE, for EventSource)",
            preface="For the browser's `EventSource`: the fields of TranslateRequest are query "
            "parameters, the API key (if any) is `api_key`, and the response is always SSE.\n\n",
            parameters=[QUERY, *resume],
        ),
        "POST /v1/translate/stream": operation(
            "translation", "translateStream", stream, (*checks, 415), parameters=resume, requestBody=body
        ),
        "GET /v1/models": open_get("models", "listModels", json_response("The models.", ref("ModelList"))),
        "GET /healthz": open_get(
            "operations", "healthz", json_response("Alive.", ref("Health"), ok={"status": "ok"})
        ),
        "GET /readyz": open_get("operations", "readyz", ready, responses=not_ready),
        "GET /metrics": open_get(
            "operations", "metrics", metrics_text, appendix="\n\n" + facts.metrics_table
        ),
    }


def open_get(tag: str, op_id: str, ok: Schema, **extra: Any) -> Schema:
    """An operation that needs no key."""
    return operation(tag, op_id, ok, security=[], **extra)
